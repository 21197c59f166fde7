// p4rotor rotor/selector circuit switch for v1model (BMv2 simple_switch_grpc).
// Composition only: the logic lives in ../shared/.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/state.p4"
#include "include/parser.p4"
#include "include/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "include/control/circuit.p4"
#include "include/control/optical_loss.p4"
#include "include/control/stale_guard.p4"
#include "include/control/port_mtu.p4"

control RotorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control RotorComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control RotorIngress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    SlotState() slot_state;
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    Circuit() circuit;
    apply {
        slot_state.apply(meta, std);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, std);
        } else if (std.ingress_port == CLOCK_PORT) {
            clock_probe.apply(hdr, std);
        } else {
            rx_port_counter.count((bit<32>) std.ingress_port);
            bool switched;
            circuit.apply(meta, std, switched);
        }
    }
}

control RotorEgress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    StaleGuard() stale_guard;
    PacketInHeader() packet_in_header;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    OpticalLoss() optical_loss;
    apply {
        if (std.egress_port == CPU_PORT) {
            packet_in_header.apply(hdr, meta, std);
        } else if (std.egress_port == CLOCK_PORT) {
            clock_probe_egress.apply(hdr, std);
        } else {
            // A circuit carries the frame's bytes unchanged.
            bool too_long;
            port_mtu.apply(std.packet_length, std, too_long);
            if (!too_long) {
                bool lost;
                optical_loss.apply(meta.slot.index, std, lost);
                if (!lost) {
                    stale_guard.apply(meta, std);
                }
            }
        }
    }
}

V1Switch(RotorParser(), RotorVerifyChecksum(), RotorIngress(), RotorEgress(),
         RotorComputeChecksum(), RotorDeparser()) main;
