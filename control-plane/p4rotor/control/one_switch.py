"""The one-switch fabric's entities as plain values (p4src/v1model/oneswitch.p4, docs/one-switch.md).

One switch holds what every ToR and every rotor of a topology would: the ToRs' routes keyed by
their rack too, the rotors' circuits keyed by their rotor and by racks (not ports), and each
rotor's slots as ranges of the phase within the hyperperiod, shifted by the rotor's offset.  The
routes are the same ``schedule.routes.compute`` gives the multi-switch fabric; the slot clock is
the ToR's (one slice per entry).  Host ports are the switch's ports, numbered in topology order.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import routes as R
from .entities import _range_pieces, phase_entries, slot_config_entry
from .errors import ControllerError
from .target import BMV2, Target
from .tor import route_until_us, slice_spans

if TYPE_CHECKING:
    from ..schedule.topology import Topology

# Ports 1..253 are front-panel ports (254: the clock port, 255: the CPU port).
MAX_HOST_PORT = 253


def host_ports(topo: Topology) -> dict[str, int]:
    """Each host's port on the one switch: 1, 2, ... in topology order (racks, then hosts)."""
    names = [h.name for k in topo.racks for h in k.hosts]
    if len(names) > MAX_HOST_PORT:
        raise ControllerError(f"a one-switch fabric has ports for {MAX_HOST_PORT} hosts, this topology has "
                              f"{len(names)}")
    return {n: i + 1 for i, n in enumerate(names)}


def rotor_day_spans(sched, r_idx: int) -> list[tuple[int, int, int, int]]:
    """(lo, hi, matching, day_start) pieces of rotor ``r_idx``'s slots tiling [0, hyperperiod):
    slot k of the rotor spans [offset + k slot, offset + (k+1) slot); its day starts a night
    after that.  A slot that wraps the hyperperiod's end is cut in two (day_start may then lie
    before the piece, or after it: the phase compares against it as it is, clamped to 0)."""
    H = sched.hyperperiod_us
    r = sched.rotors[r_idx]
    M = len(r.matchings)
    out = []
    k = -((r.offset_us + sched.slot_us - 1) // sched.slot_us) - 1
    while True:
        a = r.offset_us + k * sched.slot_us
        if a >= H:
            break
        b = a + sched.slot_us
        lo, hi = max(a, 0), min(b, H)
        if lo < hi:
            out.append((lo, hi, k % M, max(0, a + sched.reconfig_us)))
        k += 1
    return out


def one_switch_entities(topo: Topology, routes: Sequence[R.SliceRoutes], mode: int, *, offset_us: int = 0,
                        epoch_us: int = 0, generation: int = 1, epsilon_us: float = 0.0,
                        target: Target = BMV2) -> list[Any]:
    """Everything the one switch needs; the slot config (which starts it) goes last."""
    if mode != dp.MODE_CLOCK:
        raise ControllerError("the one-switch fabric runs in clock mode only (one clock drives every rotor)")
    s = topo.schedule
    ports = host_ports(topo)
    hop_limit = max(k.tor.hop_limit for k in topo.racks)
    ents: list[Any] = [~fy.P4TableEntry(dp.ONE_T_FABRIC_CONFIG, is_default_action=True,
                                        action=fy.P4TableAction(dp.ONE_A_SET_FABRIC, hop_limit_=hop_limit))]
    for k in topo.racks:
        net = ipaddress.ip_network(k.prefix)
        ents.append(+fy.P4TableEntry(dp.ONE_T_RACK_OF, match=fy.P4TableMatch(ipv4_dst=str(net)),
                                     action=fy.P4TableAction(dp.ONE_A_TO_RACK, rack=k.id)))
        for h in k.hosts:
            ents.append(+fy.P4TableEntry(dp.ONE_T_HOST_PORT, match=fy.P4TableMatch(port=ports[h.name]),
                                         action=fy.P4TableAction(dp.ONE_A_HOST_OF, rack=k.id)))
            ents.append(+fy.P4TableEntry(dp.ONE_T_LOCAL_HOST, match=fy.P4TableMatch(ipv4_dst=h.ip),
                                         action=fy.P4TableAction(dp.ONE_A_DELIVER, port=ports[h.name])))
    for sr in routes:
        ents.append(+fy.P4TableEntry(dp.ONE_T_SLICE_INFO, match=fy.P4TableMatch(slice=sr.index),
                                     action=fy.P4TableAction(dp.ONE_A_SLICE_LIVE, live=sr.live_mask)))
        for (src, dst, tclass), hop in sorted(sr.hops.items()):
            act = dp.ONE_A_VIA_VLB if hop.vlb else dp.ONE_A_VIA
            until = target.duration_units(route_until_us(s, sr, tclass, hop, epsilon_us), "route until")
            ents.append(+fy.P4TableEntry(
                dp.ONE_T_ROUTE, match=fy.P4TableMatch(rack=src, slice=sr.index, dst_rack=dst, tclass=tclass),
                action=fy.P4TableAction(act, rotor_=hop.rotor, mask=1 << hop.rotor, until=until)))
    for ri, r in enumerate(s.rotors):
        for lo, hi, m, day in rotor_day_spans(s, ri):
            lo_u = target.duration_units(lo, "slot start")
            hi_u = target.duration_units(hi, "slot end")
            for piece in _range_pieces(lo_u, hi_u - 1):
                ents.append(+fy.P4TableEntry(
                    dp.ONE_T_ROTOR_PHASE, match=fy.P4TableMatch(rotor=ri, phase=piece),
                    action=fy.P4TableAction(dp.ONE_A_ROTOR_DAY, index=m,
                                            day_start_=target.duration_units(day, "day start")),
                    priority=1))
        for m, mm in enumerate(r.matchings):
            for i, j in enumerate(mm):
                if j is None or j == i:
                    continue
                ents.append(+fy.P4TableEntry(dp.ONE_T_CIRCUIT, match=fy.P4TableMatch(rotor=ri, matching=m, in_rack=i),
                                             action=fy.P4TableAction(dp.ONE_A_CONNECT, rack=j)))
    ents += [+e for e in phase_entries(slice_spans(routes), dp.ONE_T_CLOCK_PHASE, dp.ONE_A_CLOCK_SLOT,
                                       target=target)]
    ents.append(~slot_config_entry(mode, len(routes), s.hyperperiod_us, 0, offset_us=offset_us,
                                     epoch_us=epoch_us, generation=generation,
                                     table=dp.ONE_T_CONFIG, action=dp.ONE_A_CONFIGURE, target=target))
    return ents
