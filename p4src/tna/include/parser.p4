// p4rotor rotor on TNA: ingress parser and deparser.  As on v1model, only control
// packets (CPU port) and time probes (clock port) are parsed; every other frame
// stays opaque payload.  The CPU and clock ports are parser value sets written by
// the controller: Tofino's CPU port depends on the part (320 or 192 on Tofino 1,
// 0 for the CPU Ethernet ports), so it cannot be a compile-time constant.
#ifndef P4ROTOR_TNA_PARSER_P4
#define P4ROTOR_TNA_PARSER_P4

parser RotorIngressParser(packet_in packet, out headers_t hdr, out metadata_t meta,
                          out ingress_intrinsic_metadata_t ig_intr_md) {
    value_set<PortId_t>(4) cpu_port;
    value_set<PortId_t>(4) clock_port;

    state start {
        packet.extract(ig_intr_md);
        packet.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            cpu_port: parse_packet_out;
            clock_port: parse_clock_ethernet;
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

control RotorIngressDeparser(packet_out packet, inout headers_t hdr, in metadata_t meta,
                             in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        packet.emit(hdr.bridged);
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);      // valid only for a clock probe
        packet.emit(hdr.clock_probe);
    }
}

#endif
