"""Numeric constants of the P4 programs.  GENERATED from p4src/shared/defines.p4 by
``python -m p4rotor.p4.generate`` (``make constants``): edit the P4, not this file.
"""

# fmt: off
CPU_PORT = 255
CLOCK_PORT = 254
CIRCUIT_TABLE_SIZE = 65536
CLOCK_PHASE_TABLE_SIZE = 4096
MAX_PORTS = 512
LOSS_TABLE_SIZE = 4096
ENERGY_SLOTS = 128
ENERGY_PORT_BITS = 9
ENERGY_CELLS = 65536
SLEEP_TABLE_SIZE = 4096
MODE_UNCONFIGURED = 0
MODE_SIGNAL = 1  # controller writes the slot with control packets
MODE_CLOCK = 2  # pipeline derives the slot from its timestamp
OP_SET_SLOT = 1  # signal mode: new (slot, matching, night)
OP_TIME_PROBE = 2  # reply with the switch's ingress timestamp
OP_ERROR = 255  # PacketIn only: the control packet was refused
FLAG_NIGHT = 0x01  # OP_SET_SLOT: the slot is in its night
FLAG_ACK = 0x02  # reply with a PacketIn carrying the timestamp
FLAG_AT = 0x04
DROP_NIGHT = 0  # arrived while the rotor is dark
DROP_NO_CIRCUIT = 1  # the live matching has no circuit for this port
DROP_STALE = 2  # reconfiguration loss: its slot ended before egress
DROP_CTRL_ERROR = 3  # control packet refused (opcode, matching index)
DROP_NOT_STARTED = 4  # no slot yet: unconfigured, before the epoch, clock resync
DROP_NO_ROUTE = 5  # ToR: no route for this destination now
DROP_DARK_UPLINK = 6  # ToR: the chosen uplink's rotor is dark
DROP_HOP_LIMIT = 7  # ToR: transit hop limit exceeded
DROP_BAD_HEADER = 8  # ToR: header the ToR cannot route
DROP_MTU = 9  # longer than its egress link's MTU (port_mtu table)
DROP_OPTICAL_LOSS = 10  # injected loss on a rotor link (optical_loss tables)
DROP_SLEEPING = 11  # in or out through a port asleep in this slot (port_sleep tables)
NUM_DROP_CAUSES = 16
CTRL_SET_SLOT = 0
CTRL_TIME_PROBE = 1
CTRL_CLOCK_PORT_PROBE = 2
CTRL_SET_SLOT_LATE = 3  # a timed OP_SET_SLOT arrived at or after its `at`
NUM_CTRL_COUNTERS = 4
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_FABRIC = 0x88B6  # local experimental: p4rotor fabric header
ETHERTYPE_CLOCK_PROBE = 0x88B7  # local experimental: time probe on CLOCK_PORT
DSCP_LOW_LATENCY = 46  # EF: Opera low-latency class (docs/addressing.md)
DSCP_DIRECT_ONLY = 8  # CS1: probes that may only take a live direct circuit
FABRIC_HEADER_BYTES = 8
TCLASS_BULK = 0  # direct, else 2-hop VLB
TCLASS_LOW_LATENCY = 1  # Opera multi-hop on the slice's expander
TCLASS_BULK_TRANSIT = 2  # VLB second hop: direct only
ROUTE_TABLE_SIZE = 262144
ONE_ROUTE_TABLE_SIZE = 4194304
HOST_TABLE_SIZE = 4096
RACK_TABLE_SIZE = 4096
SLICE_TABLE_SIZE = 4096
CLOCK_INDEX_BITS = 12
