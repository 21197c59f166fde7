"""Is a run stable?  Two questions, answered apart (issue #14: "past RotorLB's capacity the queue
climbs, and the run says 'unstable'").

A 2000-flow run cannot answer it from its own pending-bytes curve when the sizes have a heavy
tail: at Data Mining 10 % the bytes pending rose from 0 to 228 MB at 520 s (one host was sent
53.8 + 51.7 MB within 45 s) and a least-squares trend over the arrivals called the run unstable,
though every flow finished and the queue emptied 228 s after the last arrival.  So:

1. **Capacity** (a property of the load): the RotorLB model (``rotorlb/model.py``: the agents'
   own algorithm, whole slots, no protocol delay) runs the run's bulk flows ``REPEATS`` times back
   to back, the racks relabelled in every copy after the first.  Below capacity every copy's
   mean queue is the same; past it, it grows by the excess each time.  Past capacity when it
   grows by more than ``GROWTH_MAX`` of one copy's bytes per copy.  (2000 Data Mining flows,
   seed 1: 10 % load grows 0.0 % per copy, 25 % 7.7 %, 40 % 27 %.)
2. **Keeping up** (a property of the fabric): the run's measured pending bytes against the
   model's for the same flows, over the arrivals.  The fabric keeps up when its mean is at most
   ``TRACK_MAX`` x the model's plus ``slack_bytes`` (what the agents' protocol holds on top of
   the model: frames in flight, a relay's wait for its second hop).  Every 2000-flow run so far:
   0.96-1.20x.

The verdict is the measurement's (:func:`measured_growth`): **unstable when the measured pending
bytes rise, over the arrivals after their first tenth, by more than** ``MEASURED_GROWTH_MAX`` **of
the bulk bytes that arrived meanwhile** (the least-squares trend's rise, so one late large flow
moves it by its share of the window only).  Questions 1 and 2 -- the model's -- are shown beside
it, not instead of it; where they disagree the line says so.

Pure functions on values: the experiment (``experiments/fct``) says which host is in which
rack and plane and how many bytes a slot unit is.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Iterable, Mapping, Sequence

from ..rotorlb.model import Backlog, replay
from ..schedule import Schedule

REPEATS = 6        # repetitions of the flow list the capacity check runs
GROWTH_MAX = 0.01  # past capacity: a copy's mean queue grows by more than this share of its bytes
TRACK_MAX = 1.5    # keeping up: measured mean pending <= this x the model's (+ slack)
MEASURED_GROWTH_MAX = 0.05  # unstable: the measured queue rises by more than this share of the bulk bytes arrived
FILL_SHARE = 0.1   # the first tenth of the arrivals fills an empty fabric: not judged


@dataclasses.dataclass(frozen=True)
class Plane:
    """Where a bulk flow's bytes go in the model: ``where[host] = (rack, plane)`` (the agents of
    the n-th host of each rack form plane n, fabric/agents.py); a flow of ``size`` bytes is
    ``frames(size) / frames_per_unit`` slot units, a unit being what one circuit carries in one
    slot (``frames_per_unit`` frames of ``payload`` bytes)."""

    where: Mapping[str, tuple[int, int]]
    payload: int
    frames_per_unit: int
    slot_s: float

    def frames(self, size: int) -> int:
        return max(1, math.ceil(size / self.payload))

    @property
    def unit_bytes(self) -> int:
        return self.frames_per_unit * self.payload

    def rack_shared(self) -> "Plane":
        """The same fabric with every rack's hosts sharing its circuits (one RotorLB per rack, as
        a ToR's queues are shared) instead of a plane per host: one plane, whose unit is a whole
        circuit's slot, all its hosts' planes' worth (docs/notes/bulk-bound.md)."""
        planes = len({p for _, p in self.where.values()})
        return dataclasses.replace(self, where={h: (rack, 0) for h, (rack, _) in self.where.items()},
                                   frames_per_unit=self.frames_per_unit * planes)


def arrivals(flows: Iterable, cutoff: float, plane: Plane, shift_s: float = 0.0) -> dict[int, list]:
    """Bulk flows (``size >= cutoff``) as the model's arrivals per plane: (slot, src rack, dst
    rack, units)."""
    out: dict[int, list] = {}
    for f in flows:
        if f.size < cutoff:
            continue
        (sr, p), (dr, _) = plane.where[f.src], plane.where[f.dst]
        out.setdefault(p, []).append((int((f.start + shift_s) / plane.slot_s), sr, dr,
                                      plane.frames(f.size) / plane.frames_per_unit))
    return out


