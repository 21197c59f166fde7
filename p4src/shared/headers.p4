// p4rotor: header types and the metadata types every target shares (Timestamp_t and
// PortId_t come from the target shim).  Each target composes its own headers_t and
// metadata_t from these (<target>/include/metadata.p4); the shared controls (control/)
// read only the fields every target's structs have.
#ifndef P4ROTOR_HEADERS_P4
#define P4ROTOR_HEADERS_P4

// From the controller (PacketOut).  Data frames are never parsed by the rotor:
// a circuit carries any bytes, whatever ethertype or garbage they hold.
@controller_header("packet_out")
header packet_out_t {
    bit<8>  opcode;
    bit<8>  flags;
    bit<16> index;   // OP_SET_SLOT: matching index within the rotor's cycle
    bit<32> slot;    // OP_SET_SLOT: absolute slot number (never wraps in practice)
    bit<32> seq;     // echoed in the PacketIn reply
    bit<48> at;      // OP_SET_SLOT with FLAG_AT: common time (us) the slot starts
    bit<32> night_us; // OP_SET_SLOT with FLAG_AT: its night, from `at`
}

// To the controller (PacketIn): acks, time probes, refusals.
@controller_header("packet_in")
header packet_in_t {
    bit<8>  opcode;
    bit<8>  flags;
    bit<16> index;
    bit<32> slot;
    bit<32> seq;
    bit<48> timestamp;  // switch-local ingress timestamp of the control packet
    bit<16> ingress_port;
}

// Ethernet: parsed by the ToR on every port, by the rotor only on CLOCK_PORT.
header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

// Between racks a frame carries where it is going: the final rack (so a transit
// ToR sends it on), its class, and the hops taken (a limit stops loops).
// Inserted by the first ToR after Ethernet, removed by the destination ToR.
header fabric_t {
    bit<16> dst_rack;
    bit<16> src_rack;
    bit<8>  hops;
    bit<8>  tclass;
    bit<16> ether_type;   // of what follows (IPv4)
}

// A time probe on CLOCK_PORT (after Ethernet, ethertype ETHERTYPE_CLOCK_PROBE),
// reflected back out of CLOCK_PORT with the switch's two timestamps filled in.
header clock_probe_t {
    bit<32> seq;        // chosen by the sender, to match its send and receive times
    bit<48> t_ingress;  // switch-local ingress timestamp (filled by ClockProbe)
    bit<48> t_egress;   // switch-local egress timestamp (filled by ClockProbeEgress)
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

// The slot a frame was admitted in, computed at ingress and re-checked at egress.
struct slot_meta_t {
    bit<8>      mode;
    bit<16>     matchings;  // matchings in this rotor's cycle
    bit<16>     generation; // config generation (signal state set under another is void)
    bool        running;    // a slot exists (configured, past the epoch, clock in sync)
    bool        night;
    bit<16>     index;      // live matching index
    bit<32>     slot_id;    // absolute slot id (signal: controller's k; clock: cycle<<12|index)
    Timestamp_t offset;     // local timestamp + offset = common time (clock mode)
    Timestamp_t slot_end;   // common time at which this slot's day ends (clock mode)
    Timestamp_t cycle_start; // common time at which this cycle started (clock mode)
}

// ToR routing decision.
struct route_meta_t {
    bit<16> my_rack;
    bit<16> dst_rack;
    bit<8>  tclass;       // TCLASS_* of defines.p4
    bit<8>  hop_limit;
    bit<32> live_rotors;  // bit r set: rotor r is live in this slice
}

#endif
