// p4rotor on PSA: headers and metadata of both programs (egress sees the ingress's metadata_t:
// p4c-ebpf's XDP design hands it over as it is).
#ifndef P4ROTOR_PSA_METADATA_P4
#define P4ROTOR_PSA_METADATA_P4

struct headers_t {
    ethernet_t ethernet;   // the rotor parses nothing: a circuit carries any bytes
    fabric_t   fabric;
    ipv4_t     ipv4;
}

struct metadata_t {
    slot_meta_t  slot;
    route_meta_t route;
    bit<32> in_port;      // rotor: a link direction is a port's input or output
    bit<32> frame_len;    // ToR: the frame as it leaves (PSA gives egress no length)
    bool    uplink;       // ToR: the frame leaves on an uplink (it carries the fabric header)
}

struct empty_t {}
#endif
