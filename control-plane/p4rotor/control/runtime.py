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

A live CorrOpt monitor (``loss_monitor.py``, seed 003 §3.4) can run beside either mode: it reads the
rotors' per-link loss counters, and when a link is lossier than the threshold and every slice
stays connected without it, it masks the link's circuits out of the schedule and writes only what
changes, ToRs first (their routes stop using the link) and rotors last (its circuits go): no clear,
no dark cycle.

The target (``target.py``: BMv2 or Tofino) says which modes exist, how times convert between
the controller's microseconds and the switch, where the CPU port is and what device config
to push; everything here stays in microseconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import Schedule
from .entities import (Comparison, check_egress_guard, compare_installed, diff_entities, loss_entries,
                       port_value_set_entries, set_slot_packet, time_probe_packet, write_batched)
from .errors import ControllerError, NotPrimaryError
from .loss_monitor import LossMonitor
from .p4info import check_p4info
from .roles import Role, SwitchRuntime, SwitchSpec, Trace, rotor_role
from .skew import ClockSkew, LossFault, ResyncCheck, loss_changes, skew_at, skew_changes
from .status import StatusFile
from .target import BMV2, Target, clock_start_entities, is_slot_config
from .timebase import AdoptedClock, OffsetEstimate, Timebase, adopt_clock, estimate_offset, timed_changes

LOG = logging.getLogger("p4rotor.controller")

# A restarted switch should be re-installed within a slot cycle of listening again, but gRPC's
# channel retries a lost connection after 1 s, then 1.6 s, 2.6 s ... (its default backoff), and
# finsy builds its channel with fixed options and no way to add one.  So the options finsy
# passes gain a constant 100 ms reconnect backoff (a refused connect to a switch that is down
# costs nothing).  Measured on BMv2 (issue #17, docs/faults.md): a rotor restarted 0.3 s after it
# died was re-installed 1.54 s after its restart with gRPC's backoff; with 100 ms growing 1.6x
# per attempt (ceiling 1 s) its ready handler still began 290-355 ms after it listened again
# (the attempts had spread to 0.26, 0.52, 0.93 s); at a constant 100 ms, 30-65 ms.
RECONNECT_BACKOFF_MS = 100


