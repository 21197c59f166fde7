"""Installing a switch: probe its clock if the mode needs the offset, then either **adopt**
what it holds (clock mode: exactly what this controller would install, but for the run's
offset, epoch and generation: nothing written, its running clock taken as this run's;
``compare_installed``, ``adopt_clock``) or clear it and write everything, config last.  Safe to
run again after a switch restart, which finsy reconnects to."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import finsy as fy

from .. import p4 as dp
from .entities import Comparison, compare_installed
from .roles import SwitchRuntime
from .target import clock_start_entities, is_slot_config
from .timebase import AdoptedClock, adopt_clock

if TYPE_CHECKING:
    from .runtime import Controller

LOSS_TABLES = (dp.T_LOSS_IN, dp.T_LOSS_OUT)
# Switches installed at once (clear, probe, write); the rest wait their turn.
INSTALL_CONCURRENCY = 8
# Adoption: switches of one fabric are adopted together only if their clocks' slot 0 agree
# within this (plus both offsets' uncertainty); a switch further off is cleared and rewritten.
ADOPT_SKEW_US = 500


class Installer:
    """Installs (or adopts) each switch, and decides the run's slot 0 once, from the first
    switch (in the order given) whose running clock can be adopted."""

    def __init__(self, ctl: "Controller", port_sets: dict[str, list[fy.P4ValueSetEntry]],
                 concurrency: int, adopt: bool):
        self.ctl = ctl
        # Parser value sets (Tofino: the CPU port, the clock port), written before anything else.
        self.port_sets = port_sets
        self.concurrency = concurrency
        # Clock mode only: signal mode drives every slot itself, there is no running clock to adopt.
        # Not on NIKSS yet: its clock_phase covers would have to be read back as the ranges built.
        self.adopt = adopt and ctl.mode_code == dp.MODE_CLOCK and ctl.target.api != "nikss"
        self.no_adopt = "--no-adopt" if not adopt else f"no adoption on target {ctl.target.name}"
        # There the running clock is still kept: the slot config a switch holds gives the slot 0
        # everything is written again on, so a restarted controller's fabric goes on with its
        # slots instead of going dark until a new slot 0.
        self.keep_clock = adopt and ctl.mode_code == dp.MODE_CLOCK and ctl.target.api == "nikss"
        self._sem: asyncio.Semaphore | None = None
        # Each switch's proposal (its clock's slot 0, offset uncertainty; None: cannot adopt)
        # until every switch has one and t0 is decided, once per run.
        self._proposals: dict[str, tuple[float | None, float]] = {}
        self._t0_decided = asyncio.Event()
        self._t0_from: tuple[str, float] | None = None  # (switch, uncertainty) t0 was adopted from
        if not self.adopt and not self.keep_clock:
            self._t0_decided.set()

    async def install(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Probe the clock if needed, adopt what the switch holds (clock mode) or clear it and
        write everything (config last); then ready.

        At most ``concurrency`` switches probe, read or write at once: on a small machine
        running a hundred BMv2 processes, all of them installing together starve one another
        until a P4Runtime write outlives its deadline (finsy's 10 s)."""
        ctl = self.ctl
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        t = time.perf_counter()
        rt.install_phases = {"ready_ns": time.time_ns()}
        async with self._sem:
            if self.port_sets[sw.name]:
                # The CPU port first: PacketOut probes (and their replies) need it.  Value sets
                # take MODIFY only, and writing the same port again disturbs nothing.
                await rt.write(sw, self.port_sets[sw.name])
            # Clock mode and timed changes need the offset; signal mode uses it to time acks.
            probe = ctl.mode_code == dp.MODE_CLOCK or ctl.signal.ack_every or ctl.signal.timed
            if probe:
                # A switch (re)installed while a skew fault is live: its clock has jumped already
                # (the probes see it too).  Before slot 0 (the first install) nothing is live.
                rt.injected_skew_us = ctl.injector.skew_now(sw.name)
            # The probe and the read at once: what is compared leaves out the offset (a run
            # field), and a restarted switch is back only when both are done.
            offset, cmp = await asyncio.gather(
                self._timed(rt, "probe_ms", ctl.prober.probe(sw, rt)) if probe else _nothing(),
                self._timed(rt, "read_ms", self._read_and_compare(sw, rt)) if self.adopt else _nothing())
            if probe:
                rt.offset = offset
                ctl.on_event(f"{sw.name}: clock offset {rt.offset.offset_us} us ({rt.offset.describe()})")
            running = await sw.running_clock() if self.keep_clock else None
        if running is not None and running["mode"] != dp.MODE_CLOCK:
            running = None
        clock, why = await self._adoptable(sw, rt, cmp, running)
        if clock is not None:
            self._adopted(sw, rt, cmp, clock, (time.perf_counter() - t) * 1e3)
            return
        held = cmp.clock if cmp is not None and cmp.clock is not None else running
        if held is not None and held.get("gen") == rt.generation:
            # The clock registers still hold the old config's generation: a new one restarts them.
            rt.generation = (rt.generation + 1) & 0xFFFF or 1
        async with self._sem:
            await self._clear_and_write(sw, rt, why, running)

    @staticmethod
    async def _timed(rt: SwitchRuntime, phase: str, job: Any) -> Any:
        p = time.perf_counter()
        out = await job
        rt.install_phases[phase] = _ms_since(p)
        return out

    async def _read_and_compare(self, sw: fy.Switch, rt: SwitchRuntime) -> Comparison:
        """What the switch holds (every table entry, the defaults the role sets) against what
        this controller would write; the run fields of the config are not compared."""
        ctl = self.ctl
        want = rt.role.entities(ctl.mode_code, rt.offset.offset_us if rt.offset else 0, 0, rt.generation,
                                ctl.target)
        # The optical-loss tables hold fault state (a plan's loss, written and removed at its
        # times), not configuration: a fabric with a loss live is still this controller's.
        have = [e async for e in sw.read(fy.P4TableEntry())
                if sw.p4info.tables[e.table_id].name not in LOSS_TABLES]
        defaults = [fy.P4TableEntry(e.table_id, is_default_action=True) for e in want
                    if isinstance(e, fy.P4TableEntry) and e.is_default_action]
        if defaults:
            have += [e async for e in sw.read(defaults)]
        return compare_installed(sw.p4info, want, have)

    async def _adoptable(self, sw: fy.Switch, rt: SwitchRuntime, cmp: Comparison | None,
                         running: dict[str, int] | None = None) -> tuple[AdoptedClock | None, str]:
        """(the switch's running clock, "") to adopt it, or (None, why not; "" in signal mode,
        which never adopts).  The first time, every switch proposes and t0 is decided once all have: the
        first switch (in --switch/topology order) whose clock can be adopted gives it.  ``running``:
        the slot config a switch whose tables cannot be read back holds (``keep_clock``): its
        clock is proposed, and the switch written again on the t0 decided."""
        ctl = self.ctl
        clock = kept = None
        if cmp is not None and cmp.same and cmp.clock is not None and rt.offset is not None:
            clock = adopt_clock(ctl.target, cmp.clock["epoch_us"], cmp.clock["offset"], rt.offset.offset_us,
                                ctl.clock.now_us())
        if running is not None and rt.offset is not None:
            kept = adopt_clock(ctl.target, running["epoch"], running["offset"], rt.offset.offset_us,
                               ctl.clock.now_us())
        unc = rt.offset.uncertainty_us if rt.offset else 0.0
        if not self._t0_decided.is_set():
            proposal = clock or kept
            self._proposals[sw.name] = (None if proposal is None else proposal.epoch_us - rt.role.epoch_offset_us,
                                        unc)
            if len(self._proposals) == len(ctl.runtimes):
                self._decide_t0()
            else:
                await self._t0_decided.wait()
        if cmp is None:
            if kept is not None and self._t0_from is not None:
                return None, (f"{self.no_adopt}: its tables cannot be read back; written again on the running "
                              f"clock {self._t0_from[0]} holds")   # over them if the schedule is the same
            return None, self.no_adopt if ctl.mode_code == dp.MODE_CLOCK else ""
        if clock is None:
            return None, cmp.reason or "the switch holds no slot config"
        # Its slot 0 against this run's: the first adopted switch's, or (none adopted) this run's
        # own, which a switch holds when its connection came back without a restart.
        ref, ref_unc = self._t0_from or ("this run", unc)
        skew = clock.epoch_us - rt.role.epoch_offset_us - ctl.clock.t0_common_us
        tol = ADOPT_SKEW_US + unc + ref_unc
        if abs(skew) > tol:
            return None, (f"its slot 0 is {skew:+.0f} us from {ref}'s, more than {tol:.0f} us: "
                          f"not the same clock")
        return clock, ""

    def _decide_t0(self) -> None:
        for name in self.ctl.runtimes:  # the order switches were given in
            t0, unc = self._proposals.get(name, (None, 0.0))
            if t0 is not None:
                self.ctl.clock.t0_common_us = round(t0)
                self._t0_from = (name, unc)
                break
        self._t0_decided.set()

    def _adopted(self, sw: fy.Switch, rt: SwitchRuntime, cmp: Comparison, clock: AdoptedClock,
                 elapsed_ms: float) -> None:
        """Take the switch's running clock as this run's: nothing written (but value sets)."""
        ctl = self.ctl
        cfg = cmp.clock
        rt.generation = cfg["gen"]
        rt.t0_common_us = round(clock.epoch_us) - rt.role.epoch_offset_us
        rt.adopted = True
        rt.install_ms = elapsed_ms
        rt.entities = cmp.entries
        # In this run's time the adopted clock runs on the offset just measured (the epoch
        # absorbed the difference): that is what a rewrite keeps.
        rt.config_offset_us = rt.offset.offset_us + rt.injected_skew_us
        cycle_us = cfg["cycle"] * ctl.target.time_unit_ns / 1000
        rt.install_phases["done_ns"] = time.time_ns()
        ctl.status.installed(
            sw.name, cmp.entries, elapsed_ms, rt.offset.offset_us, rt.offset, adopted=True,
            writes=rt.writes, clears=rt.clears, generation=rt.generation, epoch_us=round(clock.epoch_us),
            installed_epoch_us=round(clock.installed_epoch_us), installed_offset_us=round(clock.installed_offset_us),
            cycle_us=cycle_us, phases=dict(rt.install_phases), **ctl.keeper.status(rt))
        since = (ctl.clock.now_us() - clock.epoch_us) / 1e6
        ctl.on_event(f"{sw.name}: adopted: it holds what this controller would install ({cmp.entries} "
                     f"entries and defaults); its clock runs on: generation {rt.generation}, epoch "
                     f"{clock.installed_epoch_us:.0f} us with offset {clock.installed_offset_us:.0f} us as "
                     f"installed = {clock.epoch_us:.0f} us in our time ({since:.1f} s ago); "
                     f"{rt.writes} entities written")
        rt.ready.set()

    async def _clear_and_write(self, sw: fy.Switch, rt: SwitchRuntime, why: str,
                               running: dict[str, int] | None = None) -> None:
        """Clear, then write everything: safe to run again after a restart.  A switch whose
        running clock is kept (``keep_clock``) and whose config has this schedule's cycle is
        written over instead, not cleared: what it holds is what this controller writes (the
        same schedule), and its frames keep their routes while it is written."""
        ctl = self.ctl
        offset = rt.offset.offset_us if rt.offset else 0
        epoch = ctl.clock.t0_common_us + rt.role.epoch_offset_us
        if ctl.mode_code == dp.MODE_CLOCK:
            offset += rt.injected_skew_us  # the emulated clock's jump (skew.py); 0 without faults
        ents = rt.role.entities(ctl.mode_code, offset, epoch, rt.generation, ctl.target)
        cfg = next((e.action.args for e in ents if is_slot_config(e)), None)
        over = (running is not None and cfg is not None and running["cycle"] == cfg.get("cycle")
                and running["matchings"] == cfg.get("num_matchings"))
        if why:
            ctl.on_event(f"{sw.name}: not adopted ({why}): "
                         + ("writing over what it holds" if over else "clearing and writing"))
        p = time.perf_counter()
        if not over:
            await sw.delete_all()
            rt.clears += 1
        rt.install_phases["clear_ms"] = _ms_since(p)
        rt.adopted = False
        rt.t0_common_us = None
        if ctl.mode_code == dp.MODE_CLOCK:
            rt.config_offset_us = offset
        t = time.perf_counter()
        starts = clock_start_entities(ctl.target, ents)
        if starts:
            # TNA: the clock's cycle register is started before the config that uses it.
            await rt.write(sw, starts)
        with sw.writing_over() if over else contextlib.nullcontext():
            await rt.write(sw, ents)
        rt.install_ms = (time.perf_counter() - t) * 1e3
        rt.install_phases["write_ms"] = round(rt.install_ms, 3)
        rt.install_phases["done_ns"] = time.time_ns()  # the last write returned: the switch is installed
        rt.entities = len(ents)
        extra: dict[str, Any] = dict(adopted=False, writes=rt.writes, clears=rt.clears, generation=rt.generation,
                                     phases=dict(rt.install_phases))
        if ctl.mode_code == dp.MODE_CLOCK:
            extra["epoch_us"] = epoch
            extra.update(ctl.keeper.status(rt))
        if why:
            extra["not_adopted"] = why
        if over:
            extra["written_over"] = True
        ctl.status.installed(sw.name, len(ents), rt.install_ms, rt.offset.offset_us if rt.offset else None,
                             rt.offset, **extra)
        ctl.on_event(f"{sw.name}: installed {len(ents)} entities in {rt.install_ms:.1f} ms "
                     f"({ctl.mode} mode{', written over what it held' if over else ''})")
        rt.ready.set()


def _ms_since(t: float) -> float:
    return round((time.perf_counter() - t) * 1e3, 3)


async def _nothing() -> None:
    return None
