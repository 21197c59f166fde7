// p4rotor: what every shared control (this directory) needs besides ../defines.p4 and
// ../headers.p4, and what it expects from the target.
//
// The controls here are the one copy of the logic: v1model (BMv2) and PSA (eBPF) compile
// them as they are.  A control decides; the target's top acts: it sends the frame or drops
// it, and counts the drop by cause in its own drop counter (v1model: one at top level; PSA:
// one per control that drops).  The target shim (<target>/include/target.p4) provides:
//   Port_t, Time_t      a port and a time (the target's width and units)
//   Span_t              a time within the cycle (its length, the night, slot bounds, a
//                       route's `until`): bit<32> on v1model as in its P4Info, Time_t on PSA
//   REG_READ, REG_WRITE a register access (v1model: r.read(dst, i); PSA: dst = r.read(i))
//   CLOCK_REGISTERS     SlotState's registers, where the target declares them in a control
//   PORT_PACKET_COUNTER a per-port packet counter declared in a control, with the name the
//                       target's controller reads
//   SLOT_PORT_COUNTER   a per-(slot, port) packet-and-byte counter (port_energy.p4), likewise
//   RANDOM32_DECL/RANDOM32  a uniform 32-bit draw
//   TOR_ROUTE_TABLE_SIZE    the ToR's route table (memory on eBPF: NIKSS allocates it whole)
//   INTERNAL_ACTION     an annotation for an action no controller writes: nothing where the
//                       target's P4Info has always listed it (v1model), @hidden where not
//   PHASE_GRAINS        defined where the target has no range match: the clock phase is
//                       looked up in grains (slot_state.p4)
// and the target supplies the slot-register hooks SlotRegisters and SlotRegistersStale
// (slot_state.p4, stale_guard.p4): signal mode, where the target has a CPU port.
#ifndef P4ROTOR_SHARED_COMMON_P4
#define P4ROTOR_SHARED_COMMON_P4

// A control's verdict: forward (NO_DROP), or drop and count under this DROP_* cause.
const bit<32> NO_DROP = 0xFFFFFFFF;

#endif
