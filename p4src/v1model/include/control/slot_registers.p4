// p4rotor on v1model: the slot registers (../state.p4), the hooks of the shared SlotState
// and StaleGuard (../../../shared/control/).  Signal mode: the controller sets the slot with
// control packets (control_packet.p4); a timed change waits in the pend_* registers until
// its time.  Clock mode records its slot in the same registers.
#ifndef P4ROTOR_V1MODEL_SLOT_REGISTERS_P4
#define P4ROTOR_V1MODEL_SLOT_REGISTERS_P4

control SlotRegisters(inout metadata_t meta, in Time_t local_now, in bit<16> generation) {
    apply {
        if (meta.slot.mode == MODE_SIGNAL) {
            Timestamp_t now = local_now + meta.slot.offset;
            // A timed change whose time has come becomes the current slot, before
            // this packet looks at it (whatever the packet is, a control packet too).
            bit<8> pflags;
            bit<16> pg;
            Timestamp_t pat;
            pend_flags.read(pflags, 0);
            pend_generation.read(pg, 0);
            pend_at.read(pat, 0);
            if ((pflags & RF_VALID) != 0 && pg == generation && now >= pat) {
                bit<32> ps;
                bit<16> pi;
                Timestamp_t pday;
                pend_slot.read(ps, 0);
                pend_index.read(pi, 0);
                pend_day_start.read(pday, 0);
                rotor_slot.write(0, ps);
                rotor_index.write(0, pi);
                rotor_day_start.write(0, pday);
                rotor_flags.write(0, RF_VALID);
                rotor_generation.write(0, generation);
                pend_flags.write(0, 0);
            }
            bit<8> flags;
            bit<16> g;
            Timestamp_t day_start;
            rotor_flags.read(flags, 0);
            rotor_generation.read(g, 0);
            rotor_day_start.read(day_start, 0);
            rotor_slot.read(meta.slot.slot_id, 0);
            rotor_index.read(meta.slot.index, 0);
            meta.slot.running = (flags & RF_VALID) != 0 && g == generation;
            meta.slot.night = (flags & RF_NIGHT) != 0 || now < day_start;
        } else if (meta.slot.mode == MODE_CLOCK && meta.slot.running) {
            rotor_slot.write(0, meta.slot.slot_id);
            rotor_index.write(0, meta.slot.index);
            rotor_flags.write(0, RF_VALID | (meta.slot.night ? RF_NIGHT : 8w0));
        }
    }
}

// now: the egress timestamp in common time.  Stale: the slot changed (or went dark, or the
// config did) since ingress admitted the frame, or a timed change is due.
control SlotRegistersStale(in metadata_t meta, in Time_t now, out bool stale) {
    apply {
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
        if ((pflags & RF_VALID) != 0 && pg == meta.slot.generation && now >= pat) {
            stale = true;
        }
    }
}

#endif
