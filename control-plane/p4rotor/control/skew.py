"""Clock skew, injected and corrected: pure functions the controller's clock tasks use.

BMv2 switches on one machine all read the kernel's clock, so their real drift is nil: a skew
fault (a fault plan's ``clock-skew``, fault_plan.py) models a switch whose clock *jumped*.  The
controller emulates that clock: between the fault's start and end the switch's clock reads
``offset_us`` more than its raw one.  The switch cannot be given another clock, so the
controller writes the skew into the slot config instead (the pipeline adds the config's offset
to its raw timestamp: writing controller offset + skew is the switch's clock jumping by the
skew) and, to stay faithful, sees the emulated clock in its own probes too (a probe's estimate
is the raw one less the skew).  So the re-sync finds a jumped clock exactly as it would find a
real one, and a clock that jumps back when the fault ends leaves a corrected offset off by the
skew the other way, as a real one would.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from .entities import LinkLoss  # noqa: F401  (LossFault's field)
from .errors import ControllerError
from .timebase import OffsetEstimate


@dataclasses.dataclass(frozen=True)
class ClockSkew:
    """One switch's clock is ``offset_us`` off from ``start_us`` until ``end_us`` (None: the end
    of the run); times in the controller's schedule us from slot 0 (the run's common t0)."""

    switch: str
    offset_us: int
    start_us: int
    end_us: int | None = None

    def __post_init__(self) -> None:
        if self.start_us < 0 or (self.end_us is not None and self.end_us <= self.start_us):
            raise ControllerError(f"clock skew on {self.switch}: bad window {self.start_us}..{self.end_us} us")


def skew_at(skews: Iterable[ClockSkew], switch: str, t_us: float) -> int:
    """How far ``switch``'s emulated clock is off at schedule time ``t_us``: the sum of the skews
    live then (start inclusive, end exclusive; overlapping skews add, as two jumps would)."""
    return sum(s.offset_us for s in skews
               if s.switch == switch and s.start_us <= t_us and (s.end_us is None or t_us < s.end_us))


def skew_changes(skews: Iterable[ClockSkew], switch: str) -> list[int]:
    """The schedule times at which ``switch``'s skew may change (starts and ends), in order."""
    return sorted({t for s in skews if s.switch == switch
                   for t in (s.start_us, s.end_us) if t is not None})


# A drifting clock is rewritten this often (schedule us): its offset then moves by ppm x this, a
# step of 5 us at 50 ppm.  Ten slot-config MODIFYs a second per drifting switch.
DRIFT_PERIOD_US = 100_000


@dataclasses.dataclass(frozen=True)
class ClockDrift:
    """One switch's clock runs ``ppm`` parts per million fast (negative: slow) from ``start_us``
    until ``end_us`` (None: the end of the run), schedule us from slot 0.  What it gained stays
    when the drift ends (the rate is right again; the offset is not): only a re-sync corrects it."""

    switch: str
    ppm: float
    start_us: int
    end_us: int | None = None
    period_us: int = DRIFT_PERIOD_US

    def __post_init__(self) -> None:
        if self.start_us < 0 or (self.end_us is not None and self.end_us <= self.start_us):
            raise ControllerError(f"clock drift on {self.switch}: bad window {self.start_us}..{self.end_us} us")
        if not self.ppm or self.period_us <= 0:
            raise ControllerError(f"clock drift on {self.switch}: ppm {self.ppm} and period {self.period_us} us")

    def gained_us(self, t_us: float) -> float:
        """How far the drift has moved the clock by schedule time ``t_us``."""
        if t_us < self.start_us:
            return 0.0
        upto = t_us if self.end_us is None else min(t_us, self.end_us)
        return self.ppm * (upto - self.start_us) / 1e6


def drift_at(drifts: Iterable[ClockDrift], switch: str, t_us: float) -> int:
    """What ``switch``'s drifts have added to its clock at ``t_us``, to the nearest us."""
    return round(sum(d.gained_us(t_us) for d in drifts if d.switch == switch))


def drift_changes(drifts: Iterable[ClockDrift], switch: str):
    """The schedule times at which ``switch``'s drifting clock is rewritten, in order: every
    ``period_us`` from each drift's start to its end (lazily: a drift without an end never ends)."""
    import heapq
    import itertools

    def one(d: ClockDrift):
        for k in itertools.count():
            t = d.start_us + k * d.period_us
            if d.end_us is not None and t >= d.end_us:
                yield d.end_us
                return
            yield t

    last = None
    for t in heapq.merge(*[one(d) for d in drifts if d.switch == switch]):
        if t != last:
            yield t
        last = t


@dataclasses.dataclass(frozen=True)
class ResyncCheck:
    """One periodic re-sync check: the installed offset against a fresh estimate."""

    installed_us: int       # the offset the config is built on (controller's, emulated clock)
    fresh: OffsetEstimate   # the fresh estimate (same probe method as the install)
    bound_us: float

    @property
    def error_us(self) -> int:
        """How far the switch's common time is ahead of the controller's (installed - fresh)."""
        return self.installed_us - self.fresh.offset_us

    @property
    def rewrite(self) -> bool:
        """Above the bound, and larger than the fresh estimate's own uncertainty: a smaller error
        is as likely the probe's as the clock's, and rewriting on it would only chase noise."""
        e = abs(self.error_us)
        return e > self.bound_us and e > self.fresh.uncertainty_us


@dataclasses.dataclass(frozen=True)
class LossFault:
    """Optical loss on one rotor port (a fault plan's ``loss``, [Zhuo19 §3]) from ``start_us``
    until ``end_us`` (None: the end of the run), schedule us from slot 0 like ``ClockSkew``."""

    switch: str
    loss: "LinkLoss"
    start_us: int
    end_us: int | None = None

    def live(self, t_us: float) -> bool:
        return self.start_us <= t_us and (self.end_us is None or t_us < self.end_us)


def loss_changes(losses: Iterable[LossFault], switch: str) -> list[int]:
    """The schedule times at which ``switch``'s loss entries may change, in order."""
    return sorted({t for x in losses if x.switch == switch for t in (x.start_us, x.end_us) if t is not None})
