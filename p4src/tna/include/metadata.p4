// p4rotor on TNA: the headers and metadata structs of both programs.
#ifndef P4ROTOR_TNA_METADATA_P4
#define P4ROTOR_TNA_METADATA_P4

// TNA metadata does not cross the traffic manager (v1model's does): what egress
// needs of the ingress decision travels in front of the frame as a bridged
// header, which the egress parser extracts and the egress deparser drops.
// (Each kind is written whole: Tofino writes a container from one source per action.)
const bit<8> BRIDGE_DATA  = 0;   // a data frame without a deadline (a ToR delivering to a host)
const bit<8> BRIDGE_TIMED = 1;   // a data frame whose slot (rotor) or route (ToR) ends at `deadline`
const bit<8> BRIDGE_CPU   = 2;   // a PacketIn to the controller (built at ingress)
const bit<8> BRIDGE_CLOCK = 3;   // a clock probe going back out: stamp its egress time
header bridged_t {
    bit<8>  kind;          // BRIDGE_*
    Timestamp_t deadline;  // BRIDGE_TIMED: local time units (egress adds no offset)
    bit<16> in_port;       // rotor, BRIDGE_TIMED: for the optical loss tables (egress)
    bit<16> matching;      //   the matching the frame was switched in
}
#define BRIDGED_BYTES 32w9

struct headers_t {
    bridged_t    bridged;
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    clock_probe_t clock_probe;
    fabric_t     fabric;
    ipv4_t       ipv4;
}

// Ingress.  Every count of a cause-indexed counter happens once, at the end of
// the control (Tofino runs an indexed counter in one place per packet): the
// controls only record the cause.
struct metadata_t {
    slot_meta_t slot;
    route_meta_t route;
    bit<32> day_left;      // phase - day start: sign set while the slot is in its night
    bool    discard;       // drop the frame (ig_dprsr_md.drop_ctl)
    bool    count_drop;    // count it under drop_cause (a refused control packet is
    bit<32> drop_cause;    //   counted and still answered)
    bool    count_ctrl;
    bit<32> ctrl_index;    // CTRL_* counter index
}

struct egress_metadata_t {
    bool    discard;
    bit<32> drop_cause;
}

#endif
