// p4rotor: the data-frame headers a ToR parses on every port (Ethernet, then the fabric
// header between racks, then IPv4), as a sub-parser each target's ToR parser calls after
// its own port-specific states (v1model: the CPU and clock ports).  The rotor parses no
// data frame: a circuit carries any bytes, whatever ethertype or garbage they hold.
#ifndef P4ROTOR_SHARED_PARSER_P4
#define P4ROTOR_SHARED_PARSER_P4

parser FrameParser(packet_in packet, out ethernet_t ethernet, out fabric_t fabric, out ipv4_t ipv4) {
    state start {
        packet.extract(ethernet);
        transition select(ethernet.ether_type) {
            ETHERTYPE_FABRIC: parse_fabric;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_fabric {
        packet.extract(fabric);
        transition select(fabric.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(ipv4);
        transition accept;
    }
}

#endif
