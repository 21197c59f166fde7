// p4rotor: state shared between ingress and egress.  Declared at top level
// because v1model gives ingress and egress no other common store: the egress
// re-check reads what the ingress (or a control packet) wrote.
#ifndef P4ROTOR_STATE_P4
#define P4ROTOR_STATE_P4

// What the state register holds (index 0; one rotor per switch):
//   rotor_slot  - absolute id of the current slot (signal: the controller's k;
//                 clock: cycle << CLOCK_INDEX_BITS | index)
//   rotor_index - live matching index within the cycle
//   rotor_flags - bit0 night, bit1 valid (a slot was ever set)
register<bit<32>>(1) rotor_slot;
register<bit<16>>(1) rotor_index;
register<bit<8>>(1)  rotor_flags;
// Registers outlive table writes: a slot set under an older config must not count.
// rotor_generation holds the config generation the signal-mode slot was set under.
register<bit<16>>(1) rotor_generation;
// rotor_day_start: common time the current slot's day starts (timed changes;
// 0 for immediate ones, whose night is RF_NIGHT).
register<Timestamp_t>(1) rotor_day_start;
// The one pending timed change (FLAG_AT): applied by the first packet whose
// common time is >= pend_at, or refused if another is still pending.
register<bit<32>>(1)     pend_slot;
register<bit<16>>(1)     pend_index;
register<bit<8>>(1)      pend_flags;   // RF_VALID: a change is pending
register<Timestamp_t>(1) pend_at;
register<Timestamp_t>(1) pend_day_start;
register<bit<16>>(1)     pend_generation;
const bit<8> RF_NIGHT = 0x01;
const bit<8> RF_VALID = 0x02;

// Clock mode: where the current cycle started (common time, us), its number,
// and the config generation they belong to (a new config restarts the clock).
register<Timestamp_t>(1) clock_cycle_start;
register<bit<32>>(1)     clock_cycle;
register<bit<16>>(1)     clock_generation;

// Counters readable over P4Runtime (docs/dataplane.md lists the indices).
counter(NUM_DROP_CAUSES, CounterType.packets_and_bytes) drop_counter;
counter(MAX_PORTS, CounterType.packets_and_bytes) rx_port_counter;
counter(MAX_PORTS, CounterType.packets_and_bytes) tx_port_counter;
counter(NUM_CTRL_COUNTERS, CounterType.packets) ctrl_counter;

#endif
