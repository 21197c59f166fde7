"""A run's activity per port and slot (frames and bytes out), and where it comes from.

The accounting (account.py) reads per port, per slot, the frames and bytes the port sent, and
the schedule: what a switch's per-port counters sampled at slot boundaries would give.  The
committed results hold no such counters, so :func:`from_fct_run` **reconstructs** them from an
FCT run's flow records (docs/energy.md, "Where the activity comes from"):

* every finished flow's wire bytes (size plus a header per MSS segment) are spread evenly over
  its life, [start, start + FCT] (schedule time: wall / dilation);
* a **low-latency** flow rides, in each slice of its life, the low-latency path the schedule's
  routes give its racks (schedule/routes.py, the run's epsilon), and its ACKs (one 66-byte frame
  per two segments) the reverse path; a **bulk** flow (RotorLB) rides the direct circuits of its
  rack pair, its bytes split evenly over the days of those circuits in its life (RotorLB's
  two-hop relays are not reconstructed: the run does not record them);
* the host links carry a flow's bytes in the same time as the fabric: the sender's link up, the
  receiver's down.

The schedule is the one the FCT experiment runs (Opera, 8 racks x 4 rotors, 1 ms slots, 100 us
nights: experiments/fct/run.py) unless the run records its own.  The schedule's phase at the
flows' time 0 is not recorded; slot 0 is taken to start there.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import schedule as S
from ..inputs import MALFORMED, MAX_TIME_US, check_work, read_json
from ..p4.constants import TCLASS_LOW_LATENCY
from ..schedule import routes as R
from ..schedule.windows import SliceClock
from .model import EnergyError

ACK_BYTES = 66          # a TCP ACK with timestamps on the wire
SEGMENTS_PER_ACK = 2    # delayed ACKs
FABRIC_MODES = ("opera", "rotornet")  # modes whose flows crossed the rotor fabric
# Work limits (inputs.check_work): the committed runs walk ~3e5 slots of flow life and hold ~2e6
# frames (Data Mining 1 %: 2 h of arrivals); ten times more is a minute or two of accounting.
MAX_SLOTS_WALKED = 2 * 10 ** 7
MAX_FRAMES = 3 * 10 ** 7


@dataclasses.dataclass
class Port:
    """One transmitter: a channel (0 up, 1 down) of a link, its class, the rotor it faces (its
    slots and nights) or None (a host link: slots of the schedule's length from time 0)."""
    link: str
    channel: int
    cls: str
    rotor: int | None
    # slot -> [frames, bytes, bytes of low-latency frames]: bulk is granted per slot (RotorLB's
    # OFFER/ACCEPT), so its amount is known before the slot; a low-latency frame's time is not
    bins: dict[int, list[float]] = dataclasses.field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))

    def add(self, k: int, frames: float, nbytes: float, low_latency: bool = False) -> None:
        b = self.bins[k]
        b[0] += frames
        b[1] += nbytes
        if low_latency:
            b[2] += nbytes


@dataclasses.dataclass
class Activity:
    """Per-port per-slot counts over [0, horizon_us) of schedule time."""
    schedule: S.Schedule
    horizon_us: float
    rate_bps: dict[str, float]       # each port class's link rate (schedule time)
    ports: dict[tuple[str, int], Port]
    source: str                      # "reconstructed from ..." or "measured ..."
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)

    def port(self, link: str, channel: int, cls: str, rotor: int | None) -> Port:
        key = (link, channel)
        if key not in self.ports:
            self.ports[key] = Port(link, channel, cls, rotor)
        return self.ports[key]

    def links(self) -> dict[str, list[Port]]:
        out: dict[str, list[Port]] = defaultdict(list)
        for (link, ch), p in sorted(self.ports.items()):
            out[link].append(p)
        return out


def fabric_ports(act: Activity, hosts: dict[str, int]) -> None:
    """Every port of the fabric, idle or not (an idle port draws power too)."""
    s = act.schedule
    for h, rack in hosts.items():
        for ch in (0, 1):
            act.port(f"{h}~tor{rack}", ch, "host-link", None)
    for rack in range(s.racks):
        for r, rot in enumerate(s.rotors):
            act.port(f"tor{rack}~{rot.name}", 0, "tor-uplink", r)
            act.port(f"tor{rack}~{rot.name}", 1, "rotor-port", r)


