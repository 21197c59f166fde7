// p4rotor: the rotor's circuits: (live matching, ingress port) -> egress port.
#ifndef P4ROTOR_CIRCUIT_P4
#define P4ROTOR_CIRCUIT_P4

// ``switched``: the frame has an egress port (it may still be lost on the link: OpticalLoss).
control Circuit(inout metadata_t meta, inout std_meta_t std, out bool switched) {
    action connect(PortId_t port) {
        std.egress_spec = port;
    }

    action no_circuit() {
        drop_counter.count(DROP_NO_CIRCUIT);
        mark_to_drop(std);
    }

    table circuit {
        key = {
            meta.slot.index  : exact @name("matching");
            std.ingress_port : exact @name("in_port");
        }
        actions = { connect; @defaultonly no_circuit; }
        const default_action = no_circuit();
        size = CIRCUIT_TABLE_SIZE;
    }

    apply {
        switched = false;
        if (!meta.slot.running) {
            drop_counter.count(DROP_NOT_STARTED);
            mark_to_drop(std);
        } else if (meta.slot.night) {
            drop_counter.count(DROP_NIGHT);
            mark_to_drop(std);
        } else {
            switched = circuit.apply().hit;
        }
    }
}

#endif
