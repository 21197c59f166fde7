// p4rotor ToR: local delivery, and routing over the rotors' live circuits.
//
// The ToR's "slot" (SlotState) is the topology *slice*: the interval during which the set of
// live circuits is constant.  Routes are installed for every slice of the hyperperiod, keyed
// by slice, so the clock mode switches routes to the microsecond with no controller write
// racing a slice boundary.
#ifndef P4ROTOR_SHARED_TOR_ROUTING_P4
#define P4ROTOR_SHARED_TOR_ROUTING_P4
#include "common.p4"

// parsed: the parser found no error.  verdict: NO_DROP and out_port, or the drop cause.
control TorRouting(inout headers_t hdr, inout metadata_t meta, in bool parsed,
                   out Port_t out_port, out bit<32> verdict) {
    bit<32> rotor_mask = 0;
    Span_t  live_until = 0;

    INTERNAL_ACTION action drop_for(bit<32> cause) {
        verdict = cause;
    }

    // Written by the controller (default action): this ToR's rack and hop limit.
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

    // Which rotors are live (not dark) during the slice.
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

    // Destination rack of a host address (docs/addressing.md: one prefix per rack).
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

    // Hosts of this rack.
    action deliver(Port_t port) {
        out_port = port;
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

    // Next hop in the current slice: the uplink to the rotor whose circuit leads on.
    //   mask: 1 << rotor index, checked against the slice's live rotors
    //   until: from the cycle start until which this route may still leave (clock mode egress
    //          re-check): the slice's end for a low-latency route (the multi-hop path is this
    //          slice's), the uplink rotor's day end for a direct circuit (it outlives slice
    //          changes made by the other rotors; re-checking it per slice dropped bulk at
    //          every one)
    action via(Port_t port, bit<32> mask, Span_t until) {
        out_port = port;
        rotor_mask = mask;
        live_until = until;
    }
    // Bulk, no direct circuit now: first hop of a 2-hop VLB path.  The transit
    // ToR sees TCLASS_BULK_TRANSIT and may only send it on directly.
    action via_vlb(Port_t port, bit<32> mask, Span_t until) {
        out_port = port;
        rotor_mask = mask;
        live_until = until;
        hdr.fabric.tclass = TCLASS_BULK_TRANSIT;
    }
    action no_route() {
        drop_for(DROP_NO_ROUTE);
    }
    table route {
        key = {
            meta.slot.index     : exact @name("slice");
            meta.route.dst_rack : exact @name("dst_rack");
            meta.route.tclass   : exact @name("tclass");
        }
        actions = { via; via_vlb; @defaultonly no_route; }
        const default_action = no_route();
        size = TOR_ROUTE_TABLE_SIZE;
    }

    apply {
        out_port = 0;
        verdict = NO_DROP;
        // Low-latency until the frame's class is read: a frame dropped before (a header the ToR
        // cannot route) counts as low-latency in port_energy.p4's class counters, not as bulk
        // (TCLASS_BULK is 0, what unset metadata reads).
        meta.route.tclass = TCLASS_LOW_LATENCY;
        tor_config.apply();
        if (!parsed || !hdr.ipv4.isValid()) {
            drop_for(DROP_BAD_HEADER);
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
        if (meta.route.dst_rack == 0xFFFF) {
            drop_for(DROP_NO_ROUTE);
            return;
        }
        if (!meta.slot.running) {
            drop_for(DROP_NOT_STARTED);
            return;
        }
        if (hdr.fabric.isValid()) {
            if (hdr.fabric.hops >= meta.route.hop_limit) {
                drop_for(DROP_HOP_LIMIT);
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
        if (route.apply().hit) {
            if ((meta.route.live_rotors & rotor_mask) == 0) {
                // Never send on an uplink whose rotor is dark.
                drop_for(DROP_DARK_UPLINK);
            } else {
                hdr.fabric.hops = hdr.fabric.hops + 1;
                if (meta.slot.mode == MODE_CLOCK) {
                    meta.slot.slot_end = meta.slot.cycle_start + (Time_t) live_until;
                }
            }
        }
    }
}

#endif
