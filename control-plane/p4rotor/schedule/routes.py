"""Routes per topology slice, computed from the schedule (networkx).

Classes (docs/routing.md):

* **low latency** (DSCP 46): Opera routing ([McGuinness21 §2.6.1]).  In each slice, the next hop on
  a shortest path of the graph of circuits that are live for the whole slice *and* stay live
  for ``epsilon_us`` after it ends (a frame sent late in the slice still gets through before
  its circuit reconfigures).  Paths of any length the expander needs.
* **bulk**: the direct circuit if one is live for the whole slice; otherwise a 2-hop VLB path
  through a rack that is connected to the source now and to the destination now (RotorLB's
  indirection, [McGuinness21 §2.5.1], restricted to paths that exist in the current slice because a
  P4 switch cannot hold a frame for a later slot).  The first hop marks the frame
  ``BULK_TRANSIT``; the transit ToR may only send it on directly.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import networkx as nx

from ..p4.constants import TCLASS_BULK, TCLASS_BULK_TRANSIT, TCLASS_LOW_LATENCY
from ..schedule import Schedule, Slice
from .windows import SliceClock

TCLASS_NAMES = {TCLASS_BULK: "bulk", TCLASS_LOW_LATENCY: "low-latency", TCLASS_BULK_TRANSIT: "bulk-transit"}


@dataclasses.dataclass(frozen=True)
class Hop:
    rotor: int        # index of the rotor (= uplink) to send on
    next_rack: int    # the rack that circuit reaches
    vlb: bool = False  # bulk first hop of a 2-hop path
    path: tuple[int, ...] = ()  # the whole path (racks), for display


def dark_intervals(s: Schedule, r_idx: int, a: float, b: float) -> bool:
    """True if rotor r is dark at any instant of [a, b)."""
    r = s.rotors[r_idx]
    if s.reconfig_us == 0:
        return False
    k0 = int((a - r.offset_us) // s.slot_us) - 1
    k = k0
    while True:
        ns = r.offset_us + k * s.slot_us
        if ns >= b:
            return False
        if ns + s.reconfig_us > a:
            return True
        k += 1


def live_rotors(s: Schedule, sl: Slice, until_us: float | None = None) -> list[int]:
    """Rotors live for all of [slice start, until) (default: the slice end)."""
    end = sl.end_us if until_us is None else until_us
    return [i for i in range(len(s.rotors)) if not dark_intervals(s, i, sl.start_us, end)]


def circuit_graph(s: Schedule, sl: Slice, rotors: Iterable[int]) -> nx.DiGraph:
    """Directed graph of circuits of the given rotors during the slice (edge attr: rotors)."""
    g = nx.DiGraph()
    g.add_nodes_from(range(s.racks))
    mid = (sl.start_us + sl.end_us) / 2
    for ri in rotors:
        r = s.rotors[ri]
        _, m, _ = s.state_at(r, mid)
        for i, j in enumerate(r.matchings[m]):
            if j is None or j == i:
                continue
            if g.has_edge(i, j):
                g[i][j]["rotors"].append(ri)
            else:
                g.add_edge(i, j, rotors=[ri])
    return g


def low_latency_hops(g: nx.DiGraph, racks: int) -> dict[tuple[int, int], Hop]:
    """(src, dst) -> next hop on a shortest path; deterministic (lowest rack, lowest rotor)."""
    out = {}
    rev = g.reverse(copy=False)
    for dst in range(racks):
        dist = nx.single_source_shortest_path_length(rev, dst)
        for src in range(racks):
            if src == dst or src not in dist:
                continue
            nxt = min(n for n in g.successors(src) if dist.get(n, 1 << 30) == dist[src] - 1)
            path = [src, nxt]
            while path[-1] != dst:
                cur = path[-1]
                path.append(min(n for n in g.successors(cur) if dist.get(n, 1 << 30) == dist[cur] - 1))
            out[(src, dst)] = Hop(rotor=min(g[src][nxt]["rotors"]), next_rack=nxt, path=tuple(path))
    return out


def bulk_hops(g: nx.DiGraph, racks: int) -> tuple[dict[tuple[int, int], Hop], dict[tuple[int, int], Hop]]:
    """(bulk, bulk-transit) next hops: direct if live, else 2-hop VLB through a rack live both ways."""
    bulk, transit = {}, {}
    for src in range(racks):
        for dst in range(racks):
            if src == dst:
                continue
            if g.has_edge(src, dst):
                h = Hop(rotor=min(g[src][dst]["rotors"]), next_rack=dst, path=(src, dst))
                bulk[(src, dst)] = h
                transit[(src, dst)] = h
                continue
            mids = sorted(n for n in g.successors(src) if g.has_edge(n, dst))
            if mids:
                n = mids[(src + dst) % len(mids)]  # spread VLB load over the candidates
                bulk[(src, dst)] = Hop(rotor=min(g[src][n]["rotors"]), next_rack=n, vlb=True, path=(src, n, dst))
    return bulk, transit


@dataclasses.dataclass
class SliceRoutes:
    index: int
    slice: Slice
    live_mask: int                  # rotors live for the whole slice (bit r)
    ll_rotors: list[int]            # rotors low-latency traffic may use
    hops: dict[tuple[int, int, int], Hop]  # (src, dst, tclass) -> next hop
    ll_diameter: int | None         # None: the low-latency graph is not strongly connected


def compute(s: Schedule, epsilon_us: float = 0.0) -> list[SliceRoutes]:
    out = []
    for idx, sl in enumerate(s.slices()):
        live = live_rotors(s, sl)
        ll = live_rotors(s, sl, sl.end_us + epsilon_us)
        g_bulk = circuit_graph(s, sl, live)
        g_ll = circuit_graph(s, sl, ll)
        hops: dict[tuple[int, int, int], Hop] = {}
        for (a, b), h in low_latency_hops(g_ll, s.racks).items():
            hops[(a, b, TCLASS_LOW_LATENCY)] = h
        bulk, transit = bulk_hops(g_bulk, s.racks)
        for (a, b), h in bulk.items():
            hops[(a, b, TCLASS_BULK)] = h
        for (a, b), h in transit.items():
            hops[(a, b, TCLASS_BULK_TRANSIT)] = h
        diam = nx.diameter(g_ll) if nx.is_strongly_connected(g_ll) else None
        mask = sum(1 << r for r in live)
        out.append(SliceRoutes(idx, sl, mask, ll, hops, diam))
    return out


class PathClock:
    """Which low-latency path two racks have at a moment: the slice holding schedule time ``t_us``
    (taken modulo the hyperperiod) and, in it, the rack hops from ``src`` to ``dst``.  What a
    flow that starts then meets alone (workload/paths.py: its "alone" FCT by path)."""

    def __init__(self, s: Schedule, routes: list[SliceRoutes]):
        self.clock = SliceClock(s)
        self.routes = routes

    def slice_at(self, t_us: float) -> SliceRoutes:
        return self.routes[self.clock.index(t_us)]

    def hops(self, t_us: float, src: int, dst: int) -> int | None:
        """Rack-to-rack hops of the low-latency path at ``t_us`` (1: the direct circuit); None: none."""
        h = self.slice_at(t_us).hops.get((src, dst, TCLASS_LOW_LATENCY))
        return None if h is None else len(h.path) - 1


def describe(s: Schedule, routes: list[SliceRoutes], k: int, src: int | None = None) -> str:
    sr = routes[k]
    names = [r.name for r in s.rotors]
    lines = [f"slice {k} of {len(routes)}: [{sr.slice.start_us}, {sr.slice.end_us}) us of the "
             f"{s.hyperperiod_us} us hyperperiod",
             "  live rotors (bulk): " + (", ".join(names[i] for i in range(len(names)) if sr.live_mask >> i & 1)
                                         or "none"),
             "  low-latency rotors: " + (", ".join(names[i] for i in sr.ll_rotors) or "none")
             + (f" (diameter {sr.ll_diameter})" if sr.ll_diameter is not None else " (NOT connected)")]
    for (a, b, c), h in sorted(sr.hops.items()):
        if src is not None and a != src:
            continue
        kind = "vlb" if h.vlb else ("direct" if h.next_rack == b else "multi-hop")
        lines.append(f"  rack {a:>3} -> {b:>3} {TCLASS_NAMES[c]:<12} via {names[h.rotor]} to rack {h.next_rack:<3}"
                     f" {kind:<9} path {'-'.join(map(str, h.path))}")
    return "\n".join(lines)
