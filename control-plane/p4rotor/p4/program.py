"""The P4 programs' contract: numeric constants (generated: constants.py), counter enums, and the
P4Info names and shapes the controller relies on (``ROTOR_CONTRACT``, ``TOR_CONTRACT``).

control-plane/tests/test_p4_contract.py checks the constants against p4src/shared/defines.p4 and
the contracts against the rotor's and the ToR's P4Info (the committed fixtures, and build/ when
there is one).
"""

from __future__ import annotations

import enum

from . import constants as K
from .constants import *  # noqa: F401,F403  (the numeric constants, generated from defines.p4)

ETHERNET_HEADER_BYTES = 14  # a link's MTU counts from after this header (Linux)
TIMESTAMP_BITS = 48         # v1model on BMv2: 48-bit microsecond timestamps (p4src/v1model/include/target.p4)

# Counter indices as enums, built from the generated DROP_* and CTRL_* constants.
DropCause = enum.IntEnum("DropCause", {n[len("DROP_"):]: v for n, v in vars(K).items() if n.startswith("DROP_")})
DropCause.__doc__ = "Index of each cause in ``drop_counter``."
CtrlCounter = enum.IntEnum("CtrlCounter", {n[len("CTRL_"):]: v for n, v in vars(K).items() if n.startswith("CTRL_")})
CtrlCounter.__doc__ = "Index of each control-packet kind in ``ctrl_counter``."


# Fully qualified P4Info names the controller relies on.
T_CONFIG = "RotorIngress.slot_state.config"
T_CLOCK_PHASE = "RotorIngress.slot_state.clock_phase"
T_CIRCUIT = "RotorIngress.circuit.circuit"
A_CONFIGURE = "RotorIngress.slot_state.configure"
A_CLOCK_SLOT = "RotorIngress.slot_state.clock_slot"
A_CONNECT = "RotorIngress.circuit.connect"
T_LOSS_IN = "RotorEgress.optical_loss.loss_in"
T_LOSS_OUT = "RotorEgress.optical_loss.loss_out"
A_LOSSY = "RotorEgress.optical_loss.lossy"
T_PORT_MTU = "RotorEgress.port_mtu.port_mtu"
A_MTU_LIMIT = "RotorEgress.port_mtu.limit"
C_DROP = "drop_counter"
C_RX = "rx_port_counter"
C_TX = "tx_port_counter"
C_CTRL = "ctrl_counter"
# Optical loss per rotor port and direction (the CorrOpt monitor's input; the rotor only):
# frames that crossed the port's input / output, and frames lost there.
C_LINK_IN = "link_in_counter"
C_LINK_IN_LOSS = "link_in_loss_counter"
C_LINK_OUT = "link_out_counter"
C_LINK_OUT_LOSS = "link_out_loss_counter"
LINK_COUNTERS = {"in": (C_LINK_IN, C_LINK_IN_LOSS), "out": (C_LINK_OUT, C_LINK_OUT_LOSS)}
# Energy (p4src/shared/control/port_energy.p4; v1model and PSA, not TNA): frames and bytes per
# (slot position, port), in and out, and the sleep plan's tables (both programs, by kind).
C_SLOT_RX = "slot_rx_counter"
C_SLOT_TX = "slot_tx_counter"
SLOT_COUNTERS = (C_SLOT_RX, C_SLOT_TX)
# The same cells counting only the frames not known to be bulk (the ToR only: the rotor parses no
# traffic class), what the predictive policy must keep a slot's day awake for.
C_SLOT_RX_LL = "slot_rx_ll_counter"
C_SLOT_TX_LL = "slot_tx_ll_counter"
SLOT_LL_COUNTERS = (C_SLOT_RX_LL, C_SLOT_TX_LL)


def energy_cell(slot: int, port: int) -> int:
    """The per-slot counters' index of (slot position, port) (ENERGY_CELL in port_energy.p4)."""
    return ((slot & (K.ENERGY_SLOTS - 1)) << K.ENERGY_PORT_BITS) | (port & (K.MAX_PORTS - 1))


def sleep_tables(kind: str) -> dict[str, str]:
    """{"in": table, "out": table, "action": the sleep action} of the rotor ("Rotor") or ToR ("Tor")."""
    return {"in": f"{kind}Egress.port_sleep.sleep_in", "out": f"{kind}Egress.port_sleep.sleep_out",
            "action": f"{kind}Egress.port_sleep.sleep"}


def energy_contract(kind: str) -> dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]]:
    t = sleep_tables(kind)
    return {t["in"]: (("port", "slot"), {t["action"]: ()}), t["out"]: (("port", "slot"), {t["action"]: ()})}

