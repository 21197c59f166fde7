// p4rotor top-of-rack switch for PSA on eBPF (p4c-ebpf --arch psa --xdp, NIKSS).  Clock mode
// only, as the rotor (rotor.p4).  Tables and actions carry the v1model program's P4Info names.
// Composition only: the logic lives in ../shared/, PSA's ways in include/.
#include "include/target.p4"
#define Timestamp_t Time_t
#define PortId_t Port_t
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#undef Timestamp_t
#undef PortId_t
#include "include/metadata.p4"
#include "../shared/parser.p4"
#include "include/slot_registers.p4"
#include "../shared/control/slot_state.p4"
#include "../shared/control/tor_routing.p4"
#include "../shared/control/port_mtu.p4"
#include "../shared/control/stale_guard.p4"
#include "../shared/control/port_energy.p4"

parser TorIngressParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                        in psa_ingress_parser_input_metadata_t istd, in empty_t r, in empty_t c) {
    FrameParser() frame_parser;
    state start {
        frame_parser.apply(packet, hdr.ethernet, hdr.fabric, hdr.ipv4);
        transition accept;
    }
}

control TorIngress(inout headers_t hdr, inout metadata_t meta,
                   in psa_ingress_input_metadata_t istd, inout psa_ingress_output_metadata_t ostd) {
    Counter<bit<64>, bit<32>>(NUM_DROP_CAUSES, PSA_CounterType_t.PACKETS_AND_BYTES) drop_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS_AND_BYTES) rx_port_counter;
    SlotState() slot_state;       // the slot of a ToR is the topology slice
    TorRouting() routing;
    PortMtu() port_mtu;
    SlotRx() slot_rx;
    SlotRxLowLatency() slot_rx_ll;
    apply {
        Port_t in_port = (Port_t) istd.ingress_port;
        meta.in_port = in_port;
        slot_state.apply(meta, TIME_OF(istd.ingress_timestamp));
        rx_port_counter.count(in_port);
        slot_rx.apply(meta.slot.index, in_port);
        Port_t out_port;
        bit<32> verdict;
        routing.apply(hdr, meta, istd.parser_error == error.NoError, out_port, verdict);
        slot_rx_ll.apply(meta.slot.index, in_port, meta.route.tclass);  // its class read
        if (verdict == NO_DROP) {
            // The MTU check is here, before the redirect: the kernel drops a frame redirected to
            // a veth whose MTU it exceeds before the egress program could count it.  The frame
            // as it leaves: Ethernet, the fabric header if it goes up, IPv4's length.
            // An if, not `meta.uplink = hdr.fabric.isValid()`: p4c-ebpf 1.2.4.2 leaves that
            // assignment out of the C it writes (the ptf suite's oversize test found it).
            if (hdr.fabric.isValid()) {
                meta.uplink = true;
            } else {
                meta.uplink = false;
            }
            meta.frame_len = 14 + (meta.uplink ? 32w8 : 32w0) + (bit<32>) hdr.ipv4.total_len;
            bool too_long;
            port_mtu.apply(meta.frame_len, out_port, too_long);
            if (too_long) {
                verdict = DROP_MTU;
            } else {
                hdr.bridged.setValid();
                hdr.bridged.kind = meta.uplink ? BRIDGE_TIMED : BRIDGE_UNTIMED;
                hdr.bridged.matching = meta.slot.index;
                hdr.bridged.in_port = in_port;
                hdr.bridged.slot_end = meta.slot.slot_end;
                hdr.bridged.offset = meta.slot.offset;
                hdr.bridged.tclass = meta.route.tclass;
                send_to_port(ostd, (PortId_t) out_port);
            }
        }
        if (verdict != NO_DROP) {
            drop_counter.count(verdict);   // PSA starts every frame as dropped
        }
    }
}

control TorIngressDeparser(packet_out packet, out empty_t clone_meta, out empty_t resubmit_meta,
                           out empty_t normal_meta, inout headers_t hdr, in metadata_t meta,
                           in psa_ingress_output_metadata_t istd) {
    apply {
        packet.emit(hdr.bridged);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.fabric);
        packet.emit(hdr.ipv4);
    }
}

// Egress parses the bridged header only (include/metadata.p4); the frame stays payload.
parser TorEgressParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                       in psa_egress_parser_input_metadata_t istd, in empty_t normal_meta,
                       in empty_t c, in empty_t cc) {
    state start {
        packet.extract(hdr.bridged);
        transition accept;
    }
}

// The re-check of a frame leaving on an uplink: if its slice ended before it left, the circuit is
// dark or another one (STALE), as on the rotor.
control TorEgress(inout headers_t hdr, inout metadata_t meta, in psa_egress_input_metadata_t istd,
                  inout psa_egress_output_metadata_t ostd) {
    Counter<bit<64>, bit<32>>(NUM_DROP_CAUSES, PSA_CounterType_t.PACKETS_AND_BYTES) egress_drop_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS_AND_BYTES) tx_port_counter;
    StaleGuard() stale_guard;
    PortSleep() port_sleep;
    SlotTx() slot_tx;
    SlotTxLowLatency() slot_tx_ll;
    apply {
        UNBRIDGE(hdr, meta);
        Port_t out_port = (Port_t) istd.egress_port;
        bit<32> verdict = NO_DROP;
        bool stale = false;
        if (hdr.bridged.kind == BRIDGE_TIMED) {
            stale_guard.apply(meta, TIME_OF(istd.egress_timestamp) + meta.slot.offset, stale);
        }
        if (stale) {
            verdict = DROP_STALE;
        } else {
            bool asleep;
            port_sleep.apply(meta.slot.index, (Port_t) meta.in_port, out_port, asleep);
            if (asleep) {
                verdict = DROP_SLEEPING;
            }
        }
        if (verdict == NO_DROP) {
            tx_port_counter.count(out_port);
            slot_tx.apply(meta.slot.index, out_port);
            slot_tx_ll.apply(meta.slot.index, out_port, meta.route.tclass);
        } else {
            egress_drop_counter.count(verdict);
            egress_drop(ostd);
        }
    }
}

control TorEgressDeparser(packet_out packet, out empty_t clone_meta, out empty_t recirculate_meta,
                          inout headers_t hdr, in metadata_t meta, in psa_egress_output_metadata_t istd,
                          in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}

IngressPipeline(TorIngressParser(), TorIngress(), TorIngressDeparser()) ip;
EgressPipeline(TorEgressParser(), TorEgress(), TorEgressDeparser()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
