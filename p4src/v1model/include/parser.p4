// p4rotor: parser and deparser.  Only control packets from the CPU port and time
// probes on the clock port are parsed; every other frame stays opaque payload.
#ifndef P4ROTOR_PARSER_P4
#define P4ROTOR_PARSER_P4

parser RotorParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout std_meta_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            CLOCK_PORT: parse_clock_ethernet;
            default: accept;
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
            default: accept;   // not a probe: ClockProbe counts and drops it
        }
    }
    state parse_clock_probe {
        packet.extract(hdr.clock_probe);
        transition accept;
    }
}

control RotorDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);      // valid only for a reflected clock probe
        packet.emit(hdr.clock_probe);
    }
}

#endif
