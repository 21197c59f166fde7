// p4rotor on TNA: egress MTU check (../../../shared/control/port_mtu.p4 explains why).  The frame's
// length is eg_intr_md.pkt_length less the bridged header, which the egress
// deparser removes.
#ifndef P4ROTOR_TNA_PORT_MTU_P4
#define P4ROTOR_TNA_PORT_MTU_P4

control PortMtu(in bit<16> pkt_length, in PortId_t port, out bool too_long) {
    bit<32> max_frame = 0;   // 0: no limit configured for this port

    action limit(bit<16> max_frame_bytes) { max_frame = (bit<32>) max_frame_bytes; }
    action no_limit() { max_frame = 0; }

    table port_mtu {
        key = { port : exact @name("port"); }
        actions = { limit; no_limit; }
        const default_action = no_limit;
        size = MAX_PORTS;
    }

    bit<32> frame_len = 0;
    bit<32> room = 0;     // sign set: longer than the limit
    action find_length() { frame_len = (bit<32>) pkt_length - BRIDGED_BYTES; }
    action find_room() { room = max_frame - frame_len; }

    apply {
        port_mtu.apply();
        find_length();
        find_room();
        too_long = false;
        if (max_frame != 0 && SIGN(room) == 1) {
            too_long = true;
        }
    }
}

#endif
