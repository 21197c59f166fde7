// p4rotor: the egress re-check.  A switch may hold a frame between ingress and egress (BMv2
// for milliseconds on a busy machine); a real circuit cannot deliver it after its matching
// is gone, so the top drops it (reconfiguration loss, DROP_STALE).
#ifndef P4ROTOR_SHARED_STALE_GUARD_P4
#define P4ROTOR_SHARED_STALE_GUARD_P4
#include "common.p4"

// now: the egress timestamp in common time (local + the slot's offset).  Signal mode asks
// the target's slot registers (SlotRegistersStale).
control StaleGuard(in metadata_t meta, in Time_t now, out bool stale) {
    SlotRegistersStale() slot_registers;
    apply {
        if (meta.slot.mode == MODE_CLOCK) {
            // Absolute times, never the index within the cycle: a frame held a
            // whole cycle would otherwise find "its" matching live again.
            stale = now >= meta.slot.slot_end;
        } else {
            slot_registers.apply(meta, now, stale);
        }
    }
}

#endif
