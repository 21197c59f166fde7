"""ToR entities as plain values, beside the rotor's (entities.py): rack, hosts, routes per slice, the clock."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import routes as R
from .entities import phase_entries, port_mtu_entries, slot_config_entry
from .target import BMV2, Target

if TYPE_CHECKING:  # the topology is fabric data; the builders only read it
    from ..schedule.topology import Rack, Topology


def slice_spans(routes: Sequence[R.SliceRoutes]) -> list[tuple[int, int]]:
    return [(sr.slice.start_us, sr.slice.end_us) for sr in routes]


def route_until_us(s, sr: R.SliceRoutes, tclass: int, hop: R.Hop, epsilon_us: float = 0.0) -> int:
    """Until when (us from the cycle start) a frame routed in slice ``sr`` may still leave on
    ``hop``'s uplink (the ToR's egress re-check, clock mode).  Any route rides one direct circuit
    to its next hop, which lives until its rotor's night, however many slices the other rotors
    make meanwhile.  A bulk route may use all of it.  A low-latency route belongs to its slice's
    expander: the slice's end, plus the ``epsilon_us`` the routes were computed to leave (they avoid
    a rotor going dark within epsilon of the slice's end: a frame admitted just before the end
    still leaves on a live circuit, and the next ToR routes it in the new slice)."""
    r = s.rotors[hop.rotor]
    t = sr.slice.start_us
    n = (t - r.offset_us) // s.slot_us + 1  # the rotor's next slot starts with its night
    day_end = r.offset_us + n * s.slot_us
    if tclass == dp.TCLASS_LOW_LATENCY:
        return min(sr.slice.end_us + int(epsilon_us), day_end)
    return day_end


def tor_entities(topo: Topology, rack: Rack, routes: Sequence[R.SliceRoutes], mode: int, *,
                 offset_us: int = 0, epoch_us: int = 0, generation: int = 1, epsilon_us: float = 0.0,
                 target: Target = BMV2) -> list[Any]:
    """Everything one ToR needs; the slot config (which starts it) goes last.  Times (route
    ``until``, the clock) are written in the target's units."""
    s = topo.schedule
    uplink = [rack.tor.uplinks[r.name] for r in s.rotors]
    ents: list[Any] = [~fy.P4TableEntry(dp.T_TOR_CONFIG, is_default_action=True,
                                        action=fy.P4TableAction(dp.A_SET_RACK, rack=rack.id,
                                                                hop_limit=rack.tor.hop_limit))]
    for other in topo.racks:
        net = ipaddress.ip_network(other.prefix)
        ents.append(+fy.P4TableEntry(dp.T_RACK_OF, match=fy.P4TableMatch(ipv4_dst=str(net)),
                                     action=fy.P4TableAction(dp.A_TO_RACK, rack=other.id)))
    for h in rack.hosts:
        ents.append(+fy.P4TableEntry(dp.T_LOCAL_HOST, match=fy.P4TableMatch(ipv4_dst=h.ip),
                                     action=fy.P4TableAction(dp.A_DELIVER, port=h.port)))
    ents += [+e for e in port_mtu_entries(topo.tor_link_mtus(rack), dp.TOR_T_PORT_MTU, dp.TOR_A_MTU_LIMIT)]
    for sr in routes:
        ents.append(+fy.P4TableEntry(dp.T_SLICE_INFO, match=fy.P4TableMatch(slice=sr.index),
                                     action=fy.P4TableAction(dp.A_SLICE_LIVE, live=sr.live_mask)))
        # This rack's routes only, then sorted: sorting every rack's (a slice of Opera 108x6
        # holds 23 000) for each ToR and slice cost seconds per ToR.
        mine = sorted(((key, hop) for key, hop in sr.hops.items() if key[0] == rack.id), key=lambda kv: kv[0])
        for (src, dst, tclass), hop in mine:
            act = dp.A_VIA_VLB if hop.vlb else dp.A_VIA
            ents.append(+fy.P4TableEntry(
                dp.T_ROUTE, match=fy.P4TableMatch(slice=sr.index, dst_rack=dst, tclass=tclass),
                action=fy.P4TableAction(act, port=uplink[hop.rotor], mask=1 << hop.rotor,
                                        until=target.duration_units(route_until_us(s, sr, tclass, hop, epsilon_us),
                                                                    "route until"))))
    if mode == dp.MODE_CLOCK:
        ents += [+e for e in phase_entries(slice_spans(routes), dp.TOR_T_CLOCK_PHASE, dp.TOR_A_CLOCK_SLOT,
                                           target=target)]
    ents.append(~slot_config_entry(mode, len(routes), s.hyperperiod_us, 0, offset_us=offset_us,
                                     epoch_us=epoch_us, generation=generation,
                                     table=dp.TOR_T_CONFIG, action=dp.TOR_A_CONFIGURE, target=target))
    return ents


def slice_boundaries(topo: Topology, routes: Sequence[R.SliceRoutes], t0: int, now: float
                     ) -> Iterable[tuple[int, int, int, bool]]:
    """Every slice start from ``now`` on: (common us, absolute slice k, slice index, False)."""
    H = topo.schedule.hyperperiod_us
    S = len(routes)
    c = max(0, int((now - t0) // H))
    while True:
        for i, sr in enumerate(routes):
            yield t0 + c * H + sr.slice.start_us, c * S + i, i, False
        c += 1
