// A stand-in switch for the eBPF fabric's tests: forwards every frame by an exact table on its
// ingress port and changes nothing, so a chain of them carries host traffic as a wire would.
#include <core.p4>
#include <psa.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t eth; }
struct meta_t { }
struct empty_t { }

parser IP(packet_in pkt, out headers_t h, inout meta_t m, in psa_ingress_parser_input_metadata_t im,
          in empty_t r, in empty_t rr) {
    state start { pkt.extract(h.eth); transition accept; }
}

control Ing(inout headers_t h, inout meta_t m, in psa_ingress_input_metadata_t im,
            inout psa_ingress_output_metadata_t om) {
    action fwd(PortId_t p) { send_to_port(om, p); }
    action drop() { ingress_drop(om); }
    table t {
        key = { im.ingress_port : exact; }
        actions = { fwd; drop; }
        const default_action = drop();  // a port nobody wired goes nowhere
        size = 64;
    }
    apply { t.apply(); }
}

control ID(packet_out pkt, out empty_t c, out empty_t r, out empty_t n, inout headers_t h, in meta_t m,
           in psa_ingress_output_metadata_t im) {
    apply { pkt.emit(h.eth); }
}

parser EP(packet_in pkt, out headers_t h, inout meta_t m, in psa_egress_parser_input_metadata_t im,
          in empty_t n, in empty_t c, in empty_t cc) {
    state start { transition accept; }
}

control Eg(inout headers_t h, inout meta_t m, in psa_egress_input_metadata_t im,
           inout psa_egress_output_metadata_t om) { apply { } }

control ED(packet_out pkt, out empty_t c, out empty_t r, inout headers_t h, in meta_t m,
           in psa_egress_output_metadata_t im, in psa_egress_deparser_input_metadata_t ed) { apply { } }

IngressPipeline(IP(), Ing(), ID()) ip;
EgressPipeline(EP(), Eg(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
