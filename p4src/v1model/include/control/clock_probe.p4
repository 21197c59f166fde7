// p4rotor: time probes on the clock port (a time base on the data path).
#ifndef P4ROTOR_CLOCK_PROBE_P4
#define P4ROTOR_CLOCK_PROBE_P4

// Two-way time transfer, like PTP but through the pipeline.  A host on CLOCK_PORT
// sends a probe at t1 (its kernel's send stamp); the switch notes its ingress
// time T2 and its egress time T3 and sends the probe back out of CLOCK_PORT, where
// the host's kernel stamps its arrival t4.  With common = local + offset:
//   t1 <= T2 + offset  and  T3 + offset <= t4,
// so every probe bounds the offset from both sides, with no assumption about
// symmetry; the tightest bounds over a few probes bracket it to within BMv2's
// receive and transmit latency floors.  No gRPC, no PI on either path.
control ClockProbe(inout headers_t hdr, inout std_meta_t std) {
    apply {
        if (hdr.clock_probe.isValid()) {
            hdr.clock_probe.t_ingress = std.ingress_global_timestamp;
            ctrl_counter.count(CTRL_CLOCK_PORT_PROBE);
            std.egress_spec = CLOCK_PORT;
        } else {
            // Anything else on the clock port is not ours to forward.
            drop_counter.count(DROP_BAD_HEADER);
            mark_to_drop(std);
        }
    }
}

control ClockProbeEgress(inout headers_t hdr, in std_meta_t std) {
    apply {
        hdr.clock_probe.t_egress = std.egress_global_timestamp;
    }
}

#endif
