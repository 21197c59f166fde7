"""Time in each link state under a policy, from a link's frames: the arithmetic, nothing else.

A *link* is one or two *channels* (the two directions of a cable; each channel's transmitter is
a port).  Its frames are (arrival, duration, channel) in schedule microseconds: when the frame
reached the port and how long it occupies the wire.  Three reactive readings of the same frames
([Biswas21 §2.2.3]):

* **always on**: every port in L0 the whole time; a frame waits only behind its channel's
  previous frame, or for a dark window to end.  The baseline every delay is measured against.
* **TOS** (one channel at a time, L0s): after ``runway_us`` of idleness the transmitter takes
  ``entry_us`` to fall asleep and sleeps until the next frame arrives; that frame waits
  ``exit_us``.
* **TRS** (both channels together, L1): the link sleeps only when both directions have been idle
  for the runway (the neighbour must agree), entry and exit each carry the handshake; a frame in
  either direction wakes both.

A frame pushed by a wake into a dark window (a rotor's night) waits for the window's end: the
circuit is not there.  Entry and exit are spent at L0 power, so a port's L0 time is everything
but its sleep.  The delay a policy adds is, per frame, its start under the policy less its start
always on.

**Predictive** knows the future at slot granularity (the schedule's nights, and which slots a
port carries nothing in): through every window in which a link is known idle it sleeps in the
deepest state whose entry plus exit fit, waking exactly when the window ends (no frame waits);
where only one direction is idle, that transmitter takes L0s.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Sequence

from .model import SLEEP_STATES, PortClass, State


@dataclasses.dataclass(frozen=True)
class Dark:
    """Periodic dark windows: ``[offset + k*period, offset + k*period + length)`` for every k."""
    offset_us: float
    period_us: float
    length_us: float

    def release(self, t: float) -> float:
        """``t``, or the end of the dark window ``t`` falls in."""
        if self.length_us <= 0:
            return t
        k = (t - self.offset_us) // self.period_us
        start = self.offset_us + k * self.period_us
        return start + self.length_us if start <= t < start + self.length_us else t


@dataclasses.dataclass
class Outcome:
    """One channel's reading under one policy."""
    time_us: dict[str, float]       # state -> time in it
    frames: int = 0
    delayed: int = 0                # frames that started later than always on
    added_delay_us: float = 0.0     # summed over frames
    max_delay_us: float = 0.0
    wakes: int = 0

    def energy(self, cls: PortClass) -> float:
        """Joules if the powers are watts (us x W / 1e6)."""
        return sum(t * cls.power(s) for s, t in self.time_us.items()) / 1e6


Frame = tuple[float, float, int]  # arrival us, duration us, channel


def _run(frames: Sequence[Frame], channels: int, horizon_us: float, state: State | None,
         dark: Dark | None) -> tuple[list[float], float, int]:
    """Start time of every frame, the link's time asleep, and its wakes.  ``state`` None: always on."""
    free = [0.0] * channels        # when each channel's transmitter is done with its last frame
    link_free = 0.0                # when the link last went idle (every channel done)
    awake_at = 0.0                 # no frame starts before the link is awake again
    asleep, wakes = 0.0, 0
    starts = []
    runway = state.runway_us if state is not None else None
    for a, d, ch in frames:
        ready = a
        if runway is not None and a - link_free > runway:  # idle for more than the runway: it slept
            asleep_at = link_free + runway + state.enter_cost_us
            asleep += max(0.0, a - asleep_at)
            ready = max(a, asleep_at) + state.wake_cost_us  # a frame met mid-entry waits for entry too
            awake_at = ready
            wakes += 1
        start = max(ready, awake_at, free[ch])
        if dark is not None:
            start = dark.release(start)
        starts.append(start)
        free[ch] = start + d
        link_free = max(link_free, free[ch])
    if runway is not None and horizon_us - link_free > runway:
        asleep += max(0.0, horizon_us - (link_free + runway + state.enter_cost_us))
    return starts, asleep, wakes


