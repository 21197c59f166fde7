// p4rotor: what a port does per slot, for the energy accounting (docs/energy.md), and the ports
// the controller put to sleep.
//
// SlotRx / SlotTx count, per slot position of the cycle (a rotor: the live matching; a ToR: the
// slice) and port, the frames and bytes that came in on the port (what the transmitter at its
// other end sent) and that left through it.  The controller reads each slot's cells once the
// slot is over (control/activity_recorder.py): per-port counters sampled at slot boundaries,
// without having to read at the boundary.  Cell (slot << ENERGY_PORT_BITS) | port: shifts only
// (Tofino has no run-time multiplication); a counter index is one field.
//
// SlotRxLowLatency / SlotTxLowLatency (the ToR only): the same cells, counting only the frames
// whose traffic class is not known to be bulk (TCLASS_LOW_LATENCY, or a frame the ToR could not
// classify: routing sets the class, low-latency until it knows).  Bulk (TCLASS_BULK,
// TCLASS_BULK_TRANSIT: RotorLB's agents, DSCP 8) is granted per slot at OFFER time, so its
// amount is known ahead; a low-latency frame's time is not (docs/energy.md).  Low-latency rather
// than bulk is counted because the energy reader's question is "did any low-latency frame cross
// this port in this slot": a zero here is exact, where a bulk count taken from the total would
// leave a frame or two counted between the two counters' reads (reads are not atomic) as
// spurious low-latency.  The rotor parses no data frame (a circuit carries any bytes) and has
// none: its transmitters' low-latency frames are counted where they arrive, at the ToR's uplink.
//
// PortSleep: the predictive policy's sleep, set by the controller from a plan (a port asleep in
// the slot positions it is known to carry nothing).  A frame that comes in on or would leave
// through a port asleep in the frame's slot is a wrong prediction; the top drops it and counts
// it as DROP_SLEEPING.  Dropped, not only counted: the pipeline cannot hold a frame for the wake
// (the exit latency), and a frame forwarded but counted under a drop cause would break the
// ledger every reader of the counters keeps (received = sent + dropped by cause).  Tables, not a
// register: BMv2's P4Runtime server writes no registers, and the plan is per slot position, so
// it is written once.  No entry: awake (the default: nothing changes unless the controller
// writes a plan).
#ifndef P4ROTOR_SHARED_PORT_ENERGY_P4
#define P4ROTOR_SHARED_PORT_ENERGY_P4
#include "common.p4"

#define ENERGY_CELL(slot, port) \
    (((((bit<32>) (slot)) & (ENERGY_SLOTS - 1)) << ENERGY_PORT_BITS) | (((bit<32>) (port)) & (MAX_PORTS - 1)))

control SlotRx(in bit<16> slot, in Port_t in_port) {
    SLOT_PORT_COUNTER(slot_rx_counter);
    apply {
        slot_rx_counter.count(ENERGY_CELL(slot, in_port));
    }
}

control SlotTx(in bit<16> slot, in Port_t out_port) {
    SLOT_PORT_COUNTER(slot_tx_counter);
    apply {
        slot_tx_counter.count(ENERGY_CELL(slot, out_port));
    }
}

// A frame's class counts as low-latency unless it is one of the bulk classes.
#define ENERGY_LOW_LATENCY(tclass) ((tclass) != TCLASS_BULK && (tclass) != TCLASS_BULK_TRANSIT)

control SlotRxLowLatency(in bit<16> slot, in Port_t in_port, in bit<8> tclass) {
    SLOT_PORT_COUNTER(slot_rx_ll_counter);
    apply {
        if (ENERGY_LOW_LATENCY(tclass)) {
            slot_rx_ll_counter.count(ENERGY_CELL(slot, in_port));
        }
    }
}

control SlotTxLowLatency(in bit<16> slot, in Port_t out_port, in bit<8> tclass) {
    SLOT_PORT_COUNTER(slot_tx_ll_counter);
    apply {
        if (ENERGY_LOW_LATENCY(tclass)) {
            slot_tx_ll_counter.count(ENERGY_CELL(slot, out_port));
        }
    }
}

control PortSleep(in bit<16> slot, in Port_t in_port, in Port_t out_port, out bool asleep) {
    bool sleeping = false;

    action sleep() { sleeping = true; }
    action awake() { }

    table sleep_in {
        key = {
            in_port : exact @name("port");
            slot    : exact @name("slot");
        }
        actions = { sleep; awake; }
        const default_action = awake;
        size = SLEEP_TABLE_SIZE;
    }

    table sleep_out {
        key = {
            out_port : exact @name("port");
            slot     : exact @name("slot");
        }
        actions = { sleep; awake; }
        const default_action = awake;
        size = SLEEP_TABLE_SIZE;
    }

    apply {
        sleeping = false;
        sleep_in.apply();
        sleep_out.apply();
        asleep = sleeping;
    }
}

#endif
