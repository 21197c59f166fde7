// p4rotor top-of-rack switch for v1model (BMv2 simple_switch_grpc).
// Composition only: the logic lives in ../shared/control/, v1model's ways in include/.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/state.p4"
#include "../shared/parser.p4"
#include "include/tor_parser.p4"
#include "include/control/slot_registers.p4"
#include "../shared/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "../shared/control/tor_routing.p4"
#include "../shared/control/port_mtu.p4"
#include "../shared/control/port_energy.p4"
#include "../shared/control/stale_guard.p4"

control TorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control TorComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control TorIngress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    SlotState() slot_state;       // the slot of a ToR is the topology slice
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    TorRouting() routing;
    SlotRx() slot_rx;
    SlotRxLowLatency() slot_rx_ll;
    apply {
        slot_state.apply(meta, std.ingress_global_timestamp);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, std);
        } else if (std.ingress_port == CLOCK_PORT) {
            clock_probe.apply(hdr, std);
        } else {
            rx_port_counter.count((bit<32>) std.ingress_port);
            slot_rx.apply(meta.slot.index, std.ingress_port);
            Port_t out_port;
            bit<32> verdict;
            routing.apply(hdr, meta, std.parser_error == error.NoError, out_port, verdict);
            slot_rx_ll.apply(meta.slot.index, std.ingress_port, meta.route.tclass);  // its class read
            if (verdict == NO_DROP) {
                std.egress_spec = out_port;
            } else {
                drop_counter.count(verdict);
                mark_to_drop(std);
            }
        }
    }
}

control TorEgress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    PacketInHeader() packet_in_header;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    StaleGuard() stale_guard;
    PortSleep() port_sleep;
    SlotTx() slot_tx;
    SlotTxLowLatency() slot_tx_ll;
    apply {
        if (std.egress_port == CPU_PORT) {
            packet_in_header.apply(hdr, meta, std);
        } else if (std.egress_port == CLOCK_PORT) {
            clock_probe_egress.apply(hdr, std);
        } else {
            // At egress packet_length is the frame as ingress left it (BMv2 deparses
            // between the two; TNA's eg_intr_md.pkt_length likewise), so it already
            // counts a fabric header routing added or removed (ptf proves it).
            bit<32> verdict = NO_DROP;
            bool too_long;
            port_mtu.apply(std.packet_length, std.egress_port, too_long);
            if (too_long) {
                verdict = DROP_MTU;
            } else if (hdr.fabric.isValid()) {
                // A frame carries the fabric header exactly when it leaves on an uplink
                // (routing strips it for a local host).  Its uplink was chosen for the
                // slice it was admitted in: if that slice ended while it sat in the queue,
                // the circuit is dark or another one, so drop it (STALE), as the rotor does.
                bool stale;
                stale_guard.apply(meta, std.egress_global_timestamp + meta.slot.offset, stale);
                if (stale) {
                    verdict = DROP_STALE;
                }
            }
            if (verdict == NO_DROP) {
                // Last: a frame the fabric loses anyway is counted under that cause.
                bool asleep;
                port_sleep.apply(meta.slot.index, std.ingress_port, std.egress_port, asleep);
                if (asleep) {
                    verdict = DROP_SLEEPING;
                }
            }
            if (verdict == NO_DROP) {
                tx_port_counter.count((bit<32>) std.egress_port);
                slot_tx.apply(meta.slot.index, std.egress_port);
                slot_tx_ll.apply(meta.slot.index, std.egress_port, meta.route.tclass);
            } else {
                drop_counter.count(verdict);
                mark_to_drop(std);
            }
        }
    }
}

V1Switch(TorParser(), TorVerifyChecksum(), TorIngress(), TorEgress(),
         TorComputeChecksum(), TorDeparser()) main;
