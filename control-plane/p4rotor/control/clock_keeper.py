"""Clock mode: keeping each switch's slot config on its clock.  The slot config alone is
rewritten (never a clear): when a fault plan's skew makes the emulated clock jump
(``fault_injector.py``), and when the periodic re-sync finds the installed offset off by more
than its bound (``skew.ResyncCheck``)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import finsy as fy

from .errors import ControllerError
from .options import ResyncOptions
from .roles import SwitchRuntime
from .skew import ResyncCheck
from .target import clock_start_entities, is_slot_config

if TYPE_CHECKING:
    from .runtime import Controller


class ClockKeeper:
    """Rewrites a switch's slot config on a corrected offset; runs the periodic re-sync."""

    def __init__(self, ctl: "Controller", options: ResyncOptions):
        self.ctl = ctl
        self.options = options

    def status(self, rt: SwitchRuntime) -> dict[str, Any]:
        """The status file's clock fields for one switch."""
        out: dict[str, Any] = dict(injected_skew_us=rt.injected_skew_us, config_offset_us=rt.config_offset_us)
        if self.options.every:
            out["resyncs"] = rt.resyncs
        return out

    async def rewrite(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Rewrite the slot config alone (a MODIFY of its default action, no clear: the tables stay
        and frames keep flowing) with offset + injected skew, on the same epoch, so the slot
        goes on where the corrected clock says.  Caller holds ``rt.clock_lock``.

        A new generation, as at every install: v1model then recomputes its cycle from the epoch
        (the cycle number is the same, so slot ids go on); with the same generation its cycle
        start, kept in common time, would stay, and a clock moved back past it makes the
        unsigned delta wrap (the clock dark for ~2^48 us).  TNA keeps a cycle register per
        generation parity: the new one is started at the cycle running now."""
        ctl = self.ctl
        t0 = ctl.clock.t0_common_us if rt.t0_common_us is None else rt.t0_common_us
        epoch = t0 + rt.role.epoch_offset_us
        gen = (rt.generation + 1) & 0xFFFF or 1
        offset = rt.offset.offset_us + rt.injected_skew_us
        cfg = [e for e in rt.role.entities(ctl.mode_code, offset, epoch, gen, ctl.target) if is_slot_config(e)]
        if len(cfg) != 1:
            raise ControllerError(f"{sw.name}: the role builds {len(cfg)} slot configs, not one")
        starts = clock_start_entities(ctl.target, cfg, now_us=ctl.clock.now_us())
        if starts:
            await rt.write(sw, starts)  # before the config that uses it (TNA)
        await rt.write(sw, cfg)
        rt.generation = gen
        rt.config_offset_us = offset

    async def resync(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Every ``options.every`` s: re-measure this switch's offset and rewrite the slot config
        when the installed one is off by more than the bound (``ResyncCheck``)."""
        while True:
            await asyncio.sleep(self.options.every)
            await self.check(sw, rt)

    async def check(self, sw: fy.Switch, rt: SwitchRuntime) -> ResyncCheck | None:
        ctl = self.ctl
        bound = self.options.bound_us
        async with rt.clock_lock:
            try:
                fresh = await ctl.prober.probe_locked(sw, rt)
            except ControllerError as ex:
                # One lost round (a busy machine, a probe late) is no reason to stop the switch:
                # the config stays as it is and the next period tries again.
                ctl.on_event(f"{sw.name}: re-sync check failed ({ex}); the config stays")
                ctl.trace.event(t_ns=time.time_ns(), switch=sw.name, event="resync", error=str(ex))
                return None
            check = ResyncCheck(rt.offset.offset_us, fresh, bound)
            if check.rewrite:
                rt.offset = fresh
                await self.rewrite(sw, rt)
                rt.resyncs += 1
        now = time.time_ns()
        if check.rewrite:
            ctl.on_event(f"{sw.name}: re-sync: the installed offset {check.installed_us} us is {check.error_us:+d} us "
                         f"off ({fresh.describe()}), more than the {bound:g} us bound: slot config "
                         f"rewritten with {fresh.offset_us} us, generation {rt.generation} (re-sync {rt.resyncs})")
        ctl.status.clock(sw.name, generation=rt.generation, writes=rt.writes, offset_us=rt.offset.offset_us,
                         offset=rt.offset.describe(), last_resync_error_us=check.error_us,
                         last_resync_check_ns=now, **self.status(rt))
        ctl.trace.event(t_ns=now, switch=sw.name, event="resync", error_us=check.error_us,
                        bound_us=bound, uncertainty_us=round(fresh.uncertainty_us, 1),
                        offset_us=check.installed_us, fresh_offset_us=fresh.offset_us,
                        method=fresh.method, rewritten=check.rewrite, injected_skew_us=rt.injected_skew_us,
                        generation=rt.generation)
        return check
