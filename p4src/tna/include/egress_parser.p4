// p4rotor on TNA: the egress parser and deparser of both programs.  Egress parses
// only what it rewrites: the bridged header always (then drops it), and a clock
// probe's Ethernet and probe headers to stamp its egress time.  Everything else,
// a PacketIn built at ingress included, leaves as the ingress deparser wrote it.
#ifndef P4ROTOR_TNA_EGRESS_PARSER_P4
#define P4ROTOR_TNA_EGRESS_PARSER_P4

parser P4rotorEgressParser(packet_in packet, out headers_t hdr, out egress_metadata_t meta,
                           out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        packet.extract(eg_intr_md);
        packet.extract(hdr.bridged);
        transition select(hdr.bridged.kind) {
            BRIDGE_CLOCK: parse_clock_ethernet;
            default: accept;
        }
    }
    state parse_clock_ethernet {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.clock_probe);
        transition accept;
    }
}

control P4rotorEgressDeparser(packet_out packet, inout headers_t hdr, in egress_metadata_t meta,
                              in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.clock_probe);
    }
}

#endif
