// p4rotor on v1model: the headers and metadata structs of both programs.  On v1model
// metadata reaches egress as it left ingress, so nothing is bridged.
#ifndef P4ROTOR_V1MODEL_METADATA_P4
#define P4ROTOR_V1MODEL_METADATA_P4

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    clock_probe_t clock_probe;
    fabric_t     fabric;
    ipv4_t       ipv4;
}

struct metadata_t {
    slot_meta_t slot;
    route_meta_t route;
    bit<8>  ctrl_opcode;    // control packet being answered (PacketIn)
    bit<8>  ctrl_flags;
    bit<16> ctrl_index;
    bit<32> ctrl_slot;
    bit<32> ctrl_seq;
    Timestamp_t ctrl_ts;
    // One-switch fabric (oneswitch.p4): where the frame is in the emulated fabric, kept
    // across resubmits (one pass per rack it visits).  Unused by the rotor and ToR programs.
    @field_list(1) bit<16> one_rack;      // the rack whose ToR this pass is
    @field_list(1) bit<8>  one_hops;      // circuits crossed so far
    @field_list(1) bit<8>  one_tclass;    // TCLASS_* (a VLB first hop turns bulk into transit)
    @field_list(1) bit<8>  one_visiting;  // 1: a resubmitted pass (the rack is one_rack)
    @field_list(1) bit<48> one_arrival;   // the frame's ingress timestamp at its first pass
}

#endif
