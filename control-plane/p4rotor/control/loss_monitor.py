"""The live CorrOpt monitor's state ([Zhuo19 §3.4]): per-link loss rates estimated from the
rotors' per-port counters, and which links to turn off.  Pure: counter readings in, decisions
out; the controller (runtime.py) reads the counters over P4Runtime and writes what changes.

A *link* is one rack's fibre pair to one rotor, ``(rotor name, rack)``, as in
``fast_checker.py`` (whose fast checker decides).  Each of its two directions is measured
apart, from the rotor's ``link_{in,out}[_loss]_counter`` at the rack's port (docs/dataplane.md):
frames that crossed the direction and frames lost on it, as differences between readings.  A
direction's estimate is made once ``min_frames`` frames were offered to it since its last one
(a rate from 50 frames says little); the link's rate is the larger of its two directions' latest
estimates, as CorrOpt judges a link by its worse direction.

Decisions are made once per link: a disabled link carries nothing afterwards (no new estimate),
and a link kept because its removal would split a slice can never become removable while the
disabled ones stay off (removing more only splits more).  Links are not turned back on: a
repaired link is the operator's to restore (CorrOpt's repair loop), here by restarting the
controller.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from . import fast_checker as M
from ..schedule import Schedule

Direction = str  # "in" (from the rack into the rotor) or "out" (rotor to the rack)


@dataclasses.dataclass
class _Window:
    crossed: int = 0
    lost: int = 0


@dataclasses.dataclass(frozen=True)
class Estimate:
    rotor: str
    rack: int
    direction: Direction
    rate: float
    frames: int   # frames offered in the window the rate is from
    lost: int


class LossMonitor:
    """Counter readings in (``observe``), decisions out (``decide``); see the module docstring."""

    def __init__(self, schedule: Schedule, ports: Mapping[str, Mapping[int, int]], threshold: float,
                 min_frames: int = 1000):
        if not 0 < threshold < 1:
            raise M.MonitorError(f"the loss threshold must be in (0, 1), got {threshold!r}")
        if type(min_frames) is not int or min_frames < 1:
            raise M.MonitorError(f"min_frames must be an integer >= 1, got {min_frames!r}")
        self.schedule = schedule
        self.threshold = threshold
        self.min_frames = min_frames
        # rotor -> port -> rack (the counters are indexed by port)
        self.racks = {r: {p: rack for rack, p in pm.items()} for r, pm in ports.items()}
        self._last: dict[tuple[str, Direction, int], tuple[int, int]] = {}
        self._window: dict[tuple[str, int, Direction], _Window] = {}
        self.estimates: dict[tuple[str, int, Direction], Estimate] = {}
        self.disabled: list[M.Link] = []
        self.decisions: list[M.Decision] = []

    def observe(self, rotor: str, direction: Direction, readings: Mapping[int, tuple[int, int]]) -> list[Estimate]:
        """One reading of a rotor's counters for one direction: ``{port: (crossed, lost)}``, the
        counters' totals.  A total below the previous one means the switch restarted (its
        counters began again at 0): the new total is the difference.  Returns the estimates
        this reading completed."""
        done = []
        for port, (crossed, lost) in readings.items():
            rack = self.racks.get(rotor, {}).get(port)
            if rack is None:
                continue  # not a rack port (the clock port, a port no topology uses)
            key = (rotor, direction, port)
            pc, pl = self._last.get(key, (0, 0))
            dc = crossed - pc if crossed >= pc else crossed
            dl = lost - pl if lost >= pl else lost
            self._last[key] = (crossed, lost)
            w = self._window.setdefault((rotor, rack, direction), _Window())
            w.crossed += dc
            w.lost += dl
            n = w.crossed + w.lost
            if n >= self.min_frames:
                est = Estimate(rotor, rack, direction, w.lost / n, n, w.lost)
                self.estimates[(rotor, rack, direction)] = est
                self._window[(rotor, rack, direction)] = _Window()
                done.append(est)
        return done

    def rates(self) -> dict[M.Link, float]:
        """Each measured link's rate: the larger of its directions' latest estimates."""
        out: dict[M.Link, float] = {}
        for (rotor, rack, _), est in self.estimates.items():
            out[(rotor, rack)] = max(out.get((rotor, rack), 0.0), est.rate)
        return out

    def decide(self) -> list[M.Decision]:
        """Decisions on the links above the threshold not decided yet (the fast checker, with
        the links already disabled removed first); the new disabled ones join ``disabled``."""
        decided = {d.link for d in self.decisions}
        rates = {k: v for k, v in self.rates().items() if k not in decided}
        if not any(v > self.threshold for v in rates.values()):
            return []  # the usual round: nothing to decide, no slice analysis
        new = M.decide(self.schedule, rates, self.threshold, disabled=self.disabled)
        self.decisions += new
        self.disabled += M.disabled_links(new)
        return new

    def masked(self) -> Schedule:
        """The schedule to run: the original without the disabled links' circuits."""
        return M.masked_schedule(self.schedule, self.disabled)
