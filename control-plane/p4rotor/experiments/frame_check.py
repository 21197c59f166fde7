"""Did a frame leave a rotor on a circuit its schedule did not have live at that moment?  Judged
from probe traces or a capture (in port, out port, time out) against the schedule, for the
experiments (experiments/faults.py: wrong or dark circuits must be 0) and the benchmarks
(bench/inside.py, bench/measure.py).

Times: the schedule's slot 0 of the rotor starts at wall time ``t0_ns + rotor.offset_us``.
A received frame came in on ``in_port`` and left on ``out_port``; the matchings that
connect those ports tell which matching carried it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from ..host.traffic import Rx
from ..schedule import Rotor, Schedule


def matchings_for(rotor: Rotor, port_map: dict[int, int]) -> dict[tuple[int, int], set[int]]:
    """(in port, out port) -> matching indices that connect them."""
    out: dict[tuple[int, int], set[int]] = {}
    for mi, m in enumerate(rotor.matchings):
        for i, j in enumerate(m):
            if j is not None:
                out.setdefault((port_map[i], port_map[j]), set()).add(mi)
    return out


@dataclasses.dataclass
class FrameCheck:
    frames: int
    stale: int            # left after the day of the matching that carried it had ended
    wrong_port: int       # left on a port no matching connects to its ingress port
    worst_late_us: float  # largest (rx - day end) over all frames, negative when all are in time


def check_frames(rx: Sequence[Rx], sched: Schedule, rotor: Rotor, port_map: dict[int, int],
                 t0_ns: int, tolerance_us: float = 0.0) -> FrameCheck:
    """Did any frame leave on a matching that was no longer live when it left?

    For each frame, take the latest day of a slot with its matching that began
    before the frame was received; the frame is stale if it was received more than
    ``tolerance_us`` (capture latency, the switch's clock error) after that day ended.
    The tolerance holds both ways: a frame received less than ``tolerance_us`` before a
    day of its matching begins is that day's (a switch clock a little ahead of the
    capture's), not judged against the previous one.
    """
    conn = matchings_for(rotor, port_map)
    M = len(rotor.matchings)
    stale = wrong = 0
    worst = -math.inf
    for r in rx:
        ms = conn.get((r.in_port, r.out_port))
        if not ms:
            wrong += 1
            continue
        t_rx = (r.rx_ns - t0_ns) / 1000 - rotor.offset_us
        k_now = math.floor(t_rx / sched.slot_us)
        best_end = -math.inf
        early = False
        for m in ms:
            # latest slot k <= k_now with k % M == m whose day started before rx
            k = k_now - ((k_now - m) % M)
            if k * sched.slot_us + sched.reconfig_us > t_rx:
                early = early or k * sched.slot_us + sched.reconfig_us - t_rx <= tolerance_us
                k -= M
            else:
                # the next day of m, if it begins within the tolerance
                nxt = k + M
                early = early or nxt * sched.slot_us + sched.reconfig_us - t_rx <= tolerance_us
            best_end = max(best_end, (k + 1) * sched.slot_us)
        late = 0.0 if early else t_rx - best_end
        worst = max(worst, late)
        if late > tolerance_us:
            stale += 1
    return FrameCheck(frames=len(rx), stale=stale, wrong_port=wrong, worst_late_us=worst)
