// p4rotor: time probes arriving on the clock port (a data-path time base).
#ifndef P4ROTOR_CLOCK_PROBE_P4
#define P4ROTOR_CLOCK_PROBE_P4

// A host on CLOCK_PORT sends a probe and notes when its kernel put the frame on
// the wire; the PacketIn tells it when this pipeline stamped it.  The smallest
// (stamp - send) over a few probes gives the clock offset, off only by the
// switch's receive latency floor: the gRPC/PI path is only on the way back,
// where its delay does not matter.
control ClockProbe(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    apply {
        if (hdr.clock_probe.isValid()) {
            meta.ctrl_opcode = OP_TIME_PROBE;
            meta.ctrl_flags = FLAG_CLOCK_PORT;
            meta.ctrl_index = 0;
            meta.ctrl_slot = 0;
            meta.ctrl_seq = hdr.clock_probe.seq;
            meta.ctrl_ts = std.ingress_global_timestamp;
            ctrl_counter.count(CTRL_CLOCK_PORT_PROBE);
            std.egress_spec = CPU_PORT;
        } else {
            // Anything else on the clock port is not ours to forward.
            drop_counter.count(DROP_BAD_HEADER);
            mark_to_drop(std);
        }
        // The reply is the packet_in header (and any padding), not the probe.
        hdr.ethernet.setInvalid();
        hdr.clock_probe.setInvalid();
    }
}

#endif
