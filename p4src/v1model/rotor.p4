// p4rotor rotor/selector circuit switch for v1model (BMv2 simple_switch_grpc).
// Composition only: the logic lives in ../shared/control/, v1model's ways in include/.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/state.p4"
#include "include/parser.p4"
#include "include/control/slot_registers.p4"
#include "../shared/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "../shared/control/circuit.p4"
#include "../shared/control/optical_loss.p4"
#include "../shared/control/stale_guard.p4"
#include "../shared/control/port_mtu.p4"
#include "../shared/control/port_energy.p4"

control RotorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control RotorComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control RotorIngress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    SlotState() slot_state;
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    Circuit() circuit;
    SlotRx() slot_rx;
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
            circuit.apply(meta, std.ingress_port, out_port, verdict);
            if (verdict == NO_DROP) {
                std.egress_spec = out_port;
            } else {
                drop_counter.count(verdict);
                mark_to_drop(std);
            }
        }
    }
}

control RotorEgress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    StaleGuard() stale_guard;
    PacketInHeader() packet_in_header;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    OpticalLoss() optical_loss;
    PortSleep() port_sleep;
    SlotTx() slot_tx;
    apply {
        if (std.egress_port == CPU_PORT) {
            packet_in_header.apply(hdr, meta, std);
        } else if (std.egress_port == CLOCK_PORT) {
            clock_probe_egress.apply(hdr, std);
        } else {
            // A circuit carries the frame's bytes unchanged.  Link MTU, then optical loss,
            // then the reconfiguration re-check: the first that fails names the cause.
            bit<32> verdict = NO_DROP;
            bool too_long;
            port_mtu.apply(std.packet_length, std.egress_port, too_long);
            if (too_long) {
                verdict = DROP_MTU;
            } else {
                bool lost;
                optical_loss.apply(meta.slot.index, std.ingress_port, std.egress_port, lost);
                if (lost) {
                    verdict = DROP_OPTICAL_LOSS;
                } else {
                    bool stale;
                    stale_guard.apply(meta, std.egress_global_timestamp + meta.slot.offset, stale);
                    if (stale) {
                        verdict = DROP_STALE;
                    }
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
            } else {
                drop_counter.count(verdict);
                mark_to_drop(std);
            }
        }
    }
}

V1Switch(RotorParser(), RotorVerifyChecksum(), RotorIngress(), RotorEgress(),
         RotorComputeChecksum(), RotorDeparser()) main;
