// p4rotor rotor/selector circuit switch for PSA on eBPF (p4c-ebpf --arch psa --xdp, NIKSS).
// Clock mode only: every switch reads the kernel's clock, so no control packets set slots and
// no probes measure clocks (there is no CPU port on this target).  Tables and actions carry
// the v1model program's P4Info names, so the controller builds the same entities.
// Composition only: the logic lives in ../shared/control/, PSA's ways in include/.
#include "include/target.p4"
#define Timestamp_t Time_t
#define PortId_t Port_t
#include "../shared/defines.p4"
#include "../shared/headers.p4"
#undef Timestamp_t
#undef PortId_t
#include "include/metadata.p4"
#include "include/slot_registers.p4"
#include "../shared/control/slot_state.p4"
#include "../shared/control/circuit.p4"
#include "../shared/control/optical_loss.p4"
#include "../shared/control/stale_guard.p4"
#include "../shared/control/port_energy.p4"

parser RotorIngressParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                          in psa_ingress_parser_input_metadata_t istd, in empty_t r, in empty_t c) {
    state start { transition accept; }   // a circuit carries any bytes: nothing to parse
}

control RotorIngress(inout headers_t hdr, inout metadata_t meta,
                     in psa_ingress_input_metadata_t istd, inout psa_ingress_output_metadata_t ostd) {
    // PSA declares counters inside the control that counts (docs/dataplane.md: indices).
    Counter<bit<64>, bit<32>>(NUM_DROP_CAUSES, PSA_CounterType_t.PACKETS_AND_BYTES) drop_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS_AND_BYTES) rx_port_counter;
    SlotState() slot_state;
    Circuit() circuit;
    SlotRx() slot_rx;
    apply {
        Port_t in_port = (Port_t) istd.ingress_port;
        meta.in_port = in_port;
        slot_state.apply(meta, TIME_OF(istd.ingress_timestamp));
        rx_port_counter.count(in_port);
        slot_rx.apply(meta.slot.index, in_port);
        Port_t out_port;
        bit<32> verdict;
        circuit.apply(meta, in_port, out_port, verdict);
        if (verdict == NO_DROP) {
            hdr.bridged.setValid();
            hdr.bridged.kind = BRIDGE_TIMED;
            hdr.bridged.matching = meta.slot.index;
            hdr.bridged.in_port = in_port;
            hdr.bridged.slot_end = meta.slot.slot_end;
            hdr.bridged.offset = meta.slot.offset;
            hdr.bridged.tclass = TCLASS_LOW_LATENCY;   // not read: the rotor parses no class
            send_to_port(ostd, (PortId_t) out_port);
        } else {
            drop_counter.count(verdict);   // PSA starts every frame as dropped
        }
    }
}

control RotorIngressDeparser(packet_out packet, out empty_t clone_meta, out empty_t resubmit_meta,
                             out empty_t normal_meta, inout headers_t hdr, in metadata_t meta,
                             in psa_ingress_output_metadata_t istd) {
    apply { packet.emit(hdr.bridged); }
}

// Egress parses the bridged header only (include/metadata.p4); the frame stays payload.
parser RotorEgressParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                         in psa_egress_parser_input_metadata_t istd, in empty_t normal_meta,
                         in empty_t c, in empty_t cc) {
    state start {
        packet.extract(hdr.bridged);
        transition accept;
    }
}

// Optical loss where the frame meets its link, then the re-check: a frame whose day ended
// before it left is reconfiguration loss (STALE).
// No MTU check: PSA gives the program no frame length, and every frame a rotor carries left a
// ToR whose egress checked it against the same link's MTU.
control RotorEgress(inout headers_t hdr, inout metadata_t meta, in psa_egress_input_metadata_t istd,
                    inout psa_egress_output_metadata_t ostd) {
    Counter<bit<64>, bit<32>>(NUM_DROP_CAUSES, PSA_CounterType_t.PACKETS_AND_BYTES) egress_drop_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS_AND_BYTES) tx_port_counter;
    OpticalLoss() optical_loss;
    StaleGuard() stale_guard;
    PortSleep() port_sleep;
    SlotTx() slot_tx;
    apply {
        UNBRIDGE(hdr, meta);
        Port_t in_port = (Port_t) meta.in_port;
        Port_t out_port = (Port_t) istd.egress_port;
        bit<32> verdict = NO_DROP;
        bool lost;
        optical_loss.apply(meta.slot.index, in_port, out_port, lost);
        if (lost) {
            verdict = DROP_OPTICAL_LOSS;
        } else {
            bool stale;
            stale_guard.apply(meta, TIME_OF(istd.egress_timestamp) + meta.slot.offset, stale);
            if (stale) {
                verdict = DROP_STALE;
            }
        }
        if (verdict == NO_DROP) {
            bool asleep;
            port_sleep.apply(meta.slot.index, in_port, out_port, asleep);
            if (asleep) {
                verdict = DROP_SLEEPING;
            }
        }
        if (verdict == NO_DROP) {
            tx_port_counter.count(out_port);
            slot_tx.apply(meta.slot.index, out_port);
        } else {
            egress_drop_counter.count(verdict);
            egress_drop(ostd);
        }
    }
}

control RotorEgressDeparser(packet_out packet, out empty_t clone_meta, out empty_t recirculate_meta,
                            inout headers_t hdr, in metadata_t meta, in psa_egress_output_metadata_t istd,
                            in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}

IngressPipeline(RotorIngressParser(), RotorIngress(), RotorIngressDeparser()) ip;
EgressPipeline(RotorEgressParser(), RotorEgress(), RotorEgressDeparser()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
