"""The P4Runtime controller: installs a schedule's matchings and rotates the slots.

finsy drives the P4Runtime sessions: one ``finsy.Switch`` (one asyncio task) per
switch, a ready handler that clears the switch and writes its whole state (so it
is safe to run again after a switch restart, which finsy reconnects to), and
entities built as plain values by pure functions that tests inspect directly.

Two ways to move the slot (docs/dataplane.md explains why):

* **signal**: at every slot boundary the controller sends a PacketOut control
  packet (``OP_SET_SLOT``) through the switch; the pipeline writes it into its
  state register.  BMv2's P4Runtime server does not implement register writes.
  *Timed* (``signal_timed``): each change carries its start time and is sent one
  slot ahead; the pipeline holds it and applies it by its own clock, so the
  gRPC/PI path's jitter no longer moves the boundary (needs the clock offset).
* **clock**: the controller measures the switch's clock offset with time probes,
  installs the cycle once, and the pipeline computes the slot itself.  It goes on doing so
  when the controller stops: a restarted controller reads what each switch holds and, when
  it is exactly what it would install (but for the run's offset, epoch and generation),
  **adopts** it: writes nothing and takes the running clock as its own (``compare_installed``,
  ``adopt_clock``).  Otherwise it clears and writes, as always in signal mode.
  While it runs, a switch's clock can be made to jump (a fault plan's clock skew) and a task per
  switch can re-measure its offset periodically and rewrite the slot config when it is off by
  more than a bound (``skew.py``): the slot config alone, never a clear.

A live CorrOpt monitor (``loss_monitor.py``, [Zhuo19 §3.4]) can run beside either mode: it reads the
rotors' per-link loss counters, and when a link is lossier than the threshold and every slice
stays connected without it, it masks the link's circuits out of the schedule and writes only what
changes, ToRs first (their routes stop using the link) and rotors last (its circuits go): no clear,
no dark cycle.

The ``Controller`` here checks its options, starts a task per switch and ends the run; each job
has its helper: ``installer.py`` (install or adopt), ``prober.py`` (clock offsets),
``rotator.py`` (slot changes), ``clock_keeper.py`` (slot config rewrites, the re-sync),
``fault_injector.py`` (skew and loss at their times), ``counters.py``, ``corropt_task.py``.

The target (``target.py``: BMv2 or Tofino) says which modes exist, how times convert between
the controller's microseconds and the switch, where the CPU port is and what device config
to push; everything here stays in microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import Schedule
from .clock_keeper import ClockKeeper
from .corropt_task import CorrOptTask
from .activity_recorder import ActivityRecorder
from .counters import CounterPoller
from .entities import check_egress_guard, port_value_set_entries
from .roles import with_sleep
from .errors import ControllerError, NotPrimaryError
from .fault_injector import FaultInjector
from .installer import INSTALL_CONCURRENCY, Installer
from .nikss import ebpf_contract
from .options import CorrOptOptions, InjectedFaults, ResyncOptions, SignalOptions
from .p4info import check_p4info
from .prober import ClockProber, read_packets
from .reconnect import reconnect_sooner
from .roles import Role, SwitchRuntime, SwitchSpec, Trace, rotor_role
from .rotator import SlotRotator
from .status import StatusFile
from .target import BMV2, Target
from .timebase import Timebase
from .timing import RunClock

LOG = logging.getLogger("p4rotor.controller")

reconnect_sooner()


class Controller:
    """Drive switches (rotors, ToRs) over P4Runtime: one finsy Switch task per switch."""

    def __init__(self, roles: Sequence[Role], *, mode: str, target: Target = BMV2, trace: Path | None = None,
                 status_file: Path | None = None, on_event: Callable[[str], None] | None = None,
                 election_id: int = 10, lead_s: float = 1.0, probes: int = 16,
                 install_concurrency: int = INSTALL_CONCURRENCY, adopt: bool = True, counters_every: float = 0.0,
                 signal: SignalOptions = SignalOptions(), resync: ResyncOptions = ResyncOptions(),
                 faults: InjectedFaults = InjectedFaults(), corropt: CorrOptOptions | None = None,
                 activity: Path | None = None, port_sleep: dict[str, dict[int, dict[str, list[int]]]] | None = None):
        # Checked before anything is written (the status file either): one line, nothing started.
        if mode not in ("signal", "clock"):
            raise ControllerError(f"unknown mode {mode!r} (signal or clock)")
        if mode not in target.modes:
            raise ControllerError(f"target {target.name} has no {mode} mode ({' or '.join(target.modes)} only)")
        if not roles:
            raise ControllerError("no switch given (--switch; --pipeline on target ebpf)")
        signal.check(mode)
        if install_concurrency < 1:
            raise ControllerError(f"bad install concurrency {install_concurrency}: at least 1")
        if counters_every < 0:
            raise ControllerError(f"bad counter interval {counters_every}: seconds >= 0")
        resync.check(mode)
        faults.check(mode, roles)
        if corropt is not None:
            corropt.check()
        if (activity is not None or port_sleep) and target.name == "tofino":
            raise ControllerError("--activity and --port-sleep: the TNA programs have no per-slot counters or "
                                  "sleep tables (v1model and ebpf only)")
        if activity is not None and not any(r.energy is not None for r in roles):
            raise ControllerError("--activity: no rotor or ToR to record (it needs --topology; the one-switch "
                                  "fabric has no per-slot counters)")
        unknown = sorted(set(port_sleep or {}) - {r.spec.name for r in roles})
        if unknown:
            raise ControllerError(f"--port-sleep: no switch {', '.join(unknown)} in this run")
        if port_sleep:
            roles = [with_sleep(r, port_sleep[r.spec.name]) if r.spec.name in port_sleep else r for r in roles]
        self.target = target
        self.mode = mode
        self.mode_code = dp.MODE_SIGNAL if mode == "signal" else dp.MODE_CLOCK
        self.election_id = election_id
        self.signal = signal
        self._stop: asyncio.Event | None = None  # set when the run must end (taken over)
        self.on_event = on_event or (lambda msg: LOG.info("%s", msg))
        blobs: dict[Path, Path | bytes] = {}
        schemas: dict[Path, fy.P4Schema] = {}
        for r in roles:
            if r.spec.clock_iface and target.clock_port is None:
                raise ControllerError(f"{r.spec.name}: --clock-iface needs the switch's clock port: target "
                                      f"{target.name} has none unless --clock-port N sets it")
            if r.p4blob not in blobs:
                blobs[r.p4blob] = target.p4blob(r.p4blob)
            if r.p4info not in schemas:
                contract, counters = {"rotor": (dp.ROTOR_CONTRACT, dp.ROTOR_COUNTERS),
                                      "tor": (dp.TOR_CONTRACT, dp.TOR_COUNTERS),
                                      "one-switch": (dp.ONE_CONTRACT, dp.ONE_COUNTERS)}[r.kind]
                counters += tuple(c for c in target.drop_counters if c not in counters)
                if target.api == "nikss":
                    # The PSA programs' P4Info lists no counters (the adapter finds them by name).
                    contract, counters = ebpf_contract(contract), ()
                schemas[r.p4info] = check_p4info(r.p4info, contract, counters)
        self.trace = Trace(trace)
        self.tb = Timebase.for_target(target)
        # Slot 0 of the schedule starts lead_s from now (each switch adds its own offset), unless
        # a switch's running clock is adopted: then slot 0 is where that clock says (installer.py).
        self.clock = RunClock(self.tb, self.tb.start_us + int(lead_s * 1e6), signal.spin_us)
        self.runtimes: dict[str, SwitchRuntime] = {}
        port_sets: dict[str, list[fy.P4ValueSetEntry]] = {}
        for r in roles:
            if r.spec.name in self.runtimes:
                raise ControllerError(f"switch {r.spec.name!r} given twice")
            # Fresh generation per run: state a previous run left in registers is void.
            self.runtimes[r.spec.name] = SwitchRuntime(role=r, generation=(time.time_ns() >> 20) & 0x7FFF)
            schema = schemas[r.p4info]
            port_sets[r.spec.name] = port_value_set_entries(
                schema, target.port_value_sets(r.kind, (vs.name for vs in schema.value_sets)))
        # One helper per job (module docstring).
        self.installer = Installer(self, port_sets, install_concurrency, adopt)
        self.prober = ClockProber(self, probes)
        self.rotator = SlotRotator(self, signal)
        self.keeper = ClockKeeper(self, resync)
        self.injector = FaultInjector(self, faults)
        self.counters = CounterPoller(self, counters_every)
        self.recorder = (ActivityRecorder(self, activity, {r.spec.name: r.energy for r in roles if r.energy is not None})
                         if activity is not None else None)
        self.corropt = CorrOptTask(self, corropt) if corropt is not None else None
        self.loss_monitor = corropt.monitor if corropt is not None else None
        # What other processes read (phase, switches installed, epoch, error); log text is for people.
        self.status = StatusFile(status_file, mode, {n: rt.role.kind for n, rt in self.runtimes.items()})
        self.switches = self._switches(blobs)

    def _switches(self, blobs: dict[Path, Path | bytes]) -> list[Any]:
        """A finsy Switch per switch; on a NIKSS target its adapter, which answers the same calls."""
        if self.target.api == "nikss":
            from .nikss_switch import NikssDriver

            missing = [rt.spec.name for rt in self.runtimes.values() if rt.spec.pipeline is None]
            if missing:
                raise ControllerError(f"target {self.target.name}: no NIKSS pipeline for {', '.join(missing)} "
                                      "(--pipeline NAME=ID[@NETNS])")
            return [NikssDriver(rt.spec.name, rt.spec.pipeline, rt.spec.netns, rt.role.p4info, self._ready)
                    for rt in self.runtimes.values()]
        return [fy.Switch(rt.spec.name, rt.spec.address, fy.SwitchOptions(
                    p4info=rt.role.p4info, p4blob=blobs[rt.role.p4blob], device_id=rt.spec.device_id,
                    initial_election_id=self.election_id, ready_handler=self._ready))
                for rt in self.runtimes.values()]

    @property
    def t0_common_us(self) -> int:
        """The run's slot 0 in common us (the lead from start, or an adopted switch's clock)."""
        return self.clock.t0_common_us

    # -- per-switch lifecycle ------------------------------------------------
    async def _ready(self, sw: fy.Switch) -> None:
        rt = self.runtimes[sw.name]
        # Ready again (a switch that restarted): what failed while it was gone is not the run's.
        rt.error = None
        try:
            if not sw.is_primary:
                # Not raised into finsy (which would log a traceback and retry): the run ends.
                self._not_primary(sw, rt)
                return
            rt.was_primary = True
            rt.generation = (rt.generation + 1) & 0xFFFF or 1
            sw.create_task(read_packets(sw, rt))
            await self.installer.install(sw, rt)
            sw.create_task(self.rotator.task(sw, rt))
            if self.mode_code == dp.MODE_CLOCK:
                if self.injector.skewed(sw.name):
                    sw.create_task(self.injector.inject_skew(sw, rt))
                if self.keeper.options.every:
                    sw.create_task(self.keeper.resync(sw, rt))
            if self.injector.lossy(sw.name):
                sw.create_task(self.injector.inject_loss(sw, rt))
            if self.counters.every:
                sw.create_task(self.counters.publish(sw))
        except ControllerError as ex:
            rt.error = ex
            raise
        except fy.P4ClientError as ex:
            rt.error = ControllerError(f"{sw.name}: {ex}")
            raise rt.error from None

    def _not_primary(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Another controller is primary: refuse to run as a backup, or (once primary) stop."""
        if rt.was_primary:
            msg = (f"{sw.name}: taken over by another controller (election id {sw.primary_id} > "
                   f"ours {self.election_id}); stopping")
        else:
            msg = (f"{sw.name}: another controller is primary (its election id {sw.primary_id}, ours "
                   f"{self.election_id}); refusing to run as backup (a higher --election-id takes over)")
        rt.error = NotPrimaryError(msg)
        self.stop()

    def stop(self) -> None:
        """End the run (its error, if any, is a switch's or the monitor's)."""
        if self._stop is not None:
            self._stop.set()

    async def measure_skew(self, probes: int = 8, packet_out: bool = False) -> dict[str, int]:
        """Residual error of each installed offset, measured with fresh probes (us).

        ``packet_out``: measure with PacketOut probes even where a clock port is set
        (to compare the two time bases)."""
        out = {}
        for sw in self.switches:
            rt = self.runtimes[sw.name]
            if rt.offset is None:
                continue
            fresh = await self.prober.probe(sw, rt, probes, packet_out=packet_out)
            out[sw.name] = fresh.offset_us - rt.offset.offset_us
        return out

    # -- whole run -------------------------------------------------------------
    async def run(self, duration: float | None = None, connect_timeout: float = 10.0,
                  after_ready: Callable[["Controller"], Any] | None = None) -> None:
        """Run until ``duration`` seconds pass (None: forever) or a switch fails."""
        if self.target.api == "nikss":
            from .nikss_switch import NikssFabric

            controller: Any = NikssFabric(self.switches, self.on_event)
        else:
            controller = fy.Controller(self.switches)
        self._stop = asyncio.Event()
        monitor: asyncio.Task | None = None
        recording: asyncio.Task | None = None
        task = asyncio.create_task(controller.run())
        stop = asyncio.create_task(self._stop.wait())
        try:
            await self._wait_ready(task, connect_timeout)
            self.status.running(self.tb.wall_ns(self.t0_common_us))
            if self.corropt is not None:
                monitor = asyncio.create_task(self.corropt.run())
                monitor.add_done_callback(self.corropt.done)
            if self.recorder is not None:
                recording = asyncio.create_task(self.recorder.run(
                    {s.name: s for s in self.switches if s.name in self.recorder.views}))
            if after_ready is not None:
                res = after_ready(self)
                if asyncio.iscoroutine(res):
                    await res
            # Until the duration is over, a switch fails the run, or another controller takes over.
            done, _ = await asyncio.wait([task, stop], timeout=duration, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                task.result()
            self._raise_switch_errors()
        except ControllerError as ex:
            self.status.failed(str(ex))
            raise
        except fy.P4ClientError as ex:
            self.status.failed(f"P4Runtime: {ex}")
            raise
        finally:
            self.status.stopped()
            if monitor is not None:
                monitor.cancel()
            if recording is not None:
                recording.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await recording
            stop.cancel()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            self.trace.close()

    def _raise_switch_errors(self) -> None:
        errs = [rt.error for rt in self.runtimes.values() if rt.error is not None]
        if self.corropt is not None and self.corropt.error is not None:
            errs.append(self.corropt.error)
        if errs:
            raise errs[0]

    async def _wait_ready(self, task: asyncio.Task, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while True:
            self._raise_switch_errors()
            if task.done():
                task.result()
                raise ControllerError("controller stopped before the switches were ready")
            pending = [rt for rt in self.runtimes.values() if not rt.ready.is_set()]
            if not pending:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{rt.spec.name} ({rt.spec.address})" for rt in pending)
                raise ControllerError(f"switch unreachable or not ready after {timeout:.0f} s: {names}")
            if len(self.runtimes) > 4 and time.monotonic() - last_report > 2:
                last_report = time.monotonic()
                self.on_event(f"{len(self.runtimes) - len(pending)}/{len(self.runtimes)} switches ready")
            await asyncio.sleep(0.05)


class RotorController(Controller):
    """Drive one schedule's rotor switches (``--switch NAME=HOST:PORT[@DEV]``)."""

    def __init__(self, sched: Schedule, specs: Sequence[SwitchSpec], *, mode: str, p4info: Path,
                 p4blob: Path, port_maps: dict[str, dict[int, int]] | None = None, egress_guard_us: int = 0,
                 **kw):
        if not specs:
            raise ControllerError("no switch given (--switch; --pipeline on target ebpf)")
        check_egress_guard(sched, egress_guard_us)
        self.sched = sched
        roles = [rotor_role(sched, spec, p4info, p4blob, (port_maps or {}).get(spec.name), egress_guard_us)
                 for spec in specs]
        super().__init__(roles, mode=mode, **kw)
