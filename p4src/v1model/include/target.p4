// Target shim for v1model (BMv2 simple_switch_grpc): the only place that knows the width of
// a port or a timestamp on this target, and how v1model declares and uses what the shared
// controls need (../../shared/control/common.p4 lists it).  The PSA shim
// (../../psa/include/target.p4) defines the same names; TNA's keeps its own controls.
#ifndef P4ROTOR_TARGET_P4
#define P4ROTOR_TARGET_P4
#include <core.p4>
#include <v1model.p4>

typedef bit<9>  PortId_t;
typedef bit<48> Timestamp_t;   // BMv2: microseconds since the switch process started
typedef standard_metadata_t std_meta_t;

// The shared controls' names.  A time within the cycle is 32 bits of us (the P4Info's).
typedef PortId_t    Port_t;
typedef Timestamp_t Time_t;
typedef bit<32>     Span_t;

// Registers: the state registers are declared at top level (state.p4): v1model gives
// ingress and egress no other common store, and P4Runtime names them without a control.
#define REG_READ(r, dst, i) r.read(dst, i)
#define REG_WRITE(r, i, v) r.write(i, v)
#define CLOCK_REGISTERS

// A counter in a control keeps the top-level P4Info name the controller reads ("." + name).
#define P4ROTOR_STR(x) #x
#define PORT_PACKET_COUNTER(c) \
    @name(P4ROTOR_STR(.c)) counter(MAX_PORTS, CounterType.packets) c
// A per-(slot, port) packet-and-byte counter (port_energy.p4), with its top-level name too.
#define SLOT_PORT_COUNTER(c) \
    @name(P4ROTOR_STR(.c)) counter(ENERGY_CELLS, CounterType.packets_and_bytes) c

// A uniform 32-bit draw.
#define RANDOM32_DECL(name)
#define RANDOM32(name, dst) random(dst, 0, 32w0xFFFFFFFF)

#define TOR_ROUTE_TABLE_SIZE ROUTE_TABLE_SIZE

// The ToR's P4Info has always listed its internal drop_for: kept, byte for byte.
#define INTERNAL_ACTION

#endif
