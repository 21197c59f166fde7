// p4rotor on TNA: time probes on the clock port (two-way time transfer through
// the pipeline; ../../../v1model/include/control/clock_probe.p4 explains the
// bounds).  Timestamps are the 48-bit nanosecond global timestamps.
#ifndef P4ROTOR_TNA_CLOCK_PROBE_P4
#define P4ROTOR_TNA_CLOCK_PROBE_P4

control ClockProbe(inout headers_t hdr, inout metadata_t meta, in PortId_t in_port,
                   in bit<48> ingress_ts, inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (hdr.clock_probe.isValid()) {
            hdr.clock_probe.t_ingress = ingress_ts;
            meta.count_ctrl = true;
            meta.ctrl_index = CTRL_CLOCK_PORT_PROBE;
            ig_tm_md.ucast_egress_port = in_port;   // back out of the clock port
            hdr.bridged.kind = BRIDGE_CLOCK;
        } else {
            // Anything else on the clock port is not ours to forward.
            meta.discard = true;
            meta.count_drop = true;
            meta.drop_cause = DROP_BAD_HEADER;
        }
    }
}

control ClockProbeEgress(inout headers_t hdr, in bit<48> egress_ts) {
    apply {
        hdr.clock_probe.t_egress = egress_ts;
    }
}

#endif
