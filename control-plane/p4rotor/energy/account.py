"""The four policies over a run's activity: time in each state, energy, savings and added delay,
per port class (docs/energy.md).

Per-slot counters say how many frames and bytes a port sent in a slot, not when.  The frames are
placed evenly over the part of the slot the port can send in (a fabric port: the day; a host
link: the whole slot), each as long as its share of the bytes at the link rate.  Evenly spaced
frames are the reading least kind to the reactive policies (the most, and shortest, gaps); a
port's busy time, and so its utilisation, does not depend on it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

import numpy as np

from . import fast as F
from .activity import Activity, Port
from .model import CLASSES, SLEEP_STATES, PortClass, PowerModel, State
from .states import Dark, Outcome, predictive

POLICIES = ("always-on", "tos", "trs", "predictive")


def window(act: Activity, p: Port, k: int) -> tuple[float, float]:
    """Where in slot k port ``p`` can send: a fabric port's day, a host link's whole slot."""
    s = act.schedule
    if p.rotor is None:
        return k * s.slot_us, (k + 1) * s.slot_us
    start = s.rotors[p.rotor].offset_us + k * s.slot_us
    return start + s.reconfig_us, start + s.slot_us


def dark(act: Activity, p: Port) -> Dark | None:
    s = act.schedule
    if p.rotor is None or s.reconfig_us == 0:
        return None
    return Dark(s.rotors[p.rotor].offset_us, s.slot_us, s.reconfig_us)


def frames(act: Activity, p: Port) -> tuple[np.ndarray, np.ndarray]:
    """(arrival, duration) us of the port's frames as two arrays, evenly spaced in each slot's
    window, slot by slot."""
    ks = sorted(k for k, b in p.bins.items() if b[1] > 0)
    if not ks:
        return np.zeros(0), np.zeros(0)
    k = np.array(ks, dtype=np.float64)
    n_f = np.array([p.bins[x][0] for x in ks], dtype=np.float64)
    n_b = np.array([p.bins[x][1] for x in ks], dtype=np.float64)
    a, b = window(act, p, k)  # every slot's window at once (k an array)
    keep = ~((a >= act.horizon_us) | (b <= 0))
    a, b, n_f, n_b = a[keep], b[keep], n_f[keep], n_b[keep]
    n = np.maximum(1.0, np.rint(n_f))
    d = n_b * (8e6 / act.rate_bps[p.cls]) / n
    step = np.maximum((b - a) / n, d)  # overloaded: back to back, past the window
    counts = n.astype(np.int64)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    i = (np.arange(int(counts.sum()), dtype=np.int64) - first).astype(np.float64)
    return np.repeat(a, counts) + i * np.repeat(step, counts), np.repeat(d, counts)


def busy(act: Activity, p: Port) -> list[tuple[float, float]]:
    """What the predictive policy keeps awake, per slot the port sends in: the whole window if it
    carries a low-latency frame (its time is not known ahead); else, bulk only, the slot's bytes
    sent back to back from the window's start (RotorLB grants them at OFFER time), after which
    the rest of the window is known empty."""
    out = []
    us_per_byte = 8e6 / act.rate_bps[p.cls]
    for k in sorted(p.bins):
        _, n_b, ll_b = p.bins[k]
        if n_b <= 0:
            continue
        a, b = window(act, p, k)
        out.append((a, b) if ll_b > 0 else (a, a + n_b * us_per_byte))
    return out


def _joint(states: list[State]) -> State:
    """The L1 of a link whose two ends differ: the slower of each."""
    return dataclasses.replace(states[0], entry_us=max(s.entry_us for s in states),
                               exit_us=max(s.exit_us for s in states),
                               runway_us=max(s.runway_us for s in states),
                               handshake_us=max(s.handshake_us for s in states))


@dataclasses.dataclass
class Tally:
    """A port class's sum under one policy."""
    ports: int = 0
    time_us: dict[str, float] = dataclasses.field(default_factory=lambda: defaultdict(float))
    energy_j: float = 0.0
    frames: int = 0
    delayed: int = 0
    added_delay_us: float = 0.0
    max_delay_us: float = 0.0
    wakes: int = 0

    def add(self, o: Outcome, cls: PortClass) -> None:
        self.ports += 1
        for s, t in o.time_us.items():
            self.time_us[s] += t
        self.energy_j += o.energy(cls)
        self.frames += o.frames
        self.delayed += o.delayed
        self.added_delay_us += o.added_delay_us
        self.max_delay_us = max(self.max_delay_us, o.max_delay_us)
        self.wakes += o.wakes


