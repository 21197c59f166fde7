"""The slot gate: when this rack's circuits are up, in wall time, computed in one place.

Every host process that times its sends by the schedule (RotorLB agents, gated probes) gets the
(dilated) schedule and the fabric's epoch ``t0_ns`` (the wall time of schedule slot 0, from the
controller's status file; every Mininet host shares the kernel clock) and asks this module.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Iterator

from ..schedule import Schedule


@dataclasses.dataclass(frozen=True)
class Circuit:
    """One direction of one circuit: rotor ``rotor`` connects ``rack`` to ``peer`` in slot ``slot``."""

    rotor: int
    slot: int
    peer: int
    day_start_ns: int   # the night is over: the circuit carries frames
    day_end_ns: int     # the rotor starts reconfiguring

    def window(self, guard_ns: int) -> tuple[int, int]:
        """When a host may send on it: the day less a guard at each end ([TDMA12]'s guard time)."""
        return self.day_start_ns + guard_ns, self.day_end_ns - guard_ns


def circuits(s: Schedule, t0_ns: int, rack: int, from_ns: int) -> Iterator[Circuit]:
    """Every circuit of ``rack`` whose day ends after ``from_ns``, in order of day start (all rotors
    merged; a rack idle in a matching has no circuit in that slot)."""
    def rotor_slots(ri: int):
        r = s.rotors[ri]
        k = max(0, (from_ns - t0_ns) // 1000 // s.slot_us - 1)
        while True:
            start = t0_ns + (r.offset_us + k * s.slot_us) * 1000
            peer = r.matchings[k % len(r.matchings)][rack]
            end = start + s.slot_us * 1000
            if peer is not None and peer != rack and end > from_ns:
                yield Circuit(ri, k, peer, start + s.reconfig_us * 1000, end)
            k += 1

    yield from heapq.merge(*(rotor_slots(i) for i in range(len(s.rotors))), key=lambda c: c.day_start_ns)
