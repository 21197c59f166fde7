// Baseline for benchmarks: the trivial port-to-port program (port p -> p^1 pairs
// via one exact table), same parser shape as the rotor.  Not for production.
#include "include/target.p4"

struct empty_headers_t {}
struct empty_meta_t {}

parser PParser(packet_in packet, out empty_headers_t hdr, inout empty_meta_t meta,
               inout std_meta_t std) {
    state start { transition accept; }
}
control PNoop(inout empty_headers_t hdr, inout empty_meta_t meta) { apply { } }
control PIngress(inout empty_headers_t hdr, inout empty_meta_t meta, inout std_meta_t std) {
    action forward(PortId_t port) { std.egress_spec = port; }
    action drop() { mark_to_drop(std); }
    table port_map {
        key = { std.ingress_port : exact @name("in_port"); }
        actions = { forward; @defaultonly drop; }
        const default_action = drop();
        size = 512;
    }
    apply { port_map.apply(); }
}
control PEgress(inout empty_headers_t hdr, inout empty_meta_t meta, inout std_meta_t std) { apply { } }
control PDeparser(packet_out packet, in empty_headers_t hdr) { apply { } }

V1Switch(PParser(), PNoop(), PIngress(), PEgress(), PNoop(), PDeparser()) main;
