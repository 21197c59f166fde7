"""The run's time: the controller's common microseconds, schedule time from slot 0, and waiting
for either, precisely (slot changes) or coarsely (fault plans, traces)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Awaitable, Callable, Iterable

from .timebase import Timebase


class RunClock:
    """Common time (``tb``), the run's slot 0 in it (``t0_common_us``, decided at install: the
    controller's lead, or an adopted switch's clock), and sleeping until a time."""

    def __init__(self, tb: Timebase, t0_common_us: int, spin_us: float):
        self.tb = tb
        self.t0_common_us = t0_common_us
        self.spin_s = spin_us / 1e6
        self._timer: concurrent.futures.ThreadPoolExecutor | None = None

    def now_us(self) -> float:
        return self.tb.common_us(self.tb.now_ns())

    def schedule_us(self) -> float:
        """Schedule time now: us since slot 0 of the run (the common t0), as fault plans count."""
        return self.now_us() - self.t0_common_us

    async def sleep_until(self, common_us: float, spin: bool = True) -> None:
        now = self.tb.now_ns
        target = self.tb.clock_ns(common_us)
        delay = (target - now()) / 1e9
        if not spin:
            await asyncio.sleep(max(0.0, delay))
            return
        # Coarse: the event loop's own timer (epoll rounds its timeout up to whole ms).
        if delay > 0.003:
            await asyncio.sleep(delay - 0.003)
        # Fine: nanosleep in a timer thread; its completion wakes the loop through its
        # self-pipe at once (no ms rounding). Then spin the last spin_us.
        left = (target - now()) / 1e9 - self.spin_s
        if left > 0:
            if self._timer is None:
                self._timer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="p4rotor-timer")
            await asyncio.get_running_loop().run_in_executor(self._timer, time.sleep, left)
        while now() < target:
            pass
        await asyncio.sleep(0)  # always let the other switches' tasks run

    async def at_schedule_times(self, times: Iterable[int], apply: Callable[[float], Awaitable[None]]) -> None:
        """Timed changes of a fault plan (clock skew, optical loss): ``apply(t)`` now, then at each
        of ``times`` (schedule us) still ahead, with the schedule time it runs at.  Started at
        every install, so the first call catches up: a switch that came back mid-fault, or a t0
        adopted from a running fabric (a fault already started)."""
        await apply(self.schedule_us())
        for t in times:
            if t <= self.schedule_us():
                continue
            await self.sleep_until(self.t0_common_us + t, spin=False)
            await apply(max(t, self.schedule_us()))
