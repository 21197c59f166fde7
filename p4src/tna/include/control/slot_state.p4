// p4rotor on TNA: which slot is live now.  Clock mode only (docs/tofino.md, "Why
// clock mode only"): Tofino's timestamps are hardware clocks the controller can
// align to within the PTP/probe error, while a PacketOut per slot crosses PCIe
// with milliseconds of jitter; and signal mode's current/pending slot state is
// read and written by ingress and egress alike, which TNA does not allow.
//
// v1model computes the cycle number with a 24-step restoring division in one
// packet.  Tofino has no stage budget for that (12 stages) and a register can be
// touched once per packet, so here the *end of the current cycle* is a register
// (switch-local time units) that a stateful ALU moves forward by one cycle
// whenever a packet finds the cycle over:
//   end' = end + cycle  if now - end >= 0
// Any traffic at least once per cycle keeps it exact; on hardware the packet
// generator's periodic timer (one tick per cycle or faster, docs/tofino.md)
// guarantees it.  A packet that still finds the cycle over (after an idle spell
// of several cycles) is dropped as NOT_STARTED, and each such packet moves the
// end one more cycle: never a wrong matching, only a short catch-up.
// The stage budget also shapes the arithmetic: every dependent operation costs a
// stage, so the register works in local time (no common-time conversion per
// packet) and the *controller* starts it: before it installs a config of
// generation g it writes cell g & 1 of clock_cycle_end with the local time of
// the end of cycle 0 (epoch - offset + cycle, in units) over P4Runtime --
// Tofino's P4Runtime server writes registers, BMv2's does not, which is why the
// v1model program restarts its clock itself.  Frames still in flight under the
// old generation keep using the other cell.
#ifndef P4ROTOR_TNA_SLOT_STATE_P4
#define P4ROTOR_TNA_SLOT_STATE_P4

control SlotState(inout metadata_t meta, in bit<48> timestamp) {
    TS_UNITS_HASH(to_units);
    Timestamp_t local_now = 0;
    Timestamp_t epoch = 0;
    bit<32>     cycle_units = 0;
    bit<32>     night_units = 0;
    bit<16>     generation = 0;

    action unconfigured() {
        meta.slot.mode = MODE_UNCONFIGURED;
    }

    // Same name and parameters as on v1model; every time is in units (target.p4).
    action configure(bit<8> mode, bit<16> num_matchings, Timestamp_t offset,
                     Timestamp_t epoch_us, bit<32> cycle, bit<32> night, bit<16> gen) {
        meta.slot.mode = mode;
        meta.slot.offset = offset;
        meta.slot.matchings = num_matchings;
        epoch = epoch_us;
        cycle_units = cycle;
        night_units = night;
        generation = gen;
        meta.slot.generation = gen;
    }

    table config {
        key = {}
        actions = { configure; unconfigured; }
        default_action = unconfigured();  // not const: the controller sets it
        size = 1;
    }

    action find_now() { local_now = TS_UNITS(to_units, timestamp); }

    // Local time at which the current cycle ends, one cell per generation parity.
    Register<bit<32>, bit<1>>(2, 0) clock_cycle_end;
    RegisterAction<bit<32>, bit<1>, bit<32>>(clock_cycle_end) advance = {
        void apply(inout bit<32> value, out bit<32> end) {
            if (local_now - value < 32w0x80000000) {   // now - end >= 0: the cycle is over
                value = value + cycle_units;
            }
            end = value;
        }
    };

    bit<32> cycle_end = 0;
    bit<32> to_end = 0;      // sign set: now < end (the cycle has not run out)
    bit<32> phase = 0;       // now - cycle start; sign set: before the epoch
    bit<32> day_start = 0;
    // Tofino matches a range on at most 16 bits (4 nibbles): the phase key is the
    // low 16 bits of the phase, so a cycle must be shorter than 2^16 units (67 ms;
    // the controller refuses longer ones).  v1model's key is 32 bits.
    bit<16> phase_key = 0;

    action find_to_end() {
        to_end = local_now - cycle_end;
        meta.slot.cycle_start = cycle_end - cycle_units;
    }
    action find_phase() {
        phase = to_end + cycle_units;
        phase_key = to_end[15:0] + cycle_units[15:0];   // the same sum, 16 bits wide
    }

    action clock_slot(bit<16> index, bit<32> slot_start, bit<32> slot_end) {
        meta.slot.running = true;
        meta.slot.index = index;
        day_start = slot_start + night_units;
        meta.slot.slot_end = slot_end;
    }

    action clock_miss() {
        meta.slot.running = false;
    }

    table clock_phase {
        key = { phase_key : range @name("phase"); }
        actions = { clock_slot; @defaultonly clock_miss; }
        const default_action = clock_miss();
        size = CLOCK_PHASE_TABLE_SIZE;
    }

    action find_day_left() {
        meta.day_left = phase - day_start;
        meta.slot.slot_end = meta.slot.cycle_start + meta.slot.slot_end;   // local units
    }

    // Straight-line where it can be: a gateway that ends this control would hold
    // back every table after it (the ToR's routing), so the night is left as a
    // sign bit (meta.day_left) for whoever needs it, not turned into a flag here.
    apply {
        meta.slot.running = false;
        meta.slot.night = false;   // v1model's flag; TNA readers test SIGN(meta.day_left)
        find_now();
        config.apply();
        if (meta.slot.mode == MODE_CLOCK) {
            cycle_end = advance.execute(generation[0:0]);
        }
        find_to_end();
        find_phase();
        // Configured, in sync (now < end) and past the epoch (phase >= 0).
        if (meta.slot.mode == MODE_CLOCK && SIGN(to_end) == 1 && SIGN(phase) == 0) {
            clock_phase.apply();   // a hit sets running
        }
        find_day_left();
    }
}

#endif
