"""An agent's own frames for one destination rack (L[d] of [McGuinness21 §2.5.1]), served one flow at a
time in turn: a frame of each flow that has some, round and round (processor sharing).

In arrival order (one FIFO per destination, as before), a 324 KB flow queued behind a 53.8 MB
flow to the same rack waited 502 s for all of it (Data Mining 10 %, docs/notes/flows-in-turn.md).  The
model holds bulk per destination and says nothing of the order within; RotorLB's amounts (how
many frames go where) are the same either way, since they count frames only.
"""

from __future__ import annotations

import collections


class FlowQueue:
    """Items ``(flow, seq, payload)``: ``append`` at the tail of the item's flow, ``popleft`` the
    head of the flow whose turn it is (then it goes to the back of the turn), ``appendleft`` back
    to the head of its flow, and that flow goes first (what a window could not carry, or a frame
    to resend, leaves before anything else).  A flow's frames keep their order."""

    __slots__ = ("_flows", "_turn", "_n")

    def __init__(self) -> None:
        self._flows: dict[int, collections.deque] = {}
        self._turn: collections.deque[int] = collections.deque()  # flows with frames, next first
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def append(self, item: tuple) -> None:
        q = self._flows.get(item[0])
        if q is None:
            q = self._flows[item[0]] = collections.deque()
            self._turn.append(item[0])
        q.append(item)
        self._n += 1

    def appendleft(self, item: tuple) -> None:
        flow = item[0]
        q = self._flows.get(flow)
        if q is None:
            q = self._flows[flow] = collections.deque()
        else:
            self._turn.remove(flow)
        self._turn.appendleft(flow)
        q.appendleft(item)
        self._n += 1

    def popleft(self) -> tuple:
        if not self._n:
            raise IndexError("pop from an empty FlowQueue")
        flow = self._turn.popleft()
        q = self._flows[flow]
        item = q.popleft()
        if q:
            self._turn.append(flow)
        else:
            del self._flows[flow]
        self._n -= 1
        return item

    def __iter__(self):
        """Every item, flow by flow in turn order (not the order ``popleft`` would give)."""
        for flow in self._turn:
            yield from self._flows[flow]
