"""Names and constants of the P4 programs (p4src/shared/defines.p4), in one place.

Keep in step with the P4: tests/test_p4info.py checks these names against the
compiled P4Info when a build exists.
"""

from __future__ import annotations

import enum

CPU_PORT = 255

MODE_UNCONFIGURED = 0
MODE_SIGNAL = 1
MODE_CLOCK = 2

OP_SET_SLOT = 1
OP_TIME_PROBE = 2
OP_ERROR = 255

FLAG_NIGHT = 0x01
FLAG_ACK = 0x02

CLOCK_INDEX_BITS = 12
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


class CtrlCounter(enum.IntEnum):
    SET_SLOT = 0
    TIME_PROBE = 1


# Fully qualified P4Info names the controller relies on.
T_CONFIG = "RotorIngress.slot_state.config"
T_CLOCK_PHASE = "RotorIngress.slot_state.clock_phase"
T_CIRCUIT = "RotorIngress.circuit.circuit"
A_CONFIGURE = "RotorIngress.slot_state.configure"
A_CLOCK_SLOT = "RotorIngress.slot_state.clock_slot"
A_CONNECT = "RotorIngress.circuit.connect"
C_DROP = "drop_counter"
C_RX = "rx_port_counter"
C_TX = "tx_port_counter"
C_CTRL = "ctrl_counter"

# What a P4Info must hold for the rotor controller: table -> (keys, actions->params).
ROTOR_CONTRACT: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    T_CONFIG: ((), {A_CONFIGURE: ("mode", "num_matchings", "offset", "epoch_us", "cycle", "night", "gen")}),
    T_CLOCK_PHASE: (("phase",), {A_CLOCK_SLOT: ("index", "slot_start", "slot_end")}),
    T_CIRCUIT: (("matching", "in_port"), {A_CONNECT: ("port",)}),
}
ROTOR_COUNTERS = (C_DROP, C_RX, C_TX, C_CTRL)
PACKET_OUT_FIELDS = ("opcode", "flags", "index", "slot", "seq")
PACKET_IN_FIELDS = ("opcode", "flags", "index", "slot", "seq", "timestamp", "ingress_port")
