"""The live CorrOpt monitor's task ([Zhuo19 §3.4]): it reads the rotors' per-link loss counters
into the monitor's state (``loss_monitor.py``, pure), and when a link is to go, writes the masked
schedule: only what changes, ToRs first (their routes stop using the link) and rotors last (its
circuits go), no clear, no dark cycle."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import Schedule
from .entities import diff_entities
from .errors import ControllerError
from .options import CorrOptOptions

if TYPE_CHECKING:
    from .runtime import Controller


async def read_link_counters(sw: fy.Switch, ports: Sequence[int]) -> dict[str, dict[int, tuple[int, int]]]:
    """{direction: {port: (crossed, lost)}} from the rotor's four per-link counters."""
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for d, (c_ok, c_lost) in dp.LINK_COUNTERS.items():
        got: dict[str, dict[int, int]] = {}
        for c in (c_ok, c_lost):
            got[c] = {e.index: (e.data.packet_count if e.data is not None else 0)
                      async for e in sw.read([fy.P4CounterEntry(c, index=p) for p in ports])}
        out[d] = {p: (got[c_ok].get(p, 0), got[c_lost].get(p, 0)) for p in ports}
    return out


class CorrOptTask:
    """One task for the whole fabric; an error in it ends the run (``error``)."""

    def __init__(self, ctl: "Controller", options: CorrOptOptions):
        self.ctl = ctl
        self.options = options
        self.monitor = options.monitor
        self.error: ControllerError | None = None

    def done(self, task: asyncio.Task) -> None:
        """A monitor that fails ends the run with its error (never silently stops watching)."""
        if task.cancelled() or task.exception() is None:
            return
        self.error = ControllerError(f"CorrOpt monitor: {task.exception()}")
        self.ctl.stop()

    async def run(self) -> None:
        """Every ``options.every`` s: read every ready rotor's per-link counters, estimate, decide;
        apply new disables at once (``_apply_masked``).  A rotor that cannot be read (restarting)
        is skipped this round, said once per outage."""
        ctl, mon, every = self.ctl, self.monitor, self.options.every
        sws = {sw.name: sw for sw in ctl.switches}
        unreadable: set[str] = set()
        ctl.status.corropt(threshold=mon.threshold, min_frames=mon.min_frames, rates={}, decisions=[],
                           disabled=[])
        ctl.on_event(f"CorrOpt monitor: links lossier than {mon.threshold:g} are turned off while every slice "
                     f"stays connected (estimates over {mon.min_frames} frames, read every {every:g} s)")
        while True:
            await asyncio.sleep(every)
            for name, rt in ctl.runtimes.items():
                if rt.role.kind != "rotor" or not rt.ready.is_set() or name not in mon.racks:
                    continue
                try:
                    readings = await read_link_counters(sws[name], sorted(mon.racks[name]))
                except Exception as ex:  # noqa: BLE001 - a switch restarting: gRPC/finsy errors alike
                    if name not in unreadable:
                        unreadable.add(name)
                        ctl.on_event(f"CorrOpt monitor: {name} unreadable ({str(ex).splitlines()[0][:120]}); "
                                     "skipped until it answers")
                    continue
                unreadable.discard(name)
                for d, r in readings.items():
                    mon.observe(name, d, r)
            rates: dict[str, dict[str, list]] = {}
            for (rotor, rack, d), est in sorted(mon.estimates.items()):
                rates.setdefault(f"{rotor}:{rack}", {})[d] = [round(est.rate, 6), est.frames]
            new = mon.decide()
            ctl.status.corropt(rates=rates)
            if not new:
                continue
            now = time.time_ns()
            recs = []
            for d in new:
                port = {rack: p for p, rack in mon.racks[d.rotor].items()}[d.rack]
                ctl.on_event(f"CorrOpt monitor: {d.action} {d.rotor} rack {d.rack} (port {port}), loss "
                             f"{d.rate:.3g} > {mon.threshold:g}: {d.reason()}")
                rec = dict(rotor=d.rotor, rack=d.rack, port=port, rate=round(d.rate, 6), action=d.action,
                           reason=d.reason(), t_ns=now)
                ctl.trace.event(t_ns=now, event="corropt", **{k: v for k, v in rec.items() if k != "t_ns"})
                recs.append(rec)
            if any(d.action == "disable" for d in new):
                t = time.perf_counter()
                writes = await self._apply_masked(mon.masked())
                applied = time.time_ns()
                for rec in recs:
                    if rec["action"] == "disable":
                        rec.update(applied_ns=applied, writes=writes)
                ctl.on_event(f"CorrOpt monitor: {len(mon.disabled)} link(s) off now: masked schedule written "
                             f"({writes} updates, ToRs then rotors, {(time.perf_counter() - t) * 1e3:.0f} ms)")
            ctl.status.corropt(decisions=ctl.status.data["corropt"]["decisions"] + recs,
                               disabled=[f"{r}:{k}" for r, k in mon.disabled])

    async def _apply_masked(self, sched: Schedule) -> int:
        """Every switch to ``sched``'s entities by writing what differs (``diff_entities``), ToRs
        first: their routes leave the masked circuits before the rotors drop them.  A switch
        takes its new role at once, so one (re)installed later gets the masked schedule too."""
        ctl = self.ctl
        assert self.options.replan is not None
        roles = {r.spec.name: r for r in self.options.replan(sched)}
        sws = {sw.name: sw for sw in ctl.switches}
        writes = 0
        for rt in sorted(ctl.runtimes.values(), key=lambda rt: rt.role.kind == "rotor"):
            new = roles.get(rt.spec.name)
            if new is None:
                continue
            old, rt.role = rt.role, new
            if not rt.ready.is_set():
                continue
            sw = sws[rt.spec.name]
            # Built with the same run fields: the slot config compares equal and is not written.
            args = (ctl.mode_code, 0, 0, rt.generation, ctl.target)
            ups = diff_entities(sw.p4info, old.entities(*args), new.entities(*args))
            if not ups:
                continue
            try:
                await rt.write(sw, ups)
            except Exception as ex:  # noqa: BLE001 - it gets the masked schedule when re-installed
                ctl.on_event(f"{rt.spec.name}: masked schedule not written ({str(ex).splitlines()[0][:120]}); "
                             "it gets it when it is re-installed")
                continue
            writes += len(ups)
        return writes
