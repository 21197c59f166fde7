"""A fault plan's faults the controller applies itself, each at its times (schedule us from
slot 0) through the one timed-change helper (``RunClock.at_schedule_times``): clock skew (the
slot config's offset jumps, skew.py), clock drift (the offset rewritten every
``skew.DRIFT_PERIOD_US`` with what the drift has gained) and optical loss (a rotor's loss tables)."""

from __future__ import annotations

import dataclasses
import heapq
import time
from typing import TYPE_CHECKING

import finsy as fy

from .. import p4 as dp
from .entities import loss_entries
from .options import InjectedFaults
from .roles import SwitchRuntime
from .skew import drift_at, drift_changes, loss_changes, skew_at, skew_changes

if TYPE_CHECKING:
    from .runtime import Controller


class FaultInjector:
    """Per switch, a task per kind: apply what the plan says is live now, then each change."""

    def __init__(self, ctl: "Controller", faults: InjectedFaults):
        self.ctl = ctl
        self.skews = tuple(faults.skews)
        self.drifts = tuple(faults.drifts)
        self.losses = tuple(faults.losses)

    def skewed(self, switch: str) -> bool:
        return any(sk.switch == switch for sk in (*self.skews, *self.drifts))

    def lossy(self, switch: str) -> bool:
        return any(x.switch == switch for x in self.losses)

    def skew_now(self, switch: str) -> int:
        """How far ``switch``'s emulated clock is off now (0 before slot 0: nothing is live)."""
        return self._want(switch, self.ctl.clock.schedule_us())

    def _want(self, switch: str, t_us: float) -> int:
        """Jumps and drifts together: how far ``switch``'s emulated clock is off at ``t_us``."""
        return skew_at(self.skews, switch, t_us) + drift_at(self.drifts, switch, t_us)

    # -- clock skew (clock mode) ----------------------------------------------------------
    async def inject_skew(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        times = heapq.merge(skew_changes(self.skews, sw.name), drift_changes(self.drifts, sw.name))
        await self.ctl.clock.at_schedule_times(times,
                                               lambda t: self._apply_skew(sw, rt, t))

    async def _apply_skew(self, sw: fy.Switch, rt: SwitchRuntime, t_us: float) -> None:
        ctl = self.ctl
        want = self._want(sw.name, t_us)
        async with rt.clock_lock:
            if want == rt.injected_skew_us:
                return
            was, rt.injected_skew_us = rt.injected_skew_us, want
            await ctl.keeper.rewrite(sw, rt)
        ctl.on_event(f"{sw.name}: clock skew {want:+d} us from t={t_us / 1e6:.3f} s (was {was:+d}): slot config "
                     f"offset {rt.config_offset_us} us (controller's {rt.offset.offset_us} us), generation "
                     f"{rt.generation}")
        ctl.status.clock(sw.name, generation=rt.generation, writes=rt.writes, **ctl.keeper.status(rt))
        ctl.trace.event(t_ns=time.time_ns(), switch=sw.name, event="clock-skew", at_us=round(t_us),
                        injected_skew_us=want, config_offset_us=rt.config_offset_us,
                        offset_us=rt.offset.offset_us, generation=rt.generation)

    # -- optical loss (a rotor's loss tables) ---------------------------------------------
    async def inject_loss(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """An adopted switch may hold its predecessor's entries: the first pass makes the
        tables exactly what the plan says now."""
        await self.ctl.clock.at_schedule_times(loss_changes(self.losses, sw.name),
                                               lambda t: self._apply_loss(sw, rt, t))

    async def _apply_loss(self, sw: fy.Switch, rt: SwitchRuntime, t_us: float) -> None:
        want = [x.loss for x in self.losses if x.switch == sw.name and x.live(t_us)]
        held = [e async for e in sw.read([fy.P4TableEntry(dp.T_LOSS_IN), fy.P4TableEntry(dp.T_LOSS_OUT)])]
        if held:
            await rt.write(sw, [-e for e in held])
        if want:
            await rt.write(sw, [+e for e in loss_entries(want)])
        what = ", ".join(f"port {x.port} {x.direction} {x.rate:g}" + (f" in matching {x.matching}"
                                                                       if x.matching is not None else "")
                         for x in want) or "none"
        self.ctl.on_event(f"{sw.name}: optical loss from t={t_us / 1e6:.3f} s: {what}")
        self.ctl.trace.event(t_ns=time.time_ns(), switch=sw.name, event="loss", at_us=round(t_us),
                             losses=[dataclasses.asdict(x) for x in want])
