"""Time: one common time base for every switch, offset estimates, slot boundaries."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, Iterator

from ..schedule import Rotor, Schedule
from .errors import ControllerError
from .target import Target


def wall_minus_monotonic_ns(samples: int = 7) -> int:
    """Wall time minus CLOCK_MONOTONIC, from the tightest of a few monotonic-wall-monotonic
    brackets: one pair of reads is off by however long the process was preempted between them
    (microseconds on a loaded machine), the tightest bracket by ~0.1 us."""
    best: tuple[int, int] | None = None
    for _ in range(samples):
        a = time.monotonic_ns()
        w = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) // 2)
    assert best is not None
    return best[1]


@dataclasses.dataclass
class Timebase:
    """Common time = microseconds since ``ref_ns`` of ``clock`` (ns): the wall clock, or, on a
    target whose switches read the controller's own clock (``Target.shared_clock``: eBPF's
    bpf_ktime_get_ns is CLOCK_MONOTONIC), that clock from 0, so every switch's offset is 0 by
    construction.  ``wall_ns`` is for what other processes read (status, traces)."""

    ref_ns: int
    clock: Callable[[], int] = time.time_ns
    wall_minus_clock_ns: int = 0  # wall time - clock, sampled once (0: the clock is the wall)
    start_us: int = 0             # common time when the run started (its lead counts from here)

    @classmethod
    def for_target(cls, target: Target) -> "Timebase":
        if target.shared_clock:
            return cls(ref_ns=0, clock=time.monotonic_ns, wall_minus_clock_ns=wall_minus_monotonic_ns(),
                       start_us=time.monotonic_ns() // 1000)
        return cls(ref_ns=time.time_ns())

    def now_ns(self) -> int:
        return self.clock()

    def common_us(self, clock_ns: int) -> int:
        return (clock_ns - self.ref_ns) // 1000

    def clock_ns(self, common_us: float) -> int:
        """A common time on ``clock`` (what to sleep until)."""
        return self.ref_ns + int(common_us * 1000)

    def wall_ns(self, common_us: float) -> int:
        return self.clock_ns(common_us) + self.wall_minus_clock_ns


@dataclasses.dataclass
class OffsetEstimate:
    offset_us: int      # local timestamp + offset = common time
    rtt_us: float       # packet-out probes: round trip of the best probe (uncertainty rtt/2)
    probes: int
    method: str = "packet-out"   # or "clock-port" (one-way, data path), "shared-clock" (exact)
    jitter_us: float = 0.0       # clock-port: half the width of the proven bracket
    spread_us: float = 0.0       # clock-port: how far the 4th best bounds are from the best

    @property
    def uncertainty_us(self) -> float:
        """Half the best round trip (packet-out, assuming a symmetric path); half the proven
        bracket (clock-port, no assumption)."""
        return self.rtt_us / 2 if self.method == "packet-out" else self.jitter_us

    def describe(self) -> str:
        if self.method == "packet-out":
            return f"+/- {self.rtt_us / 2:.0f} us, {self.probes} packet-out probes"
        if self.method == "shared-clock":
            return "exact: the switch reads the controller's CLOCK_MONOTONIC"
        return (f"+/- {self.jitter_us:.1f} us proven, clock port, {self.probes} probes "
                f"(4 best bounds within {self.spread_us:.1f} us)")


def estimate_offset(samples: Iterable[tuple[int, int, float]], tb: Timebase) -> OffsetEstimate:
    """From (sent wall ns, received wall ns, switch local us) choose the tightest probe.

    The switch stamped the probe somewhere between send and receive; assume the
    middle, so the error is at most half the round trip.  The offset is whole microseconds
    (a local time finer than that, Tofino's ns converted, rounds).
    """
    best = None
    n = 0
    for sent, recv, local in samples:
        n += 1
        rtt = recv - sent
        if best is None or rtt < best[0]:
            best = (rtt, sent, recv, local)
    if best is None:
        raise ControllerError("no time probe came back")
    rtt, sent, recv, local = best
    mid_common = tb.common_us((sent + recv) // 2)
    return OffsetEstimate(offset_us=round(mid_common - local), rtt_us=rtt / 1000, probes=n)


def boundary_times(sched: Schedule, rotor: Rotor, t0_common_us: int, from_common_us: float):
    """Yield (common us, slot k, index, night) for every night start / day start from a time on."""
    k = max(0, int((from_common_us - t0_common_us - rotor.offset_us) // sched.slot_us))
    while True:
        start = t0_common_us + rotor.offset_us + k * sched.slot_us
        idx = k % len(rotor.matchings)
        if sched.reconfig_us > 0:
            yield start, k, idx, True
        yield start + sched.reconfig_us, k, idx, False
        k += 1


def timed_changes(bounds: Iterable[tuple[int, int, int, bool]]) -> Iterator[tuple[int, int, int, int]]:
    """(at, k, index, night) boundaries -> one timed change per slot: (start, k, index, night_us).

    A night start followed by its own day start becomes one change whose night lasts until
    the day; a day start with no night before it has night_us 0."""
    pend = None
    for at, k, idx, night in bounds:
        if pend is not None:
            pat, pk, pidx = pend
            pend = None
            if not night and (k, idx) == (pk, pidx):
                yield pat, pk, pidx, at - pat
                continue
            yield pat, pk, pidx, 0
        if night:
            pend = (at, k, idx)
        else:
            yield at, k, idx, 0


@dataclasses.dataclass(frozen=True)
class AdoptedClock:
    """A running clock taken over from the slot config another controller run installed.

    ``installed_*``: the config's epoch and offset as that run wrote them (its common time,
    signed us); ``epoch_us``: the same epoch in this run's common time."""

    installed_epoch_us: float
    installed_offset_us: float
    epoch_us: float


def _signed(units: int, bits: int) -> int:
    units &= (1 << bits) - 1
    return units - (1 << bits) if units >> (bits - 1) else units


def adopt_clock(target: Target, epoch_units: int, offset_units: int, offset_us: float,
                now_us: float) -> AdoptedClock:
    """The installed epoch in this run's common time.  A pure function.

    The switch holds ``epoch`` in the installing run's common time and that run's ``offset``
    (local + offset = its common time).  Its local time of slot 0 is epoch - offset; this run's
    common time of that instant is epoch - offset + ``offset_us`` (ours, just measured).
    Absolute times wrap at the target's width (48 bits of us on BMv2, 32 of 1024 ns on
    Tofino): of the values that fit, the one nearest ``now_us`` (this run's common time now)."""
    bits, unit_us = target.time_bits, target.time_unit_ns / 1000
    ours = target.to_units(offset_us)
    now = target.to_units(now_us)  # >= 0: this run's common time starts at its start
    epoch = epoch_units - offset_units + ours
    nearest = now + _signed(epoch - now, bits)
    return AdoptedClock(installed_epoch_us=_signed(epoch_units, bits) * unit_us,
                        installed_offset_us=_signed(offset_units, bits) * unit_us,
                        epoch_us=nearest * unit_us)