def _reconnect_sooner() -> None:
    from finsy import grpcutil

    if getattr(grpcutil.GRPCOptions.to_native, "_p4rotor", False):
        return
    native = grpcutil.GRPCOptions.to_native

    def to_native(self):
        out = [(k, v) for k, v in native(self) if k != "grpc.max_reconnect_backoff_ms"]
        return out + [("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                      ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                      ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS)]

    to_native._p4rotor = True  # type: ignore[attr-defined]
    grpcutil.GRPCOptions.to_native = to_native


_reconnect_sooner()
LOSS_TABLES = (dp.T_LOSS_IN, dp.T_LOSS_OUT)

# Timed changes: sent this long (plus twice the offset's uncertainty) after the previous start.
TIMED_MARGIN_US = 50
# Switches installed at once (clear, probe, write); the rest wait their turn.
INSTALL_CONCURRENCY = 8
CLOCK_PORT_PROBES = 64  # per round, in bursts of 8: enough that some meet both latency floors
CLOCK_PORT_ROUNDS = 4   # more rounds while the proven half-bracket exceeds the target
CLOCK_PORT_TARGET_US = 15
# Adoption: switches of one fabric are adopted together only if their clocks' slot 0 agree
# within this (plus both offsets' uncertainty); a switch further off is cleared and rewritten.
ADOPT_SKEW_US = 500


class Controller:
    """Drive switches (rotors, ToRs) over P4Runtime: one finsy Switch task per switch."""

    def __init__(self, roles: Sequence[Role], *, mode: str, trace: Path | None = None,
                 election_id: int = 10, lead_s: float = 1.0, probes: int = 16,
                 ack_every: int = 0, spin_us: int = 150, signal_lead_us: float | str = 0.0,
                 signal_timed: bool = False, install_concurrency: int = INSTALL_CONCURRENCY,
                 on_event: Callable[[str], None] | None = None, status_file: Path | None = None,
                 counters_every: float = 0.0, target: Target = BMV2, adopt: bool = True,
                 skews: Sequence[ClockSkew] = (), resync_every: float = 0.0, resync_bound_us: float = 100.0,
                 losses: Sequence[LossFault] = (), loss_monitor: LossMonitor | None = None,
                 monitor_every: float = 1.0, replan: Callable[[Schedule], Sequence[Role]] | None = None):
        if mode not in ("signal", "clock"):
            raise ControllerError(f"unknown mode {mode!r} (signal or clock)")
        if mode not in target.modes:
            raise ControllerError(f"target {target.name} has no {mode} mode ({' or '.join(target.modes)} only)")
        if not roles:
            raise ControllerError("no --switch given")
        self.target = target
        self.mode = mode
        self.mode_code = dp.MODE_SIGNAL if mode == "signal" else dp.MODE_CLOCK
        self.election_id = election_id
        self.probes = probes
        self.ack_every = ack_every
        if signal_lead_us != "auto" and not (isinstance(signal_lead_us, (int, float)) and signal_lead_us >= 0):
            raise ControllerError(f"bad signal lead {signal_lead_us!r}: microseconds >= 0 or 'auto'")
        if signal_lead_us == "auto" and not ack_every:
            raise ControllerError("signal lead 'auto' learns from acks: give --ack-every N too")
        self.signal_lead_us = signal_lead_us
        if signal_timed and mode != "signal":
            raise ControllerError("timed slot changes are a signal-mode option")
        if signal_timed and signal_lead_us:
            raise ControllerError("timed slot changes go one slot ahead: no signal lead with them")
        self.signal_timed = signal_timed
        if install_concurrency < 1:
            raise ControllerError(f"bad install concurrency {install_concurrency}: at least 1")
        self.install_concurrency = install_concurrency
        self._install_sem: asyncio.Semaphore | None = None
        self.spin_s = spin_us / 1e6
        if counters_every < 0:
            raise ControllerError(f"bad counter interval {counters_every}: seconds >= 0")
        self.counters_every = counters_every
        # Clock mode only: signal mode drives every slot itself, there is no running clock to adopt.
        self.adopt = adopt and mode == "clock"
        # Checked before anything is written (the status file either): one line, nothing started.
        if not resync_every >= 0:  # NaN too
            raise ControllerError(f"bad re-sync period {resync_every}: seconds >= 0 (0: off)")
        if not resync_bound_us > 0:
            raise ControllerError(f"bad re-sync bound {resync_bound_us}: microseconds > 0")
        if resync_every and mode != "clock":
            raise ControllerError("the periodic re-sync is a clock-mode option (signal mode sends every slot)")
        names = {r.spec.name for r in roles}
        for sk in skews:
            if sk.switch not in names:
                raise ControllerError(f"clock skew on {sk.switch!r}: not a switch this controller drives")
            if mode != "clock":
                raise ControllerError("clock skew is injected in clock mode only (through the slot config's offset)")
        self.skews = tuple(skews)
        for x in losses:
            if x.switch not in names:
                raise ControllerError(f"loss on {x.switch!r}: not a switch this controller drives")
            if not any(r.spec.name == x.switch and r.kind == "rotor" for r in roles):
                raise ControllerError(f"loss on {x.switch!r}: optical loss is a rotor's (its loss tables)")
        self.losses = tuple(losses)
        # The live CorrOpt monitor: ``replan`` gives every role for a masked schedule.
        if loss_monitor is not None and replan is None:
            raise ControllerError("the loss monitor needs the fabric's roles for a masked schedule (--topology)")
        if not monitor_every > 0:
            raise ControllerError(f"bad monitor period {monitor_every}: seconds > 0")
        self.loss_monitor = loss_monitor
        self.monitor_every = monitor_every
        self.replan = replan
        self.monitor_error: ControllerError | None = None
        self.resync_every = resync_every
        self.resync_bound_us = resync_bound_us
        self._timer = None
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
                schemas[r.p4info] = check_p4info(r.p4info, contract, counters)
        self.trace = Trace(trace)
        self.tb = Timebase(ref_ns=time.time_ns())
        # Slot 0 of the schedule starts lead_s from now (each switch adds its own offset), unless
        # a switch's running clock is adopted: then slot 0 is where that clock says (_decide_t0).
        self.t0_common_us = int(lead_s * 1e6)
        # Adoption: each switch's proposal (its clock's slot 0, offset uncertainty; None: cannot
        # adopt) until every switch has one and t0 is decided, once per run.
        self._proposals: dict[str, tuple[float | None, float]] = {}
        self._t0_decided = asyncio.Event()
        self._t0_from: tuple[str, float] | None = None  # (switch, uncertainty) t0 was adopted from
        if not self.adopt:
            self._t0_decided.set()
        self.runtimes: dict[str, SwitchRuntime] = {}
        # Parser value sets (Tofino: the CPU port, the clock port), written before anything else.
        self.port_sets: dict[str, list[fy.P4ValueSetEntry]] = {}
        for r in roles:
            if r.spec.name in self.runtimes:
                raise ControllerError(f"switch {r.spec.name!r} given twice")
            # Fresh generation per run: state a previous run left in registers is void.
            self.runtimes[r.spec.name] = SwitchRuntime(role=r, generation=(time.time_ns() >> 20) & 0x7FFF)
            schema = schemas[r.p4info]
            self.port_sets[r.spec.name] = port_value_set_entries(
                schema, target.port_value_sets(r.kind, (vs.name for vs in schema.value_sets)))
        # What other processes read (phase, switches installed, epoch, error); log text is for people.
        self.status = StatusFile(status_file, mode, {n: rt.role.kind for n, rt in self.runtimes.items()})
        self.switches = [
            fy.Switch(rt.spec.name, rt.spec.address, fy.SwitchOptions(
                p4info=rt.role.p4info, p4blob=blobs[rt.role.p4blob], device_id=rt.spec.device_id,
                initial_election_id=election_id, ready_handler=self._ready))
            for rt in self.runtimes.values()
        ]

    # -- per-switch lifecycle ------------------------------------------------
    async def _ready(self, sw: fy.Switch) -> None:
        rt = self.runtimes[sw.name]
        try:
            if not sw.is_primary:
                # Not raised into finsy (which would log a traceback and retry): the run ends.
                self._not_primary(sw, rt)
                return
            rt.was_primary = True
            rt.generation = (rt.generation + 1) & 0xFFFF or 1
            sw.create_task(self._packet_reader(sw, rt))
            if self._install_sem is None:
                self._install_sem = asyncio.Semaphore(self.install_concurrency)
            await self._install(sw, rt)
            if self.mode_code == dp.MODE_SIGNAL:
                sw.create_task(self._rotate_timed(sw, rt) if self.signal_timed else self._rotate(sw, rt))
            else:
                sw.create_task(self._trace_clock(sw, rt))
                if any(sk.switch == sw.name for sk in self.skews):
                    sw.create_task(self._inject_skew(sw, rt))
                if self.resync_every:
                    sw.create_task(self._resync(sw, rt))
            if any(x.switch == sw.name for x in self.losses):
                sw.create_task(self._inject_loss(sw, rt))
            if self.counters_every:
                sw.create_task(self._publish_counters(sw))
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
        if self._stop is not None:
            self._stop.set()

    async def _write(self, sw: fy.Switch, rt: SwitchRuntime, updates: Sequence[Any]) -> None:
        await write_batched(sw, updates)
        rt.writes += len(updates)

    async def _install(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Probe the clock if needed, adopt what the switch holds (clock mode) or clear it and
        write everything (config last); then ready.

        At most ``install_concurrency`` switches probe, read or write at once: on a small machine
        running a hundred BMv2 processes, all of them installing together starve one another
        until a P4Runtime write outlives its deadline (finsy's 10 s)."""
        assert self._install_sem is not None
        t = time.perf_counter()
        cmp = None
        async with self._install_sem:
            if self.port_sets[sw.name]:
                # The CPU port first: PacketOut probes (and their replies) need it.  Value sets
                # take MODIFY only, and writing the same port again disturbs nothing.
                await self._write(sw, rt, self.port_sets[sw.name])
            if self.mode_code == dp.MODE_CLOCK or self.ack_every or self.signal_timed:
                # A switch (re)installed while a skew fault is live: its clock has jumped already
                # (the probes see it too).  Before slot 0 (the first install) nothing is live.
                rt.injected_skew_us = skew_at(self.skews, sw.name, self._schedule_us())
                # Clock mode and timed changes need the offset; signal mode uses it to time acks.
                rt.offset = await self._probe_offset(sw, rt)
                self.on_event(f"{sw.name}: clock offset {rt.offset.offset_us} us ({rt.offset.describe()})")
            if self.adopt:
                cmp = await self._read_and_compare(sw, rt)
        clock, why = await self._adoptable(sw, rt, cmp)
        if clock is not None:
            self._adopted(sw, rt, cmp, clock, (time.perf_counter() - t) * 1e3)
            return
        if why:
            self.on_event(f"{sw.name}: not adopted ({why}): clearing and writing")
        if cmp is not None and cmp.clock is not None and cmp.clock.get("gen") == rt.generation:
            # The clock registers still hold the old config's generation: a new one restarts them.
            rt.generation = (rt.generation + 1) & 0xFFFF or 1
        async with self._install_sem:
            await self._clear_and_write(sw, rt, why)

    async def _read_and_compare(self, sw: fy.Switch, rt: SwitchRuntime) -> Comparison:
        """What the switch holds (every table entry, the defaults the role sets) against what
        this controller would write; the run fields of the config are not compared."""
        want = rt.role.entities(self.mode_code, rt.offset.offset_us if rt.offset else 0, 0, rt.generation,
                                self.target)
        # The optical-loss tables hold fault state (a plan's loss, written and removed at its
        # times), not configuration: a fabric with a loss live is still this controller's.
        have = [e async for e in sw.read(fy.P4TableEntry())
                if sw.p4info.tables[e.table_id].name not in LOSS_TABLES]
        defaults = [fy.P4TableEntry(e.table_id, is_default_action=True) for e in want
                    if isinstance(e, fy.P4TableEntry) and e.is_default_action]
        if defaults:
            have += [e async for e in sw.read(defaults)]
        return compare_installed(sw.p4info, want, have)

    async def _adoptable(self, sw: fy.Switch, rt: SwitchRuntime,
                         cmp: Comparison | None) -> tuple[AdoptedClock | None, str]:
        """(the switch's running clock, "") to adopt it, or (None, why not; "" in signal mode,
        which never adopts).  The first time, every switch proposes and t0 is decided once all have: the
        first switch (in --switch/topology order) whose clock can be adopted gives it."""
        clock = None
        if cmp is not None and cmp.same and cmp.clock is not None and rt.offset is not None:
            clock = adopt_clock(self.target, cmp.clock["epoch_us"], cmp.clock["offset"], rt.offset.offset_us,
                                self.tb.common_us(time.time_ns()))
        unc = rt.offset.uncertainty_us if rt.offset else 0.0
        if not self._t0_decided.is_set():
            self._proposals[sw.name] = (None if clock is None else clock.epoch_us - rt.role.epoch_offset_us, unc)
            if len(self._proposals) == len(self.runtimes):
                self._decide_t0()
            else:
                await self._t0_decided.wait()
        if cmp is None:
            return None, "--no-adopt" if self.mode_code == dp.MODE_CLOCK else ""
        if clock is None:
            return None, cmp.reason or "the switch holds no slot config"
        # Its slot 0 against this run's: the first adopted switch's, or (none adopted) this run's
        # own, which a switch holds when its connection came back without a restart.
        ref, ref_unc = self._t0_from or ("this run", unc)
        skew = clock.epoch_us - rt.role.epoch_offset_us - self.t0_common_us
        tol = ADOPT_SKEW_US + unc + ref_unc
        if abs(skew) > tol:
            return None, (f"its slot 0 is {skew:+.0f} us from {ref}'s, more than {tol:.0f} us: "
                          f"not the same clock")
        return clock, ""

    def _decide_t0(self) -> None:
        for name in self.runtimes:  # the order switches were given in
            t0, unc = self._proposals.get(name, (None, 0.0))
            if t0 is not None:
                self.t0_common_us = round(t0)
                self._t0_from = (name, unc)
                break
        self._t0_decided.set()

    def _adopted(self, sw: fy.Switch, rt: SwitchRuntime, cmp: Comparison, clock: AdoptedClock,
                 elapsed_ms: float) -> None:
        """Take the switch's running clock as this run's: nothing written (but value sets)."""
        cfg = cmp.clock
        rt.generation = cfg["gen"]
        rt.t0_common_us = round(clock.epoch_us) - rt.role.epoch_offset_us
        rt.adopted = True
        rt.install_ms = elapsed_ms
        rt.entities = cmp.entries
        # In this run's time the adopted clock runs on the offset just measured (the epoch
        # absorbed the difference): that is what a rewrite keeps.
        rt.config_offset_us = rt.offset.offset_us + rt.injected_skew_us
        cycle_us = cfg["cycle"] * self.target.time_unit_ns / 1000
        self.status.installed(
            sw.name, cmp.entries, elapsed_ms, rt.offset.offset_us, rt.offset, adopted=True,
            writes=rt.writes, clears=rt.clears, generation=rt.generation, epoch_us=round(clock.epoch_us),
            installed_epoch_us=round(clock.installed_epoch_us), installed_offset_us=round(clock.installed_offset_us),
            cycle_us=cycle_us, **self._clock_status(rt))
        since = (self.tb.common_us(time.time_ns()) - clock.epoch_us) / 1e6
        self.on_event(f"{sw.name}: adopted: it holds what this controller would install ({cmp.entries} "
                      f"entries and defaults); its clock runs on: generation {rt.generation}, epoch "
                      f"{clock.installed_epoch_us:.0f} us with offset {clock.installed_offset_us:.0f} us as "
                      f"installed = {clock.epoch_us:.0f} us in our time ({since:.1f} s ago); "
                      f"{rt.writes} entities written")
        rt.ready.set()

    async def _clear_and_write(self, sw: fy.Switch, rt: SwitchRuntime, why: str) -> None:
        """Clear, then write everything: safe to run again after a restart."""
        await sw.delete_all()
        rt.clears += 1
        rt.adopted = False
        rt.t0_common_us = None
        offset = rt.offset.offset_us if rt.offset else 0
        epoch = self.t0_common_us + rt.role.epoch_offset_us
        if self.mode_code == dp.MODE_CLOCK:
            offset += rt.injected_skew_us  # the emulated clock's jump (skew.py); 0 without faults
            rt.config_offset_us = offset
        ents = rt.role.entities(self.mode_code, offset, epoch, rt.generation, self.target)
        t = time.perf_counter()
        starts = clock_start_entities(self.target, ents)
        if starts:
            # TNA: the clock's cycle register is started before the config that uses it.
            await self._write(sw, rt, starts)
        await self._write(sw, rt, ents)
        rt.install_ms = (time.perf_counter() - t) * 1e3
        rt.entities = len(ents)
        extra: dict[str, Any] = dict(adopted=False, writes=rt.writes, clears=rt.clears, generation=rt.generation)
        if self.mode_code == dp.MODE_CLOCK:
            extra["epoch_us"] = epoch
            extra.update(self._clock_status(rt))
        if why:
            extra["not_adopted"] = why
        self.status.installed(sw.name, len(ents), rt.install_ms, rt.offset.offset_us if rt.offset else None,
                              rt.offset, **extra)
        self.on_event(f"{sw.name}: installed {len(ents)} entities in {rt.install_ms:.1f} ms "
                      f"({self.mode} mode)")
        rt.ready.set()

    async def _packet_reader(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
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

    async def _probe_offset(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                            packet_out: bool = False) -> OffsetEstimate:
        """The switch's clock offset as the controller sees it: one probe round per switch at a
        time (they share sequence numbers), a live skew fault's jump included (skew.py)."""
        async with rt.clock_lock:
            return await self._probe_emulated(sw, rt, n, packet_out)

    async def _probe_emulated(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                              packet_out: bool = False) -> OffsetEstimate:
        """``_probe_offset`` for a caller that holds ``rt.clock_lock``."""
        est = await self._probe_raw(sw, rt, n, packet_out)
        if rt.injected_skew_us:
            # The emulated clock reads the skew more than the raw one the probe saw:
            # raw + skew + offset = common.
            est = dataclasses.replace(est, offset_us=est.offset_us - rt.injected_skew_us)
        return est

    async def _probe_raw(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None,
                         packet_out: bool = False) -> OffsetEstimate:
        if rt.spec.clock_iface and not packet_out:
            return await self._probe_clock_port(sw, rt, n)
        samples = []
        for i in range(n or self.probes):
            seq = 0x70000000 + (rt.generation << 12) + i
            sent, recv, reply = await self._request(sw, rt, time_probe_packet(seq), seq)
            if reply is not None:
                samples.append((sent, recv, self.target.reported_to_us(reply["timestamp"])))
        if not samples:
            raise ControllerError(f"{sw.name}: no time probe answered (is the CPU port {self.target.cpu_port} set?)")
        return estimate_offset(samples, self.tb)

    async def _probe_clock_port(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None) -> OffsetEstimate:
        """Two-way probes through the switch's clock port, on the data path only (clockport.py)."""
        from . import clockport as CP

        def run() -> list:
            # Bounds from every probe hold together (the offset is one number): keep probing, up
            # to CLOCK_PORT_ROUNDS rounds, until the proven bracket is narrow enough.
            samples: list = []
            us = self.target.reported_to_us
            with CP.ClockPort(rt.spec.clock_iface) as cp:
                for r in range(CLOCK_PORT_ROUNDS):
                    samples += [dataclasses.replace(s, t2_us=us(s.t2_us), t3_us=us(s.t3_us))
                                for s in cp.measure(max(CLOCK_PORT_PROBES, n or self.probes),
                                                    first_seq=0x60000000 + (rt.generation << 12) + (r << 8))]
                    try:
                        if CP.bracket(samples, self.tb.ref_ns).half_width_us <= CLOCK_PORT_TARGET_US:
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
                                  f"(is it wired to port {self.target.clock_port} of this switch?)")
        try:
            b = CP.bracket(samples, self.tb.ref_ns)
        except ValueError as ex:
            raise ControllerError(f"{sw.name}: {ex}") from None
        return OffsetEstimate(offset_us=b.offset_us, rtt_us=0.0, probes=b.probes, method="clock-port",
                              jitter_us=b.half_width_us, spread_us=b.spread_us)

    async def measure_skew(self, probes: int = 8, packet_out: bool = False) -> dict[str, int]:
        """Residual error of each installed offset, measured with fresh probes (us).

        ``packet_out``: measure with PacketOut probes even where a clock port is set
        (to compare the two time bases)."""
        out = {}
        for sw in self.switches:
            rt = self.runtimes[sw.name]
            if rt.offset is None:
                continue
            fresh = await self._probe_offset(sw, rt, probes, packet_out=packet_out)
            out[sw.name] = fresh.offset_us - rt.offset.offset_us
        return out

    # -- clock skew and re-sync (clock mode; skew.py) -------------------------
    def _schedule_us(self) -> float:
        """Schedule time now: us since slot 0 of the run (the common t0), as fault plans count."""
        return self.tb.common_us(time.time_ns()) - self.t0_common_us

    def _clock_status(self, rt: SwitchRuntime) -> dict[str, Any]:
        out: dict[str, Any] = dict(injected_skew_us=rt.injected_skew_us, config_offset_us=rt.config_offset_us)
        if self.resync_every:
            out["resyncs"] = rt.resyncs
        return out

    async def _rewrite_clock(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Rewrite the slot config alone (a MODIFY of its default action, no clear: the tables stay
        and frames keep flowing) with offset + injected skew, on the same epoch, so the slot
        goes on where the corrected clock says.  Caller holds ``rt.clock_lock``.

        A new generation, as at every install: v1model then recomputes its cycle from the epoch
        (the cycle number is the same, so slot ids go on); with the same generation its cycle
        start, kept in common time, would stay, and a clock moved back past it makes the
        unsigned delta wrap (the clock dark for ~2^48 us).  TNA keeps a cycle register per
        generation parity: the new one is started at the cycle running now."""
        epoch = (self.t0_common_us if rt.t0_common_us is None else rt.t0_common_us) + rt.role.epoch_offset_us
        gen = (rt.generation + 1) & 0xFFFF or 1
        offset = rt.offset.offset_us + rt.injected_skew_us
        cfg = [e for e in rt.role.entities(self.mode_code, offset, epoch, gen, self.target) if is_slot_config(e)]
        if len(cfg) != 1:
            raise ControllerError(f"{sw.name}: the role builds {len(cfg)} slot configs, not one")
        starts = clock_start_entities(self.target, cfg, now_us=self.tb.common_us(time.time_ns()))
        if starts:
            await self._write(sw, rt, starts)  # before the config that uses it (TNA)
        await self._write(sw, rt, cfg)
        rt.generation = gen
        rt.config_offset_us = offset

    async def _inject_skew(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Apply the plan's clock skews on this switch at their start and end (schedule time).
        Started at every install, so it first catches up: a switch that came back mid-fault, or
        a t0 adopted from a running fabric (a skew already started)."""
        await self._apply_skew(sw, rt, self._schedule_us())
        for t in skew_changes(self.skews, sw.name):
            if t <= self._schedule_us():
                continue
            await self._sleep_until(self.t0_common_us + t, spin=False)
            await self._apply_skew(sw, rt, max(t, self._schedule_us()))

    async def _apply_skew(self, sw: fy.Switch, rt: SwitchRuntime, t_us: float) -> None:
        want = skew_at(self.skews, sw.name, t_us)
        async with rt.clock_lock:
            if want == rt.injected_skew_us:
                return
            was, rt.injected_skew_us = rt.injected_skew_us, want
            await self._rewrite_clock(sw, rt)
        self.on_event(f"{sw.name}: clock skew {want:+d} us from t={t_us / 1e6:.3f} s (was {was:+d}): slot config "
                      f"offset {rt.config_offset_us} us (controller's {rt.offset.offset_us} us), generation "
                      f"{rt.generation}")
        self.status.clock(sw.name, generation=rt.generation, writes=rt.writes, **self._clock_status(rt))
        self.trace.event(t_ns=time.time_ns(), switch=sw.name, event="clock-skew", at_us=round(t_us),
                         injected_skew_us=want, config_offset_us=rt.config_offset_us,
                         offset_us=rt.offset.offset_us, generation=rt.generation)

    # -- optical loss (a fault plan's ``loss``; the rotor's loss tables) ------------------
    async def _inject_loss(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Write the plan's loss entries on this rotor while they are live.  Started at every
        install: an adopted switch may hold its predecessor's entries, so the first pass makes
        the tables exactly what the plan says now."""
        await self._apply_loss(sw, rt, self._schedule_us())
        for t in loss_changes(self.losses, sw.name):
            if t <= self._schedule_us():
                continue
            await self._sleep_until(self.t0_common_us + t, spin=False)
            await self._apply_loss(sw, rt, max(t, self._schedule_us()))

    async def _apply_loss(self, sw: fy.Switch, rt: SwitchRuntime, t_us: float) -> None:
        want = [x.loss for x in self.losses if x.switch == sw.name and x.live(t_us)]
        held = [e async for e in sw.read([fy.P4TableEntry(dp.T_LOSS_IN), fy.P4TableEntry(dp.T_LOSS_OUT)])]
        if held:
            await self._write(sw, rt, [-e for e in held])
        if want:
            await self._write(sw, rt, [+e for e in loss_entries(want)])
        what = ", ".join(f"port {x.port} {x.direction} {x.rate:g}" + (f" in matching {x.matching}"
                                                                       if x.matching is not None else "")
                         for x in want) or "none"
        self.on_event(f"{sw.name}: optical loss from t={t_us / 1e6:.3f} s: {what}")
        self.trace.event(t_ns=time.time_ns(), switch=sw.name, event="loss", at_us=round(t_us),
                         losses=[dataclasses.asdict(x) for x in want])

    async def _resync(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Every ``resync_every`` s: re-measure this switch's offset and rewrite the slot config
        when the installed one is off by more than the bound (``ResyncCheck``)."""
        while True:
            await asyncio.sleep(self.resync_every)
            await self._resync_check(sw, rt)

    async def _resync_check(self, sw: fy.Switch, rt: SwitchRuntime) -> ResyncCheck | None:
        async with rt.clock_lock:
            try:
                fresh = await self._probe_emulated(sw, rt)
            except ControllerError as ex:
                # One lost round (a busy machine, a probe late) is no reason to stop the switch:
                # the config stays as it is and the next period tries again.
                self.on_event(f"{sw.name}: re-sync check failed ({ex}); the config stays")
                self.trace.event(t_ns=time.time_ns(), switch=sw.name, event="resync", error=str(ex))
                return None
            check = ResyncCheck(rt.offset.offset_us, fresh, self.resync_bound_us)
            if check.rewrite:
                rt.offset = fresh
                await self._rewrite_clock(sw, rt)
                rt.resyncs += 1
        now = time.time_ns()
        if check.rewrite:
            self.on_event(f"{sw.name}: re-sync: the installed offset {check.installed_us} us is {check.error_us:+d} us "
                          f"off ({fresh.describe()}), more than the {self.resync_bound_us:g} us bound: slot config "
                          f"rewritten with {fresh.offset_us} us, generation {rt.generation} (re-sync {rt.resyncs})")
        self.status.clock(sw.name, generation=rt.generation, writes=rt.writes, offset_us=rt.offset.offset_us,
                          offset=rt.offset.describe(), last_resync_error_us=check.error_us,
                          last_resync_check_ns=now, **self._clock_status(rt))
        self.trace.event(t_ns=now, switch=sw.name, event="resync", error_us=check.error_us,
                         bound_us=self.resync_bound_us, uncertainty_us=round(fresh.uncertainty_us, 1),
                         offset_us=check.installed_us, fresh_offset_us=fresh.offset_us,
                         method=fresh.method, rewritten=check.rewrite, injected_skew_us=rt.injected_skew_us,
                         generation=rt.generation)
        return check

    async def _sleep_until(self, common_us: float, spin: bool = True) -> None:
        target = self.tb.wall_ns(common_us)
        delay = (target - time.time_ns()) / 1e9
        if not spin:
            await asyncio.sleep(max(0.0, delay))
            return
        # Coarse: the event loop's own timer (epoll rounds its timeout up to whole ms).
        if delay > 0.003:
            await asyncio.sleep(delay - 0.003)
        # Fine: nanosleep in a timer thread; its completion wakes the loop through its
        # self-pipe at once (no ms rounding). Then spin the last spin_us.
        left = (target - time.time_ns()) / 1e9 - self.spin_s
        if left > 0:
            if self._timer is None:
                import concurrent.futures

                self._timer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="p4rotor-timer")
            await asyncio.get_running_loop().run_in_executor(self._timer, time.sleep, left)
        while time.time_ns() < target:
            pass
        await asyncio.sleep(0)  # always let the other switches' tasks run

    async def _rotate(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        now = self.tb.common_us(time.time_ns())
        seq = 0
        pending = None
        for nxt in rt.role.boundaries(self.t0_common_us, now):
            lead = self._lead_us(rt)
            # Fallen behind (tiny slots, busy machine): send only the newest state, never replay.
            if pending is None or nxt[0] - lead <= self.tb.common_us(time.time_ns()):
                pending = nxt
                continue
            at, k, idx, night = pending
            pending = nxt
            await self._sleep_until(at - lead)
            seq += 1
            ack = bool(self.ack_every) and seq % self.ack_every == 0
            scheduled = self.tb.wall_ns(at)
            sent = time.time_ns()
            if ack:
                # Send inline (no extra task before the write); a task waits for the ack.
                fut = asyncio.get_running_loop().create_future()
                rt.waiters[seq] = fut
                await rt.send(sw, set_slot_packet(k, idx, night, seq=seq, ack=True))
                asyncio.get_running_loop().create_task(self._ack(rt, fut, seq, scheduled, sent))
            else:
                await rt.send(sw, set_slot_packet(k, idx, night, seq=seq))
            self.trace.write(t_ns=sent, switch=sw.name, slot=k, index=idx, night=night,
                             scheduled_ns=scheduled, source="signal")

    async def _rotate_timed(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Timed changes: slot k+1's change (with its start time) goes out once slot k has
        started (the switch holds one pending change); the pipeline applies it by its clock."""
        # Sent this long after the previous start: its change is applied by then even if the
        # installed offset is off by the whole measured uncertainty.
        margin = TIMED_MARGIN_US + 2 * (rt.offset.uncertainty_us if rt.offset else 0.0)
        now = self.tb.common_us(time.time_ns())
        seq = 0
        prev_at = None
        changes = timed_changes(rt.role.boundaries(self.t0_common_us, now))
        cur = next(changes)
        for nxt in changes:
            at, k, idx, night_us = cur
            cur = nxt
            if nxt[0] <= self.tb.common_us(time.time_ns()):
                continue  # fallen behind: the next change is already due, skip this one
            if prev_at is not None:
                await self._sleep_until(prev_at + margin, spin=False)
            prev_at = at
            seq += 1
            ack = bool(self.ack_every) and seq % self.ack_every == 0
            pkt = set_slot_packet(k, idx, seq=seq, ack=ack, at_us=at, night_us=night_us, target=self.target)
            scheduled = self.tb.wall_ns(at)
            sent = time.time_ns()
            if ack:
                fut = asyncio.get_running_loop().create_future()
                rt.waiters[seq] = fut
                await rt.send(sw, pkt)
                asyncio.get_running_loop().create_task(self._ack(rt, fut, seq, scheduled, sent))
            else:
                await rt.send(sw, pkt)
            self.trace.write(t_ns=sent, switch=sw.name, slot=k, index=idx, night=night_us > 0,
                             night_us=night_us, scheduled_ns=scheduled, source="signal-timed")

    def _lead_us(self, rt: SwitchRuntime) -> float:
        """How early to send a slot change: fixed, or (auto) the median of the last acked
        changes' transport delay (send -> applied), so the switch applies it on time."""
        if self.signal_lead_us != "auto":
            return float(self.signal_lead_us)
        if rt.offset is None or len(rt.acks) < 8:
            return 0.0
        recent = [local + rt.offset.offset_us - (sent - self.tb.ref_ns) / 1000
                  for _, sent, _, local in rt.acks[-64:]]
        return max(0.0, statistics.median(recent))

    async def _ack(self, rt: SwitchRuntime, fut: asyncio.Future, seq: int, scheduled: int, sent: int) -> None:
        try:
            recv, reply = await asyncio.wait_for(fut, 1.0)
        except asyncio.TimeoutError:
            rt.waiters.pop(seq, None)
            return
        if reply["opcode"] == dp.OP_SET_SLOT:
            rt.acks.append((scheduled, sent, recv, self.target.reported_to_us(reply["timestamp"])))
        else:
            rt.refused += 1

    async def _publish_counters(self, sw: fy.Switch) -> None:
        """Every ``counters_every`` s: the switch's drop counters, by cause, into the status file
        (what experiments and a loss monitor read; one wildcard read per counter).  A target with
        drops counted in more than one place (Tofino: ingress and egress) sums them per cause.
        The per-port counters are read at the role's data ports only, when it names them."""
        ports = self.runtimes[sw.name].role.data_ports
        while True:
            drops: dict[str, int] = {}
            for name in self.target.drop_counters:
                async for e in sw.read(fy.P4CounterEntry(name)):
                    if e.data is not None and e.index in dp.DropCause._value2member_map_:
                        cause = dp.DropCause(e.index).name
                        drops[cause] = drops.get(cause, 0) + e.data.packet_count
            rx = tx = 0
            async for e in sw.read(self._port_counters(ports, dp.C_RX)):
                rx += e.data.packet_count if e.data is not None else 0
            async for e in sw.read(self._port_counters(ports, dp.C_TX)):
                tx += e.data.packet_count if e.data is not None else 0
            # Data frames the pipeline took in but neither sent nor dropped by a cause: lost in
            # BMv2's queues (64 frames per port, dropped silently when full) or still in flight.
            pipeline_drops = sum(n for c, n in drops.items() if c != dp.DropCause.CTRL_ERROR.name)
            self.status.counters(sw.name, drops, rx=rx, tx=tx, unaccounted=rx - tx - pipeline_drops)
            await asyncio.sleep(self.counters_every)

    @staticmethod
    def _port_counters(ports: Sequence[int] | None, name: str) -> Any:
        """One read request for a per-port counter: the listed indices, or the whole array."""
        if ports is None:
            return fy.P4CounterEntry(name)
        return [fy.P4CounterEntry(name, index=p) for p in ports]

    async def _trace_clock(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Clock mode: the switch moves by itself; trace the boundaries it follows (no spinning)."""
        if not self.trace.enabled:
            return
        now = self.tb.common_us(time.time_ns())
        # An adopted switch follows its own clock (slot 0 where the run that installed it put it).
        t0 = self.t0_common_us if rt.t0_common_us is None else rt.t0_common_us
        for at, k, idx, night in rt.role.boundaries(t0, now):
            await self._sleep_until(at, spin=False)
            self.trace.write(t_ns=self.tb.wall_ns(at), switch=sw.name, slot=k, index=idx, night=night,
                             source="clock")

    # -- the live CorrOpt monitor (loss_monitor.py) ------------------------------
    def _monitor_done(self, task: asyncio.Task) -> None:
        """A monitor that fails ends the run with its error (never silently stops watching)."""
        if task.cancelled() or task.exception() is None:
            return
        ex = task.exception()
        self.monitor_error = ControllerError(f"CorrOpt monitor: {ex}")
        if self._stop is not None:
            self._stop.set()

    async def _read_link_counters(self, sw: fy.Switch, ports: Sequence[int]) -> dict[str, dict[int, tuple[int, int]]]:
        """{direction: {port: (crossed, lost)}} from the rotor's four per-link counters."""
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for d, (c_ok, c_lost) in dp.LINK_COUNTERS.items():
            got: dict[str, dict[int, int]] = {}
            for c in (c_ok, c_lost):
                got[c] = {e.index: (e.data.packet_count if e.data is not None else 0)
                          async for e in sw.read([fy.P4CounterEntry(c, index=p) for p in ports])}
            out[d] = {p: (got[c_ok].get(p, 0), got[c_lost].get(p, 0)) for p in ports}
        return out

    async def _monitor_loss(self) -> None:
        """Every ``monitor_every`` s: read every ready rotor's per-link counters, estimate, decide;
        apply new disables at once (``_apply_masked``).  A rotor that cannot be read (restarting)
        is skipped this round, said once per outage."""
        mon = self.loss_monitor
        assert mon is not None
        sws = {sw.name: sw for sw in self.switches}
        unreadable: set[str] = set()
        self.status.corropt(threshold=mon.threshold, min_frames=mon.min_frames, rates={}, decisions=[],
                            disabled=[])
        self.on_event(f"CorrOpt monitor: links lossier than {mon.threshold:g} are turned off while every slice "
                      f"stays connected (estimates over {mon.min_frames} frames, read every {self.monitor_every:g} s)")
        while True:
            await asyncio.sleep(self.monitor_every)
            for name, rt in self.runtimes.items():
                if rt.role.kind != "rotor" or not rt.ready.is_set() or name not in mon.racks:
                    continue
                try:
                    readings = await self._read_link_counters(sws[name], sorted(mon.racks[name]))
                except Exception as ex:  # noqa: BLE001 - a switch restarting: gRPC/finsy errors alike
                    if name not in unreadable:
                        unreadable.add(name)
                        self.on_event(f"CorrOpt monitor: {name} unreadable ({str(ex).splitlines()[0][:120]}); "
                                      "skipped until it answers")
                    continue
                unreadable.discard(name)
                for d, r in readings.items():
                    mon.observe(name, d, r)
            rates: dict[str, dict[str, list]] = {}
            for (rotor, rack, d), est in sorted(mon.estimates.items()):
                rates.setdefault(f"{rotor}:{rack}", {})[d] = [round(est.rate, 6), est.frames]
            new = mon.decide()
            self.status.corropt(rates=rates)
            if not new:
                continue
            now = time.time_ns()
            recs = []
            for d in new:
                port = {rack: p for p, rack in mon.racks[d.rotor].items()}[d.rack]
                self.on_event(f"CorrOpt monitor: {d.action} {d.rotor} rack {d.rack} (port {port}), loss "
                              f"{d.rate:.3g} > {mon.threshold:g}: {d.reason()}")
                rec = dict(rotor=d.rotor, rack=d.rack, port=port, rate=round(d.rate, 6), action=d.action,
                           reason=d.reason(), t_ns=now)
                self.trace.event(t_ns=now, event="corropt", **{k: v for k, v in rec.items() if k != "t_ns"})
                recs.append(rec)
            if any(d.action == "disable" for d in new):
                t = time.perf_counter()
                writes = await self._apply_masked(mon.masked())
                applied = time.time_ns()
                for rec in recs:
                    if rec["action"] == "disable":
                        rec.update(applied_ns=applied, writes=writes)
                self.on_event(f"CorrOpt monitor: {len(mon.disabled)} link(s) off now: masked schedule written "
                              f"({writes} updates, ToRs then rotors, {(time.perf_counter() - t) * 1e3:.0f} ms)")
            self.status.corropt(decisions=self.status.data["corropt"]["decisions"] + recs,
                                disabled=[f"{r}:{k}" for r, k in mon.disabled])

    async def _apply_masked(self, sched: Schedule) -> int:
        """Every switch to ``sched``'s entities by writing what differs (``diff_entities``), ToRs
        first: their routes leave the masked circuits before the rotors drop them.  A switch
        takes its new role at once, so one (re)installed later gets the masked schedule too."""
        assert self.replan is not None
        roles = {r.spec.name: r for r in self.replan(sched)}
        sws = {sw.name: sw for sw in self.switches}
        writes = 0
        for rt in sorted(self.runtimes.values(), key=lambda rt: rt.role.kind == "rotor"):
            new = roles.get(rt.spec.name)
            if new is None:
                continue
            old, rt.role = rt.role, new
            if not rt.ready.is_set():
                continue
            sw = sws[rt.spec.name]
            # Built with the same run fields: the slot config compares equal and is not written.
            args = (self.mode_code, 0, 0, rt.generation, self.target)
            ups = diff_entities(sw.p4info, old.entities(*args), new.entities(*args))
            if not ups:
                continue
            try:
                await self._write(sw, rt, ups)
            except Exception as ex:  # noqa: BLE001 - it gets the masked schedule when re-installed
                self.on_event(f"{rt.spec.name}: masked schedule not written ({str(ex).splitlines()[0][:120]}); "
                              "it gets it when it is re-installed")
                continue
            writes += len(ups)
        return writes

    # -- whole run -------------------------------------------------------------
    async def run(self, duration: float | None = None, connect_timeout: float = 10.0,
                  after_ready: Callable[["Controller"], Any] | None = None) -> None:
        """Run until ``duration`` seconds pass (None: forever) or a switch fails."""
        controller = fy.Controller(self.switches)
        self._stop = asyncio.Event()
        monitor: asyncio.Task | None = None
        task = asyncio.create_task(controller.run())
        stop = asyncio.create_task(self._stop.wait())
        try:
            await self._wait_ready(task, connect_timeout)
            self.status.running(self.tb.wall_ns(self.t0_common_us))
            if self.loss_monitor is not None:
                monitor = asyncio.create_task(self._monitor_loss())
                monitor.add_done_callback(self._monitor_done)
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
            stop.cancel()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            self.trace.close()

    def _raise_switch_errors(self) -> None:
        errs = [rt.error for rt in self.runtimes.values() if rt.error is not None]
        if self.monitor_error is not None:
            errs.append(self.monitor_error)
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
            raise ControllerError("no --switch given")
        check_egress_guard(sched, egress_guard_us)
        self.sched = sched
        roles = [rotor_role(sched, spec, p4info, p4blob, (port_maps or {}).get(spec.name), egress_guard_us)
                 for spec in specs]
        super().__init__(roles, mode=mode, **kw)