# What a P4Info must hold for the rotor controller: table -> (keys, actions->params).
ROTOR_CONTRACT: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    T_CONFIG: ((), {A_CONFIGURE: ("mode", "num_matchings", "offset", "epoch_us", "cycle", "night", "gen")}),
    T_CLOCK_PHASE: (("phase",), {A_CLOCK_SLOT: ("index", "slot_start", "slot_end")}),
    T_CIRCUIT: (("matching", "in_port"), {A_CONNECT: ("port",)}),
    T_PORT_MTU: (("port",), {A_MTU_LIMIT: ("max_frame_bytes",)}),
    T_LOSS_IN: (("port", "matching"), {A_LOSSY: ("threshold_",)}),
    T_LOSS_OUT: (("port", "matching"), {A_LOSSY: ("threshold_",)}),
}
ROTOR_COUNTERS = (C_DROP, C_RX, C_TX, C_CTRL, C_LINK_IN, C_LINK_IN_LOSS, C_LINK_OUT, C_LINK_OUT_LOSS)
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
    T_ROUTE: (("slice", "dst_rack", "tclass"), {A_VIA: ("port", "mask", "until"),
                                                A_VIA_VLB: ("port", "mask", "until")}),
    TOR_T_PORT_MTU: (("port",), {TOR_A_MTU_LIMIT: ("max_frame_bytes",)}),
}
TOR_COUNTERS = ROTOR_COUNTERS[:4]  # the ToR has the first four (p4src/v1model/include/state.p4)

# The one-switch fabric (p4src/v1model/oneswitch.p4): every ToR and rotor on one switch.
ONE_T_CONFIG = "OneIngress.slot_state.config"
ONE_T_CLOCK_PHASE = "OneIngress.slot_state.clock_phase"
ONE_A_CONFIGURE = "OneIngress.slot_state.configure"
ONE_A_CLOCK_SLOT = "OneIngress.slot_state.clock_slot"
ONE_T_FABRIC_CONFIG = "OneIngress.fabric.fabric_config"
ONE_A_SET_FABRIC = "OneIngress.fabric.set_fabric"
ONE_T_HOST_PORT = "OneIngress.fabric.host_port"
ONE_A_HOST_OF = "OneIngress.fabric.host_of"
ONE_T_SLICE_INFO = "OneIngress.fabric.slice_info"
ONE_A_SLICE_LIVE = "OneIngress.fabric.slice_live"
ONE_T_RACK_OF = "OneIngress.fabric.rack_of"
ONE_A_TO_RACK = "OneIngress.fabric.to_rack"
ONE_T_LOCAL_HOST = "OneIngress.fabric.local_host"
ONE_A_DELIVER = "OneIngress.fabric.deliver"
ONE_T_ROUTE = "OneIngress.fabric.route"
ONE_A_VIA = "OneIngress.fabric.via"
ONE_A_VIA_VLB = "OneIngress.fabric.via_vlb"
ONE_T_ROTOR_PHASE = "OneIngress.fabric.rotor_phase"
ONE_A_ROTOR_DAY = "OneIngress.fabric.rotor_day"
ONE_T_CIRCUIT = "OneIngress.fabric.circuit"
ONE_A_CONNECT = "OneIngress.fabric.connect"
C_HOPS = "hop_counter"

ONE_CONTRACT: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    ONE_T_CONFIG: ((), {ONE_A_CONFIGURE: ROTOR_CONTRACT[T_CONFIG][1][A_CONFIGURE]}),
    ONE_T_CLOCK_PHASE: (("phase",), {ONE_A_CLOCK_SLOT: ("index", "slot_start", "slot_end")}),
    ONE_T_FABRIC_CONFIG: ((), {ONE_A_SET_FABRIC: ("hop_limit_",)}),
    ONE_T_HOST_PORT: (("port",), {ONE_A_HOST_OF: ("rack",)}),
    ONE_T_SLICE_INFO: (("slice",), {ONE_A_SLICE_LIVE: ("live",)}),
    ONE_T_RACK_OF: (("ipv4_dst",), {ONE_A_TO_RACK: ("rack",)}),
    ONE_T_LOCAL_HOST: (("ipv4_dst",), {ONE_A_DELIVER: ("port",)}),
    ONE_T_ROUTE: (("rack", "slice", "dst_rack", "tclass"), {ONE_A_VIA: ("rotor_", "mask", "until"),
                                                          ONE_A_VIA_VLB: ("rotor_", "mask", "until")}),
    ONE_T_ROTOR_PHASE: (("rotor", "phase"), {ONE_A_ROTOR_DAY: ("index", "day_start_")}),
    ONE_T_CIRCUIT: (("rotor", "matching", "in_rack"), {ONE_A_CONNECT: ("rack",)}),
}
ONE_COUNTERS = ROTOR_COUNTERS[:4] + (C_HOPS,)
