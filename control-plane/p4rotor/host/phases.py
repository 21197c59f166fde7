"""One agent run for a list of traffic matrices (experiments/rotorlb_plan.py; host/agent_cli.py
``--phases``): the mode of each window, and the frames received counted at given times.

Saturated flows carry their own start_ns / stop_ns (host/agent.py: ``saturating``); this holds
the rest: from each ``one_hop_from`` [t_ns, 0|1] on, windows run that mode; at each
``snapshots`` t_ns (between two days, when no circuit is open) the frames received per (origin,
flow) since the last one are kept.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable


class Phases:
    def __init__(self, doc: dict | None, one_hop: bool):
        doc = doc or {}
        self.default = one_hop
        self.mode_from = sorted((int(t), bool(v)) for t, v in doc.get("one_hop_from", []))
        self.snapshot_at = sorted(int(t) for t in doc.get("snapshots", []))
        self.snapshots: list[dict] = []  # {"t_ns", "woke_late_ns", "late_ns", "rx": {"origin:flow": frames}}

    def one_hop_at(self, t_ns: int) -> bool:
        """The mode of a window opening at ``t_ns``: the last change at or before it."""
        mode = self.default
        for t, v in self.mode_from:
            if t > t_ns:
                break
            mode = v
        return mode

    async def take_snapshots(self, counts: Callable[[], tuple[dict, int]]) -> None:
        """``counts()``: frames received per (origin, flow) and the wall time they were counted.
        ``late_ns`` is that time's lateness: the rotorlb plan judges it against the quiet time
        between two days."""
        last: dict[tuple[int, int], int] = {}
        for t in self.snapshot_at:
            d = (t - time.time_ns()) / 1e9
            if d > 0:
                await asyncio.sleep(d)
            woke = time.time_ns()
            got, taken = counts()
            delta = {}
            for k, v in got.items():
                if v[0] != last.get(k, 0):
                    delta[f"{k[0]}:{k[1]}"] = v[0] - last.get(k, 0)
                    last[k] = v[0]
            self.snapshots.append({"t_ns": t, "woke_late_ns": woke - t, "late_ns": taken - t, "rx": delta})
