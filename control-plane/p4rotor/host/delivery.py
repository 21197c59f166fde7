"""Frames a host agent (host/agent.py) receives for its own rack, delivered exactly once: an
(origin, flow, seq) seen before is counted as a duplicate, never delivered twice.  What it keeps
is what the agent's summary and progress file say of the flows received here."""

from __future__ import annotations

import collections

from ..rotorlb import wire


class Delivery:
    def __init__(self, measure: tuple[int, int]):
        self.measure = measure  # wall ns [start, end) of the throughput window
        self.seen: set[tuple[int, int, int]] = set()
        self.delivered = collections.Counter()      # origin -> frames delivered here
        self.in_window = collections.Counter()      # origin -> delivered inside the measurement window
        self.duplicates = 0
        self.relay_delay = collections.Counter()    # slots spent at the relay -> frames
        self.flow_rx: dict[tuple[int, int], list[int]] = {}  # (origin, flow) -> [frames, last ns]
        # How each flow went, for the flows an FCT run finds slow (experiments/fct.py:
        # ``bulk_paths``): (origin, flow) -> [frames relayed, most slots one waited at its relay,
        # first ns, second copies dropped (a resent frame whose first copy came: its sender's
        # resends less these are the frames the fabric lost)].
        self.flow_via: dict[tuple[int, int], list[int]] = {}

    def take(self, m: wire.Data, now: int) -> bool:
        """Count ``m``, received at ``now``; False if it is a second copy (not to be delivered)."""
        key = (m.origin, m.flow, m.seq)
        via = self.flow_via.setdefault((m.origin, m.flow), [0, 0, now, 0])
        if key in self.seen:
            self.duplicates += 1
            via[3] += 1
            return False
        self.seen.add(key)
        self.delivered[m.origin] += 1
        rx = self.flow_rx.setdefault((m.origin, m.flow), [0, 0])
        rx[0] += 1
        rx[1] = now
        if self.measure[0] <= now < self.measure[1]:
            self.in_window[m.origin] += 1
        if m.relayed:
            self.relay_delay[m.slot - m.accepted_slot] += 1
            via[0] += 1
            via[1] = max(via[1], m.slot - m.accepted_slot)
        return True
