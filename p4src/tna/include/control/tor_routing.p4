// p4rotor ToR on TNA: local delivery, and routing over the rotors' live circuits
// (../../../shared/control/tor_routing.p4 explains slices, classes and VLB).  Same tables, actions and
// parameters; `until` is in time units (target.p4).  Where v1model compares two
// variables, this file tests equality (a gateway can) or subtracts and tests the
// sign (hops against the limit).
#ifndef P4ROTOR_TNA_TOR_ROUTING_P4
#define P4ROTOR_TNA_TOR_ROUTING_P4

// The lookups that need no slot run first, beside SlotState rather than after it
// (Tofino: a table placed after another control's last gateway cannot move ahead
// of it).  Both controls are instantiated as "routing", so the P4Info names are
// v1model's: TorIngress.routing.tor_config, ... TorIngress.routing.route.
control TorClassify(inout headers_t hdr, inout metadata_t meta) {
    action set_rack(bit<16> rack, bit<8> hop_limit) {
        meta.route.my_rack = rack;
        meta.route.hop_limit = hop_limit;
    }
    table tor_config {
        key = {}
        actions = { set_rack; }
        default_action = set_rack(0xFFFF, 0);  // not const: the controller sets it
        size = 1;
    }

    action to_rack(bit<16> rack) {
        meta.route.dst_rack = rack;
    }
    action unknown_rack() {
        meta.route.dst_rack = 0xFFFF;
    }
    table rack_of {
        key = { hdr.ipv4.dst_addr : lpm @name("ipv4_dst"); }
        actions = { to_rack; @defaultonly unknown_rack; }
        const default_action = unknown_rack();
        size = RACK_TABLE_SIZE;
    }

    apply {
        tor_config.apply();
        rack_of.apply();
        if (hdr.ipv4.dscp == DSCP_LOW_LATENCY) {
            meta.route.tclass = TCLASS_LOW_LATENCY;
        } else if (hdr.ipv4.dscp == DSCP_DIRECT_ONLY) {
            meta.route.tclass = TCLASS_BULK_TRANSIT;   // direct circuit or nothing
        } else {
            meta.route.tclass = TCLASS_BULK;
        }
        if (hdr.fabric.isValid()) {
            meta.route.dst_rack = hdr.fabric.dst_rack;
            meta.route.tclass = hdr.fabric.tclass;
        }
    }
}

control TorRouting(inout headers_t hdr, inout metadata_t meta, in bit<16> parser_err,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    bit<32> rotor_mask = 0;
    bit<32> live_until = 0;

    action drop_for(bit<32> cause) {
        meta.discard = true;
        meta.count_drop = true;
        meta.drop_cause = cause;
    }

    action slice_live(bit<32> live) {
        meta.route.live_rotors = live;
    }
    action slice_unknown() {
        meta.route.live_rotors = 0;
    }
    table slice_info {
        key = { meta.slot.index : exact @name("slice"); }
        actions = { slice_live; @defaultonly slice_unknown; }
        const default_action = slice_unknown();
        size = SLICE_TABLE_SIZE;
    }

    action deliver(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.fabric.setInvalid();
    }
    action unknown_host() {
        drop_for(DROP_NO_ROUTE);
    }
    table local_host {
        key = { hdr.ipv4.dst_addr : exact @name("ipv4_dst"); }
        actions = { deliver; @defaultonly unknown_host; }
        const default_action = unknown_host();
        size = HOST_TABLE_SIZE;
    }

    action via(PortId_t port, bit<32> mask, bit<32> until) {
        ig_tm_md.ucast_egress_port = port;
        rotor_mask = mask;
        live_until = until;
    }
    bool vlb = false;
    action via_vlb(PortId_t port, bit<32> mask, bit<32> until) {
        ig_tm_md.ucast_egress_port = port;
        rotor_mask = mask;
        live_until = until;
        vlb = true;   // the fabric header's class becomes TCLASS_BULK_TRANSIT (below)
    }
    bit<8>  over = 0;   // sign set: hops < hop_limit (both < 128: limits are a few hops)
    bit<32> live = 0;
    action find_over() { over = hdr.fabric.hops - meta.route.hop_limit; }
    action find_live() { live = meta.route.live_rotors & rotor_mask; }
    action find_deadline() { hdr.bridged.deadline = meta.slot.cycle_start + live_until; }
    action no_route() {
        rotor_mask = 0;   // the decision below drops it (NO_ROUTE)
    }
    table route {
        key = {
            meta.slot.index     : exact @name("slice");
            meta.route.dst_rack : exact @name("dst_rack");
            meta.route.tclass   : exact @name("tclass");
        }
        actions = { via; via_vlb; @defaultonly no_route; }
        const default_action = no_route();
        size = ROUTE_TABLE_SIZE;
    }

    // No `return`: each one becomes a flag and a gateway that serialises every table
    // after it.  And the route is looked up for every frame, in parallel with the
    // checks, which then pick the one outcome: the ToR has no stages to spare.
    apply {
        find_over();
        slice_info.apply();
        bool routed = route.apply().hit;
        find_live();
        if (parser_err != PARSER_ERROR_OK || !hdr.ipv4.isValid()) {
            drop_for(DROP_BAD_HEADER);
        } else if (meta.route.dst_rack == meta.route.my_rack) {
            local_host.apply();
        } else if (meta.route.dst_rack == 0xFFFF) {
            drop_for(DROP_NO_ROUTE);
        } else if (!meta.slot.running) {
            drop_for(DROP_NOT_STARTED);
        } else if (hdr.fabric.isValid() && over[7:7] == 0) {    // hops - hop_limit >= 0
            drop_for(DROP_HOP_LIMIT);
        } else if (!routed) {
            drop_for(DROP_NO_ROUTE);
        } else if (live == 0) {
            drop_for(DROP_DARK_UPLINK);   // never send on an uplink whose rotor is dark
        } else {
            if (hdr.fabric.isValid()) {
                hdr.fabric.hops = hdr.fabric.hops + 1;
            } else {
                hdr.fabric.setValid();
                hdr.fabric.dst_rack = meta.route.dst_rack;
                hdr.fabric.src_rack = meta.route.my_rack;
                hdr.fabric.hops = 1;
                hdr.fabric.tclass = meta.route.tclass;
                hdr.fabric.ether_type = hdr.ethernet.ether_type;
                hdr.ethernet.ether_type = ETHERTYPE_FABRIC;
            }
            if (vlb) {
                hdr.fabric.tclass = TCLASS_BULK_TRANSIT;
            }
            // The egress re-check: this route may leave until `until` after the cycle start.
            hdr.bridged.kind = BRIDGE_TIMED;
            find_deadline();
        }
    }
}

#endif
