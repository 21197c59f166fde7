"""Which corrupting rotor links to disable: CorrOpt's fast checker ([Zhuo19 §3.4.1]) on a rotor
schedule.  Pure: schedules and rates in, decisions and schedules out, no I/O.

A *link* is one rack's fibre pair to one rotor, named ``(rotor name, rack)`` (the topology maps it
to a rotor port).  Disabling it removes, from every matching of that rotor, the circuits that use
that rack's port: ``matchings[m][rack]`` (the rack's outgoing circuit) and every entry that points
at ``rack`` (its incoming one).  A circuit needs both ends, so for the bidirectional circuits every
generator makes (``m[m[i]] == i``) the peer rack idles too in that matching.

The capacity constraint is CorrOpt's with "paths to the spine" replaced by what a rotor fabric
needs: **no slice may lose connectivity**.  In every slice of the schedule (``Schedule.slices()``),
racks connected by the live circuits of the original schedule must still be connected with every
disabled link removed.  For an Opera schedule, whose slices are all connected, that is exactly
"every slice stays connected".  A schedule whose slices are not connected to begin with (RotorNet:
a slice is one matching, a set of rack pairs) keeps its components: there no circuit can go,
since each one is its pair's only path in the slices where it is live.

``decide`` is the fast checker run over links in descending rate order (ties: rotor name, then
rack): a link is disabled if the constraint holds with it and every link disabled before it
removed, otherwise kept.  Like the fast checker, the result is maximal (no kept link could be
disabled on top of the disabled ones) but greedy: a high-rate link is never traded for two
lower-rate ones; ``corropt_optimizer`` is CorrOpt's optimizer, which does.  Links at or below the
threshold are not decided on and are not listed.  ``Connectivity`` is the constraint check both
use.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Collection, Iterable, Iterator, Mapping

import networkx as nx

from ..schedule.analysis import analyse
from ..schedule.model import Schedule, ScheduleError, from_json

Link = tuple[str, int]  # (rotor name, rack)


class MonitorError(ValueError):
    """Bad input to the monitor; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Decision:
    rotor: str
    rack: int
    rate: float
    action: str                              # "disable" or "keep"
    # keep: the first slice (time order) that would lose connectivity, and how it would split:
    slice_index: int | None = None
    slice_start_us: int | None = None
    component: tuple[int, ...] = ()          # the rack's component in that slice before ...
    split: tuple[tuple[int, ...], ...] = ()  # ... and the pieces it would split into (sorted)
    # disable: worst diameter over the connected slices, after and before any link was disabled
    worst_diameter: int | None = None
    worst_diameter_before: int | None = None

    @property
    def link(self) -> Link:
        return (self.rotor, self.rack)

    def reason(self) -> str:
        if self.action == "disable":
            return (f"every slice keeps its connectivity without it; worst slice diameter "
                    f"{_hops(self.worst_diameter)} (was {_hops(self.worst_diameter_before)})")
        pieces = " + ".join(_racks(p) for p in self.split)
        return (f"slice {self.slice_index} (t={self.slice_start_us} us) would split "
                f"{_racks(self.component)} into {pieces}")


def _hops(d: int | None) -> str:
    return "-" if d is None else f"{d} hops"


def _racks(rs: Iterable[int]) -> str:
    return "{" + ",".join(map(str, rs)) + "}"


def _check_links(schedule: Schedule, links: Iterable[Link]) -> list[Link]:
    names = {r.name for r in schedule.rotors}
    out = []
    for link in links:
        if not (isinstance(link, tuple) and len(link) == 2):
            raise MonitorError(f"a link is (rotor name, rack), got {link!r}")
        rotor, rack = link
        if rotor not in names:
            raise MonitorError(f"link {link!r}: no rotor {rotor!r} in the schedule ({', '.join(sorted(names))})")
        if type(rack) is not int or not 0 <= rack < schedule.racks:
            raise MonitorError(f"link {link!r}: rack must be an integer in 0..{schedule.racks - 1}")
        out.append((rotor, rack))
    return out


def masked_schedule(schedule: Schedule, disabled: Iterable[Link]) -> Schedule:
    """``schedule`` without the circuits of the disabled links (module docstring), validated.

    A removed circuit is a ``null`` entry, the format's idle rack: every matching stays a partial
    permutation, RotorNet's bidirectional rule still holds (both ends go), offsets and matching
    counts are unchanged, so slot times, slices and the hyperperiod are too.
    """
    gone: dict[str, set[int]] = {}
    for rotor, rack in _check_links(schedule, disabled):
        gone.setdefault(rotor, set()).add(rack)
    rotors = []
    for r in schedule.rotors:
        racks = gone.get(r.name)
        if not racks:
            rotors.append(r)
            continue
        mats = tuple(tuple(None if i in racks or j in racks else j for i, j in enumerate(m))
                     for m in r.matchings)
        rotors.append(dataclasses.replace(r, matchings=mats))
    out = dataclasses.replace(schedule, rotors=tuple(rotors))
    try:
        return from_json(out.to_json())
    except ScheduleError as ex:  # a bug here, not bad input: masking keeps every rule
        raise AssertionError(f"masked schedule does not validate: {ex}") from None


def _components(g: nx.Graph) -> list[frozenset[int]]:
    return [frozenset(c) for c in nx.connected_components(g)]


def _worst_connected_diameter(s: Schedule) -> int | None:
    ds = [d for d in analyse(s).diameters if d is not None]
    return max(ds) if ds else None


