// p4rotor: egress re-check.  BMv2 may hold a frame between ingress and egress
// for milliseconds on a busy machine; a real circuit cannot deliver it after
// its matching is gone, so drop it (reconfiguration loss).
#ifndef P4ROTOR_STALE_GUARD_P4
#define P4ROTOR_STALE_GUARD_P4

control StaleGuard(inout metadata_t meta, inout std_meta_t std) {
    apply {
        bool stale = false;
        if (meta.slot.mode == MODE_CLOCK) {
            // Absolute times, never the index within the cycle: a frame held a
            // whole cycle would otherwise find "its" matching live again.
            stale = std.egress_global_timestamp + meta.slot.offset >= meta.slot.slot_end;
        } else {
            bit<32> slot;
            bit<8> flags;
            bit<16> g;
            rotor_slot.read(slot, 0);
            rotor_flags.read(flags, 0);
            rotor_generation.read(g, 0);
            stale = slot != meta.slot.slot_id || (flags & RF_NIGHT) != 0 || g != meta.slot.generation;
            // A timed change that is due ends this frame's slot even if no packet
            // has applied it yet.
            bit<8> pflags;
            bit<16> pg;
            Timestamp_t pat;
            pend_flags.read(pflags, 0);
            pend_generation.read(pg, 0);
            pend_at.read(pat, 0);
            if ((pflags & RF_VALID) != 0 && pg == meta.slot.generation
                    && std.egress_global_timestamp + meta.slot.offset >= pat) {
                stale = true;
            }
        }
        if (stale) {
            drop_counter.count(DROP_STALE);
            mark_to_drop(std);
        } else {
            tx_port_counter.count((bit<32>) std.egress_port);
        }
    }
}

#endif
