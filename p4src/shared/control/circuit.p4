// p4rotor: the rotor's circuits: (live matching, ingress port) -> egress port.
#ifndef P4ROTOR_SHARED_CIRCUIT_P4
#define P4ROTOR_SHARED_CIRCUIT_P4
#include "common.p4"

// verdict: NO_DROP and out_port, or the drop cause.  A switched frame may still be lost on
// its link (OpticalLoss, at egress).
control Circuit(in metadata_t meta, in Port_t in_port, out Port_t out_port, out bit<32> verdict) {
    action connect(Port_t port) {
        out_port = port;
        verdict = NO_DROP;
    }

    action no_circuit() {
        verdict = DROP_NO_CIRCUIT;
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
        out_port = 0;
        if (!meta.slot.running) {
            verdict = DROP_NOT_STARTED;
        } else if (meta.slot.night) {
            verdict = DROP_NIGHT;
        } else {
            circuit.apply();
        }
    }
}

#endif
