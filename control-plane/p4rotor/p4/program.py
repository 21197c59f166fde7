"""Names and constants of the P4 programs (p4src/shared/defines.p4), in one place.

Keep in step with the P4: tests/test_p4info.py checks these names against the
compiled P4Info when a build exists.
"""

from __future__ import annotations

import enum

CPU_PORT = 255
CLOCK_PORT = 254  # time probes on the data path (docs/dataplane.md)
ETHERTYPE_CLOCK_PROBE = 0x88B7

MODE_UNCONFIGURED = 0
MODE_SIGNAL = 1
MODE_CLOCK = 2

OP_SET_SLOT = 1
OP_TIME_PROBE = 2
OP_ERROR = 255

FLAG_NIGHT = 0x01
FLAG_ACK = 0x02
FLAG_AT = 0x04  # timed OP_SET_SLOT: applies at `at` (common us), night `night_us`

CLOCK_INDEX_BITS = 12
FABRIC_HEADER_BYTES = 8  # the fabric header the first ToR inserts (defines.p4)
ETHERNET_HEADER_BYTES = 14  # a link's MTU counts from after this header (Linux)
TIMESTAMP_BITS = 48


class DropCause(enum.IntEnum):
    """Index of each cause in ``drop_counter``."""

    NIGHT = 0
    NO_CIRCUIT = 1
    STALE = 2  # reconfiguration loss (egress re-check)
    CTRL_ERROR = 3
    NOT_STARTED = 4
    NO_ROUTE = 5
    DARK_UPLINK = 6
    HOP_LIMIT = 7
    BAD_HEADER = 8
    MTU = 9  # longer than its egress link's MTU (port_mtu table)


class CtrlCounter(enum.IntEnum):
    SET_SLOT = 0
    TIME_PROBE = 1
    CLOCK_PORT_PROBE = 2
    SET_SLOT_LATE = 3  # a timed OP_SET_SLOT arrived at or after its start time


# Fully qualified P4Info names the controller relies on.
T_CONFIG = "RotorIngress.slot_state.config"
T_CLOCK_PHASE = "RotorIngress.slot_state.clock_phase"
T_CIRCUIT = "RotorIngress.circuit.circuit"
A_CONFIGURE = "RotorIngress.slot_state.configure"
A_CLOCK_SLOT = "RotorIngress.slot_state.clock_slot"
A_CONNECT = "RotorIngress.circuit.connect"
T_PORT_MTU = "RotorEgress.port_mtu.port_mtu"
A_MTU_LIMIT = "RotorEgress.port_mtu.limit"
C_DROP = "drop_counter"
C_RX = "rx_port_counter"
C_TX = "tx_port_counter"
C_CTRL = "ctrl_counter"

# What a P4Info must hold for the rotor controller: table -> (keys, actions->params).
ROTOR_CONTRACT: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    T_CONFIG: ((), {A_CONFIGURE: ("mode", "num_matchings", "offset", "epoch_us", "cycle", "night", "gen")}),
    T_CLOCK_PHASE: (("phase",), {A_CLOCK_SLOT: ("index", "slot_start", "slot_end")}),
    T_CIRCUIT: (("matching", "in_port"), {A_CONNECT: ("port",)}),
    T_PORT_MTU: (("port",), {A_MTU_LIMIT: ("max_frame_bytes",)}),
}
ROTOR_COUNTERS = (C_DROP, C_RX, C_TX, C_CTRL)
PACKET_OUT_FIELDS = ("opcode", "flags", "index", "slot", "seq", "at", "night_us")
PACKET_IN_FIELDS = ("opcode", "flags", "index", "slot", "seq", "timestamp", "ingress_port")

# ToR program names.
TOR_T_CONFIG = "TorIngress.slot_state.config"
TOR_T_CLOCK_PHASE = "TorIngress.slot_state.clock_phase"
TOR_A_CONFIGURE = "TorIngress.slot_state.configure"
TOR_A_CLOCK_SLOT = "TorIngress.slot_state.clock_slot"
T_TOR_CONFIG = "TorIngress.routing.tor_config"
A_SET_RACK = "TorIngress.routing.set_rack"
T_SLICE_INFO = "TorIngress.routing.slice_info"
A_SLICE_LIVE = "TorIngress.routing.slice_live"
T_RACK_OF = "TorIngress.routing.rack_of"
A_TO_RACK = "TorIngress.routing.to_rack"
T_LOCAL_HOST = "TorIngress.routing.local_host"
A_DELIVER = "TorIngress.routing.deliver"
T_ROUTE = "TorIngress.routing.route"
A_VIA = "TorIngress.routing.via"
A_VIA_VLB = "TorIngress.routing.via_vlb"
TOR_T_PORT_MTU = "TorEgress.port_mtu.port_mtu"
TOR_A_MTU_LIMIT = "TorEgress.port_mtu.limit"

TOR_CONTRACT: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    TOR_T_CONFIG: ((), {TOR_A_CONFIGURE: ROTOR_CONTRACT[T_CONFIG][1][A_CONFIGURE]}),
    TOR_T_CLOCK_PHASE: (("phase",), {TOR_A_CLOCK_SLOT: ("index", "slot_start", "slot_end")}),
    T_TOR_CONFIG: ((), {A_SET_RACK: ("rack", "hop_limit")}),
    T_SLICE_INFO: (("slice",), {A_SLICE_LIVE: ("live",)}),
    T_RACK_OF: (("ipv4_dst",), {A_TO_RACK: ("rack",)}),
    T_LOCAL_HOST: (("ipv4_dst",), {A_DELIVER: ("port",)}),
    T_ROUTE: (("slice", "dst_rack", "tclass"), {A_VIA: ("port", "mask"), A_VIA_VLB: ("port", "mask")}),
    TOR_T_PORT_MTU: (("port",), {TOR_A_MTU_LIMIT: ("max_frame_bytes",)}),
}