def account(act: Activity, model: PowerModel) -> dict[str, Any]:
    """Every policy's tally per class, and the summary (savings, delay) as JSON-ready data."""
    model.check_slot(act.schedule.slot_us)
    T = act.horizon_us
    tallies = {pol: {c: Tally() for c in CLASSES} for pol in POLICIES}
    busy_us = defaultdict(float)
    host_frames = 0
    for link, ports in act.links().items():
        classes = [model.classes[p.cls] for p in ports]
        chans = [frames(act, p) for p in ports]
        dk = dark(act, ports[0])
        for p, (_, d) in zip(ports, chans):
            busy_us[p.cls] += float(d.sum())
            if p.cls == "host-link" and p.channel == 0:
                host_frames += len(d)
        # the link's frames by arrival (then duration, then channel), both directions together
        a = np.concatenate([fa for fa, _ in chans])
        d = np.concatenate([fd for _, fd in chans])
        ch = np.concatenate([np.full(len(fa), c, dtype=np.intc) for c, (fa, _) in enumerate(chans)])
        order = np.lexsort((ch, d, a))
        a, d, ch = a[order], d[order], ch[order]
        outs = {"always-on": F.reactive(a, d, ch, len(ports), T, None, dk)}
        tos = []
        for c, (fa, fd) in enumerate(chans):
            st = classes[c].states["L0s"]
            tos += F.reactive(fa, fd, np.zeros(len(fa), dtype=np.intc), 1, T, st if st.usable else None, dk)
        outs["tos"] = tos
        l1 = [c.states["L1"] for c in classes]
        outs["trs"] = F.reactive(a, d, ch, len(ports), T, _joint(l1) if all(s.usable for s in l1) else None, dk)
        outs["predictive"] = predictive([busy(act, p) for p in ports], classes, T)
        for o, (fa, _) in zip(outs["predictive"], chans):
            o.frames = len(fa)  # none waits: it wakes before each day it sends in
        for pol, os_ in outs.items():
            for p, c, o in zip(ports, classes, os_):
                tallies[pol][p.cls].add(o, c)
    return summarize(act, tallies, busy_us, host_frames)


def summarize(act: Activity, tallies: dict[str, dict[str, Tally]], busy_us: dict[str, float],
              host_frames: int) -> dict[str, Any]:
    T = act.horizon_us
    on = tallies["always-on"]
    e_on = sum(t.energy_j for t in on.values())
    out: dict[str, Any] = {
        "source": act.source, "horizon_us": T, "rate_bps": act.rate_bps,
        "schedule": {"kind": act.schedule.kind, "racks": act.schedule.racks, "rotors": len(act.schedule.rotors),
                     "slot_us": act.schedule.slot_us, "reconfig_us": act.schedule.reconfig_us},
        "notes": act.notes,
        "utilisation": {c: busy_us[c] / (T * on[c].ports) if on[c].ports else None for c in CLASSES},
        "host_frames": host_frames,
        "policies": {}}
    floor = act.notes.get("alone_floor_us")
    for pol, per in tallies.items():
        e = sum(t.energy_j for t in per.values())
        added = sum(t.added_delay_us for t in per.values())
        fr = sum(t.frames for t in per.values())
        path_delay = added / host_frames if host_frames else 0.0  # summed over a frame's hops
        out["policies"][pol] = {
            "energy_j": e,
            "saving": 1 - e / e_on if e_on else 0.0,
            "delay": {"frames_delayed": sum(t.delayed for t in per.values()),
                      "frame_hops": fr,
                      "mean_per_frame_hop_us": added / fr if fr else 0.0,
                      "mean_per_frame_us": path_delay,
                      "vs_alone_floor": path_delay / floor if floor else None,
                      "max_us": max(t.max_delay_us for t in per.values()),
                      "wakes": sum(t.wakes for t in per.values())},
            "classes": {c: {"ports": t.ports, "energy_j": t.energy_j,
                            "saving": 1 - t.energy_j / on[c].energy_j if on[c].energy_j else 0.0,
                            "state_share": {s: t.time_us.get(s, 0.0) / (T * t.ports) if t.ports else 0.0
                                            for s in ("L0", *SLEEP_STATES)}}
                        for c, t in per.items()}}
    return out
