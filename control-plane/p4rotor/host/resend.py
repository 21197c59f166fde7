"""A host agent's retransmission (host/agent.py, ``--retransmit-us``): its own frames sent and not
yet acknowledged go back to their queue once overdue, and the ACKs it owes each origin for the
frames delivered here.  The receiver drops a second copy (host/delivery.py): exactly once."""

from __future__ import annotations

import collections

from ..rotorlb import wire


class Resend:
    def __init__(self, after_ns: int, ack_direct: bool):
        self.after_ns = after_ns  # 0: never resend, owe no ACKs
        # ACKs over the direct circuit to the origin, at the start of its next window, instead of
        # the low-latency class (a schedule without one: RotorNet); they then take up to a cycle.
        self.ack_direct = ack_direct
        self.inflight: dict[tuple[int, int], tuple[int, bytes, int]] = {}  # (flow, seq) -> (dst, payload, sent ns)
        self.owed: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)  # origin -> (flow, seq)
        self.resent = 0

    def sent(self, m: wire.Data, ns: int) -> None:
        if self.after_ns:
            self.inflight[(m.flow, m.seq)] = (m.dst, m.payload, ns)

    def acked(self, ack: wire.Ack) -> None:
        for key in ack.frames:
            self.inflight.pop(key, None)

    def received(self, m: wire.Data) -> None:
        if self.after_ns:
            self.owed[m.origin].append((m.flow, m.seq))  # a duplicate too: its ACK was lost

    def acks_for(self, origin: int) -> list[bytes]:
        """The ACK messages owed to ``origin``, now no longer owed."""
        frames = self.owed.pop(origin, [])
        return [wire.encode_ack(wire.Ack(tuple(frames[i:i + wire.ACK_MAX])))
                for i in range(0, len(frames), wire.ACK_MAX)]

    def overdue(self, now: int) -> list[tuple[tuple[int, int], int, bytes]]:
        """Frames sent before ``now`` less ``after_ns`` and not acknowledged, oldest first, as
        ((flow, seq), dst, payload): no longer in flight, to be sent again."""
        old = now - self.after_ns
        due = [(key, dst, payload) for key, (dst, payload, sent) in self.inflight.items() if sent < old]
        for key, _, _ in due:
            del self.inflight[key]
        self.resent += len(due)
        return due