def model_curve(s: Schedule, per_plane: Mapping[int, list]) -> tuple[dict[int, float], dict[int, Backlog]]:
    """The model's queue summed over the planes: {slot: units queued at its end} (absent slots:
    0), and each plane's :class:`Backlog`."""
    runs = {p: replay(s, ev) for p, ev in sorted(per_plane.items())}
    tot: dict[int, float] = {}
    for b in runs.values():
        for k, v in b.pending:
            tot[k] = tot.get(k, 0.0) + v
    return tot, runs


def _span(flows: Sequence) -> float:
    """The list's length for back-to-back repetition: the last start, plus one mean gap so the
    seam looks like the rest of the list."""
    starts = sorted(f.start for f in flows)
    if len(starts) < 2:
        return max(starts[-1], 1.0) if starts else 1.0
    return starts[-1] - starts[0] + (starts[-1] - starts[0]) / (len(starts) - 1) or 1.0


def capacity(s: Schedule, flows: Sequence, cutoff: float, plane: Plane, repeats: int = REPEATS) -> dict:
    """Question 1: the model on ``repeats`` back-to-back copies of the bulk flows.  Every copy
    after the first relabels the racks by a seeded random permutation: the sizes, times and
    planes stay, but a pair that two large flows happened to meet in the list is not met again
    every copy (150 flows repeated as they are made one hot pair a standing overload).
    ``growth``: how much the copies' mean queue grows per copy, from the second to the last (the
    first fills an empty fabric), as a share of one copy's bytes."""
    span = _span(flows)
    first = min((f.start for f in flows), default=0.0)
    per_plane: dict[int, list] = {}
    for r in range(repeats):
        perm = list(range(s.racks))
        if r:
            random.Random(r).shuffle(perm)
        for p, ev in arrivals(flows, cutoff, plane, shift_s=r * span - first).items():
            per_plane.setdefault(p, []).extend((k, perm[a], perm[b], v) for k, a, b, v in ev)
    if not per_plane:
        return {"bulk_flows": 0, "stable": True, "why": "no bulk flows"}
    tot, runs = model_curve(s, per_plane)
    cut = [int(r * span / plane.slot_s) for r in range(repeats + 1)]
    means = [sum(v for k, v in tot.items() if cut[r] <= k < cut[r + 1]) / max(1, cut[r + 1] - cut[r])
             for r in range(repeats)]
    per_rep = sum(b.arrived for b in runs.values()) / repeats
    base = 1 if repeats > 2 else 0
    growth = ((means[-1] - means[base]) / (repeats - 1 - base) / per_rep
              if repeats > 1 and per_rep > 0 else 0.0)
    growth = growth if abs(growth) >= 5e-4 else 0.0  # "-0.0 %" is float dust, not a falling queue
    stable = growth <= GROWTH_MAX
    return {"bulk_flows": sum(1 for f in flows if f.size >= cutoff), "repeats": repeats,
            "mean_bytes": [round(v * plane.unit_bytes) for v in means],
            "per_repeat_bytes": round(per_rep * plane.unit_bytes), "growth": growth,
            "growth_max": GROWTH_MAX, "stable": stable,
            "why": (f"the model's queue grows {growth:.1%} of the arrivals per repetition "
                    f"of the flows, {repeats} with racks relabelled; past capacity above {GROWTH_MAX:.0%}")}


