"""A fault plan: what breaks, where, and when, in schedule time (emulated us from slot 0).

```json
{"version": 1, "faults": [
  {"kind": "loss", "start_us": 0, "end_us": 2000000, "rotor": "rotor0", "port": 3, "direction": "out",
   "rate": 0.01, "matching": null},
  {"kind": "link-down", "start_us": 500000, "end_us": 900000, "switch": "tor2", "port": 1},
  {"kind": "switch-crash", "start_us": 1000000, "switch": "rotor1", "restart_after_us": 300000},
  {"kind": "controller-crash", "start_us": 1000000, "restart_after_us": 500000},
  {"kind": "clock-skew", "start_us": 0, "switch": "tor3", "offset_us": 200},
  {"kind": "host-pause", "start_us": 200000, "end_us": 400000, "host": "h0x0"},
  {"kind": "clock-drift", "start_us": 0, "end_us": 2000000, "switch": "tor1", "ppm": 50},
  {"kind": "agent-kill", "start_us": 300000, "host": "h5x0", "restart_after_us": 10000}]}
```

Validated like schedules and topologies: against the topology (names and ports exist), every
mistake a one-line ``FaultPlanError``; nothing is started from a plan that does not validate.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..schedule.topology import Topology

KINDS = ("loss", "link-down", "switch-crash", "controller-crash", "clock-skew", "clock-drift", "host-pause",
         "agent-kill")
MAX_PPM = 100_000  # a rate error of 10 %: a clock further off than that is not drifting, it is broken
MAX_US = 10 ** 12  # ~11.6 days of schedule time: anything beyond is a typo
_FIELDS = {
    "loss": {"rotor", "port", "direction", "rate", "matching", "end_us"},
    "link-down": {"switch", "port", "end_us"},
    "switch-crash": {"switch", "restart_after_us"},
    "controller-crash": {"restart_after_us"},
    "clock-skew": {"switch", "offset_us", "end_us"},
    "host-pause": {"host", "end_us"},
    "clock-drift": {"switch", "ppm", "end_us"},
    "agent-kill": {"host", "restart_after_us"},
}


class FaultPlanError(ValueError):
    """A fault plan is malformed; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    start_us: int
    end_us: int | None = None        # None: until the run ends
    switch: str | None = None
    rotor: str | None = None
    port: int | None = None
    direction: str | None = None     # loss: "in" (into the rotor) or "out"
    rate: float | None = None        # loss probability
    matching: int | None = None      # loss: only while this matching is live
    host: str | None = None
    offset_us: int | None = None     # clock-skew
    ppm: float | None = None         # clock-drift: the clock runs this many parts per million fast
    restart_after_us: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    faults: tuple[Fault, ...]

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "faults": [f.to_json() for f in self.faults]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"


def _int(v: Any, what: str, lo: int = 0, hi: int = MAX_US) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise FaultPlanError(f"{what} must be an integer in {lo}..{hi}, got {v!r}")
    return v


def _name(v: Any, what: str, known: set[str]) -> str:
    if not isinstance(v, str) or v not in known:
        raise FaultPlanError(f"{what} {v!r} is not in the topology ({', '.join(sorted(known)[:6])}...)")
    return v


