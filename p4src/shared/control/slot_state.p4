// p4rotor: which slot is live now (the ToR's "slot" is the topology slice).  Clock mode here,
// on every target: the slot follows from the switch's timestamp and a config the controller
// writes once.  Signal mode (the controller sets the slot with control packets) lives in the
// target's slot registers, the SlotRegisters hook: v1model's; PSA-eBPF has no CPU port, so
// none, and a config in signal mode leaves it not running.
#ifndef P4ROTOR_SHARED_SLOT_STATE_P4
#define P4ROTOR_SHARED_SLOT_STATE_P4
#include "common.p4"

// One restoring-division step: if at least 2^i cycles have passed, advance by 2^i.
// Shifts and comparisons only: p4c refuses run-time division and Tofino has none.
#define CLOCK_STEP(i) \
    if (delta >= (cycle << i)) { delta = delta - (cycle << i); start = start + (cycle << i); n = n + (1 << i); }

#ifdef PHASE_GRAINS
// One restoring-division step of phase / grain: if 2^i more grains fit, take them.
#define GRAIN_STEP(i) \
    if (rem >= (grain_units << i)) { rem = rem - (grain_units << i); grains = grains | (1 << i); }
#endif

// local_now: the frame's ingress timestamp in the target's time units.
control SlotState(inout metadata_t meta, in Time_t local_now) {
    // Where the current cycle started (common time), its number and the config generation
    // they belong to (a new config restarts the clock).  One cell each (one rotor per
    // switch), indexed by a variable: p4c-ebpf writes C that does not compile for a literal.
    CLOCK_REGISTERS
    SlotRegisters() slot_registers;
    bit<32> cell = 0;
    Time_t  epoch = 0;
    Span_t  cycle_us = 0;
    Span_t  night_us = 0;
    bit<16> generation = 0;
    Span_t  phase = 0;
#ifdef PHASE_GRAINS
    Span_t  grain_units = 0;
    bit<16> grains = 0;
#endif

    action unconfigured() {
        meta.slot.mode = MODE_UNCONFIGURED;
    }

    // Written by the controller as this table's default action: P4Runtime can set a default
    // action on BMv2 where it cannot write a register.  Times in the target's units (the
    // parameter names keep the "us" of BMv2's).
    //   epoch: common time at which slot 0 of this rotor starts (clock mode)
    //   offset: add to the local timestamp to get common time (measured by probes)
    //   grain (PHASE_GRAINS): a length every slot (slice) bound is a multiple of; the NIKSS
    //          adapter adds it (control-plane/p4rotor/control/nikss.py)
    action configure(bit<8> mode, bit<16> num_matchings, Time_t offset,
                     Time_t epoch_us, Span_t cycle, Span_t night, bit<16> gen
#ifdef PHASE_GRAINS
                     , Span_t grain
#endif
                     ) {
#ifdef PHASE_GRAINS
        grain_units = grain;
#endif
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

    // Clock mode: phase within the cycle -> the matching (the ToR: the slice) and its bounds.
    //   slot_start/slot_end: the slot's bounds relative to the cycle start
    action clock_slot(bit<16> index, Span_t slot_start, Span_t slot_end) {
        meta.slot.index = index;
        meta.slot.night = phase < slot_start + night_us;
        meta.slot.slot_end = (Time_t) slot_end;
    }

    action clock_miss() {
        meta.slot.running = false;
    }

    // A range per slot where the target matches ranges.  PSA-eBPF has none: as ternary
    // prefixes a slot costs up to 2 x 32 - 2 entries and a lookup tries every mask (2.3 us a
    // frame with a 60 s slot).  Every bound is a multiple of the grain (a rotor: the slot),
    // so there the phase in grains (restoring division, 16 steps) is looked up exactly: one
    // entry per grain of the cycle (a rotor: per matching); the NIKSS adapter expands each of
    // the controller's range entries into its grains.
    table clock_phase {
#ifdef PHASE_GRAINS
        key = { grains : exact @name("phase_grains"); }
#else
        key = { phase : range @name("phase"); }
#endif
        actions = { clock_slot; @defaultonly clock_miss; }
        const default_action = clock_miss();
#ifdef PHASE_GRAINS
        size = PHASE_GRAINS;   // a cycle of up to PHASE_GRAINS grains
#else
        size = CLOCK_PHASE_TABLE_SIZE;
#endif
    }

    apply {
        meta.slot.running = false;
        meta.slot.night = false;
        config.apply();
        if (meta.slot.mode == MODE_CLOCK) {
            Time_t now = local_now + meta.slot.offset;
            if (now >= epoch) {
                bit<16> g;
                Time_t start;
                bit<32> n;
                REG_READ(clock_generation, g, cell);
                REG_READ(clock_cycle_start, start, cell);
                REG_READ(clock_cycle, n, cell);
                // Every start this config writes is the epoch plus whole cycles.  On a target
                // that runs ingress on several CPUs at once (eBPF) a frame can still read one
                // that is not, and a start it steps forward stays off the grid (every slice
                // wrong from then on: docs/notes/datamining-40.md).  From the epoch instead:
                //   now < start: another CPU moved the registers to a cycle that began after
                //     this frame read the clock; now - start would wrap to a huge delta.
                //   start < epoch: the generation read is this config's but the start is not
                //     yet (the registers are three writes; another CPU is between them).
                // The next frame of a later cycle steps the start forward again.
                if (g != generation || now < start || start < epoch) {
                    start = epoch;
                    n = 0;
                }
                Time_t cycle = (Time_t) cycle_us;
                Time_t delta = now - start;
                // The registers change only when the cycle or the config does.
                if (delta >= cycle) {
                    // Rare: only the first frame after a cycle boundary pays for this.
                    CLOCK_STEP(23) CLOCK_STEP(22) CLOCK_STEP(21) CLOCK_STEP(20)
                    CLOCK_STEP(19) CLOCK_STEP(18) CLOCK_STEP(17) CLOCK_STEP(16)
                    CLOCK_STEP(15) CLOCK_STEP(14) CLOCK_STEP(13) CLOCK_STEP(12)
                    CLOCK_STEP(11) CLOCK_STEP(10) CLOCK_STEP(9)  CLOCK_STEP(8)
                    CLOCK_STEP(7)  CLOCK_STEP(6)  CLOCK_STEP(5)  CLOCK_STEP(4)
                    CLOCK_STEP(3)  CLOCK_STEP(2)  CLOCK_STEP(1)  CLOCK_STEP(0)
                    // The generation last: a frame that reads it as this config's then reads
                    // a start this config wrote (x86 keeps stores in order).
                    REG_WRITE(clock_cycle_start, cell, start);
                    REG_WRITE(clock_cycle, cell, n);
                    REG_WRITE(clock_generation, cell, generation);
                } else if (g != generation) {
                    REG_WRITE(clock_cycle_start, cell, start);
                    REG_WRITE(clock_cycle, cell, n);
                    REG_WRITE(clock_generation, cell, generation);
                }
                if (delta < cycle) {
                    // else: idle for > 2^24 cycles; the registers moved 2^24-1
                    // cycles closer and the frame is dropped as not started.
                    meta.slot.running = true;
                    phase = (Span_t) delta;
#ifdef PHASE_GRAINS
                    Span_t rem = phase;
                    GRAIN_STEP(15) GRAIN_STEP(14) GRAIN_STEP(13) GRAIN_STEP(12)
                    GRAIN_STEP(11) GRAIN_STEP(10) GRAIN_STEP(9)  GRAIN_STEP(8)
                    GRAIN_STEP(7)  GRAIN_STEP(6)  GRAIN_STEP(5)  GRAIN_STEP(4)
                    GRAIN_STEP(3)  GRAIN_STEP(2)  GRAIN_STEP(1)  GRAIN_STEP(0)
#endif
                    clock_phase.apply();
                    if (meta.slot.running) {
                        meta.slot.slot_id = (n << CLOCK_INDEX_BITS) | (bit<32>) meta.slot.index;
                        meta.slot.slot_end = start + meta.slot.slot_end;
                        meta.slot.cycle_start = start;
                    }
                }
            }
        }
        // Signal mode's slot from the target's registers; clock mode's recorded in them.
        slot_registers.apply(meta, local_now, generation);
    }
}

#endif
