"""One circuit window of a host agent (host/agent.py) and its pacer: the window's frames leave at
the circuit's rate, within the host's own link, until the window ends."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from .gate import Circuit

CATCH_UP = 1.2  # a window behind its schedule paces up to this much faster than the rate


class Window:
    """A circuit window open now: its frames (``out``, growing while it is open), how many of them
    the pacer has sent, and the event that wakes the pacer when frames are added."""

    def __init__(self, c: Circuit, end: int):
        self.c, self.end = c, end
        self.out: list[bytes] = []
        self.sent = 0
        self.more = asyncio.Event()

    def queued(self) -> int:
        return len(self.out) - self.sent


class HostLink:
    """The host's own link, shared by every circuit's pacer (at most two at once): ``rate``
    frames/s over all of them together (None: no cap)."""

    def __init__(self, rate: float | None):
        self.gap = 1e9 / rate if rate else 0.0
        self.next = 0.0  # wall ns before which no pacer sends on it

    def took(self, now: int) -> None:
        if self.gap:
            self.next = max(self.next + self.gap, now - self.gap)


async def pace(win: Window, rate: float, link: HostLink, send: Callable[[bytes], None]) -> int:
    """Send the window's frames (``win.out``, growing while it is open: the exchange's relayed
    frames, a top-up, a flow that starts; whoever adds sets ``win.more``) at ``rate``, until its
    end; returns how many were sent.  Idle, it sleeps until ``more`` or the window's end, never
    polls."""
    out, end, more = win.out, win.end, win.more
    gap = 1e9 / rate
    nxt = time.time_ns()
    i = 0
    while (now := time.time_ns()) < end:
        if i >= len(out):
            more.clear()
            try:
                await asyncio.wait_for(more.wait(), (end - now) / 1e9)
            except asyncio.TimeoutError:
                break
            nxt = max(nxt, time.time_ns())  # idle (waited for an ACCEPT): no burst after it
            continue
        if now < max(nxt, link.next):
            await asyncio.sleep(max(0.0005, min(max(nxt, link.next) - now, end - now) / 1e9))
            continue
        send(out[i])
        link.took(now)
        i += 1
        win.sent = i
        # Behind (a late start, a busy CPU)?  Up to CATCH_UP faster, so what the window holds
        # still leaves inside it: a relayed frame that misses its relay's window waits a whole
        # cycle (issue #13: 3 of 34 545 did, at 12 slots).  Never a burst (at most two frames at
        # once): it would queue on a shaped host link past the window's end and be dropped as
        # stale; the FCT experiment's shaping has 25% room.
        now = time.time_ns()
        left = len(out) - i
        g = max(gap / CATCH_UP, min(gap, (end - now) / (left + 1))) if left else gap
        nxt = max(nxt + g, now - 2 * g)
    return i
