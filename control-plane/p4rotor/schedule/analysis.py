"""What a schedule does: pair meetings per hyperperiod, slices and their connectivity and diameter."""

from __future__ import annotations

import dataclasses

import networkx as nx

from .model import Schedule, Slice


@dataclasses.dataclass
class Analysis:
    pair_meetings: dict[tuple[int, int], int]  # directed (i,j) -> slots per hyperperiod with a circuit
    slices: list[Slice]
    connected: list[bool]
    diameters: list[int | None]

    @property
    def max_dark(self) -> int:
        return max((s.dark for s in self.slices), default=0)

    @property
    def worst_diameter(self) -> int | None:
        if not all(self.connected):
            return None
        return max(d for d in self.diameters if d is not None)


def analyse(s: Schedule) -> Analysis:
    meet: dict[tuple[int, int], int] = {
        (i, j): 0 for i in range(s.racks) for j in range(s.racks) if i != j}
    H = s.hyperperiod_us // s.slot_us
    for r in s.rotors:
        for k in range(H):
            m = r.matchings[k % len(r.matchings)]
            for i, j in enumerate(m):
                if j is not None and j != i:
                    meet[(i, j)] += 1
    sl = s.slices()
    con, dia = [], []
    for x in sl:
        g = s.slice_graph(x)
        c = nx.is_connected(g)
        con.append(c)
        dia.append(nx.diameter(g) if c else None)
    return Analysis(pair_meetings=meet, slices=sl, connected=con, diameters=dia)


def moore_diameter_bound(n: int, degree: int) -> int:
    """Smallest diameter any graph of n nodes and maximum degree ``degree`` can have."""
    if degree <= 0:
        return n
    reach, layer, d = 1, degree, 0
    while reach < n:
        reach += layer
        layer *= max(1, degree - 1)
        d += 1
        if degree == 1 and d > 1:
            return n
    return d


def worst_diameter(s: Schedule, give_up_above: int | None = None) -> int | None:
    """Worst slice diameter, or None if some slice is disconnected (or worse than a bound)."""
    worst = 0
    # The slices with a dark rotor have the fewest circuits: check them first.
    for sl in sorted(s.slices(), key=lambda x: -x.dark):
        g = s.slice_graph(sl)
        if not nx.is_connected(g):
            return None
        worst = max(worst, nx.diameter(g))
        if give_up_above is not None and worst >= give_up_above:
            return None
    return worst


def summary(s: Schedule) -> str:
    a = analyse(s)
    lines = [
        f"{s.kind} schedule: {s.racks} racks, {len(s.rotors)} rotors, slot {s.slot_us} us "
        f"(night {s.reconfig_us} us, day {s.day_us} us, duty cycle {s.day_us / s.slot_us:.1%})",
        f"hyperperiod {s.hyperperiod_us} us; {len(a.slices)} slices; at most {a.max_dark} rotor(s) dark at once",
    ]
    for r in s.rotors:
        idle = sum(1 for m in r.matchings if all(x is None for x in m))
        lines.append(f"  {r.name}: offset {r.offset_us} us, {len(r.matchings)} matchings"
                     + (f" ({idle} idle)" if idle else "") + f", cycle {s.cycle_us(r)} us")
    counts = sorted(set(a.pair_meetings.values()))
    lines.append(f"direct circuits per rack pair per hyperperiod: {', '.join(map(str, counts))}"
                 + (" (every pair meets)" if 0 not in counts else " (some pairs never meet directly)"))
    if all(a.connected):
        lines.append(f"every slice connected; worst slice diameter {a.worst_diameter} hops")
    else:
        bad = sum(1 for c in a.connected if not c)
        lines.append(f"{bad} of {len(a.slices)} slices are NOT connected")
    return "\n".join(lines)


