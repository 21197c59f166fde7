"""What a schedule does: pair meetings per hyperperiod, slices and their connectivity and diameter,
and how those diameters compare with random regular graphs (the expander yardstick of [McGuinness21 §2.6.1])."""

from __future__ import annotations

import dataclasses
import functools
import statistics
from operator import or_
from typing import Sequence

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
        d = graph_diameter(_adjacency(s.slice_graph(x)))
        con.append(d is not None)
        dia.append(d)
    return Analysis(pair_meetings=meet, slices=sl, connected=con, diameters=dia)


def _adjacency(g: nx.Graph) -> list[list[int]]:
    return [list(g.adj[v]) for v in range(g.number_of_nodes())]


def graph_diameter(adj: Sequence[Sequence[int]], cap: int | None = None) -> int | None:
    """Diameter of the undirected graph on nodes 0..n-1 (``adj[v]``: v's neighbours), None if disconnected.

    With ``cap``, also None as soon as the diameter is known to exceed ``cap`` (cheaper).
    Why not ``nx.diameter``: the Opera generator and ``schedule show`` measure hundreds of
    slice graphs; BFS from every node at once with one Python int as a bitset per node (the
    set reached within t hops) is ~50x faster at 128 racks, which keeps generation in seconds.
    """
    n = len(adj)
    if n <= 1:
        return 0
    full = (1 << n) - 1
    reach = [1 << v for v in range(n)]
    t = 0
    while True:
        if all(r == full for r in reach):
            return t
        if cap is not None and t >= cap:
            return None
        nxt = []
        for v in range(n):
            r = reach[v]
            for u in adj[v]:
                r |= reach[u]
            nxt.append(r)
        if nxt == reach:
            return None
        reach = nxt
        t += 1


def matchings_diameter(perms: Sequence[Sequence[int]], cap: int | None = None) -> int | None:
    """``graph_diameter`` of the union of matchings given as permutations (``perm[v]``: v's partner,
    v itself where v is idle); None if disconnected or (with ``cap``) above ``cap``.

    The same bitset BFS, but one C-level ``map`` per matching and round instead of a Python loop
    per node: about 2.5x faster, which is what the Opera search spends its time on.
    """
    n = len(perms[0]) if perms else 0
    if n <= 1:
        return 0
    full = (1 << n) - 1
    reach = [1 << v for v in range(n)]
    t = 0
    while True:
        if t and reach.count(full) == n:
            return t
        if cap is not None and t >= cap:
            return None
        get = reach.__getitem__
        nxt = reach
        for m in perms:
            nxt = list(map(or_, nxt, map(get, m)))
        if nxt == reach:
            return None
        reach = nxt
        t += 1


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
        d = graph_diameter(_adjacency(s.slice_graph(sl)))
        if d is None:
            return None
        worst = max(worst, d)
        if give_up_above is not None and worst >= give_up_above:
            return None
    return worst


REFERENCE_SEEDS = 20


@functools.lru_cache(maxsize=None)
def reference_diameter(n: int, degree: int) -> float | None:
    """Median diameter of ``networkx.random_regular_graph(degree, n, seed=s)``, s = 0..19.

    The yardstick for "every slice is an expander" ([McGuinness21 §2.6.1]): a random regular
    graph is a near-optimal expander, so a slice whose diameter is within a hop of it is as
    good as Opera needs.  Disconnected samples are left out of the median; degree 2 is
    special (random 2-regular graphs are mostly several cycles; the one connected 2-regular
    graph is the n-cycle, diameter n//2).  None when no such graph exists (n*degree odd,
    degree >= n or < 1).  Cached per (n, degree) for the life of the process.
    """
    if degree < 1 or degree >= n or (n * degree) % 2:
        return None
    if degree == 1:
        return 1 if n == 2 else None
    if degree == 2:
        return n // 2
    ds = []
    for seed in range(REFERENCE_SEEDS):
        g = nx.random_regular_graph(degree, n, seed=seed)
        d = graph_diameter(_adjacency(g))
        if d is not None:
            ds.append(d)
    return statistics.median(ds) if ds else None


def slice_reference(racks: int, degree: int) -> float:
    """The reference diameter for a slice of ``racks`` racks and ``degree`` live matchings.

    ``reference_diameter`` where a random regular graph of that size exists; odd racks*degree
    (odd racks: one rack idles in every matching) use racks+1; degree >= racks (a complete
    slice) the Moore bound, i.e. 1.  Odd racks and degree 2: the best slice is a path through
    all racks (each matching leaves a rack idle), diameter racks-1.
    """
    if degree == 2 and racks % 2:
        return racks - 1
    ref = reference_diameter(racks, degree)
    if ref is None:
        ref = reference_diameter(racks + 1, degree)
    if ref is None:
        ref = moore_diameter_bound(racks, degree)
    return ref


@dataclasses.dataclass(frozen=True)
class DegreeRow:
    degree: int            # maximum degree of the slice graph (= live matchings in an Opera slice)
    slices: int            # slices of that degree in the hyperperiod
    worst: int | None      # worst diameter among them (None: some slice is disconnected)
    reference: float       # slice_reference(racks, degree)


def degree_table(s: Schedule, a: Analysis | None = None) -> list[DegreeRow]:
    """Per slice degree: worst slice diameter beside the random-regular reference."""
    a = a or analyse(s)
    by: dict[int, list[int | None]] = {}
    for sl, d in zip(a.slices, a.diameters):
        g = s.slice_graph(sl)
        deg = max((x for _, x in g.degree()), default=0)
        by.setdefault(deg, []).append(d)
    rows = []
    for deg in sorted(by):
        ds = by[deg]
        worst = None if any(d is None for d in ds) else max(ds)
        rows.append(DegreeRow(deg, len(ds), worst, slice_reference(s.racks, deg)))
    return rows


def live_matchings(s: Schedule, sl: Slice) -> int:
    """Live rotors in the slice whose current matching has at least one circuit."""
    return sum(1 for r, m in zip(s.rotors, sl.live)
               if m is not None and any(j is not None and j != i for i, j in enumerate(r.matchings[m])))


def fmt_diameter(x: float | None) -> str:
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


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
    lines.append(f"live matchings per slice: at least {min(live_matchings(s, x) for x in a.slices)}")
    lines.append("worst slice diameter per slice degree, beside the median random regular graph (20 seeds):")
    lines.append("  degree  slices  worst  reference")
    for row in degree_table(s, a):
        worst = "disc." if row.worst is None else str(row.worst)
        lines.append(f"  {row.degree:>6}  {row.slices:>6}  {worst:>5}  {fmt_diameter(row.reference):>9}")
    return "\n".join(lines)


