"""Moving the slots: signal mode sends every slot change (``OP_SET_SLOT``) at its boundary, or
one slot ahead with its start time (timed); clock mode's switch moves by itself, and its
boundaries are only traced.  Acked changes record when the pipeline applied them (acks.py)."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import TYPE_CHECKING

import finsy as fy

from .. import p4 as dp
from .entities import set_slot_packet
from .options import SignalOptions
from .roles import SwitchRuntime
from .timebase import timed_changes

if TYPE_CHECKING:
    from .runtime import Controller

# Timed changes: sent this long (plus twice the offset's uncertainty) after the previous start.
TIMED_MARGIN_US = 50
# Clock mode: the trace's boundaries are the schedule's, known ahead; they are written once they
# have passed, in batches this far apart (common-clock us), not one wake-up and one write each
# (12 switches at dilation 100: ~800 a second, a fifth of a core).  A kill loses the last batch.
TRACE_BATCH_US = 50_000


class SlotRotator:
    """A task per switch: its slot changes (signal mode) or its boundaries traced (clock mode)."""

    def __init__(self, ctl: "Controller", options: SignalOptions):
        self.ctl = ctl
        self.options = options

    def task(self, sw: fy.Switch, rt: SwitchRuntime):
        """The coroutine that moves (or traces) this switch's slots in the run's mode."""
        if self.ctl.mode_code == dp.MODE_CLOCK:
            return self._trace_clock(sw, rt)
        return self._rotate_timed(sw, rt) if self.options.timed else self._rotate(sw, rt)

    def _acked(self, seq: int) -> bool:
        return bool(self.options.ack_every) and seq % self.options.ack_every == 0

    async def _send(self, sw: fy.Switch, rt: SwitchRuntime, pkt: fy.P4PacketOut, seq: int, ack: bool,
                    scheduled: int, sent: int) -> None:
        if ack:
            # Send inline (no extra task before the write); a task waits for the ack.
            fut = asyncio.get_running_loop().create_future()
            rt.waiters[seq] = fut
            await rt.send(sw, pkt)
            asyncio.get_running_loop().create_task(self._ack(rt, fut, seq, scheduled, sent))
        else:
            await rt.send(sw, pkt)

    async def _rotate(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        ctl, clock = self.ctl, self.ctl.clock
        seq = 0
        pending = None
        for nxt in rt.role.boundaries(clock.t0_common_us, clock.now_us()):
            lead = self._lead_us(rt)
            # Fallen behind (tiny slots, busy machine): send only the newest state, never replay.
            if pending is None or nxt[0] - lead <= clock.now_us():
                pending = nxt
                continue
            at, k, idx, night = pending
            pending = nxt
            await clock.sleep_until(at - lead)
            seq += 1
            ack = self._acked(seq)
            scheduled = ctl.tb.wall_ns(at)
            sent = time.time_ns()
            await self._send(sw, rt, set_slot_packet(k, idx, night, seq=seq, ack=ack), seq, ack, scheduled, sent)
            ctl.trace.write(t_ns=sent, switch=sw.name, slot=k, index=idx, night=night,
                            scheduled_ns=scheduled, source="signal")

    async def _rotate_timed(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Timed changes: slot k+1's change (with its start time) goes out once slot k has
        started (the switch holds one pending change); the pipeline applies it by its clock."""
        ctl, clock = self.ctl, self.ctl.clock
        # Sent this long after the previous start: its change is applied by then even if the
        # installed offset is off by the whole measured uncertainty.
        margin = TIMED_MARGIN_US + 2 * (rt.offset.uncertainty_us if rt.offset else 0.0)
        seq = 0
        prev_at = None
        changes = timed_changes(rt.role.boundaries(clock.t0_common_us, clock.now_us()))
        cur = next(changes)
        for nxt in changes:
            at, k, idx, night_us = cur
            cur = nxt
            if nxt[0] <= clock.now_us():
                continue  # fallen behind: the next change is already due, skip this one
            if prev_at is not None:
                await clock.sleep_until(prev_at + margin, spin=False)
            prev_at = at
            seq += 1
            ack = self._acked(seq)
            pkt = set_slot_packet(k, idx, seq=seq, ack=ack, at_us=at, night_us=night_us, target=ctl.target)
            scheduled = ctl.tb.wall_ns(at)
            sent = time.time_ns()
            await self._send(sw, rt, pkt, seq, ack, scheduled, sent)
            ctl.trace.write(t_ns=sent, switch=sw.name, slot=k, index=idx, night=night_us > 0,
                            night_us=night_us, scheduled_ns=scheduled, source="signal-timed")

    def _lead_us(self, rt: SwitchRuntime) -> float:
        """How early to send a slot change: fixed, or (auto) the median of the last acked
        changes' transport delay (send -> applied), so the switch applies it on time."""
        if self.options.lead_us != "auto":
            return float(self.options.lead_us)
        if rt.offset is None or len(rt.acks) < 8:
            return 0.0
        recent = [local + rt.offset.offset_us - (sent - self.ctl.tb.ref_ns) / 1000
                  for _, sent, _, local in rt.acks[-64:]]
        return max(0.0, statistics.median(recent))

    async def _ack(self, rt: SwitchRuntime, fut: asyncio.Future, seq: int, scheduled: int, sent: int) -> None:
        try:
            recv, reply = await asyncio.wait_for(fut, 1.0)
        except asyncio.TimeoutError:
            rt.waiters.pop(seq, None)
            return
        if reply["opcode"] == dp.OP_SET_SLOT:
            rt.acks.append((scheduled, sent, recv, self.ctl.target.reported_to_us(reply["timestamp"])))
        else:
            rt.refused += 1

    async def _trace_clock(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Clock mode: the switch moves by itself; trace the boundaries it follows (no spinning)."""
        ctl, clock = self.ctl, self.ctl.clock
        if not ctl.trace.enabled:
            return
        now = clock.now_us()
        # An adopted switch follows its own clock (slot 0 where the run that installed it put it).
        t0 = clock.t0_common_us if rt.t0_common_us is None else rt.t0_common_us
        due: list[tuple[int, int, int, bool]] = []

        def write(upto_us: float) -> None:
            passed = [b for b in due if b[0] <= upto_us]
            ctl.trace.write_many([dict(t_ns=ctl.tb.wall_ns(at), switch=sw.name, slot=k, index=idx, night=night,
                                       source="clock") for at, k, idx, night in passed])
            del due[:len(passed)]

        try:
            for b in rt.role.boundaries(t0, now):
                if due and b[0] - due[0][0] >= TRACE_BATCH_US:
                    await clock.sleep_until(due[-1][0], spin=False)
                    write(due[-1][0])
                due.append(b)
        finally:  # stopped: the boundaries that have passed are written, the rest never happened
            write(clock.now_us())
