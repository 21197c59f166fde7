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
}

#endif
