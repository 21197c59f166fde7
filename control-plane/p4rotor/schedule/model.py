"""Rotor/selector/Opera schedules: the data model, generators and validation.

A schedule is plain JSON (docs/schedule-format.md).  Time semantics, shared by
the data plane, the controller and every tool here:

* every rotor ``r`` has absolute slots ``k = 0, 1, 2, ...``; slot ``k`` starts at
  ``epoch + r.offset_us + k * slot_us`` and lasts ``slot_us``;
* the first ``reconfig_us`` of every slot is the *night* (the rotor is dark and
  drops everything); the rest is the *day*, during which matching
  ``k mod len(r.matchings)`` is live;
* ``matchings[m][i]`` is the rack that rack ``i`` reaches through the rotor
  during matching ``m`` (``null``: rack ``i`` has no circuit in that matching).

Rotor port ``i`` is wired to rack ``i``'s uplink unless the topology says
otherwise; the schedule itself only speaks of racks.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Any

import networkx as nx

from ..inputs import (MAX_HYPERPERIOD_SLOTS, MAX_RACKS, MAX_ROTORS, MAX_SLICE_WORK, MAX_SLOT_US, MAX_TIME_US,
                      SLOT_OVERHEAD, check_work, show_value)

FORMAT_VERSION = 1
KINDS = ("rotornet", "selector", "opera", "custom")


class ScheduleError(ValueError):
    """A schedule is malformed or violates a rule; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Rotor:
    name: str
    offset_us: int
    matchings: tuple[tuple[int | None, ...], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "offset_us": self.offset_us,
            "matchings": [list(m) for m in self.matchings],
        }


