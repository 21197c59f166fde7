// p4rotor ToR on PSA: local delivery, and routing over the rotors' live circuits (the ToR's
// "slot" is the topology slice; routes are keyed by slice).  The logic of v1model's TorRouting;
// the outcome goes out as (port, drop cause) for the top to act on.
#ifndef P4ROTOR_PSA_TOR_ROUTING_P4
#define P4ROTOR_PSA_TOR_ROUTING_P4

const bit<32> NO_DROP = 0xFFFFFFFF;

control TorRouting(inout headers_t hdr, inout metadata_t meta, in bool parsed,
                   out Port_t out_port, out bit<32> cause) {
    bit<32> rotor_mask = 0;
    Time_t  live_until = 0;

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

    action slice_live(bit<32> live) { meta.route.live_rotors = live; }
    action slice_unknown() { meta.route.live_rotors = 0; }
    table slice_info {
        key = { meta.slot.index : exact @name("slice"); }
        actions = { slice_live; @defaultonly slice_unknown; }
        const default_action = slice_unknown();
        size = SLICE_TABLE_SIZE;
    }

    action to_rack(bit<16> rack) { meta.route.dst_rack = rack; }
    action unknown_rack() { meta.route.dst_rack = 0xFFFF; }
    table rack_of {
        key = { hdr.ipv4.dst_addr : lpm @name("ipv4_dst"); }
        actions = { to_rack; @defaultonly unknown_rack; }
        const default_action = unknown_rack();
        size = RACK_TABLE_SIZE;
    }

    action deliver(Port_t port) {
        out_port = port;
        cause = NO_DROP;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.fabric.setInvalid();
    }
    action unknown_host() { cause = DROP_NO_ROUTE; }
    table local_host {
        key = { hdr.ipv4.dst_addr : exact @name("ipv4_dst"); }
        actions = { deliver; @defaultonly unknown_host; }
        const default_action = unknown_host();
        size = HOST_TABLE_SIZE;
    }

    // until: from the cycle start until which this route may still leave (egress re-check).
    action via(Port_t port, bit<32> mask, Time_t until) {
        out_port = port;
        rotor_mask = mask;
        live_until = until;
        cause = NO_DROP;
    }
    // Bulk with no direct circuit now: first hop of a 2-hop VLB path.
    action via_vlb(Port_t port, bit<32> mask, Time_t until) {
        out_port = port;
        rotor_mask = mask;
        live_until = until;
        cause = NO_DROP;
        hdr.fabric.tclass = TCLASS_BULK_TRANSIT;
    }
    action no_route() { cause = DROP_NO_ROUTE; }
    table route {
        key = {
            meta.slot.index     : exact @name("slice");
            meta.route.dst_rack : exact @name("dst_rack");
            meta.route.tclass   : exact @name("tclass");
        }
        actions = { via; via_vlb; @defaultonly no_route; }
        const default_action = no_route();
        size = PSA_ROUTE_TABLE_SIZE;
    }

    apply {
        out_port = 0;
        cause = DROP_BAD_HEADER;
        tor_config.apply();
        if (!parsed || !hdr.ipv4.isValid()) {
            return;
        }
        if (hdr.fabric.isValid()) {
            meta.route.dst_rack = hdr.fabric.dst_rack;
            meta.route.tclass = hdr.fabric.tclass;
        } else {
            rack_of.apply();
            if (hdr.ipv4.dscp == DSCP_LOW_LATENCY) {
                meta.route.tclass = TCLASS_LOW_LATENCY;
            } else if (hdr.ipv4.dscp == DSCP_DIRECT_ONLY) {
                meta.route.tclass = TCLASS_BULK_TRANSIT;  // direct circuit or nothing
            } else {
                meta.route.tclass = TCLASS_BULK;
            }
        }
        if (meta.route.dst_rack == meta.route.my_rack) {
            local_host.apply();
            return;
        }
        cause = DROP_NO_ROUTE;
        if (meta.route.dst_rack == 0xFFFF) {
            return;
        }
        cause = DROP_NOT_STARTED;
        if (!meta.slot.running) {
            return;
        }
        if (hdr.fabric.isValid()) {
            cause = DROP_HOP_LIMIT;
            if (hdr.fabric.hops >= meta.route.hop_limit) {
                return;
            }
        } else {
            hdr.fabric.setValid();
            hdr.fabric.dst_rack = meta.route.dst_rack;
            hdr.fabric.src_rack = meta.route.my_rack;
            hdr.fabric.hops = 0;
            hdr.fabric.tclass = meta.route.tclass;
            hdr.fabric.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_FABRIC;
        }
        slice_info.apply();
        route.apply();   // sets cause to NO_DROP on a hit, DROP_NO_ROUTE on a miss
        if (cause == NO_DROP) {
            if ((meta.route.live_rotors & rotor_mask) == 0) {
                cause = DROP_DARK_UPLINK;   // never send on an uplink whose rotor is dark
            } else {
                hdr.fabric.hops = hdr.fabric.hops + 1;
                if (meta.slot.mode == MODE_CLOCK) {
                    meta.slot.slot_end = meta.slot.cycle_start + live_until;
                }
            }
        }
    }
}

#endif
