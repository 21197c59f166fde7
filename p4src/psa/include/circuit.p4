// p4rotor on PSA: the rotor's circuits: (live matching, ingress port) -> egress port.
#ifndef P4ROTOR_PSA_CIRCUIT_P4
#define P4ROTOR_PSA_CIRCUIT_P4

control Circuit(in metadata_t meta, in Port_t in_port, out bool hit, out Port_t out_port) {
    action connect(Port_t port) {
        hit = true;
        out_port = port;
    }

    action no_circuit() {
        hit = false;
        out_port = 0;
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
        circuit.apply();
    }
}

#endif