@dataclasses.dataclass(frozen=True)
class Schedule:
    racks: int
    slot_us: int
    reconfig_us: int
    rotors: tuple[Rotor, ...]
    kind: str = "custom"
    version: int = FORMAT_VERSION

    # ---- serialisation -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kind": self.kind,
            "racks": self.racks,
            "slot_us": self.slot_us,
            "reconfig_us": self.reconfig_us,
            "rotors": [r.to_json() for r in self.rotors],
        }

    def dumps(self) -> str:
        """Compact but readable JSON: one matching per line."""
        head = {k: v for k, v in self.to_json().items() if k != "rotors"}
        lines = ["{"]
        for key, val in head.items():
            lines.append(f"  {json.dumps(key)}: {json.dumps(val)},")
        lines.append('  "rotors": [')
        for ri, rotor in enumerate(self.rotors):
            lines.append("    {")
            lines.append(f'      "name": {json.dumps(rotor.name)},')
            lines.append(f'      "offset_us": {rotor.offset_us},')
            lines.append('      "matchings": [')
            for mi, m in enumerate(rotor.matchings):
                sep = "," if mi + 1 < len(rotor.matchings) else ""
                lines.append(f"        {json.dumps(list(m))}{sep}")
            lines.append("      ]")
            lines.append("    }" + ("," if ri + 1 < len(self.rotors) else ""))
        lines.append("  ]")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def rotor(self, name: str) -> Rotor:
        for r in self.rotors:
            if r.name == name:
                return r
        names = ", ".join(r.name for r in self.rotors)
        raise ScheduleError(f"no rotor named {name!r} in schedule (rotors: {names})")

    # ---- time ----------------------------------------------------------
    @property
    def day_us(self) -> int:
        return self.slot_us - self.reconfig_us

    def cycle_us(self, rotor: Rotor) -> int:
        return self.slot_us * len(rotor.matchings)

    @property
    def hyperperiod_us(self) -> int:
        """Time after which every rotor is back in the same state."""
        n = 1
        for r in self.rotors:
            n = math.lcm(n, len(r.matchings))
        return n * self.slot_us

    def state_at(self, rotor: Rotor, t_us: float) -> tuple[int, int, bool]:
        """(absolute slot, matching index, night) of ``rotor`` at schedule time t."""
        k = math.floor((t_us - rotor.offset_us) / self.slot_us)
        into = (t_us - rotor.offset_us) - k * self.slot_us
        return k, k % len(rotor.matchings), into < self.reconfig_us

    # ---- slices ----------------------------------------------------------
    def slices(self) -> list["Slice"]:
        """Intervals of one hyperperiod during which the set of live circuits is constant.

        Boundaries are every night start and night end of every rotor.  A rotor
        is *live* in a slice when it is in its day for the whole slice.
        """
        H = self.hyperperiod_us
        points: set[int] = {0, H}
        for r in self.rotors:
            base = r.offset_us % self.slot_us
            for k in range(-1, H // self.slot_us + 1):
                for p in (base + k * self.slot_us, base + k * self.slot_us + self.reconfig_us):
                    if 0 <= p <= H:
                        points.add(p)
        bounds = sorted(points)
        out = []
        for a, b in zip(bounds, bounds[1:]):
            if b <= a:
                continue
            mid = (a + b) / 2
            live = []
            for r in self.rotors:
                _, m, night = self.state_at(r, mid)
                live.append(None if night else m)
            out.append(Slice(start_us=a, end_us=b, live=tuple(live)))
        # merge neighbours with identical live sets (e.g. across hyperperiod wrap).
        merged: list[Slice] = []
        for s in out:
            if merged and merged[-1].live == s.live and merged[-1].end_us == s.start_us:
                merged[-1] = dataclasses.replace(merged[-1], end_us=s.end_us)
            else:
                merged.append(s)
        return merged

    def slice_graph(self, sl: "Slice") -> nx.Graph:
        g = nx.Graph()
        g.add_nodes_from(range(self.racks))
        for r, m in zip(self.rotors, sl.live):
            if m is None:
                continue
            for i, j in enumerate(r.matchings[m]):
                if j is not None and j != i:
                    g.add_edge(i, j)
        return g


@dataclasses.dataclass(frozen=True)
class Slice:
    start_us: int
    end_us: int
    live: tuple[int | None, ...]  # per rotor: live matching index, or None if dark

    @property
    def dark(self) -> int:
        return sum(1 for m in self.live if m is None)


# ---------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------


def _req(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ScheduleError(f"{where}: missing field {key!r}")
    return d[key]


def _int(v: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScheduleError(f"{what} must be an integer, got {json.dumps(v)[:40]}")
    if lo is not None and v < lo:
        raise ScheduleError(f"{what} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ScheduleError(f"{what} must be <= {hi}, got {show_value(v)}")
    return v


def hyperperiod_slots(counts: Any) -> int:
    """The lcm of the rotors' matching counts, or ScheduleError once it passes
    MAX_HYPERPERIOD_SLOTS (coprime counts make it astronomically large)."""
    n = 1
    for c in counts:
        n = math.lcm(n, c)
        if n > MAX_HYPERPERIOD_SLOTS:
            raise ScheduleError(f"the rotors' matching counts repeat together only after more than "
                                f"{MAX_HYPERPERIOD_SLOTS} slots (their least common multiple): over the limit")
    return n


def from_json(data: Any) -> Schedule:
    """Build and validate a schedule from parsed JSON; raises ScheduleError."""
    if not isinstance(data, dict):
        raise ScheduleError("schedule must be a JSON object")
    version = _req(data, "version", "schedule")
    if version != FORMAT_VERSION:
        raise ScheduleError(
            f"unknown schedule version {json.dumps(version)} (this p4rotor reads version {FORMAT_VERSION})"
        )
    kind = data.get("kind", "custom")
    if kind not in KINDS:
        raise ScheduleError(f"unknown kind {json.dumps(kind)} (one of {', '.join(KINDS)})")
    racks = _int(_req(data, "racks", "schedule"), "racks", 2, MAX_RACKS)
    slot_us = _int(_req(data, "slot_us", "schedule"), "slot_us", 1, MAX_SLOT_US)
    reconfig_us = _int(_req(data, "reconfig_us", "schedule"), "reconfig_us", 0)
    if reconfig_us >= slot_us:
        raise ScheduleError(f"night must be shorter than the slot: reconfig_us={reconfig_us} >= slot_us={slot_us}")
    rotors_raw = _req(data, "rotors", "schedule")
    if not isinstance(rotors_raw, list) or not rotors_raw:
        raise ScheduleError("rotors must be a non-empty list")
    if len(rotors_raw) > MAX_ROTORS:
        raise ScheduleError(f"at most {MAX_ROTORS} rotors, got {len(rotors_raw)}")
    rotors = []
    seen = set()
    for ri, rr in enumerate(rotors_raw):
        where = f"rotors[{ri}]"
        if not isinstance(rr, dict):
            raise ScheduleError(f"{where} must be an object")
        name = _req(rr, "name", where)
        if not isinstance(name, str) or not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ScheduleError(f"{where}.name must be a non-empty word (letters, digits, - and _), got {json.dumps(name)}")
        if name in seen:
            raise ScheduleError(f"{where}: duplicate rotor name {name!r}")
        seen.add(name)
        where = f"rotor {name!r}"
        offset = _int(rr.get("offset_us", 0), f"{where}: offset_us", 0, MAX_TIME_US)
        mats_raw = _req(rr, "matchings", where)
        if not isinstance(mats_raw, list) or not mats_raw:
            raise ScheduleError(f"{where}: matchings must be a non-empty list")
        if len(mats_raw) > MAX_HYPERPERIOD_SLOTS:
            raise ScheduleError(f"{where}: at most {MAX_HYPERPERIOD_SLOTS} matchings, got {len(mats_raw)}")
        mats = []
        for mi, m in enumerate(mats_raw):
            mats.append(_check_matching(m, racks, f"{where} matching {mi}"))
        rotors.append(Rotor(name=name, offset_us=offset, matchings=tuple(mats)))
    slots = hyperperiod_slots(len(r.matchings) for r in rotors)
    check_work(slots * len(rotors) * (racks ** 2 + SLOT_OVERHEAD), MAX_SLICE_WORK,
               f"{racks} racks, {len(rotors)} rotors, a {slots}-slot hyperperiod", ScheduleError)
    sched = Schedule(racks=racks, slot_us=slot_us, reconfig_us=reconfig_us,
                     rotors=tuple(rotors), kind=kind, version=version)
    if kind == "opera":
        _check_one_dark(sched)
    if kind == "rotornet":
        _check_symmetric(sched)
    return sched


def _check_matching(m: Any, racks: int, where: str) -> tuple[int | None, ...]:
    if not isinstance(m, list):
        raise ScheduleError(f"{where}: must be a list of {racks} racks")
    if len(m) != racks:
        raise ScheduleError(f"{where}: wrong length {len(m)}, expected {racks} (one entry per rack)")
    seen: dict[int, int] = {}
    for i, j in enumerate(m):
        if j is None:
            continue
        if isinstance(j, bool) or not isinstance(j, int):
            raise ScheduleError(f"{where}: entry {i} must be a rack number or null, got {json.dumps(j)}")
        if not 0 <= j < racks:
            raise ScheduleError(f"{where}: rack {j} (entry {i}) out of range 0..{racks - 1}")
        if j in seen:
            raise ScheduleError(
                f"{where}: not a permutation: racks {seen[j]} and {i} both reach rack {j}")
        seen[j] = i
    return tuple(m)


def _check_symmetric(s: Schedule) -> None:
    for r in s.rotors:
        for mi, m in enumerate(r.matchings):
            for i, j in enumerate(m):
                if j is not None and m[j] != i:
                    raise ScheduleError(
                        f"rotor {r.name!r} matching {mi}: rotornet circuits are bidirectional, "
                        f"but {i}->{j} and {j}->{m[j]}")


def night_overlaps(s: Schedule) -> list[tuple[str, str]]:
    """Pairs of rotors whose nights overlap at some instant."""
    out = []
    if s.reconfig_us == 0:
        return out
    for a, b in itertools.combinations(s.rotors, 2):
        d = (b.offset_us - a.offset_us) % s.slot_us
        if d < s.reconfig_us or s.slot_us - d < s.reconfig_us:
            out.append((a.name, b.name))
    return out


def _check_one_dark(s: Schedule) -> None:
    bad = night_overlaps(s)
    if bad:
        a, b = bad[0]
        raise ScheduleError(
            f"opera: rotors {a!r} and {b!r} are dark at the same time "
            f"(offsets must differ by >= reconfig_us={s.reconfig_us} modulo slot_us={s.slot_us})")


def load(path: str | Path) -> Schedule:
    from ..inputs import read_json

    p = Path(path)
    data = read_json(p, ScheduleError)
    try:
        return from_json(data)
    except ScheduleError as ex:
        raise ScheduleError(f"{p}: {ex}") from None
