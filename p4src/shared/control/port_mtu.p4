// p4rotor: the MTU check.  A frame longer than its egress link carries is lost by the link
// itself: a Linux veth (Mininet, ptf) discards it without any counter, a real NIC counts it as
// oversize.  The first ToR inserts the fabric header, so a full-size host frame grows by
// FABRIC_HEADER_BYTES between racks; if a link is configured too small, that loss must show
// up here, by cause (the top counts DROP_MTU), and never as silence (docs/dataplane.md, "Link
// MTU").  Where and on what length: the target's top (v1model: egress packet_length; PSA-eBPF:
// the ToR's ingress, from the IPv4 length, before the redirect the kernel would drop).
#ifndef P4ROTOR_SHARED_PORT_MTU_P4
#define P4ROTOR_SHARED_PORT_MTU_P4
#include "common.p4"

control PortMtu(in bit<32> frame_len, in Port_t out_port, out bool too_long) {
    bit<32> max_frame = 0;   // 0: no limit configured for this port

    // max_frame_bytes: the link MTU + the Ethernet header (no FCS), as the
    // controller computes it from the topology's per-link MTU.
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
        too_long = max_frame != 0 && frame_len > max_frame;
    }
}

#endif
