// p4rotor top-of-rack switch for TNA (Tofino 1, bf-p4c).
// Composition only: the logic lives in include/ (per target) and ../shared/.
#include "include/target.p4"
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#include "include/metadata.p4"
#include "include/tor_parser.p4"
#include "include/egress_parser.p4"
#include "include/control/slot_state.p4"
#include "include/control/control_packet.p4"
#include "include/control/clock_probe.p4"
#include "include/control/tor_routing.p4"
#include "include/control/port_mtu.p4"
#include "include/control/stale_guard.p4"

control TorIngress(inout headers_t hdr, inout metadata_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".drop_counter")
    Counter<bit<32>, bit<32>>(NUM_DROP_CAUSES, CounterType_t.PACKETS_AND_BYTES) drop_counter;
    @name(".rx_port_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) rx_port_counter;
    @name(".ctrl_counter")
    Counter<bit<32>, bit<32>>(NUM_CTRL_COUNTERS, CounterType_t.PACKETS) ctrl_counter;
    SlotState() slot_state;       // the slot of a ToR is the topology slice
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    @name("routing") TorClassify() classify;
    @name("routing") TorRouting() routing;

    apply {
        meta.discard = false;
        meta.count_drop = false;
        meta.count_ctrl = false;
        hdr.bridged.setValid();
        hdr.bridged.kind = BRIDGE_DATA;
        hdr.bridged.deadline = 0;
        hdr.bridged.in_port = 0;
        hdr.bridged.matching = 0;
        classify.apply(hdr, meta);
        slot_state.apply(meta, ig_prsr_md.global_tstamp);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, ig_intr_md.ingress_port, ig_prsr_md.global_tstamp, ig_tm_md);
        } else if (hdr.clock_probe.isValid()) {
            clock_probe.apply(hdr, meta, ig_intr_md.ingress_port, ig_prsr_md.global_tstamp, ig_tm_md);
        } else {
            rx_port_counter.count((bit<32>) ig_intr_md.ingress_port);
            routing.apply(hdr, meta, ig_prsr_md.parser_err, ig_tm_md);
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

control TorEgress(inout headers_t hdr, inout egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    @name(".egress_drop_counter")
    Counter<bit<32>, bit<32>>(NUM_DROP_CAUSES, CounterType_t.PACKETS_AND_BYTES) egress_drop_counter;
    @name(".tx_port_counter")
    Counter<bit<32>, bit<32>>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) tx_port_counter;
    ClockProbeEgress() clock_probe_egress;
    PortMtu() port_mtu;
    StaleGuard() stale_guard;

    apply {
        meta.discard = false;
        if (hdr.bridged.kind == BRIDGE_CLOCK) {
            clock_probe_egress.apply(hdr, eg_prsr_md.global_tstamp);
        } else if (hdr.bridged.kind == BRIDGE_DATA || hdr.bridged.kind == BRIDGE_TIMED) {
            // pkt_length counts a fabric header routing added (and not one it removed).
            bool too_long;
            bool stale = false;
            port_mtu.apply(eg_intr_md.pkt_length, eg_intr_md.egress_port, too_long);
            if (hdr.bridged.kind == BRIDGE_TIMED) {
                // On an uplink: its route was chosen for a slice; if the route's time
                // ran out while the frame sat in the queue, the circuit is dark or
                // another one (STALE), as the rotor does.
                stale_guard.apply(hdr, eg_prsr_md.global_tstamp, stale);
            }
            if (too_long) {
                meta.discard = true;
                meta.drop_cause = DROP_MTU;
            } else if (stale) {
                meta.discard = true;
                meta.drop_cause = DROP_STALE;
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

Pipeline(TorIngressParser(), TorIngress(), TorIngressDeparser(),
         P4rotorEgressParser(), TorEgress(), P4rotorEgressDeparser()) pipe;
Switch(pipe) main;
