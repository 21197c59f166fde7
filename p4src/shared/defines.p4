// p4rotor: constants and sizes shared by every program and target.
#ifndef P4ROTOR_DEFINES_P4
#define P4ROTOR_DEFINES_P4

// The CPU port carries P4Runtime PacketOut/PacketIn.  simple_switch_grpc is
// started with --cpu-port 255 (see docs/dataplane.md); 255 is outside the range
// of front-panel ports the topologies use (1..254).
const PortId_t CPU_PORT = 255;

// The clock port: a host interface wired to this port sends time probes on the
// data path (docs/dataplane.md, "Clock port"); each comes back out of this port
// with the switch's ingress and egress timestamps.  Unlike a PacketOut probe it
// never rides gRPC and PI, so it brackets the clock offset to within BMv2's
// receive and transmit latency floors (us) instead of the gRPC/PI asymmetry.
// Reserved: topologies use 1..253 for racks, uplinks and hosts.
const PortId_t CLOCK_PORT = 254;

// Sizes.  A rotor with N racks and M matchings needs N*M circuit entries:
// 108 racks x 18 matchings (opera-sim's 6-rotor fabric) = 1944.
#define CIRCUIT_TABLE_SIZE 65536
#define CLOCK_PHASE_TABLE_SIZE 4096
#define MAX_PORTS 512
#define LOSS_TABLE_SIZE 4096
// Energy (port_energy.p4): the per-slot counters hold ENERGY_SLOTS slot positions of a cycle
// (a rotor: its matchings; a ToR: its slices) x MAX_PORTS ports, cell (slot << ENERGY_PORT_BITS)
// | port; a slot position at or past ENERGY_SLOTS shares the cell of its remainder.
#define ENERGY_SLOTS 128
#define ENERGY_PORT_BITS 9
#define ENERGY_CELLS 65536
#define SLEEP_TABLE_SIZE 4096

// Slot-advance modes, chosen by the controller in the config table.
const bit<8> MODE_UNCONFIGURED = 0;
const bit<8> MODE_SIGNAL = 1;   // controller writes the slot with control packets
const bit<8> MODE_CLOCK  = 2;   // pipeline derives the slot from its timestamp

// Control-packet opcodes (PacketOut from the controller, PacketIn replies).
const bit<8> OP_SET_SLOT   = 1;  // signal mode: new (slot, matching, night)
const bit<8> OP_TIME_PROBE = 2;  // reply with the switch's ingress timestamp
const bit<8> OP_ERROR      = 255; // PacketIn only: the control packet was refused

// PacketOut flags.
const bit<8> FLAG_NIGHT = 0x01;  // OP_SET_SLOT: the slot is in its night
const bit<8> FLAG_ACK   = 0x02;  // reply with a PacketIn carrying the timestamp
// OP_SET_SLOT, timed: the slot starts at common time `at` (its night lasts
// `night_us`), not when the packet arrives.  The controller sends slot k+1
// during slot k; the pipeline holds it as the one pending change and applies it
// at `at` by its own clock, so gRPC/PI jitter no longer moves the boundary.
const bit<8> FLAG_AT    = 0x04;

// Drop causes: index into the drop counter.  Every frame the pipeline discards
// is counted under exactly one of these.
const bit<32> DROP_NIGHT       = 0;  // arrived while the rotor is dark
const bit<32> DROP_NO_CIRCUIT  = 1;  // the live matching has no circuit for this port
const bit<32> DROP_STALE       = 2;  // reconfiguration loss: its slot ended before egress
const bit<32> DROP_CTRL_ERROR  = 3;  // control packet refused (opcode, matching index)
const bit<32> DROP_NOT_STARTED = 4;  // no slot yet: unconfigured, before the epoch, clock resync
const bit<32> DROP_NO_ROUTE    = 5;  // ToR: no route for this destination now
const bit<32> DROP_DARK_UPLINK = 6;  // ToR: the chosen uplink's rotor is dark
const bit<32> DROP_HOP_LIMIT   = 7;  // ToR: transit hop limit exceeded
const bit<32> DROP_BAD_HEADER  = 8;  // ToR: header the ToR cannot route
const bit<32> DROP_MTU         = 9;  // longer than its egress link's MTU (port_mtu table)
const bit<32> DROP_OPTICAL_LOSS = 10; // injected loss on a rotor link (optical_loss tables)
const bit<32> DROP_SLEEPING    = 11; // in or out through a port asleep in this slot (port_sleep tables)
#define NUM_DROP_CAUSES 16

// Control-packet counter indices.
const bit<32> CTRL_SET_SLOT   = 0;
const bit<32> CTRL_TIME_PROBE = 1;
const bit<32> CTRL_CLOCK_PORT_PROBE = 2;
const bit<32> CTRL_SET_SLOT_LATE = 3;  // a timed OP_SET_SLOT arrived at or after its `at`
#define NUM_CTRL_COUNTERS 4

// ToR.
const bit<16> ETHERTYPE_IPV4   = 0x0800;
const bit<16> ETHERTYPE_FABRIC = 0x88B6;  // local experimental: p4rotor fabric header
const bit<16> ETHERTYPE_CLOCK_PROBE = 0x88B7;  // local experimental: time probe on CLOCK_PORT
const bit<6>  DSCP_LOW_LATENCY = 46;      // EF: Opera low-latency class (docs/addressing.md)
const bit<6>  DSCP_DIRECT_ONLY = 8;       // CS1: probes that may only take a live direct circuit
// The fabric header (headers.p4, fabric_t) the first ToR inserts: links
// between switches must carry a full-size host frame plus this many bytes.
#define FABRIC_HEADER_BYTES 8
const bit<8>  TCLASS_BULK         = 0;    // direct, else 2-hop VLB
const bit<8>  TCLASS_LOW_LATENCY  = 1;    // Opera multi-hop on the slice's expander
const bit<8>  TCLASS_BULK_TRANSIT = 2;    // VLB second hop: direct only
#define ROUTE_TABLE_SIZE 262144
// The one-switch fabric holds every ToR's routes: racks x (a ToR's).  Opera 64 x 4 needs
// 642 208 (docs/one-switch.md); 108 x 6 would need 3.3 M.
#define ONE_ROUTE_TABLE_SIZE 4194304
#define HOST_TABLE_SIZE 4096
#define RACK_TABLE_SIZE 4096
#define SLICE_TABLE_SIZE 4096

// In clock mode the slot id is (cycle << CLOCK_INDEX_BITS) | matching index: unique
// and increasing without a run-time multiplication (Tofino has none).
#define CLOCK_INDEX_BITS 12

#endif
