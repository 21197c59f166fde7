"""The power model as data: per port class, the power in each link state and the latencies of
getting into and out of it ([Biswas21 §2.2.3]; docs/energy.md, "The power model").

A model file (``topologies/energy/lpi.json`` is the default) holds, for each of the three port
classes (``host-link``, ``tor-uplink``, ``rotor-port``), the states ``L0`` (active), ``L0s``
(transmitter-only sleep), ``L1`` (both ends asleep after a handshake) and ``off``.  Every state
but L0 has ``entry_us``/``exit_us`` (null: never entered); L0s and L1 have a ``runway_us`` (the
idleness a reactive policy waits before it enters), L1 a ``handshake_us`` (the sleep and wake
packets exchanged with the neighbour, added to both its entry and its exit).  Bad input is one
line naming the file and the field (:class:`EnergyError`).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from ..inputs import MAX_TIME_US, read_json, show_value

CLASSES = ("host-link", "tor-uplink", "rotor-port")
STATES = ("L0", "L0s", "L1", "off")
SLEEP_STATES = ("L0s", "L1", "off")  # deepest last: predictive picks the deepest that fits
MAX_POWER_W = 1e4  # a port drawing more than 10 kW is a typo


class EnergyError(ValueError):
    """Bad input to the energy accounting: one line, exit 2 (cliutil.die)."""


@dataclasses.dataclass(frozen=True)
class State:
    name: str
    power_w: float
    entry_us: float | None = None  # None: this state is never entered
    exit_us: float | None = None
    runway_us: float | None = None  # reactive policies: idle this long before entering
    handshake_us: float = 0.0       # L1: the sleep/wake exchange with the neighbour

    @property
    def usable(self) -> bool:
        return self.name == "L0" or (self.entry_us is not None and self.exit_us is not None)

    @property
    def enter_cost_us(self) -> float:
        """Time from deciding to sleep to being asleep (at L0 power)."""
        return (self.entry_us or 0.0) + self.handshake_us

    @property
    def wake_cost_us(self) -> float:
        """Time from deciding to wake to being able to send (at L0 power): a frame's delay."""
        return (self.exit_us or 0.0) + self.handshake_us


@dataclasses.dataclass(frozen=True)
class PortClass:
    name: str
    states: dict[str, State]

    def power(self, state: str) -> float:
        return self.states[state].power_w


@dataclasses.dataclass(frozen=True)
class PowerModel:
    source: str
    classes: dict[str, PortClass]

    def check_slot(self, slot_us: float) -> None:
        """An exit latency longer than a slot cannot be hidden in any window: refused."""
        for c in self.classes.values():
            for s in c.states.values():
                if s.exit_us is not None and s.wake_cost_us > slot_us:
                    raise EnergyError(f"{self.source}: {c.name}.{s.name}: exit {s.wake_cost_us:g} us is longer "
                                      f"than the schedule's slot ({slot_us:g} us)")


def _num(v: Any, where: str, *, none: bool = False, hi: float = MAX_TIME_US) -> float | None:
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise EnergyError(f"{where} must be a number{' or null' if none else ''}, got {show_value(v)}")
    if v < 0:
        raise EnergyError(f"{where} must be >= 0, got {show_value(v)}")
    if v > hi:
        raise EnergyError(f"{where} must be <= {hi:g}, got {show_value(v)}")
    return float(v)


_FIELDS = {"L0": {"power_w"},
           "L0s": {"power_w", "entry_us", "exit_us", "runway_us"},
           "L1": {"power_w", "entry_us", "exit_us", "runway_us", "handshake_us"},
           "off": {"power_w", "entry_us", "exit_us"}}


def _state(name: str, d: Any, where: str) -> State:
    if not isinstance(d, dict):
        raise EnergyError(f"{where} must be an object, got {show_value(d)}")
    extra = sorted(set(d) - _FIELDS[name])
    if extra:
        raise EnergyError(f"{where}: unknown field {extra[0]!r} (known: {', '.join(sorted(_FIELDS[name]))})")
    if "power_w" not in d:
        raise EnergyError(f"{where}: power_w missing")
    power = _num(d["power_w"], f"{where}.power_w", hi=MAX_POWER_W)
    if name == "L0":
        return State(name, power)
    entry = _num(d.get("entry_us"), f"{where}.entry_us", none=True)
    exit_ = _num(d.get("exit_us"), f"{where}.exit_us", none=True)
    if (entry is None) != (exit_ is None):
        raise EnergyError(f"{where}: entry_us and exit_us are both numbers (used) or both null (never entered)")
    runway = None
    if name in ("L0s", "L1"):
        runway = _num(d.get("runway_us"), f"{where}.runway_us", none=True)
        if entry is not None and runway is None:
            raise EnergyError(f"{where}: runway_us missing (the idleness before a reactive policy enters it)")
    hs = _num(d.get("handshake_us", 0.0), f"{where}.handshake_us") if name == "L1" else 0.0
    return State(name, power, entry, exit_, runway, hs)


def from_json(doc: Any, source: str) -> PowerModel:
    if not isinstance(doc, dict):
        raise EnergyError(f"{source}: a power model is a JSON object, got {show_value(doc)}")
    if doc.get("version") != 1:
        raise EnergyError(f"{source}: unknown power model version {show_value(doc.get('version'))} (expected 1)")
    extra = sorted(set(doc) - {"version", "about", "classes"})
    if extra:
        raise EnergyError(f"{source}: unknown field {extra[0]!r} (known: version, about, classes)")
    cl = doc.get("classes")
    if not isinstance(cl, dict):
        raise EnergyError(f"{source}: classes must be an object of port classes ({', '.join(CLASSES)})")
    for k in cl:
        if k not in CLASSES:
            raise EnergyError(f"{source}: unknown port class {str(k)[:40]!r} (known: {', '.join(CLASSES)})")
    classes = {}
    for c in CLASSES:
        if c not in cl:
            raise EnergyError(f"{source}: port class {c!r} missing")
        states = cl[c]
        if not isinstance(states, dict):
            raise EnergyError(f"{source}: {c} must be an object of states ({', '.join(STATES)})")
        for s in states:
            if s not in STATES:
                raise EnergyError(f"{source}: {c}: unknown state {str(s)[:40]!r} (known: {', '.join(STATES)})")
        if "L0" not in states:
            raise EnergyError(f"{source}: {c}: state 'L0' missing")
        parsed = {s: _state(s, states[s], f"{source}: {c}.{s}") for s in STATES if s in states}
        for s in STATES:
            parsed.setdefault(s, State(s, parsed["L0"].power_w))  # absent: never entered
        for s in SLEEP_STATES:
            if parsed[s].power_w > parsed["L0"].power_w:
                raise EnergyError(f"{source}: {c}.{s}: power_w {parsed[s].power_w:g} is above L0's "
                                  f"({parsed['L0'].power_w:g}): a sleep state draws less")
        classes[c] = PortClass(c, parsed)
    return PowerModel(source, classes)


def default_path() -> Path:
    return Path(__file__).resolve().parents[3] / "topologies" / "energy" / "lpi.json"


def load(path: str | Path | None = None) -> PowerModel:
    """The model in ``path`` (default: the shipped one, ``topologies/energy/lpi.json``)."""
    p = default_path() if path is None else Path(path)
    source = "topologies/energy/lpi.json" if path is None else str(p)
    return from_json(read_json(p, EnergyError), source)
