"""Measuring a switch's clock offset: time probes as PacketOut requests answered by PacketIn
replies, or two-way probes on the data path through its clock port (``clockport.py``).

The packet reader here is each switch's one PacketIn consumer: it hands every reply to the
request (a time probe, an acked slot change) waiting on its sequence number."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING

import finsy as fy

from .. import p4 as dp
from .entities import time_probe_packet
from .errors import ControllerError
from .roles import SwitchRuntime
from .timebase import OffsetEstimate, estimate_offset

if TYPE_CHECKING:
    from .runtime import Controller

LOG = logging.getLogger("p4rotor.controller")

CLOCK_PORT_PROBES = 64  # per round, in bursts of 8: enough that some meet both latency floors
CLOCK_PORT_ROUNDS = 4   # more rounds while the proven half-bracket exceeds the target
CLOCK_PORT_TARGET_US = 15


async def read_packets(sw: fy.Switch, rt: SwitchRuntime) -> None:
    """Every PacketIn to the request waiting for its sequence number; a refusal is logged."""
    async for pkt in sw.read_packets():
        try:
            seq, op = pkt["seq"], pkt["opcode"]
        except KeyError:
            LOG.warning("%s: packet-in without p4rotor metadata ignored", sw.name)
            continue
        recv = time.time_ns()
        fut = rt.waiters.pop(seq, None)
        if fut is not None and not fut.done():
            fut.set_result((recv, pkt))
        elif op == dp.OP_ERROR:
            LOG.error("%s refused control packet seq=%d index=%d", sw.name, seq, pkt["index"])


class ClockProber:
    """A switch's clock offset as the controller sees it, a live skew fault's jump included
    (skew.py): the emulated clock reads the skew more than the raw one the probe saw."""

    def __init__(self, ctl: "Controller", probes: int):
        self.ctl = ctl
        self.probes = probes

    async def probe(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                    packet_out: bool = False) -> OffsetEstimate:
        """One probe round per switch at a time (they share sequence numbers)."""
        async with rt.clock_lock:
            return await self.probe_locked(sw, rt, n, packet_out)

    async def probe_locked(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                           packet_out: bool = False) -> OffsetEstimate:
        """``probe`` for a caller that holds ``rt.clock_lock``."""
        est = await self._probe_raw(sw, rt, n, packet_out)
        if rt.injected_skew_us:
            # raw + skew + offset = common.
            est = dataclasses.replace(est, offset_us=est.offset_us - rt.injected_skew_us)
        return est

    async def _request(self, sw: fy.Switch, rt: SwitchRuntime, pkt: fy.P4PacketOut, seq: int,
                       timeout: float = 1.0):
        fut = asyncio.get_running_loop().create_future()
        rt.waiters[seq] = fut
        sent = time.time_ns()
        await rt.send(sw, pkt)
        try:
            recv, reply = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            rt.waiters.pop(seq, None)
            return sent, None, None
        return sent, recv, reply

    async def _probe_raw(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                         packet_out: bool = False) -> OffsetEstimate:
        target = self.ctl.target
        if target.shared_clock:
            # The switch's clock is the controller's common time (Timebase.for_target).
            return OffsetEstimate(offset_us=0, rtt_us=0.0, probes=0, method="shared-clock")
        if rt.spec.clock_iface and not packet_out:
            return await self._probe_clock_port(sw, rt, n)
        samples = []
        for i in range(n or self.probes):
            seq = 0x70000000 + (rt.generation << 12) + i
            sent, recv, reply = await self._request(sw, rt, time_probe_packet(seq), seq)
            if reply is not None:
                samples.append((sent, recv, target.reported_to_us(reply["timestamp"])))
        if not samples:
            raise ControllerError(f"{sw.name}: no time probe answered (is the CPU port {target.cpu_port} set?)")
        return estimate_offset(samples, self.ctl.tb)

    async def _probe_clock_port(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None) -> OffsetEstimate:
        """Two-way probes through the switch's clock port, on the data path only (clockport.py)."""
        from . import clockport as CP

        tb = self.ctl.tb
        us = self.ctl.target.reported_to_us

        def run() -> list:
            # Bounds from every probe hold together (the offset is one number): keep probing, up
            # to CLOCK_PORT_ROUNDS rounds, until the proven bracket is narrow enough.
            samples: list = []
            with CP.ClockPort(rt.spec.clock_iface) as cp:
                for r in range(CLOCK_PORT_ROUNDS):
                    samples += [dataclasses.replace(s, t2_us=us(s.t2_us), t3_us=us(s.t3_us))
                                for s in cp.measure(max(CLOCK_PORT_PROBES, n or self.probes),
                                                    first_seq=0x60000000 + (rt.generation << 12) + (r << 8))]
                    try:
                        if CP.bracket(samples, tb.ref_ns).half_width_us <= CLOCK_PORT_TARGET_US:
                            break
                    except ValueError:
                        pass
            return samples

        try:
            samples = await asyncio.get_running_loop().run_in_executor(None, run)
        except CP.ClockPortError as ex:
            raise ControllerError(f"{sw.name}: {ex}") from None
        if not samples:
            raise ControllerError(f"{sw.name}: no time probe came back on clock port {rt.spec.clock_iface} "
                                  f"(is it wired to port {self.ctl.target.clock_port} of this switch?)")
        try:
            b = CP.bracket(samples, tb.ref_ns)
        except ValueError as ex:
            raise ControllerError(f"{sw.name}: {ex}") from None
        return OffsetEstimate(offset_us=b.offset_us, rtt_us=0.0, probes=b.probes, method="clock-port",
                              jitter_us=b.half_width_us, spread_us=b.spread_us)
