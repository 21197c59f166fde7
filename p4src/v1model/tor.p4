// p4rotor top-of-rack switch for v1model (BMv2 simple_switch_grpc).
// Composition only: the logic lives in ../shared/.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/state.p4"
#include "include/tor_parser.p4"
#include "include/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "include/control/tor_routing.p4"
#include "include/control/port_mtu.p4"
#include "include/control/stale_guard.p4"

control TorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control TorComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control TorIngress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    SlotState() slot_state;       // the slot of a ToR is the topology slice
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    TorRouting() routing;
    apply {
        slot_state.apply(meta, std);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, std);
        } else if (std.ingress_port == CLOCK_PORT) {
            clock_probe.apply(hdr, std);
        } else {
            rx_port_counter.count((bit<32>) std.ingress_port);
            routing.apply(hdr, meta, std);
        }
    }
}

control TorEgress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    PacketInHeader() packet_in_header;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    StaleGuard() stale_guard;
    apply {
        if (std.egress_port == CPU_PORT) {
            packet_in_header.apply(hdr, meta, std);
        } else if (std.egress_port == CLOCK_PORT) {
            clock_probe_egress.apply(hdr, std);
        } else {
            // At egress packet_length is the frame as ingress left it (BMv2 deparses
            // between the two; TNA's eg_intr_md.pkt_length likewise), so it already
            // counts a fabric header routing added or removed (ptf proves it).
            bool too_long;
            port_mtu.apply(std.packet_length, std, too_long);
            if (too_long) {
                // counted by PortMtu
            } else if (hdr.fabric.isValid()) {
                // A frame carries the fabric header exactly when it leaves on an uplink
                // (routing strips it for a local host).  Its uplink was chosen for the
                // slice it was admitted in: if that slice ended while it sat in the queue,
                // the circuit is dark or another one, so drop it (STALE), as the rotor does.
                stale_guard.apply(meta, std);
            } else {
                tx_port_counter.count((bit<32>) std.egress_port);
            }
        }
    }
}

V1Switch(TorParser(), TorVerifyChecksum(), TorIngress(), TorEgress(),
         TorComputeChecksum(), TorDeparser()) main;