def reactive(frames: Sequence[Frame], channels: int, horizon_us: float, state: State | None,
             dark: Dark | None = None) -> list[Outcome]:
    """Every channel's outcome when the link sleeps reactively in ``state`` (None: always on).
    ``frames`` sorted by arrival.  TOS: call per channel (channels=1); TRS: both at once."""
    base, _, _ = _run(frames, channels, horizon_us, None, dark)
    starts, asleep, wakes = (base, 0.0, 0) if state is None else _run(frames, channels, horizon_us, state, dark)
    name = "L0" if state is None else state.name
    out = [Outcome({"L0": horizon_us - asleep, **({name: asleep} if state is not None else {})}, wakes=wakes)
           for _ in range(channels)]
    for (a, _, ch), s0, s in zip(frames, base, starts):
        o = out[ch]
        o.frames += 1
        extra = s - s0
        if extra > 1e-9:
            o.delayed += 1
            o.added_delay_us += extra
            o.max_delay_us = max(o.max_delay_us, extra)
    return out


# ---- predictive ---------------------------------------------------------------------------------
Interval = tuple[float, float]


def _merge(xs: Sequence[Interval]) -> list[Interval]:
    out: list[list[float]] = []
    for a, b in sorted(xs):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _gaps(busy: Sequence[Interval], horizon_us: float) -> list[Interval]:
    """The complement of merged ``busy`` in [0, horizon)."""
    out, t = [], 0.0
    for a, b in busy:
        if a > t:
            out.append((t, min(a, horizon_us)))
        t = max(t, b)
    if t < horizon_us:
        out.append((t, horizon_us))
    return [(a, b) for a, b in out if b > a]


def _minus(xs: Sequence[Interval], ys: Sequence[Interval]) -> list[Interval]:
    """Parts of the (disjoint, sorted) ``xs`` outside the (disjoint, sorted) ``ys``."""
    out = []
    starts = [y[0] for y in ys]
    for a, b in xs:
        i = max(0, bisect.bisect_right(starts, a) - 1)
        t = a
        while i < len(ys) and ys[i][0] < b:
            ya, yb = ys[i]
            if yb > t:
                if ya > t:
                    out.append((t, ya))
                t = max(t, yb)
            i += 1
        if t < b:
            out.append((t, b))
    return out


def deepest(cls: PortClass, window_us: float, allowed: Sequence[str] = SLEEP_STATES) -> State | None:
    """The deepest usable state whose entry and exit both fit in ``window_us``."""
    best = None
    for name in SLEEP_STATES:
        s = cls.states[name]
        if name in allowed and s.usable and s.enter_cost_us + s.wake_cost_us <= window_us:
            best = s
    return best


def predictive(busy: Sequence[Sequence[Interval]], classes: Sequence[PortClass], horizon_us: float) -> list[Outcome]:
    """Each channel's outcome when the link sleeps through every window it is known idle in.
    ``busy[ch]``: the intervals channel ch must be awake for (slots it carries frames in)."""
    merged = [_merge(b) for b in busy]
    both = _gaps(_merge([x for b in merged for x in b]), horizon_us)  # every channel idle
    out = []
    for ch, cls in enumerate(classes):
        time = {s: 0.0 for s in ("L0", *SLEEP_STATES)}
        for a, b in both:  # the neighbour idle too: any state; L1 and off need both ends
            s = deepest(cls, b - a) if len(classes) > 1 else deepest(cls, b - a, ("L0s",))
            if s is not None:
                time[s.name] += (b - a) - s.enter_cost_us - s.wake_cost_us
        for a, b in _minus(_gaps(merged[ch], horizon_us), both):  # only this transmitter idle
            s = deepest(cls, b - a, ("L0s",))
            if s is not None:
                time["L0s"] += (b - a) - s.enter_cost_us - s.wake_cost_us
        time["L0"] = horizon_us - sum(time[s] for s in SLEEP_STATES)
        out.append(Outcome({k: v for k, v in time.items() if v > 0 or k == "L0"}))
    return out