class _Spreader:
    """Adds a flow's bytes to the ports it crossed, per slot."""

    def __init__(self, act: Activity, hosts: dict[str, int], epsilon_us: float):
        self.act, self.hosts = act, hosts
        s = act.schedule
        self.s = s
        self.clock = SliceClock(s)
        self.routes = R.compute(s, epsilon_us=epsilon_us)
        self.unrouted_bytes = 0.0

    def _slot(self, r: int | None, t: float) -> int:
        off = 0 if r is None else self.s.rotors[r].offset_us
        return int((t - off) // self.s.slot_us)

    def host_links(self, src: str, dst: str, t: float, frames: float, nbytes: float, ll: bool) -> None:
        k = self._slot(None, t)
        self.act.port(f"{src}~tor{self.hosts[src]}", 0, "host-link", None).add(k, frames, nbytes, ll)
        self.act.port(f"{dst}~tor{self.hosts[dst]}", 1, "host-link", None).add(k, frames, nbytes, ll)

    def hop(self, a: int, b: int, r: int, t: float, frames: float, nbytes: float, ll: bool) -> None:
        name = self.s.rotors[r].name
        k = self._slot(r, t)
        self.act.port(f"tor{a}~{name}", 0, "tor-uplink", r).add(k, frames, nbytes, ll)
        self.act.port(f"tor{b}~{name}", 1, "rotor-port", r).add(k, frames, nbytes, ll)

    def low_latency(self, a: int, b: int, t0: float, t1: float, frames: float, nbytes: float) -> None:
        """Spread evenly over [t0, t1], on each slice's low-latency path from a to b."""
        pieces = [(t0, t0, 1.0)] if t1 <= t0 else []
        t = t0
        while t < t1:  # one piece per slice instance
            end = min(self.clock.instance_end(t), t1)
            if end <= t:  # float rounding at a slice edge
                end = min(t + 1e-3, t1)
            pieces.append((t, end, (end - t) / (t1 - t0)))
            t = end
        for u, v, f in pieces:
            mid = (u + v) / 2
            hops = self.routes[self.clock.index(mid)].hops
            cur, seen = a, 0
            while cur != b and seen < self.s.racks:
                h = hops.get((cur, b, TCLASS_LOW_LATENCY))
                if h is None:
                    self.unrouted_bytes += nbytes * f
                    break
                self.hop(cur, h.next_rack, h.rotor, mid, frames * f, nbytes * f, True)
                cur, seen = h.next_rack, seen + 1

    def direct_days(self, a: int, b: int, t0: float, t1: float) -> list[tuple[int, float]]:
        """(rotor, day midpoint) of every day in [t0, t1] whose circuit goes a -> b; at least the
        first one after t0."""
        s, out = self.s, []
        for r, rot in enumerate(s.rotors):
            k = self._slot(r, t0)
            while True:
                start = rot.offset_us + k * s.slot_us
                if start > t1 and (out or start > t0 + 2 * s.hyperperiod_us):
                    break
                m = rot.matchings[k % len(rot.matchings)]
                mid = start + (s.reconfig_us + s.slot_us) / 2
                if m[a] == b and start + s.slot_us > t0:
                    out.append((r, mid))
                    if start > t1:
                        break
                k += 1
        if not out:
            return []
        inside = [x for x in out if x[1] <= t1]
        return inside or [min(out, key=lambda x: x[1])]

    def bulk(self, a: int, b: int, t0: float, t1: float, frames: float, nbytes: float) -> list[float]:
        days = self.direct_days(a, b, t0, t1)
        if not days:
            self.unrouted_bytes += nbytes
            return []
        for r, mid in days:
            self.hop(a, b, r, mid, frames / len(days), nbytes / len(days), False)
        return [mid for _, mid in days]


def _schedule(doc: dict) -> S.Schedule:
    if "schedule" in doc:
        try:
            return S.from_json(doc["schedule"])
        except S.ScheduleError as ex:
            raise EnergyError(f"schedule: {ex}") from None
    return S.generate_opera(8, 4, 1000, 100)  # what `experiment fct` runs (experiments/fct/run.py)


def from_fct_run(run: Path, mode: str) -> Activity:
    """Reconstruct ``mode``'s per-port per-slot activity from ``run``/fct.json and flows.json."""
    doc = read_json(run / "fct.json", EnergyError, nonfinite=True)
    fl = read_json(run / "flows.json", EnergyError)
    try:
        return _reconstruct(doc, fl, mode, str(run))
    except MALFORMED as ex:
        raise EnergyError(f"{run}: not an fct run's results ({type(ex).__name__}: {str(ex)[:60]})") from None


def _reconstruct(doc: dict, fl: dict, mode: str, where: str) -> Activity:
    s = _schedule(doc)
    dil = float(doc["dilation"])
    if not (math.isfinite(dil) and dil > 0):
        raise EnergyError(f"{where}/fct.json: dilation must be > 0, got {dil!r}")
    meta = fl["meta"]
    mss, hdr = int(meta["mss"]), int(meta["header_bytes"])
    if mss < 1 or hdr < 0:
        raise EnergyError(f"{where}/flows.json: mss must be >= 1 and header_bytes >= 0")
    hosts = {str(h): int(v["rack"]) for h, v in meta["hosts"].items()}
    if any(not 0 <= r < s.racks for r in hosts.values()):
        raise EnergyError(f"{where}/flows.json: a host's rack is not in the schedule's {s.racks} racks")
    rate = float(meta["access_bps"]) * dil
    if not (math.isfinite(rate) and rate > 0):
        raise EnergyError(f"{where}/flows.json: access_bps must be > 0")
    m = doc["modes"][mode]
    flows = {int(f["id"]): f for f in fl["flows"]}
    _check_work(m["per_flow"], flows, mss, dil, s, where)
    # Every link at the access rate: a host's link, and a circuit, carry what one host sends.
    act = Activity(s, 0.0, {"host-link": rate, "tor-uplink": rate, "rotor-port": rate}, {},
                   f"reconstructed from {where} ({mode}): flow records and the schedule")
    fabric_ports(act, hosts)
    sp = _Spreader(act, hosts, float(doc.get("epsilon_us", 0.0)))
    horizon, unfinished, counted = 0.0, 0, 0
    for fid, cls, _bucket, fct, size, *_ in m["per_flow"]:
        f = flows[int(fid)]
        if fct is None or not math.isfinite(float(fct)):
            unfinished += 1
            continue
        size = float(size)
        if not (0 < size and float(fct) >= 0 and float(f["start"]) >= 0):
            raise EnergyError(f"{where}: flow {fid}: a size > 0, a start >= 0 and an FCT >= 0, got "
                              f"{size!r}, {f['start']!r}, {fct!r}")
        src, dst = str(f["src"]), str(f["dst"])
        a, b = hosts[src], hosts[dst]
        t0 = float(f["start"]) * 1e6 / dil
        t1 = t0 + float(fct) * 1e6 / dil
        horizon = max(horizon, t1)
        segs = math.ceil(size / mss)
        wire = size + segs * hdr
        counted += 1
        if cls == "low-latency":
            _spread_hosts(sp, src, dst, t0, t1, segs, wire, True)
            if a != b:
                sp.low_latency(a, b, t0, t1, segs, wire)
            acks = math.ceil(segs / SEGMENTS_PER_ACK)
            _spread_hosts(sp, dst, src, t0, t1, acks, acks * ACK_BYTES, True)
            if a != b:
                sp.low_latency(b, a, t0, t1, acks, acks * ACK_BYTES)
        elif a != b:
            mids = sp.bulk(a, b, t0, t1, segs, wire)
            for t in mids:
                sp.host_links(src, dst, t, segs / len(mids), wire / len(mids), False)
        else:
            _spread_hosts(sp, src, dst, t0, t1, segs, wire, False)
    act.horizon_us = math.ceil(horizon / s.slot_us + 1) * s.slot_us
    act.notes = {"flows": counted, "unfinished": unfinished, "unrouted_bytes": round(sp.unrouted_bytes),
                 "dilation": dil, "mode": mode, "rate_bps": rate,
                 "alone_floor_us": _floor_us(doc, mode, dil)}
    return act


def _check_work(per_flow: list, flows: dict, mss: int, dil: float, s: S.Schedule, where: str) -> None:
    """Refuse before the loops a run whose flows would take too long to spread or place: the
    slots their lives span (each is walked) and the frames they hold (each is placed)."""
    slots = frames = 0.0
    for fid, _cls, _bucket, fct, size, *_ in per_flow:
        if fct is None:
            continue
        f = flows[int(fid)]
        end = (float(f["start"]) + float(fct)) * 1e6 / dil
        if not math.isfinite(end) or end > MAX_TIME_US:
            raise EnergyError(f"{where}: flow {fid} ends at {end:.3g} us of schedule time (at most {MAX_TIME_US:g})")
        slots += float(fct) * 1e6 / dil / s.slot_us + 1
        frames += float(size) / mss
    check_work(slots, MAX_SLOTS_WALKED, f"{where}: the flows' lives in slots", EnergyError)
    check_work(frames, MAX_FRAMES, f"{where}: the flows' frames", EnergyError)


def _spread_hosts(sp: _Spreader, src: str, dst: str, t0: float, t1: float, frames: float, nbytes: float,
                  ll: bool) -> None:
    """Host links: evenly over [t0, t1], per schedule-length bin."""
    slot = sp.s.slot_us
    if t1 <= t0:
        sp.host_links(src, dst, t0, frames, nbytes, ll)
        return
    k = int(t0 // slot)
    while k * slot < t1:
        a, b = max(t0, k * slot), min(t1, (k + 1) * slot)
        f = (b - a) / (t1 - t0)
        if f > 0:
            sp.host_links(src, dst, a, frames * f, nbytes * f, ll)
        k += 1


def _floor_us(doc: dict, mode: str, dil: float) -> float | None:
    """The run's one-packet FCT alone (its floor), schedule us: what an added delay is set against."""
    v = (doc["modes"][mode].get("alone_envelope") or doc.get("alone_envelope") or {}).get("floor_s")
    return None if v is None else float(v) * 1e6 / dil


def modes(run: Path) -> list[str]:
    """The fabric modes an FCT run holds."""
    doc = read_json(run / "fct.json", EnergyError, nonfinite=True)
    if not isinstance(doc, dict) or not isinstance(doc.get("modes"), dict):
        raise EnergyError(f"{run}/fct.json: no modes: not an fct run's results")
    return [m for m in FABRIC_MODES if m in doc["modes"]]
