"""Real-time priority only while a switch is being brought back (``--rt-while-recovering N``).

A restarted switch is back once the controller has re-installed it, and under load a controller
at the default policy waited for the host processes first (docs/faults.md, "A restarted switch").
Run under SCHED_RR for the whole run, though, a controller restarted after a crash adopted twelve
switches above the RotorLB agents, which then made 14-40 % fewer bulk frames (the A/B in
docs/faults.md).  So the controller raises itself only from a switch's channel going down until
that switch is installed again, and runs at the default policy otherwise -- its start and an
adoption included.  Every thread of the process is raised (gRPC's polling threads carry the
reconnect), and every thread is lowered again, also those started meanwhile.
"""

from __future__ import annotations

import os
import time
from typing import Callable

SetPolicy = Callable[[int, int, int], None]  # (thread id, policy, priority)


def _set_policy(tid: int, policy: int, priority: int) -> None:
    os.sched_setscheduler(tid, policy, os.sched_param(priority))


def _threads() -> list[int]:
    return [int(t) for t in os.listdir("/proc/self/task")]


class RecoveryPriority:
    """SCHED_RR at ``priority`` while any switch in ``down`` is not installed again; what it did is
    in ``raised`` (times raised), ``raised_ms`` (total) and ``error`` (why it could not)."""

    def __init__(self, priority: int, set_policy: SetPolicy = _set_policy,
                 threads: Callable[[], list[int]] = _threads, on_event: Callable[[str], None] = lambda m: None):
        if not 1 <= priority <= 99:
            raise ValueError(f"real-time priority {priority}: 1 to 99")
        self.priority = priority
        self.down: set[str] = set()
        self.raised = 0
        self.raised_ms = 0.0
        self.error: str | None = None
        self._since: float | None = None
        self._set, self._threads, self._say = set_policy, threads, on_event

    def switch_down(self, name: str) -> None:
        self.down.add(name)
        if self._since is None and self._apply(os.SCHED_RR, self.priority):
            self._since = time.monotonic()
            self.raised += 1
            self._say(f"{name}: channel down; SCHED_RR {self.priority} until it is installed again")

    def switch_installed(self, name: str) -> None:
        self.down.discard(name)
        if self.down or self._since is None:
            return
        self._apply(os.SCHED_OTHER, 0)
        self.raised_ms += (time.monotonic() - self._since) * 1e3
        self._since = None
        self._say(f"{name}: installed again; back to the default policy")

    def _apply(self, policy: int, priority: int) -> bool:
        for tid in self._threads():
            try:
                self._set(tid, policy, priority)
            except ProcessLookupError:
                continue  # a thread that ended meanwhile
            except OSError as ex:
                if self.error is None:
                    self.error = f"sched_setscheduler: {ex.strerror or ex}"
                    self._say(f"cannot change the scheduling policy ({self.error}): the default kept")
                return False
        return True

    def summary(self) -> dict:
        return {"priority": self.priority, "raised": self.raised, "raised_ms": round(self.raised_ms, 3),
                "down": sorted(self.down), "error": self.error}
