// p4rotor on PSA: which slot is live now (clock mode: the slot follows from the kernel clock).
#ifndef P4ROTOR_PSA_SLOT_STATE_P4
#define P4ROTOR_PSA_SLOT_STATE_P4

// One restoring-division step of phase / grain: if 2^i more grains fit, take them.
#define GRAIN_STEP(i) \
    if (rem >= (grain_units << i)) { rem = rem - (grain_units << i); grains = grains | (1 << i); }

// One restoring-division step: if at least 2^i cycles have passed, advance by 2^i.
#define CLOCK_STEP(i) \
    if (delta >= (cycle << i)) { delta = delta - (cycle << i); start = start + (cycle << i); n = n + (1 << i); }

control SlotState(inout metadata_t meta, in Time_t local_now) {
    // Where the current cycle started (common time), its number and the config generation
    // they belong to (a new config restarts the clock).  One cell each: PSA registers are
    // indexed, and an index p4c-ebpf sees as a literal does not compile, hence `cell`.
    Register<Time_t, bit<32>>(1) clock_cycle_start;
    Register<bit<32>, bit<32>>(1) clock_cycle;
    Register<bit<16>, bit<32>>(1) clock_generation;
    bit<32> cell = 0;
    Time_t epoch = 0;
    Time_t  cycle_us = 0;
    Time_t  night_us = 0;
    bit<16> generation = 0;
    Time_t  grain_units = 0;
    Time_t  phase = 0;
    bit<16> grains = 0;

    action unconfigured() {
        meta.slot.mode = MODE_UNCONFIGURED;
    }

    // The controller writes this table's default action (as on BMv2).  Times in the target's
    // units (ns); the parameter names keep their "us" from BMv2.  ``grain``: a length every
    // slot (slice) bound is a multiple of (the NIKSS adapter adds it, control/nikss.py).
    action configure(bit<8> mode, bit<16> num_matchings, Time_t offset,
                     Time_t epoch_us, Time_t cycle, Time_t night, bit<16> gen, Time_t grain) {
        grain_units = grain;
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

    action clock_slot(bit<16> index, Time_t slot_start, Time_t slot_end) {
        meta.slot.index = index;
        meta.slot.night = phase < slot_start + night_us;
        meta.slot.slot_end = slot_end;
    }

    action clock_miss() {
        meta.slot.running = false;
    }

    // Phase -> the matching (the ToR: the slice) and its bounds.  PSA-eBPF has no range match:
    // as ternary prefixes a slot costs up to 2 x 32 - 2 entries and a lookup tries every mask
    // (2.3 us a frame with a 60 s slot).  Every bound is a multiple of the grain (a rotor: the
    // slot), so the phase in grains (restoring division, 16 steps) is looked up exactly: one entry
    // per grain of the cycle (a rotor: per matching).  The NIKSS adapter expands each of the
    // controller's range entries into its grains.
    table clock_phase {
        key = { grains : exact @name("phase_grains"); }
        actions = { clock_slot; @defaultonly clock_miss; }
        const default_action = clock_miss();
        size = PHASE_GRAINS;   // a cycle of up to 2^16 grains
    }

    apply {
        meta.slot.running = false;
        meta.slot.night = false;
        config.apply();
        if (meta.slot.mode == MODE_CLOCK) {
            Time_t now = local_now + meta.slot.offset;
            if (now >= epoch) {
                bit<16> g = clock_generation.read(cell);
                Time_t start = clock_cycle_start.read(cell);
                bit<32> n = clock_cycle.read(cell);
                if (g != generation) {
                    start = epoch;
                    n = 0;
                }
                Time_t cycle = cycle_us;
                Time_t delta = now - start;
                if (delta >= cycle) {
                    // Rare: only the first frame after a cycle boundary pays for this.
                    CLOCK_STEP(23) CLOCK_STEP(22) CLOCK_STEP(21) CLOCK_STEP(20)
                    CLOCK_STEP(19) CLOCK_STEP(18) CLOCK_STEP(17) CLOCK_STEP(16)
                    CLOCK_STEP(15) CLOCK_STEP(14) CLOCK_STEP(13) CLOCK_STEP(12)
                    CLOCK_STEP(11) CLOCK_STEP(10) CLOCK_STEP(9)  CLOCK_STEP(8)
                    CLOCK_STEP(7)  CLOCK_STEP(6)  CLOCK_STEP(5)  CLOCK_STEP(4)
                    CLOCK_STEP(3)  CLOCK_STEP(2)  CLOCK_STEP(1)  CLOCK_STEP(0)
                    clock_generation.write(cell, generation);
                    clock_cycle_start.write(cell, start);
                    clock_cycle.write(cell, n);
                } else if (g != generation) {
                    clock_generation.write(cell, generation);
                    clock_cycle_start.write(cell, start);
                    clock_cycle.write(cell, n);
                }
                if (delta < cycle) {
                    meta.slot.running = true;
                    phase = delta;
                    Time_t rem = phase;
                    GRAIN_STEP(15) GRAIN_STEP(14) GRAIN_STEP(13) GRAIN_STEP(12)
                    GRAIN_STEP(11) GRAIN_STEP(10) GRAIN_STEP(9)  GRAIN_STEP(8)
                    GRAIN_STEP(7)  GRAIN_STEP(6)  GRAIN_STEP(5)  GRAIN_STEP(4)
                    GRAIN_STEP(3)  GRAIN_STEP(2)  GRAIN_STEP(1)  GRAIN_STEP(0)
                    clock_phase.apply();
                    if (meta.slot.running) {
                        meta.slot.slot_id = (n << CLOCK_INDEX_BITS) | (bit<32>) meta.slot.index;
                        meta.slot.slot_end = start + meta.slot.slot_end;
                        meta.slot.cycle_start = start;
                    }
                }
            }
        }
    }
}

#endif
