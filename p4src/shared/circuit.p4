// p4rotor: the rotor's circuits: (live matching, ingress port) -> egress port.
#ifndef P4ROTOR_CIRCUIT_P4
#define P4ROTOR_CIRCUIT_P4

control Circuit(inout metadata_t meta, inout std_meta_t std) {
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
        if (!meta.slot.running) {
            drop_counter.count(DROP_NOT_STARTED);
            mark_to_drop(std);
        } else if (meta.slot.night) {
            drop_counter.count(DROP_NIGHT);
            mark_to_drop(std);
        } else {
            circuit.apply();
        }
    }
}

#endif
