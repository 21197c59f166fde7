// p4rotor on PSA: headers and metadata of both programs.
#ifndef P4ROTOR_PSA_METADATA_P4
#define P4ROTOR_PSA_METADATA_P4

// PSA gives egress a metadata of its own (p4c-ebpf's XDP egress starts it zeroed, and its
// normal_meta path does not generate C that compiles): what egress needs of the ingress's
// decision travels in front of the frame, as on TNA.  The ingress deparser emits it, the egress
// parser extracts it and the egress deparser leaves it out.  Egress counters count it too
// (PSA counts the frame as it is): the adapter (control/nikss.py, BRIDGED_BYTES) reads their
// bytes less its 24 per packet.
const bit<8> BRIDGE_UNTIMED = 0;   // a frame with no deadline (a ToR delivering to a host)
const bit<8> BRIDGE_TIMED   = 1;   // a frame whose slot (rotor) or slice (ToR uplink) ends at slot_end
header bridged_t {
    bit<8>  kind;       // BRIDGE_*
    bit<16> matching;   // rotor: the matching it was switched in (optical loss)
    bit<32> in_port;    // rotor: its ingress port (optical loss: a link direction)
    Time_t  slot_end;   // common time its slot or slice ends (StaleGuard)
    Time_t  offset;     // the config's offset: egress local time + offset = common time
    bit<8>  tclass;     // ToR: the frame's class as routing read it (port_energy.p4's class counter)
}

struct headers_t {
    bridged_t  bridged;
    ethernet_t ethernet;   // the rotor parses nothing: a circuit carries any bytes
    fabric_t   fabric;
    ipv4_t     ipv4;
}

struct metadata_t {
    slot_meta_t  slot;
    route_meta_t route;
    bit<32> in_port;      // rotor: a link direction is a port's input or output
    bit<32> frame_len;    // ToR: the frame as it leaves (PSA gives the program no length)
    bool    uplink;       // ToR: the frame leaves on an uplink (it carries the fabric header)
}

struct empty_t {}

// Egress: the ingress's decision back into the metadata the shared controls read.
#define UNBRIDGE(hdr, meta) \
    meta.slot.mode = MODE_CLOCK; \
    meta.slot.index = hdr.bridged.matching; \
    meta.slot.slot_end = hdr.bridged.slot_end; \
    meta.slot.offset = hdr.bridged.offset; \
    meta.in_port = hdr.bridged.in_port; \
    meta.route.tclass = hdr.bridged.tclass
#endif
