// p4rotor on TNA: the rotor's circuits: (live matching, ingress port) -> egress port.
#ifndef P4ROTOR_TNA_CIRCUIT_P4
#define P4ROTOR_TNA_CIRCUIT_P4

// Looked up for every data frame, whatever the slot state, so that the table runs
// in parallel with the night test instead of after it (Tofino's stage budget);
// the decision below then picks the one drop cause that applies.
control Circuit(inout metadata_t meta, in PortId_t in_port,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md, out bool switched) {
    action connect(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }

    action no_circuit() {
        ig_tm_md.ucast_egress_port = 0;
    }

    table circuit {
        key = {
            meta.slot.index : exact @name("matching");
            in_port         : exact @name("in_port");
        }
        actions = { connect; @defaultonly no_circuit; }
        const default_action = no_circuit();
        size = CIRCUIT_TABLE_SIZE;
    }

    apply {
        switched = circuit.apply().hit;
        if (!meta.slot.running) {
            meta.discard = true;
            meta.count_drop = true;
            meta.drop_cause = DROP_NOT_STARTED;
            switched = false;
        } else if (SIGN(meta.day_left) == 1) {   // night
            meta.discard = true;
            meta.count_drop = true;
            meta.drop_cause = DROP_NIGHT;
            switched = false;
        } else if (!switched) {
            meta.discard = true;
            meta.count_drop = true;
            meta.drop_cause = DROP_NO_CIRCUIT;
        }
    }
}

#endif
