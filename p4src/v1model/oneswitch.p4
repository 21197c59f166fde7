// p4rotor one-switch fabric for v1model: every ToR and every rotor of a topology on ONE
// BMv2 ([McGuinness21 §2.6.3]'s testbed design; docs/one-switch.md).  Composition only.
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

// Circuits crossed by delivered-or-resubmitted frames, by hop number (1..): how many
// passes the fabric's multi-hop paths cost.
counter(16, CounterType.packets) hop_counter;

#include "include/control/one_switch.p4"

control OneVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control OneComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control OneIngress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    SlotState() slot_state;       // the slot is the topology slice, as on a ToR
    ControlPacket() control_packet;
    ClockProbe() clock_probe;
    OneSwitchFabric() fabric;
    apply {
        // Every visit of a frame happens at the instant it arrived: BMv2 gives a resubmitted
        // packet no ingress timestamp (0), so the first pass's is carried and put back.
        if (meta.one_visiting == 0) {
            meta.one_arrival = std.ingress_global_timestamp;
        } else {
            std.ingress_global_timestamp = meta.one_arrival;
        }
        slot_state.apply(meta, std.ingress_global_timestamp);
        if (hdr.packet_out.isValid()) {
            control_packet.apply(hdr, meta, std);
        } else if (std.ingress_port == CLOCK_PORT) {
            clock_probe.apply(hdr, std);
        } else {
            fabric.apply(hdr, meta, std);
        }
    }
}

control OneEgress(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    PacketInHeader() packet_in_header;
    ClockProbeEgress() clock_probe_egress;
    apply {
        if (std.egress_port == CPU_PORT) {
            packet_in_header.apply(hdr, meta, std);
        } else if (std.egress_port == CLOCK_PORT) {
            clock_probe_egress.apply(hdr, std);
        } else {
            tx_port_counter.count((bit<32>) std.egress_port);
        }
    }
}

V1Switch(TorParser(), OneVerifyChecksum(), OneIngress(), OneEgress(),
         OneComputeChecksum(), TorDeparser()) main;