@dataclasses.dataclass(frozen=True)
class Break:
    """One slice's component that a set of disabled links splits: the constraint they violate."""
    slice_index: int
    component: frozenset[int]               # racks connected in this slice of the original schedule
    pieces: tuple[tuple[int, ...], ...]     # what it splits into (sorted)
    links: frozenset[Link]                  # the disabled links that removed circuits inside it:
                                            # any set holding these breaks it too


class Connectivity:
    """The capacity constraint (module docstring) of one schedule, checked without building a
    masked schedule: per slice, the original components and the live circuits, each circuit with
    the two links whose disabling removes it (its two ends on its rotor)."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.slices = schedule.slices()
        self.base: list[dict[int, frozenset[int]]] = []  # per slice: rack -> original component
        self.circuits: list[list[tuple[int, int, Link, Link]]] = []  # per slice: (i, j, link i, link j)
        self._touches: dict[Link, list[int]] = {}
        for si, sl in enumerate(self.slices):
            comp = {}
            for c in _components(schedule.slice_graph(sl)):
                for v in c:
                    comp[v] = c
            self.base.append(comp)
            cs = []
            for r, m in zip(schedule.rotors, sl.live):
                if m is None:
                    continue
                for i, j in enumerate(r.matchings[m]):
                    if j is not None and j != i:  # slice_graph's edges, one entry per direction
                        cs.append((i, j, (r.name, i), (r.name, j)))
                        for link in ((r.name, i), (r.name, j)):
                            t = self._touches.setdefault(link, [])
                            if not t or t[-1] != si:
                                t.append(si)
            self.circuits.append(cs)

    def touches(self, link: Link) -> list[int]:
        """The slices (in time order) in which ``link`` carries a live circuit: the only ones its
        disabling can change."""
        return self._touches.get(link, [])

    def breaks(self, disabled: Collection[Link], slices: Iterable[int] | None = None) -> Iterator[Break]:
        """Every component of the given slices (default: all, time order) that ``disabled``
        splits, slice by slice; nothing: the constraint holds there."""
        n = self.schedule.racks
        for si in (range(len(self.slices)) if slices is None else slices):
            parent = list(range(n))

            def find(x: int) -> int:
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x

            removed: dict[frozenset[int], set[Link]] = {}
            for i, j, a, b in self.circuits[si]:
                gone = [x for x in (a, b) if x in disabled]
                if gone:
                    removed.setdefault(self.base[si][i], set()).update(gone)
                else:
                    parent[find(i)] = find(j)
            for whole in sorted(removed, key=min):
                pieces: dict[int, list[int]] = {}
                for v in sorted(whole):
                    pieces.setdefault(find(v), []).append(v)
                if len(pieces) > 1:
                    yield Break(si, whole, tuple(sorted(tuple(p) for p in pieces.values())),
                                frozenset(removed[whole]))

    def first_break(self, disabled: Collection[Link], slices: Iterable[int] | None = None) -> Break | None:
        return next(self.breaks(disabled, slices), None)


def decide(schedule: Schedule, rates: Mapping[Link, float], threshold: float,
           disabled: Iterable[Link] = ()) -> list[Decision]:
    """The fast checker over every link whose rate is above ``threshold`` (module docstring).

    Returns one ``Decision`` per such link, in the order decided (rate descending, then rotor
    name, then rack).  ``disabled``: links already off (a running monitor's earlier decisions):
    removed first, not decided again; the constraint is still the original schedule's
    connectivity.  ``masked_schedule(schedule, [d.link for d in decisions if d.action ==
    "disable"])`` is the schedule to run.
    """
    order, off = candidates(schedule, rates, threshold, disabled)
    conn = Connectivity(schedule)
    before = _worst_connected_diameter(schedule)
    disabled = list(off)
    out = []
    for link in order:
        rate = float(rates[link])
        # Only the slices in which this link carries a circuit change; the others kept their
        # components when the earlier links were disabled.
        b = conn.first_break(set(disabled) | {link}, conn.touches(link))
        if b is not None:
            out.append(Decision(*link, rate, "keep", slice_index=b.slice_index,
                                slice_start_us=conn.slices[b.slice_index].start_us,
                                component=tuple(sorted(b.component)), split=b.pieces))
            continue
        disabled.append(link)
        trial = masked_schedule(schedule, disabled)
        out.append(Decision(*link, rate, "disable", worst_diameter=_worst_connected_diameter(trial),
                            worst_diameter_before=before))
    return out


def candidates(schedule: Schedule, rates: Mapping[Link, float], threshold: float,
               disabled: Iterable[Link] = ()) -> tuple[list[Link], list[Link]]:
    """(the links to decide on: above ``threshold``, not already off, in the fast checker's order
    -- rate descending, then rotor name, then rack --, the links already off), every input
    checked (``MonitorError``, one line)."""
    if type(threshold) not in (int, float) or not 0 < threshold < 1:
        raise MonitorError(f"the threshold must be a number in (0, 1), got {threshold!r}")
    links = _check_links(schedule, rates)
    for link in links:
        rate = rates[link]
        if type(rate) not in (int, float) or math.isnan(rate) or not 0 <= rate <= 1:
            raise MonitorError(f"link {link!r}: rate must be a number in 0..1, got {rate!r}")
    off = _check_links(schedule, disabled)
    order = sorted((link for link in links if rates[link] > threshold and link not in off),
                   key=lambda x: (-rates[x], x))
    return order, off


def disabled_links(decisions: Iterable[Decision]) -> list[Link]:
    return [d.link for d in decisions if d.action == "disable"]
