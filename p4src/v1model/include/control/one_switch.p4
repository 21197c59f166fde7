// p4rotor one-switch fabric: ONE switch emulates every ToR and every rotor ([McGuinness21]
// §2.6.3: Opera's testbed ran its 8 ToRs and 6 rotors on one Tofino).  Host ports are
// switch ports.  A pass of the pipeline is a visit to one rack's ToR: it routes the
// frame exactly as the ToR program does (same route table, keyed by the rack too),
// then crosses the chosen rotor's circuit in the same instant (same circuit table,
// keyed by the rotor too) and is resubmitted to visit the rack it lands in.  The last
// visit delivers to the host port.  One clock (the ToR's slice clock over the
// hyperperiod) drives everything: a rotor's matching is looked up by the phase within
// the hyperperiod, its slot times shifted by the rotor's offset.
#ifndef P4ROTOR_ONE_SWITCH_P4
#define P4ROTOR_ONE_SWITCH_P4

control OneSwitchFabric(inout headers_t hdr, inout metadata_t meta, inout std_meta_t std) {
    bit<32> rotor_mask = 0;
    bit<32> live_until = 0;
    bit<8>  rotor = 0;
    bit<32> phase = 0;
    bit<32> day_start = 0;
    bit<16> matching = 0;
    bit<16> next_rack = 0xFFFF;
    bit<8>  hop_limit = 0;

    action drop_for(bit<32> cause) {
        drop_counter.count(cause);
        mark_to_drop(std);
    }

    // Written by the controller (default action): the hop limit of every ToR.
    action set_fabric(bit<8> hop_limit_) {
        hop_limit = hop_limit_;
    }
    table fabric_config {
        key = {}
        actions = { set_fabric; }
        default_action = set_fabric(0);  // not const: the controller sets it
        size = 1;
    }

    // A host port's rack: where a frame from a host enters the fabric.
    action host_of(bit<16> rack) {
        meta.one_rack = rack;
    }
    action not_a_host_port() {
        meta.one_rack = 0xFFFF;
    }
    table host_port {
        key = { std.ingress_port : exact @name("port"); }
        actions = { host_of; @defaultonly not_a_host_port; }
        const default_action = not_a_host_port();
        size = HOST_TABLE_SIZE;
    }

    // The ToR's tables, one set for every rack: the same entries the ToR program holds,
    // keyed by the rack where the ToR program's entries are per switch.
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

    action deliver(PortId_t port) {
        std.egress_spec = port;
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

    // The ToR's route, with the rotor's index where the ToR program has its uplink port.
    action via(bit<8> rotor_, bit<32> mask, bit<32> until) {
        rotor = rotor_;
        rotor_mask = mask;
        live_until = until;
    }
    action via_vlb(bit<8> rotor_, bit<32> mask, bit<32> until) {
        rotor = rotor_;
        rotor_mask = mask;
        live_until = until;
        meta.one_tclass = TCLASS_BULK_TRANSIT;
    }
    action no_route() {
        drop_for(DROP_NO_ROUTE);
    }
    table route {
        key = {
            meta.one_rack       : exact @name("rack");
            meta.slot.index     : exact @name("slice");
            meta.route.dst_rack : exact @name("dst_rack");
            meta.one_tclass     : exact @name("tclass");
        }
        actions = { via; via_vlb; @defaultonly no_route; }
        const default_action = no_route();
        size = ONE_ROUTE_TABLE_SIZE;
    }

    // Each rotor's matching by the phase within the hyperperiod: one entry (or two, where a
    // slot wraps the hyperperiod's end) per slot of the rotor, shifted by its offset.
    //   day_start_: where the slot's night ends (us from the hyperperiod's start)
    action rotor_day(bit<16> index, bit<32> day_start_) {
        matching = index;
        day_start = day_start_;
    }
    action rotor_unknown() {
        matching = 0xFFFF;
    }
    table rotor_phase {
        key = {
            rotor : exact @name("rotor");
            phase : range @name("phase");
        }
        actions = { rotor_day; @defaultonly rotor_unknown; }
        const default_action = rotor_unknown();
        size = CLOCK_PHASE_TABLE_SIZE;
    }

    // The rotor's circuits: (rotor, matching, rack in) -> rack out (the rotor program's
    // circuit table, keyed by the rotor and by racks where it has ports).
    action connect(bit<16> rack) {
        next_rack = rack;
    }
    action no_circuit() {
        drop_for(DROP_NO_CIRCUIT);
    }
    table circuit {
        key = {
            rotor         : exact @name("rotor");
            matching      : exact @name("matching");
            meta.one_rack : exact @name("in_rack");
        }
        actions = { connect; @defaultonly no_circuit; }
        const default_action = no_circuit();
        size = CIRCUIT_TABLE_SIZE;
    }

    apply {
        // The phase within the hyperperiod (clock mode; SlotState found the cycle's start).
        phase = (bit<32>) (std.ingress_global_timestamp + meta.slot.offset - meta.slot.cycle_start);
        matching = 0xFFFF;
        fabric_config.apply();
        if (std.parser_error != error.NoError || !hdr.ipv4.isValid()) {
            drop_for(DROP_BAD_HEADER);
            return;
        }
        if (meta.one_visiting == 0) {
            // Entering the fabric from a host: its rack, the destination's, the class.
            rx_port_counter.count((bit<32>) std.ingress_port);
            host_port.apply();
            if (meta.one_rack == 0xFFFF) {
                drop_for(DROP_BAD_HEADER);
                return;
            }
            meta.one_hops = 0;
            if (hdr.ipv4.dscp == DSCP_LOW_LATENCY) {
                meta.one_tclass = TCLASS_LOW_LATENCY;
            } else if (hdr.ipv4.dscp == DSCP_DIRECT_ONLY) {
                meta.one_tclass = TCLASS_BULK_TRANSIT;  // direct circuit or nothing
            } else {
                meta.one_tclass = TCLASS_BULK;
            }
        }
        rack_of.apply();
        if (meta.route.dst_rack == meta.one_rack) {
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
        if (meta.one_hops >= hop_limit) {
            drop_for(DROP_HOP_LIMIT);
            return;
        }
        slice_info.apply();
        if (!route.apply().hit) {
            return;  // counted by no_route
        }
        if ((meta.route.live_rotors & rotor_mask) == 0) {
            drop_for(DROP_DARK_UPLINK);  // never onto a dark rotor
            return;
        }
        // The ToR's egress re-check: nothing queues between the emulated switches here,
        // so the route's time limit is checked at once.
        if (phase >= live_until) {
            drop_for(DROP_STALE);
            return;
        }
        rotor_phase.apply();
        if (matching == 0xFFFF) {
            drop_for(DROP_NOT_STARTED);
            return;
        }
        if (phase < day_start) {
            drop_for(DROP_NIGHT);
            return;
        }
        if (circuit.apply().hit) {
            // Across the circuit: visit the rack it leads to, with the frame unchanged.
            meta.one_rack = next_rack;
            meta.one_hops = meta.one_hops + 1;
            meta.one_visiting = 1;
            hop_counter.count((bit<32>) meta.one_hops);
            resubmit_preserving_field_list(1);
        }
    }
}

#endif
