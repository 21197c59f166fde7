// Target shim for PSA on eBPF (p4c-ebpf --arch psa --xdp, run by NIKSS): the widths of a
// port and a time, and how PSA declares and uses what the shared controls need
// (../../shared/control/common.p4 lists it).  psa.p4 declares PortId_t and Timestamp_t as P4
// `type`s of its own (bit<32> ifindex, bit<64> ns); ../../shared/headers.p4 uses those names
// for plain bit types, so they are renamed around its include (rotor.p4).
#ifndef P4ROTOR_TARGET_P4
#define P4ROTOR_TARGET_P4
#include <core.p4>
#include <psa.p4>

typedef bit<32> Port_t;   // a port is the interface's ifindex (NIKSS add-port prints it)
// Times in ns of the kernel clock (bpf_ktime_get_ns): every switch reads the same clock, so
// the controller's offset is 0 and the time base exact, and a microsecond schedule converts
// without rounding.  64 bits wide, durations too: p4c-ebpf masks a 48-bit result with
// (1 << 48) - 1 on a C int, which clang folds to garbage.
typedef bit<64> Time_t;
typedef Time_t  Span_t;

#define TIME_OF(ts) ((Time_t) (ts))

// Registers and counters live in the control that uses them (PSA has no top-level instances
// ingress and egress share; NIKSS names them by their control, RotorIngress_slot_state_...).
// A register index must be a variable: p4c-ebpf writes C that takes a literal's address.
#define REG_READ(r, dst, i) dst = r.read(i)
#define REG_WRITE(r, i, v) r.write(i, v)
#define CLOCK_REGISTERS \
    Register<Time_t, bit<32>>(1) clock_cycle_start; \
    Register<bit<32>, bit<32>>(1) clock_cycle; \
    Register<bit<16>, bit<32>>(1) clock_generation;
#define PORT_PACKET_COUNTER(c) Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) c
#define SLOT_PORT_COUNTER(c) Counter<bit<64>, bit<32>>(ENERGY_CELLS, PSA_CounterType_t.PACKETS_AND_BYTES) c

// A uniform 32-bit draw (bpf_get_prandom_u32).
#define RANDOM32_DECL(name) Random<bit<32>>(0, 32w0xFFFFFFFF) name;
#define RANDOM32(name, dst) dst = name.read()

// No range match: the clock phase is looked up in grains (../../shared/control/slot_state.p4),
// a cycle of up to this many.
#define PHASE_GRAINS 65536
// The ToR's routes.  A NIKSS hash table is allocated whole when it loads: v1model's 262 144
// routes took 24 MiB of kernel memory per ToR.  Opera 108 x 6 needs 30 376 routes a ToR.
#define TOR_ROUTE_TABLE_SIZE 65536

// This P4Info never listed the ToR's internal drop_for.
#define INTERNAL_ACTION @hidden
#endif
