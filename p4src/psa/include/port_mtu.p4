// p4rotor on PSA: the egress MTU check (v1model's PortMtu): a frame longer than its link carries
// is lost by the link itself (a veth drops it without a counter), so it is counted here (MTU).
#ifndef P4ROTOR_PSA_PORT_MTU_P4
#define P4ROTOR_PSA_PORT_MTU_P4

control PortMtu(in bit<32> frame_len, in Port_t out_port, out bool dropped) {
    bit<32> max_frame = 0;   // 0: no limit configured for this port

    // max_frame_bytes: the link MTU + the Ethernet header (no FCS).
    action limit(bit<16> max_frame_bytes) { max_frame = (bit<32>) max_frame_bytes; }
    action no_limit() { max_frame = 0; }

    table port_mtu {
        key = { out_port : exact @name("port"); }
        actions = { limit; no_limit; }
        const default_action = no_limit;   // a port the topology does not name
        size = MAX_PORTS;
    }

    apply {
        port_mtu.apply();
        dropped = max_frame != 0 && frame_len > max_frame;
    }
}

#endif
