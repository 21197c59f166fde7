// p4rotor on TNA: control packets from the controller (PacketOut on a CPU port).
// The PacketIn reply is built here, at ingress (egress passes it through), and
// goes back out of the CPU port the request came in on: no CPU port constant.
#ifndef P4ROTOR_TNA_CONTROL_PACKET_P4
#define P4ROTOR_TNA_CONTROL_PACKET_P4

control ControlPacket(inout headers_t hdr, inout metadata_t meta, in PortId_t in_port,
                      in bit<48> ingress_ts, inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // Tofino writes a container from at most one PHV source and a constant per
    // action, so the reply is copied field group by field group.
    action copy_ids() {
        hdr.packet_in.opcode = hdr.packet_out.opcode;
        hdr.packet_in.flags = hdr.packet_out.flags;
        hdr.packet_in.index = hdr.packet_out.index;
    }
    action copy_slot() { hdr.packet_in.slot = hdr.packet_out.slot; }
    action copy_seq() { hdr.packet_in.seq = hdr.packet_out.seq; }
    action stamp() { hdr.packet_in.timestamp = ingress_ts; }   // ns on Tofino (us on BMv2): the controller scales
    action note_port() { hdr.packet_in.ingress_port = (bit<16>) in_port; }
    action reply() {
        ig_tm_md.ucast_egress_port = in_port;   // back to the CPU port it came from
        hdr.bridged.kind = BRIDGE_CPU;
    }
    action refuse() {
        // OP_SET_SLOT is signal mode, which TNA does not run (slot_state.p4):
        // refused like any unknown opcode, counted, answered with OP_ERROR.
        hdr.packet_in.opcode = OP_ERROR;
        meta.count_drop = true;
        meta.drop_cause = DROP_CTRL_ERROR;
    }

    apply {
        hdr.packet_in.setValid();
        copy_ids();
        copy_slot();
        copy_seq();
        stamp();
        note_port();
        hdr.packet_out.setInvalid();            // never emitted: the reply is a packet_in
        reply();
        if (hdr.packet_in.opcode == OP_TIME_PROBE) {
            meta.count_ctrl = true;
            meta.ctrl_index = CTRL_TIME_PROBE;
        } else {
            refuse();
        }
    }
}

#endif
