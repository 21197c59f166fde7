// p4rotor: which slot is live now, in either mode.
#ifndef P4ROTOR_SLOT_STATE_P4
#define P4ROTOR_SLOT_STATE_P4

// One restoring-division step: if at least 2^i cycles have passed, advance by 2^i.
// Shifts and comparisons only: p4c refuses run-time division and Tofino has none.
#define CLOCK_STEP(i) \
    if (delta >= (cycle << i)) { delta = delta - (cycle << i); start = start + (cycle << i); n = n + (1 << i); }

control SlotState(inout metadata_t meta, in std_meta_t std) {
    Timestamp_t epoch = 0;
    bit<32>     cycle_us = 0;
    bit<32>     night_us = 0;
    bit<16>     generation = 0;
    bit<32>     phase = 0;

    action unconfigured() {
        meta.slot.mode = MODE_UNCONFIGURED;
    }

    // Written by the controller as this table's default action: P4Runtime can
    // set a default action on BMv2 where it cannot write a register.
    //   epoch: common time at which slot 0 of this rotor starts (clock mode)
    //   offset: add to the local timestamp to get common time (measured by probes)
    action configure(bit<8> mode, bit<16> num_matchings, Timestamp_t offset,
                     Timestamp_t epoch_us, bit<32> cycle, bit<32> night, bit<16> gen) {
        meta.slot.mode = mode;
        meta.slot.offset = offset;
        meta.slot.matchings = num_matchings;
        epoch = epoch_us;
        cycle_us = cycle;
        night_us = night;
        generation = gen;
        meta.slot.generation = gen;
    }

    table config {
        key = {}
        actions = { configure; unconfigured; }
        default_action = unconfigured();  // not const: the controller sets it
        size = 1;
    }

    // Clock mode: phase within the cycle -> matching; one entry per matching.
    //   slot_start/slot_end: the slot's bounds relative to the cycle start (us)
    action clock_slot(bit<16> index, bit<32> slot_start, bit<32> slot_end) {
        meta.slot.index = index;
        meta.slot.night = phase < slot_start + night_us;
        meta.slot.slot_end = (Timestamp_t) slot_end;
    }

    action clock_miss() {
        meta.slot.running = false;
    }

    table clock_phase {
        key = { phase : range @name("phase"); }
        actions = { clock_slot; @defaultonly clock_miss; }
        const default_action = clock_miss();
        size = CLOCK_PHASE_TABLE_SIZE;
    }

    apply {
        meta.slot.running = false;
        meta.slot.night = false;
        config.apply();
        if (meta.slot.mode == MODE_SIGNAL) {
            Timestamp_t now = std.ingress_global_timestamp + meta.slot.offset;
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
        } else if (meta.slot.mode == MODE_CLOCK) {
            Timestamp_t now = std.ingress_global_timestamp + meta.slot.offset;
            if (now >= epoch) {
                bit<16> g;
                Timestamp_t start;
                bit<32> n;
                clock_generation.read(g, 0);
                clock_cycle_start.read(start, 0);
                clock_cycle.read(n, 0);
                if (g != generation) {
                    start = epoch;
                    n = 0;
                }
                Timestamp_t cycle = (Timestamp_t) cycle_us;
                Timestamp_t delta = now - start;
                if (delta >= cycle) {
                    // Rare: only the first frame after a cycle boundary pays for this.
                    CLOCK_STEP(23) CLOCK_STEP(22) CLOCK_STEP(21) CLOCK_STEP(20)
                    CLOCK_STEP(19) CLOCK_STEP(18) CLOCK_STEP(17) CLOCK_STEP(16)
                    CLOCK_STEP(15) CLOCK_STEP(14) CLOCK_STEP(13) CLOCK_STEP(12)
                    CLOCK_STEP(11) CLOCK_STEP(10) CLOCK_STEP(9)  CLOCK_STEP(8)
                    CLOCK_STEP(7)  CLOCK_STEP(6)  CLOCK_STEP(5)  CLOCK_STEP(4)
                    CLOCK_STEP(3)  CLOCK_STEP(2)  CLOCK_STEP(1)  CLOCK_STEP(0)
                }
                clock_generation.write(0, generation);
                clock_cycle_start.write(0, start);
                clock_cycle.write(0, n);
                if (delta < cycle) {
                    // else: idle for > 2^24 cycles; the registers moved 2^24-1
                    // cycles closer and the frame is dropped as not started.
                    meta.slot.running = true;
                    phase = (bit<32>) delta;
                    clock_phase.apply();
                    if (meta.slot.running) {
                        meta.slot.slot_id = (n << CLOCK_INDEX_BITS) | (bit<32>) meta.slot.index;
                        meta.slot.slot_end = start + meta.slot.slot_end;
                        meta.slot.cycle_start = start;
                        rotor_slot.write(0, meta.slot.slot_id);
                        rotor_index.write(0, meta.slot.index);
                        rotor_flags.write(0, RF_VALID | (meta.slot.night ? RF_NIGHT : 8w0));
                    }
                }
            }
        }
    }
}

#endif
