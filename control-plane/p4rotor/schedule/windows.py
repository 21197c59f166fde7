"""When is a rack pair connected?  The one place that turns a schedule into time windows.

Used by the host slot gate (senders only send while their circuit is up: [TDMA12]'s host gating),
the experiments' predictions and judges, and the bench.  Every rotor's offset counts: an Opera
schedule's staggered rotors change matchings at different times, so "slot k" of one rotor is not
a time window of the fabric; the fabric's unit is the *slice* (``Schedule.slices()``), an interval
in which the set of live circuits is constant.
"""

from __future__ import annotations

import bisect
import dataclasses

from .model import Schedule, ScheduleError, Slice


def dilate(s: Schedule, x: float) -> Schedule:
    """Every schedule time multiplied by x (slot, night, offsets)."""
    if x <= 0:
        raise ScheduleError(f"--dilation must be > 0, got {x}")
    rs = tuple(dataclasses.replace(r, offset_us=int(round(r.offset_us * x))) for r in s.rotors)
    return dataclasses.replace(s, slot_us=int(round(s.slot_us * x)), reconfig_us=int(round(s.reconfig_us * x)),
                               rotors=rs)


def direct_pairs(s: Schedule, sl: Slice) -> set[tuple[int, int]]:
    """Every (src, dst) with a live direct circuit during slice ``sl``."""
    out = set()
    for r, m in zip(s.rotors, sl.live):
        if m is None:
            continue
        for i, j in enumerate(r.matchings[m]):
            if j is not None and j != i:
                out.add((i, j))
    return out


class SliceClock:
    """Maps schedule time (us since slot 0 of the schedule) to the slice of the hyperperiod it is in."""

    def __init__(self, s: Schedule):
        self.schedule = s
        self.slices = s.slices()
        self.period_us = s.hyperperiod_us
        self._starts = [sl.start_us for sl in self.slices]

    def index(self, t_us: float) -> int:
        return bisect.bisect_right(self._starts, t_us % self.period_us) - 1

    def instance_end(self, t_us: float) -> float:
        """When the slice ``t_us`` is in ends (us, on the same axis as ``t_us``)."""
        phase = t_us % self.period_us
        return t_us - phase + self.slices[self.index(t_us)].end_us

    def judged(self, t_us: float, margin_us: float) -> int | None:
        """The slice of ``t_us`` if ``t_us`` is more than ``margin_us`` from both of its edges."""
        if t_us < 0:
            return None
        k = self.index(t_us)
        sl, phase = self.slices[k], t_us % self.period_us
        if phase - sl.start_us < margin_us or sl.end_us - phase < margin_us:
            return None
        return k

    def judged_window(self, k: int, margin_us: float) -> tuple[float, float] | None:
        """[a, b) of slice k shrunk by the margin at both ends (None: nothing left)."""
        sl = self.slices[k]
        a, b = sl.start_us + margin_us, sl.end_us - margin_us
        return (a, b) if b > a else None


def direct_windows(s: Schedule, src: int, dst: int, lead_us: float = 0.0, guard_us: float = 0.0
                   ) -> list[tuple[float, float]]:
    """The windows of one hyperperiod [0, H) (us) in which a rotor's circuit src -> dst is in its
    day, starting ``lead_us`` after the day starts and ending ``guard_us`` before it ends (a host's
    guard time); a window that wraps past H is split in two.  Rotor offsets count."""
    H = s.hyperperiod_us
    out = []
    for r in s.rotors:
        for k in range(H // s.slot_us):
            if r.matchings[k % len(r.matchings)][src] != dst:
                continue
            a = r.offset_us + k * s.slot_us + s.reconfig_us + lead_us
            b = r.offset_us + (k + 1) * s.slot_us - guard_us
            if b <= a:
                continue
            a0 = a % H
            b0 = a0 + (b - a)
            if b0 <= H:
                out.append((a0, b0))
            else:
                out += [(a0, H), (0.0, b0 - H)]
    return sorted(out)
