// p4rotor on PSA-eBPF: no slot registers, the hooks of the shared SlotState and StaleGuard
// (../../shared/control/).  NIKSS gives a pipeline no CPU port, so no control packet sets a
// slot: clock mode only (the kernel clock every switch reads is common time).  A config in
// signal mode leaves the switch not running: every frame is dropped NOT_STARTED.
#ifndef P4ROTOR_PSA_SLOT_REGISTERS_P4
#define P4ROTOR_PSA_SLOT_REGISTERS_P4

control SlotRegisters(inout metadata_t meta, in Time_t local_now, in bit<16> generation) {
    apply { }
}

control SlotRegistersStale(in metadata_t meta, in Time_t now, out bool stale) {
    apply {
        stale = false;   // no frame is switched outside clock mode
    }
}

#endif
