// Target shim for PSA on eBPF (p4c-ebpf --arch psa --xdp, run by NIKSS): the widths of a
// port and a timestamp, and how this target drops.  psa.p4 declares PortId_t and Timestamp_t
// as P4 `type`s of its own (bit<32> ifindex, bit<64> ns); the shared files use those names
// for plain bit types, so they are renamed around the shared includes (rotor.p4).
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

#define TIME_OF(ts) ((Time_t) (ts))

#define PHASE_GRAINS 65536   // clock_phase: the cycle in grains (slot_state.p4)
// The ToR's routes.  A NIKSS hash table is allocated whole when it loads: v1model's 262 144
// routes took 24 MiB of kernel memory per ToR.  Opera 108 x 6 needs 30 376 routes a ToR.
#define PSA_ROUTE_TABLE_SIZE 65536
#endif
