// Target shim for v1model (BMv2 simple_switch_grpc): the only place that knows
// the width of a port or a timestamp on this target.  A TNA shim defines the
// same names for Tofino.
#ifndef P4ROTOR_TARGET_P4
#define P4ROTOR_TARGET_P4
#include <core.p4>
#include <v1model.p4>

typedef bit<9>  PortId_t;
typedef bit<48> Timestamp_t;   // BMv2: microseconds since the switch process started
typedef standard_metadata_t std_meta_t;

#endif