def tracking(measured: Sequence[tuple[float, float]], s: Schedule, flows: Sequence, cutoff: float,
             plane: Plane, arrivals_s: float, slack_bytes: float) -> dict:
    """Question 2: the measured pending bytes (wall s from the first arrival, bytes) against the
    model's for the same flows, both averaged over the arrivals."""
    per_plane = arrivals(flows, cutoff, plane)
    tot, runs = model_curve(s, per_plane)
    last = int(arrivals_s / plane.slot_s)
    model = [(k * plane.slot_s, tot.get(k, 0.0) * plane.unit_bytes) for k in range(last + 1)]
    meas = [b for t, b in measured if 0 <= t <= arrivals_s]
    m_mean = sum(b for _, b in model) / len(model) if model else 0.0
    x_mean = sum(meas) / len(meas) if meas else 0.0
    empty = [b.empty_at for b in runs.values() if b.empty_at is not None]
    keeps_up = x_mean <= TRACK_MAX * m_mean + slack_bytes
    return {"measured_mean_bytes": x_mean, "model_mean_bytes": m_mean,
            "ratio": x_mean / m_mean if m_mean > 0 else None, "track_max": TRACK_MAX,
            "slack_bytes": slack_bytes, "keeps_up": keeps_up,
            "model_peak_bytes": max((b for _, b in model), default=0.0),
            "model_empty_s": (max(empty) + 1) * plane.slot_s if empty else None,
            # the model's curve for the plot, thinned to at most ~2000 points
            "model_curve": [(round(t, 3), round(b)) for t, b in
                            [(k * plane.slot_s, v * plane.unit_bytes) for k, v in sorted(tot.items())]
                            [::max(1, len(tot) // 2000)]],
            "why": (f"measured mean pending {x_mean / 1e6:.2f} MB, the model's {m_mean / 1e6:.2f} MB "
                    f"(keeps up: <= {TRACK_MAX:g}x + {slack_bytes / 1e6:.2f} MB)")}


def trend(samples: Iterable[tuple[float, float]]) -> dict:
    """Pending bytes over time (s, bytes): the least-squares trend.  ``rising``: the trend over
    the samples exceeds their mean level (and one byte)."""
    pts = sorted(samples)
    if len(pts) < 3:
        return {"samples": len(pts), "slope_bytes_per_s": None, "rising": False}
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mb = sum(b for _, b in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    slope = sum((t - mt) * (b - mb) for t, b in pts) / var if var else 0.0
    rise = slope * (pts[-1][0] - pts[0][0])
    return {"samples": n, "mean_bytes": mb, "slope_bytes_per_s": slope, "rise_bytes": rise,
            "rising": rise > max(mb, 1.0) and rise > 0}


def measured_growth(measured: Sequence[tuple[float, float]], flows: Sequence, cutoff: float,
                    arrivals_s: float) -> dict:
    """The measured verdict: the least-squares rise of the pending bytes (wall s from the first
    arrival, bytes) over the arrivals after their first ``FILL_SHARE``, as a share of the bulk
    bytes that arrived in that window.  ``stable`` None: nothing to judge (no samples or bytes)."""
    lo = FILL_SHARE * arrivals_s
    tr = trend([(t, b) for t, b in measured if lo <= t <= arrivals_s])
    arrived = sum(f.size for f in flows if f.size >= cutoff and lo <= f.start <= arrivals_s)
    if tr.get("slope_bytes_per_s") is None or arrived <= 0:
        return {"stable": None, "arrived_bytes": arrived, "samples": tr["samples"], "bound": MEASURED_GROWTH_MAX,
                "why": "too few pending samples or bulk bytes to judge the measured queue"}
    share = tr["rise_bytes"] / arrived
    return {"stable": share <= MEASURED_GROWTH_MAX, "rise_bytes": tr["rise_bytes"], "arrived_bytes": arrived,
            "share": share, "bound": MEASURED_GROWTH_MAX, "samples": tr["samples"],
            "why": (f"the measured queue rose {share:.1%} of the {arrived / 1e6:.1f} MB of bulk that arrived "
                    f"after the first {FILL_SHARE:.0%} of the arrivals (unstable above {MEASURED_GROWTH_MAX:.0%})")}


def judge(measured: Sequence[tuple[float, float]], s: Schedule, flows: Sequence, cutoff: float, plane: Plane,
          arrivals_s: float, slack_bytes: float, repeats: int = REPEATS) -> dict:
    """The measured verdict and, beside it, the model's two questions: ``stable``, and ``why`` in
    one line."""
    over = [(t, b) for t, b in measured if t <= arrivals_s]
    tr = trend(over)
    if not any(f.size >= cutoff for f in flows):
        return {"stable": True, "why": "no bulk flows: nothing queued at the agents", "trend": tr,
                **{k: tr.get(k) for k in ("mean_bytes", "slope_bytes_per_s", "rise_bytes")}}
    meas = measured_growth(measured, flows, cutoff, arrivals_s)
    cap = capacity(s, flows, cutoff, plane, repeats)
    trk = tracking(measured, s, flows, cutoff, plane, arrivals_s, slack_bytes)
    model_stable = cap["stable"] and trk["keeps_up"]
    model = ("past RotorLB's capacity: " + cap["why"] if not cap["stable"] else
             "the fabric falls behind RotorLB: " + trk["why"] if not trk["keeps_up"] else
             "within RotorLB's capacity: " + cap["why"] + "; the fabric keeps up: " + trk["why"])
    # The measurement decides; with nothing measured to judge, the model's verdict stands and says so.
    stable = meas["stable"] if meas["stable"] is not None else model_stable
    head = ("measured " + ("stable" if meas["stable"] else "UNSTABLE") + ": " + meas["why"]
            if meas["stable"] is not None else "model only (" + meas["why"] + ")")
    differ = meas["stable"] is not None and meas["stable"] != model_stable
    why = head + f"; model{' (disagrees)' if differ else ''}: " + model
    return {"stable": stable, "why": why, "measured": meas, "model_stable": model_stable,
            "capacity": cap, "tracking": trk, "trend": tr,
            # the keys results before this check had (table and checks read them)
            **{k: tr.get(k) for k in ("mean_bytes", "slope_bytes_per_s", "rise_bytes")}}
