// p4rotor on TNA: egress re-check.  Ingress bridged the local time at which the
// frame's slot (rotor) or route (ToR) ends; a frame still in the queue then is
// reconfiguration loss (DROP_STALE), as on v1model in clock mode.  Egress reads
// no register: TNA gives ingress and egress no common state.
#ifndef P4ROTOR_TNA_STALE_GUARD_P4
#define P4ROTOR_TNA_STALE_GUARD_P4

control StaleGuard(in headers_t hdr, in bit<48> timestamp, out bool stale) {
    TS_UNITS_HASH(to_units);
    Timestamp_t local_now = 0;
    bit<32> left = 0;
    action find_now() { local_now = TS_UNITS(to_units, timestamp); }
    action find_left() { left = local_now - hdr.bridged.deadline; }
    apply {
        find_now();
        find_left();
        stale = false;
        if (SIGN(left) == 0) {   // now >= deadline
            stale = true;
        }
    }
}

#endif
