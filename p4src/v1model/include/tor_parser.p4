// p4rotor ToR: parser and deparser.  The CPU and clock ports carry their own headers;
// every other port data frames (FrameParser, ../../shared/parser.p4).
#ifndef P4ROTOR_TOR_PARSER_P4
#define P4ROTOR_TOR_PARSER_P4

parser TorParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout std_meta_t std) {
    FrameParser() frame_parser;
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            CLOCK_PORT: parse_clock_ethernet;
            default: parse_frame;
        }
    }
    state parse_clock_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_CLOCK_PROBE: parse_clock_probe;
            default: accept;   // not a probe: ClockProbe counts and drops it
        }
    }
    state parse_clock_probe {
        packet.extract(hdr.clock_probe);
        transition accept;
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition accept;
    }
    state parse_frame {
        frame_parser.apply(packet, hdr.ethernet, hdr.fabric, hdr.ipv4);
        transition accept;
    }
}

control TorDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.clock_probe);   // valid only for a reflected clock probe
        packet.emit(hdr.fabric);
        packet.emit(hdr.ipv4);
    }
}

#endif
