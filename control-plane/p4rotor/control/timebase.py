"""Time: one common time base for every switch, offset estimates, slot boundaries."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator

from ..schedule import Rotor, Schedule
from .errors import ControllerError


@dataclasses.dataclass
class Timebase:
    """Common time = microseconds since ``ref_ns`` (a wall-clock instant)."""

    ref_ns: int

    def common_us(self, wall_ns: int) -> int:
        return (wall_ns - self.ref_ns) // 1000

    def wall_ns(self, common_us: float) -> int:
        return self.ref_ns + int(common_us * 1000)


@dataclasses.dataclass
class OffsetEstimate:
    offset_us: int      # local timestamp + offset = common time
    rtt_us: float       # packet-out probes: round trip of the best probe (uncertainty rtt/2)
    probes: int
    method: str = "packet-out"   # or "clock-port" (one-way, data path)
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
