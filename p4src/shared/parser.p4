// p4rotor: parser and deparser.  Only control packets from the CPU port are
// parsed; every other frame stays opaque payload.
#ifndef P4ROTOR_PARSER_P4
#define P4ROTOR_PARSER_P4

parser RotorParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout std_meta_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: accept;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition accept;
    }
}

control RotorDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
    }
}

#endif
