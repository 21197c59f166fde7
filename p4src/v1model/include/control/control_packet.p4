// p4rotor: control packets from the controller (PacketOut on the CPU port).
#ifndef P4ROTOR_CONTROL_PACKET_P4
#define P4ROTOR_CONTROL_PACKET_P4

control ControlPacket(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    action reply() {
        std.egress_spec = CPU_PORT;
    }

    action consume() {
        mark_to_drop(std);
    }

    action refuse() {
        // Counted as a drop, answered with OP_ERROR so the controller knows.
        drop_counter.count(DROP_CTRL_ERROR);
        meta.ctrl_opcode = OP_ERROR;
        std.egress_spec = CPU_PORT;
    }

    apply {
        meta.ctrl_opcode = hdr.packet_out.opcode;
        meta.ctrl_flags = hdr.packet_out.flags;
        meta.ctrl_index = hdr.packet_out.index;
        meta.ctrl_slot = hdr.packet_out.slot;
        meta.ctrl_seq = hdr.packet_out.seq;
        meta.ctrl_ts = std.ingress_global_timestamp;
        Timestamp_t hdr_at = hdr.packet_out.at;
        bit<32> hdr_night = hdr.packet_out.night_us;
        hdr.packet_out.setInvalid();  // never emitted: the reply is a packet_in

        if (meta.ctrl_opcode == OP_SET_SLOT) {
            // A bad value never reaches the state register: the switch keeps
            // forwarding on the previous matching (or on none).
            bit<8> pflags;
            bit<16> pg;
            pend_flags.read(pflags, 0);
            pend_generation.read(pg, 0);
            if (meta.slot.mode != MODE_SIGNAL || meta.ctrl_index >= meta.slot.matchings) {
                refuse();
            } else if ((meta.ctrl_flags & FLAG_AT) != 0) {
                // Timed: held until `at`.  SlotState has already applied a pending
                // change that is due, so one still pending is in the future: refuse
                // the newcomer rather than lose it (the controller sends slot k+1
                // only once slot k has started).
                if ((pflags & RF_VALID) != 0 && pg == meta.slot.generation) {
                    refuse();
                } else {
                    pend_slot.write(0, meta.ctrl_slot);
                    pend_index.write(0, meta.ctrl_index);
                    pend_at.write(0, hdr_at);
                    pend_day_start.write(0, hdr_at + (Timestamp_t) hdr_night);
                    pend_generation.write(0, meta.slot.generation);
                    pend_flags.write(0, RF_VALID);
                    ctrl_counter.count(CTRL_SET_SLOT);
                    if (std.ingress_global_timestamp + meta.slot.offset >= hdr_at) {
                        ctrl_counter.count(CTRL_SET_SLOT_LATE);  // applied by the next packet
                    }
                    if ((meta.ctrl_flags & FLAG_ACK) != 0) {
                        reply();
                    } else {
                        consume();
                    }
                }
            } else {
                rotor_slot.write(0, meta.ctrl_slot);
                rotor_index.write(0, meta.ctrl_index);
                rotor_flags.write(0, RF_VALID | (meta.ctrl_flags & FLAG_NIGHT));
                rotor_day_start.write(0, 0);
                pend_flags.write(0, 0);  // an immediate change overrides a pending one
                rotor_generation.write(0, meta.slot.generation);
                ctrl_counter.count(CTRL_SET_SLOT);
                if ((meta.ctrl_flags & FLAG_ACK) != 0) {
                    reply();
                } else {
                    consume();
                }
            }
        } else if (meta.ctrl_opcode == OP_TIME_PROBE) {
            ctrl_counter.count(CTRL_TIME_PROBE);
            reply();
        } else {
            refuse();
        }
    }
}

control PacketInHeader(inout headers_t hdr, in metadata_t meta, in std_meta_t std) {
    apply {
        hdr.packet_in.setValid();
        hdr.packet_in.opcode = meta.ctrl_opcode;
        hdr.packet_in.flags = meta.ctrl_flags;
        hdr.packet_in.index = meta.ctrl_index;
        hdr.packet_in.slot = meta.ctrl_slot;
        hdr.packet_in.seq = meta.ctrl_seq;
        hdr.packet_in.timestamp = meta.ctrl_ts;
        hdr.packet_in.ingress_port = (bit<16>) std.ingress_port;
    }
}

#endif
