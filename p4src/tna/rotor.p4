// p4rotor rotor/selector circuit switch for TNA (Tofino 1, bf-p4c).
// Composition only: the logic lives in include/ (per target) and ../shared/.
// docs/tofino.md says what differs from the v1model program and why.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/parser.p4"
#include "include/egress_parser.p4"
#include "include/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "include/control/circuit.p4"
#include "include/control/optical_loss.p4"
#include "include/control/port_mtu.p4"
#include "include/control/stale_guard.p4"

control RotorIngress(inout headers_t hdr, inout metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // The counters keep their v1model P4Info names; egress drops have their own
    // counter (TNA: a counter belongs to one gress), which the controller adds.
    @name(".drop_counter")
    Counter<bit<32>, bit<32>>(NUM_DROP_CAUSES, CounterType_t.PACKETS_AND_BYTES) drop_counter;
    @name(".rx_port_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) rx_port_counter;
    @name(".ctrl_counter")
    Counter<bit<32>, bit<32>>(NUM_CTRL_COUNTERS, CounterType_t.PACKETS) ctrl_counter;
    SlotState() slot_state;
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    Circuit() circuit;

    apply {
        meta.discard = false;
        meta.count_drop = false;
        meta.count_ctrl = false;
        hdr.bridged.setValid();
        hdr.bridged.kind = BRIDGE_DATA;
        hdr.bridged.deadline = 0;
        hdr.bridged.in_port = 0;
        hdr.bridged.matching = 0;
        slot_state.apply(meta, ig_prsr_md.global_tstamp);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, ig_intr_md.ingress_port, ig_prsr_md.global_tstamp, ig_tm_md);
        } else if (hdr.ethernet.isValid()) {
            // The rotor parses Ethernet only on the clock port.
            clock_probe.apply(hdr, meta, ig_intr_md.ingress_port, ig_prsr_md.global_tstamp, ig_tm_md);
        } else {
            rx_port_counter.count((bit<32>) ig_intr_md.ingress_port);
            bool switched;
            circuit.apply(meta, ig_intr_md.ingress_port, ig_tm_md, switched);
            if (switched) {
                hdr.bridged.kind = BRIDGE_TIMED;
                hdr.bridged.deadline = meta.slot.slot_end;
                hdr.bridged.in_port = (bit<16>) ig_intr_md.ingress_port;
                hdr.bridged.matching = meta.slot.index;
            }
        }
        if (meta.count_drop) {
            drop_counter.count(meta.drop_cause);
        }
        if (meta.count_ctrl) {
            ctrl_counter.count(meta.ctrl_index);
        }
        if (meta.discard) {
            ig_dprsr_md.drop_ctl = 1;
        }
    }
}

control RotorEgress(inout headers_t hdr, inout egress_metadata_t meta,
                    in egress_intrinsic_metadata_t eg_intr_md,
                    in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                    inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    @name(".egress_drop_counter")
    Counter<bit<32>, bit<32>>(NUM_DROP_CAUSES, CounterType_t.PACKETS_AND_BYTES) egress_drop_counter;
    @name(".tx_port_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) tx_port_counter;
    // Optical loss per link direction, the CorrOpt monitor's input (../shared/control/optical_loss.p4 says
    // why): frames that crossed a rotor port's input or output, and frames lost on it.
    @name(".link_in_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS) link_in_counter;
    @name(".link_in_loss_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS) link_in_loss_counter;
    @name(".link_out_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS) link_out_counter;
    @name(".link_out_loss_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS) link_out_loss_counter;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    OpticalLoss() optical_loss;
    StaleGuard() stale_guard;

    apply {
        meta.discard = false;
        if (hdr.bridged.kind == BRIDGE_CLOCK) {
            clock_probe_egress.apply(hdr, eg_prsr_md.global_tstamp);
        } else if (hdr.bridged.kind == BRIDGE_TIMED) {
            // A circuit carries the frame's bytes unchanged.  The three checks run
            // side by side; the first that fails names the cause, in the order
            // v1model applies them (link MTU, optical loss, reconfiguration).
            bool too_long;
            bool lost_in;
            bool lost_out;
            bool stale;
            port_mtu.apply(eg_intr_md.pkt_length, eg_intr_md.egress_port, too_long);
            optical_loss.apply(hdr.bridged.matching, (PortId_t) hdr.bridged.in_port, eg_intr_md.egress_port,
                               lost_in, lost_out);
            stale_guard.apply(hdr, eg_prsr_md.global_tstamp, stale);
            if (too_long) {
                meta.discard = true;
                meta.drop_cause = DROP_MTU;
            } else if (lost_in || lost_out) {
                meta.discard = true;
                meta.drop_cause = DROP_OPTICAL_LOSS;
            } else if (stale) {
                meta.discard = true;
                meta.drop_cause = DROP_STALE;
            }
            if (!too_long) {
                if (lost_in) {
                    link_in_loss_counter.count((bit<32>) hdr.bridged.in_port);
                } else {
                    link_in_counter.count((bit<32>) hdr.bridged.in_port);
                    if (lost_out) {
                        link_out_loss_counter.count((bit<32>) eg_intr_md.egress_port);
                    } else {
                        link_out_counter.count((bit<32>) eg_intr_md.egress_port);
                    }
                }
            }
            if (meta.discard) {
                egress_drop_counter.count(meta.drop_cause);
                eg_dprsr_md.drop_ctl = 1;
            } else {
                tx_port_counter.count((bit<32>) eg_intr_md.egress_port);
            }
        }
    }
}

Pipeline(RotorIngressParser(), RotorIngress(), RotorIngressDeparser(),
         P4rotorEgressParser(), RotorEgress(), P4rotorEgressDeparser()) pipe;
Switch(pipe) main;