def from_json(d: Any, topo: Topology) -> FaultPlan:
    if not isinstance(d, dict):
        raise FaultPlanError("a fault plan is a JSON object with a 'faults' list")
    if d.get("version") != 1:
        raise FaultPlanError(f"unknown fault plan version {d.get('version')!r} (1)")
    items = d.get("faults")
    if not isinstance(items, list):
        raise FaultPlanError("'faults' must be a list")
    rotors = {r.name: r for r in topo.rotors}
    tors = {k.tor.name: k for k in topo.racks}
    hosts = {h.name for k in topo.racks for h in k.hosts}
    out = []
    for i, f in enumerate(items):
        where = f"fault {i}"
        if not isinstance(f, dict):
            raise FaultPlanError(f"{where}: must be an object")
        kind = f.get("kind")
        if kind not in KINDS:
            raise FaultPlanError(f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
        extra = set(f) - _FIELDS[kind] - {"kind", "start_us"}
        if extra:
            raise FaultPlanError(f"{where} ({kind}): unexpected field(s) {', '.join(sorted(extra))}")
        start = _int(f.get("start_us"), f"{where}: start_us")
        end = f.get("end_us")
        if end is not None and _int(end, f"{where}: end_us") <= start:
            raise FaultPlanError(f"{where}: end_us {end} must be after start_us {start}")
        kw: dict[str, Any] = {"kind": kind, "start_us": start, "end_us": end}
        if kind == "loss":
            r = rotors.get(_name(f.get("rotor"), f"{where}: rotor", set(rotors)))
            port = _int(f.get("port"), f"{where}: port", 1, 253)
            if port not in r.ports.values():
                raise FaultPlanError(f"{where}: rotor {r.name} has no port {port}")
            if f.get("direction") not in ("in", "out"):
                raise FaultPlanError(f"{where}: direction must be 'in' or 'out', got {f.get('direction')!r}")
            rate = f.get("rate")
            if type(rate) not in (int, float) or not 0 <= rate <= 1:
                raise FaultPlanError(f"{where}: rate must be a number in 0..1, got {rate!r}")
            m = f.get("matching")
            n = len(topo.schedule.rotor(r.name).matchings)
            if m is not None:
                _int(m, f"{where}: matching", 0, n - 1)
            kw.update(rotor=r.name, port=port, direction=f["direction"], rate=float(rate), matching=m)
        elif kind == "link-down":
            sw = _name(f.get("switch"), f"{where}: switch", set(rotors) | set(tors))
            port = _int(f.get("port"), f"{where}: port", 1, 253)
            ports = (set(rotors[sw].ports.values()) if sw in rotors
                     else set(tors[sw].tor.uplinks.values()) | {h.port for h in tors[sw].hosts})
            if port not in ports:
                raise FaultPlanError(f"{where}: {sw} has no port {port}")
            kw.update(switch=sw, port=port)
        elif kind in ("switch-crash", "controller-crash"):
            if kind == "switch-crash":
                kw["switch"] = _name(f.get("switch"), f"{where}: switch", set(rotors) | set(tors))
            if f.get("restart_after_us") is not None:
                kw["restart_after_us"] = _int(f["restart_after_us"], f"{where}: restart_after_us", 1)
        elif kind == "clock-skew":
            kw["switch"] = _name(f.get("switch"), f"{where}: switch", set(rotors) | set(tors))
            kw["offset_us"] = _int(f.get("offset_us"), f"{where}: offset_us", -10 ** 9, 10 ** 9)
        elif kind == "clock-drift":
            kw["switch"] = _name(f.get("switch"), f"{where}: switch", set(rotors) | set(tors))
            ppm = f.get("ppm")
            if type(ppm) not in (int, float) or ppm != ppm or not 0 < abs(ppm) <= MAX_PPM:
                raise FaultPlanError(f"{where}: ppm must be a non-zero number in -{MAX_PPM}..{MAX_PPM}, got {ppm!r}")
            kw["ppm"] = float(ppm)
        elif kind == "agent-kill":
            kw["host"] = _name(f.get("host"), f"{where}: host", hosts)
            if f.get("restart_after_us") is not None:
                kw["restart_after_us"] = _int(f["restart_after_us"], f"{where}: restart_after_us", 1)
        elif kind == "host-pause":
            kw["host"] = _name(f.get("host"), f"{where}: host", hosts)
            if end is None:
                raise FaultPlanError(f"{where}: a host pause needs end_us")
        out.append(Fault(**kw))
    return FaultPlan(tuple(sorted(out, key=lambda x: x.start_us)))


def load(path: str | Path, topo: Topology) -> FaultPlan:
    p = Path(path)
    from ..inputs import read_json

    d = read_json(p, FaultPlanError)
    try:
        return from_json(d, topo)
    except FaultPlanError as ex:
        raise FaultPlanError(f"{p}: {ex}") from None


def link_losses(plan: FaultPlan, rotor: str) -> list:
    """The plan's loss faults on one rotor as ``LinkLoss`` values (for ``loss_entries``)."""
    from .entities import LinkLoss

    return [LinkLoss(f.port, f.direction, f.rate, f.matching) for f in plan.faults
            if f.kind == "loss" and f.rotor == rotor]
