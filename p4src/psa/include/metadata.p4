// p4rotor on PSA: headers and metadata of the rotor (egress sees the ingress's metadata_t).
#ifndef P4ROTOR_PSA_METADATA_P4
#define P4ROTOR_PSA_METADATA_P4

struct headers_t {
    ethernet_t ethernet;   // never parsed by the rotor: a circuit carries any bytes
}

struct metadata_t {
    slot_meta_t slot;
    bit<32> in_port;   // for egress: a link direction is a port's input or output
}

struct empty_t {}
#endif
