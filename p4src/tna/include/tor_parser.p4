// p4rotor ToR on TNA: ingress parser and deparser (value-set CPU and clock ports:
// see parser.p4).
#ifndef P4ROTOR_TNA_TOR_PARSER_P4
#define P4ROTOR_TNA_TOR_PARSER_P4

parser TorIngressParser(packet_in packet, out headers_t hdr, out metadata_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    value_set<PortId_t>(4) cpu_port;
    value_set<PortId_t>(4) clock_port;

    state start {
        packet.extract(ig_intr_md);
        packet.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            cpu_port: parse_packet_out;
            clock_port: parse_clock_ethernet;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition accept;
    }
    state parse_clock_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_CLOCK_PROBE: parse_clock_probe;
            default: accept;
        }
    }
    state parse_clock_probe {
        packet.extract(hdr.clock_probe);
        transition accept;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_FABRIC: parse_fabric;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_fabric {
        packet.extract(hdr.fabric);
        transition select(hdr.fabric.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control TorIngressDeparser(packet_out packet, inout headers_t hdr, in metadata_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        packet.emit(hdr.bridged);
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.clock_probe);   // valid only for a reflected clock probe
        packet.emit(hdr.fabric);
        packet.emit(hdr.ipv4);
    }
}

#endif
