// Target shim for TNA (Tofino 1, bf-p4c --target tofino --arch tna): the only
// place that knows the width of a port or a timestamp on this target.  The
// v1model shim (../../v1model/include/target.p4) defines the same names.
#ifndef P4ROTOR_TARGET_P4
#define P4ROTOR_TARGET_P4
#include <core.p4>
#include <tna.p4>

// PortId_t comes from tna.p4 (bit<9>).
//
// Time on Tofino: the global timestamp is 48-bit nanoseconds, but a stateful ALU
// holds 32 bits and there is no 48-bit compare.  Every time the pipeline handles
// (offset, epoch, cycle, night, slot bounds, deadlines) is therefore 32 bits in
// *units* of 1024 ns: bits [41:10] of the nanosecond timestamp.  A 32-bit unit
// clock wraps every 73 minutes, so times are never compared directly: the
// pipeline subtracts and tests the sign (valid while two times are less than
// 2^31 units = 36 minutes apart).  The controller converts microseconds to these
// units (its target record, control-plane/p4rotor/control/target.py).
typedef bit<32> Timestamp_t;
#define TIME_UNIT_NS 1024
// Bits [41:10] of a 48-bit timestamp sit across two containers, misaligned for the
// ALUs: an identity hash (the input crossbar picks any bits) moves them into one.
#define TS_UNITS_HASH(name) Hash<bit<32>>(HashAlgorithm_t.IDENTITY) name
#define TS_UNITS(name, ts48) name.get({(ts48)[41:10]})
// "a < b" for two wrapping times is "the sign bit of a - b is set": the difference
// is computed by an action (a gateway only tests bits of a field).
#define SIGN(x) ((x)[31:31])

#endif
