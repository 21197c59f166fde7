"""An agent's CPU priority: SCHED_RR while it holds bulk, the default policy while it is idle.

Under SCHED_RR for its whole life (fabric/switch.py: AGENT_RT_PRIORITY) an agent's pacers send
inside their circuits' windows, which the bulk bound needs (Data Mining 1 %: 91 of 91 lone bulk
flows within it, against 85 of 86 at the default policy).  But an idle agent still wakes for
every window of its rack's circuits (four a slot), samples its queues and looks for ACKs owed:
sixteen idle agents took ~2.7 % of a CPU each, and under SCHED_RR every one of those wake-ups ran
ahead of every process at the default policy.  The switch warmer (fabric/warm.py) fell more than
1.7 ms behind its period 7x as often (894 055 times against 124 718 in the whole Data Mining 1 %
list) and the low-latency class's mean slowdown rose from 1.64 to 2.05 (docs/notes/priorities.md).  An agent holding nothing has
nothing to send on time, so it gives the priority back until it holds a frame again.

:class:`BusyPriority` changes the calling thread's policy (the agent's event loop runs on its
main thread) only when busy-ness changes; where the kernel refuses (no CAP_SYS_NICE), it says so
once in its summary and stays as it is.
"""

from __future__ import annotations

import os
import time


class BusyPriority:
    """SCHED_RR at ``priority`` while :meth:`set` is told busy; the default policy otherwise.
    ``priority`` None: never change anything (only count).  ``always``: SCHED_RR from the start,
    busy or not (for comparison: docs/notes/priorities.md)."""


    def __init__(self, priority: int | None, always: bool = False, setter=None, started_rr: bool = False):
        self.priority = priority
        self.always = always
        self._setter = setter if setter is not None else (lambda policy, prio: os.sched_setscheduler(0, policy, os.sched_param(prio)))
        self.raised = 0            # times it went to SCHED_RR
        self.busy_ns = 0           # time spent busy
        self.error: str | None = None
        # ``started_rr``: the process was started under SCHED_RR (chrt; the harness does, so an
        # agent's start-up keeps the lead it had) and counts as busy until told otherwise.
        self.busy = started_rr
        self._since = time.monotonic_ns()
        if priority is not None and always and not started_rr:
            self.busy = self._apply(True)

    def _apply(self, rr: bool) -> bool:
        try:
            if rr:
                self._setter(os.SCHED_RR, self.priority)
            else:
                self._setter(os.SCHED_OTHER, 0)
        except OSError as ex:
            self.error = f"cannot set SCHED_{'RR' if rr else 'OTHER'}: {ex.strerror or ex}"
            self.priority = None  # keep what we have; the summary says why
            return False
        return True

    def set(self, busy: bool) -> None:
        if busy == self.busy:
            return
        now = time.monotonic_ns()
        if busy:
            self._since = now
        else:
            self.busy_ns += now - self._since
        self.busy = busy
        if self.priority is None or self.always:
            return
        if busy:
            self.raised += 1
        self._apply(busy)

    def summary(self) -> dict:
        busy_ns = self.busy_ns + (time.monotonic_ns() - self._since if self.busy else 0)
        return {"rt_priority": self.priority, "always": self.always, "raised": self.raised,
                "busy_s": round(busy_ns / 1e9, 3), "busy_now": self.busy, "error": self.error}
