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
  installs the cycle once, and the pipeline computes the slot itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import finsy as fy

from .. import p4 as dp
from ..schedule import Rotor, Schedule, ScheduleError

LOG = logging.getLogger("p4rotor.controller")

WRITE_BATCH = 500
TS_MASK = (1 << dp.TIMESTAMP_BITS) - 1
# Timed changes: sent this long (plus twice the offset's uncertainty) after the previous start.
TIMED_MARGIN_US = 50
# Switches installed at once (clear, probe, write); the rest wait their turn.
INSTALL_CONCURRENCY = 8
CLOCK_PORT_PROBES = 64  # per round, in bursts of 8: enough that some meet both latency floors
CLOCK_PORT_ROUNDS = 4   # more rounds while the proven half-bracket exceeds the target
CLOCK_PORT_TARGET_US = 15


class ControllerError(Exception):
    """Any controller failure, with one line per failed update where there were some."""

    def __init__(self, message: str, failures: Sequence[str] = ()):
        self.failures = list(failures)
        text = message
        if self.failures:
            text += ": " + "; ".join(self.failures)
        super().__init__(text)


# ---------------------------------------------------------------------------
# Targets and P4Info
# ---------------------------------------------------------------------------

_SPEC_RE = re.compile(r"^(?P<name>[A-Za-z0-9_-]+)=(?P<host>[^:@\s]+|\[[^\]]+\]):(?P<port>\d+)(@(?P<dev>\d+))?$")


@dataclasses.dataclass(frozen=True)
class SwitchSpec:
    """Where a rotor's switch is: ``NAME=HOST:PORT[@DEVICE_ID]``."""

    name: str
    host: str
    port: int
    device_id: int = 1
    clock_iface: str | None = None   # host interface wired to the switch's clock port, if any

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> "SwitchSpec":
        m = _SPEC_RE.match(text.strip())
        if not m:
            raise ControllerError(f"bad --switch {text!r}: expected NAME=HOST:PORT[@DEVICE_ID]")
        port = int(m["port"])
        if not 0 < port < 65536:
            raise ControllerError(f"bad --switch {text!r}: port {port} out of range")
        return cls(m["name"], m["host"], port, int(m["dev"] or 1))


def default_port_map(racks: int) -> dict[int, int]:
    """Rack i is wired to rotor port i+1 unless a topology says otherwise (docs/topology.md)."""
    return {i: i + 1 for i in range(racks)}


def check_p4info(p4info: Path, contract=dp.ROTOR_CONTRACT, counters=dp.ROTOR_COUNTERS) -> fy.P4Schema:
    """Load a P4Info and make sure it is the program this controller drives."""
    if not p4info.exists():
        raise ControllerError(f"P4Info {p4info} not found: run 'make build' first")
    try:
        schema = fy.P4Schema(p4info)
        _ = schema.tables  # force the parse
    except Exception as ex:  # finsy raises protobuf text-format errors
        raise ControllerError(f"P4Info {p4info} unreadable: {ex}") from None
    problems = []
    tables = {t.name: t for t in schema.tables}
    for tname, (keys, actions) in contract.items():
        t = tables.get(tname)
        if t is None:
            problems.append(f"table {tname} missing")
            continue
        have = tuple(f.name for f in t.match_fields)
        if have != keys:
            problems.append(f"table {tname} keys {have} != {keys}")
        for aname, params in actions.items():
            try:
                a = schema.actions[aname]
            except Exception:
                problems.append(f"action {aname} missing")
                continue
            got = tuple(p.name for p in a.params)
            if got != params:
                problems.append(f"action {aname} params {got} != {params}")
    names = {c.name for c in schema.counters}
    problems += [f"counter {c} missing" for c in counters if c not in names]
    for cpm, fields in (("packet_out", dp.PACKET_OUT_FIELDS), ("packet_in", dp.PACKET_IN_FIELDS)):
        try:
            got = tuple(m.name for m in schema.controller_packet_metadata[cpm].metadata)
        except Exception:
            problems.append(f"controller header {cpm} missing")
            continue
        if got != fields:
            problems.append(f"{cpm} fields {got} != {fields}")
    if problems:
        raise ControllerError(f"P4Info mismatch in {p4info} (rebuild with 'make build'?)", problems)
    return schema


# ---------------------------------------------------------------------------
# Entities (pure functions of the schedule)
# ---------------------------------------------------------------------------


def circuit_entries(rotor: Rotor, port_map: dict[int, int]) -> list[fy.P4TableEntry]:
    out = []
    for mi, m in enumerate(rotor.matchings):
        for i, j in enumerate(m):
            if j is None:
                continue
            out.append(fy.P4TableEntry(
                dp.T_CIRCUIT,
                match=fy.P4TableMatch(matching=mi, in_port=port_map[i]),
                action=fy.P4TableAction(dp.A_CONNECT, port=port_map[j]),
            ))
    return out


def port_mtu_entries(link_mtus: dict[int, int], table: str = dp.T_PORT_MTU,
                     action: str = dp.A_MTU_LIMIT) -> list[fy.P4TableEntry]:
    """The egress MTU check: each port's longest frame is its link's MTU plus the Ethernet header;
    a longer frame is dropped and counted (DropCause.MTU) instead of vanishing in the link."""
    return [fy.P4TableEntry(table, match=fy.P4TableMatch(port=port),
                            action=fy.P4TableAction(action, max_frame_bytes=mtu + dp.ETHERNET_HEADER_BYTES))
            for port, mtu in sorted(link_mtus.items())]


def _range_pieces(lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi] as P4Runtime ranges BMv2's server accepts.

    PI refuses a range whose low is 0 and whose high is all-ones in its bytes (255, 65535, ...)
    as a badly written "don't care"; split such a range so neither piece looks like one.
    """
    if lo == 0 and hi > 0 and (hi + 1) & hi == 0:
        return [(0, 0), (1, hi)]
    return [(lo, hi)]


def phase_entries(spans: Sequence[tuple[int, int]], table: str = dp.T_CLOCK_PHASE,
                  action: str = dp.A_CLOCK_SLOT, egress_guard_us: int = 0) -> list[fy.P4TableEntry]:
    """Clock mode: range entries covering each [start, end) of the cycle -> its index.

    ``egress_guard_us``: the egress re-check closes each day this much before its end
    (``slot_end`` is what the re-check compares with), for frames a software switch still
    transmits after its egress pipeline ran."""
    return [fy.P4TableEntry(table, match=fy.P4TableMatch(phase=piece),
                            action=fy.P4TableAction(action, index=i, slot_start=lo, slot_end=hi - egress_guard_us),
                            priority=1)
            for i, (lo, hi) in enumerate(spans) for piece in _range_pieces(lo, hi - 1)]


def check_egress_guard(sched: Schedule, egress_guard_us: int) -> None:
    if not 0 <= egress_guard_us < sched.day_us:
        raise ControllerError(f"egress guard {egress_guard_us} us must be >= 0 and shorter than the day "
                              f"({sched.day_us} us)")


def clock_phase_entries(sched: Schedule, rotor: Rotor, egress_guard_us: int = 0) -> list[fy.P4TableEntry]:
    check_egress_guard(sched, egress_guard_us)
    return phase_entries([(m * sched.slot_us, (m + 1) * sched.slot_us) for m in range(len(rotor.matchings))],
                         egress_guard_us=egress_guard_us)


def slot_config_entry(mode: int, count: int, cycle_us: int, night_us: int, *, offset_us: int = 0,
                      epoch_us: int = 0, generation: int = 1, table: str = dp.T_CONFIG,
                      action: str = dp.A_CONFIGURE) -> fy.P4TableEntry:
    return fy.P4TableEntry(
        table, is_default_action=True,
        action=fy.P4TableAction(action, mode=mode, num_matchings=count, offset=offset_us & TS_MASK,
                                epoch_us=epoch_us & TS_MASK, cycle=cycle_us, night=night_us,
                                gen=generation & 0xFFFF))


def config_entry(sched: Schedule, rotor: Rotor, mode: int, *, offset_us: int = 0,
                 epoch_us: int = 0, generation: int = 1) -> fy.P4TableEntry:
    return slot_config_entry(mode, len(rotor.matchings), sched.cycle_us(rotor), sched.reconfig_us,
                             offset_us=offset_us, epoch_us=epoch_us, generation=generation)


def rotor_entities(sched: Schedule, rotor: Rotor, port_map: dict[int, int], mode: int, *,
                   offset_us: int = 0, epoch_us: int = 0, generation: int = 1,
                   egress_guard_us: int = 0, link_mtus: dict[int, int] | None = None) -> list[Any]:
    """Everything one rotor switch needs, as INSERT/MODIFY updates, config last.
    ``link_mtus``: {port: MTU of its link} from the topology (none: no egress MTU check)."""
    missing = [i for i in range(sched.racks) if i not in port_map]
    if missing:
        raise ControllerError(f"rotor {rotor.name}: no port for racks {missing}")
    ents: list[Any] = [+e for e in circuit_entries(rotor, port_map)]
    ents += [+e for e in port_mtu_entries(link_mtus or {})]
    if mode == dp.MODE_CLOCK:
        ents += [+e for e in clock_phase_entries(sched, rotor, egress_guard_us)]
    # The config goes last: the rotor starts switching only when its circuits exist.
    ents.append(~config_entry(sched, rotor, mode, offset_us=offset_us, epoch_us=epoch_us,
                              generation=generation))
    return ents


def set_slot_packet(slot: int, index: int, night: bool = False, *, seq: int = 0, ack: bool = False,
                    at_us: int | None = None, night_us: int = 0) -> fy.P4PacketOut:
    """OP_SET_SLOT.  Immediate (``at_us`` None): the switch moves when the packet arrives.
    Timed: slot ``slot`` starts at common time ``at_us`` with a night of ``night_us``; the
    switch holds it (one pending change) and applies it by its own clock."""
    flags = (dp.FLAG_NIGHT if night else 0) | (dp.FLAG_ACK if ack else 0)
    if at_us is not None:
        if at_us < 0 or not 0 <= night_us < 1 << 32:
            raise ControllerError(f"bad timed slot change: at {at_us} us, night {night_us} us")
        flags = (flags & ~dp.FLAG_NIGHT) | dp.FLAG_AT
    return fy.P4PacketOut(b"", opcode=dp.OP_SET_SLOT, flags=flags, index=index,
                          slot=slot & 0xFFFFFFFF, seq=seq & 0xFFFFFFFF,
                          at=(at_us or 0) & TS_MASK, night_us=night_us if at_us is not None else 0)


def time_probe_packet(seq: int) -> fy.P4PacketOut:
    return fy.P4PacketOut(b"", opcode=dp.OP_TIME_PROBE, flags=0, index=0, slot=0, seq=seq & 0xFFFFFFFF,
                          at=0, night_us=0)


async def write_batched(sw: fy.Switch, updates: Sequence[Any], batch: int = WRITE_BATCH) -> None:
    """Write updates in batches; raise one ControllerError listing every failed update."""
    for i in range(0, len(updates), batch):
        chunk = updates[i:i + batch]
        try:
            await sw.write(chunk)
        except fy.P4ClientError as ex:
            fails = [f"#{i + idx}: {err.canonical_code.name} {err.message}"
                     for idx, err in sorted(ex.details.items())]
            raise ControllerError(f"{sw.name}: write failed ({ex.code.name})",
                                  fails or [ex.message]) from None


# ---------------------------------------------------------------------------
# Time: a common time base for every switch
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Timebase:
    """Common time = microseconds since ``ref_ns`` (a wall-clock instant)."""

    ref_ns: int

    def common_us(self, wall_ns: int) -> int:
        return (wall_ns - self.ref_ns) // 1000

    def wall_ns(self, common_us: float) -> int:
        return self.ref_ns + int(common_us * 1000)


@dataclasses.dataclass
class OffsetEstimate:
    offset_us: int      # local timestamp + offset = common time
    rtt_us: float       # packet-out probes: round trip of the best probe (uncertainty rtt/2)
    probes: int
    method: str = "packet-out"   # or "clock-port" (one-way, data path)
    jitter_us: float = 0.0       # clock-port: half the width of the proven bracket
    spread_us: float = 0.0       # clock-port: how far the 4th best bounds are from the best

    @property
    def uncertainty_us(self) -> float:
        """Half the best round trip (packet-out, assuming a symmetric path); half the proven
        bracket (clock-port, no assumption)."""
        return self.rtt_us / 2 if self.method == "packet-out" else self.jitter_us

    def describe(self) -> str:
        if self.method == "packet-out":
            return f"+/- {self.rtt_us / 2:.0f} us, {self.probes} packet-out probes"
        return (f"+/- {self.jitter_us:.1f} us proven, clock port, {self.probes} probes "
                f"(4 best bounds within {self.spread_us:.1f} us)")


def estimate_offset(samples: Iterable[tuple[int, int, int]], tb: Timebase) -> OffsetEstimate:
    """From (sent wall ns, received wall ns, switch local us) choose the tightest probe.

    The switch stamped the probe somewhere between send and receive; assume the
    middle, so the error is at most half the round trip.
    """
    best = None
    n = 0
    for sent, recv, local in samples:
        n += 1
        rtt = recv - sent
        if best is None or rtt < best[0]:
            best = (rtt, sent, recv, local)
    if best is None:
        raise ControllerError("no time probe came back")
    rtt, sent, recv, local = best
    mid_common = tb.common_us((sent + recv) // 2)
    return OffsetEstimate(offset_us=mid_common - local, rtt_us=rtt / 1000, probes=n)


def boundary_times(sched: Schedule, rotor: Rotor, t0_common_us: int, from_common_us: float):
    """Yield (common us, slot k, index, night) for every night start / day start from a time on."""
    k = max(0, int((from_common_us - t0_common_us - rotor.offset_us) // sched.slot_us))
    while True:
        start = t0_common_us + rotor.offset_us + k * sched.slot_us
        idx = k % len(rotor.matchings)
        if sched.reconfig_us > 0:
            yield start, k, idx, True
        yield start + sched.reconfig_us, k, idx, False
        k += 1


def timed_changes(bounds: Iterable[tuple[int, int, int, bool]]) -> Iterator[tuple[int, int, int, int]]:
    """(at, k, index, night) boundaries -> one timed change per slot: (start, k, index, night_us).

    A night start followed by its own day start becomes one change whose night lasts until
    the day; a day start with no night before it has night_us 0."""
    pend = None
    for at, k, idx, night in bounds:
        if pend is not None:
            pat, pk, pidx = pend
            pend = None
            if not night and (k, idx) == (pk, pidx):
                yield pat, pk, pidx, at - pat
                continue
            yield pat, pk, pidx, 0
        if night:
            pend = (at, k, idx)
        else:
            yield at, k, idx, 0


# ---------------------------------------------------------------------------
# The controller
# ---------------------------------------------------------------------------


class Trace:
    """One JSON line per slot change: wall ns, switch, slot, index, night, source."""

    def __init__(self, path: Path | None):
        self._f = open(path, "w", buffering=1) if path else None

    @property
    def enabled(self) -> bool:
        return self._f is not None

    def write(self, **rec: Any) -> None:
        if self._f:
            self._f.write(json.dumps(rec) + "\n")

    def close(self) -> None:
        if self._f:
            self._f.close()


@dataclasses.dataclass
class Role:
    """One switch the controller drives: what to install and when its slots change."""

    spec: SwitchSpec
    kind: str                       # "rotor" or "tor"
    p4info: Path
    p4blob: Path
    # (mode, offset_us, epoch_us, generation) -> updates, config last
    entities: Callable[[int, int, int, int], list[Any]]
    # (t0_common_us, from_common_us) -> (at, slot k, index, night) boundaries (signal mode / trace)
    boundaries: Callable[[int, float], Iterable[tuple[int, int, int, bool]]]
    epoch_offset_us: int = 0        # this switch's slot 0 relative to the schedule's t0


@dataclasses.dataclass
class SwitchRuntime:
    role: Role
    offset: OffsetEstimate | None = None
    generation: int = 0
    ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    waiters: dict[int, asyncio.Future] = dataclasses.field(default_factory=dict)
    acks: list[tuple[int, int, int, int]] = dataclasses.field(default_factory=list)  # (scheduled, sent, recv ns, local us)
    error: BaseException | None = None
    install_ms: float | None = None
    entities: int = 0
    refused: int = 0  # acked slot changes the switch refused (OP_ERROR)
    # gRPC allows one write at a time on the P4Runtime stream; finsy does not serialise them.
    send_lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)

    async def send(self, sw: fy.Switch, pkt: fy.P4PacketOut) -> None:
        async with self.send_lock:
            await sw.write([pkt])

    @property
    def spec(self) -> SwitchSpec:
        return self.role.spec


def rotor_role(sched: Schedule, spec: SwitchSpec, p4info: Path, p4blob: Path,
               port_map: dict[int, int] | None = None, egress_guard_us: int = 0,
               link_mtus: dict[int, int] | None = None) -> Role:
    try:
        rotor = sched.rotor(spec.name)
    except ScheduleError as ex:
        raise ControllerError(str(ex)) from None
    pm = port_map or default_port_map(sched.racks)

    def ents(mode, offset, epoch, gen):
        return rotor_entities(sched, rotor, pm, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                              egress_guard_us=egress_guard_us, link_mtus=link_mtus)

    return Role(spec=spec, kind="rotor", p4info=p4info, p4blob=p4blob, entities=ents,
                boundaries=lambda t0, now: boundary_times(sched, rotor, t0, now),
                epoch_offset_us=rotor.offset_us)


class Controller:
    """Drive switches (rotors, ToRs) over P4Runtime: one finsy Switch task per switch."""

    def __init__(self, roles: Sequence[Role], *, mode: str, trace: Path | None = None,
                 election_id: int = 10, lead_s: float = 1.0, probes: int = 16,
                 ack_every: int = 0, spin_us: int = 150, signal_lead_us: float | str = 0.0,
                 signal_timed: bool = False, install_concurrency: int = INSTALL_CONCURRENCY,
                 on_event: Callable[[str], None] | None = None):
        if mode not in ("signal", "clock"):
            raise ControllerError(f"unknown mode {mode!r} (signal or clock)")
        if not roles:
            raise ControllerError("no --switch given")
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
        self._timer = None
        self.on_event = on_event or (lambda msg: LOG.info("%s", msg))
        checked: set[Path] = set()
        for r in roles:
            if not r.p4blob.exists():
                raise ControllerError(f"pipeline {r.p4blob} not found: run 'make build' first")
            if r.p4info not in checked:
                contract = dp.ROTOR_CONTRACT if r.kind == "rotor" else dp.TOR_CONTRACT
                check_p4info(r.p4info, contract)
                checked.add(r.p4info)
        self.trace = Trace(trace)
        self.tb = Timebase(ref_ns=time.time_ns())
        # Slot 0 of the schedule starts lead_s from now (each switch adds its own offset).
        self.t0_common_us = int(lead_s * 1e6)
        self.runtimes: dict[str, SwitchRuntime] = {}
        for r in roles:
            if r.spec.name in self.runtimes:
                raise ControllerError(f"switch {r.spec.name!r} given twice")
            # Fresh generation per run: state a previous run left in registers is void.
            self.runtimes[r.spec.name] = SwitchRuntime(role=r, generation=(time.time_ns() >> 20) & 0x7FFF)
        self.switches = [
            fy.Switch(rt.spec.name, rt.spec.address, fy.SwitchOptions(
                p4info=rt.role.p4info, p4blob=rt.role.p4blob, device_id=rt.spec.device_id,
                initial_election_id=election_id, ready_handler=self._ready))
            for rt in self.runtimes.values()
        ]

    # -- per-switch lifecycle ------------------------------------------------
    async def _ready(self, sw: fy.Switch) -> None:
        rt = self.runtimes[sw.name]
        try:
            if not sw.is_primary:
                raise ControllerError(
                    f"{sw.name}: another controller is primary (election id {sw.primary_id} "
                    f"> ours {self.election_id}); refusing to run as backup")
            rt.generation = (rt.generation + 1) & 0xFFFF or 1
            sw.create_task(self._packet_reader(sw, rt))
            if self._install_sem is None:
                self._install_sem = asyncio.Semaphore(self.install_concurrency)
            async with self._install_sem:
                await self._install(sw, rt)
            if self.mode_code == dp.MODE_SIGNAL:
                sw.create_task(self._rotate_timed(sw, rt) if self.signal_timed else self._rotate(sw, rt))
            else:
                sw.create_task(self._trace_clock(sw, rt))
        except ControllerError as ex:
            rt.error = ex
            raise
        except fy.P4ClientError as ex:
            rt.error = ControllerError(f"{sw.name}: {ex}")
            raise rt.error from None

    async def _install(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Clear, probe the clock if needed, write everything (config last); then ready.

        At most ``install_concurrency`` switches do this at once: on a small machine running
        a hundred BMv2 processes, all of them installing together starve one another until a
        P4Runtime write outlives its deadline (finsy's 10 s)."""
        # Clear, then write everything: safe to run again after a restart.
        await sw.delete_all()
        offset = 0
        if self.mode_code == dp.MODE_CLOCK or self.ack_every or self.signal_timed:
            # Clock mode and timed changes need the offset; signal mode uses it to time acks.
            rt.offset = await self._probe_offset(sw, rt)
            offset = rt.offset.offset_us
            self.on_event(f"{sw.name}: clock offset {offset} us ({rt.offset.describe()})")
        ents = rt.role.entities(self.mode_code, offset, self.t0_common_us + rt.role.epoch_offset_us,
                                rt.generation)
        t = time.perf_counter()
        await write_batched(sw, ents)
        rt.install_ms = (time.perf_counter() - t) * 1e3
        rt.entities = len(ents)
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
        if rt.spec.clock_iface and not packet_out:
            return await self._probe_clock_port(sw, rt, n)
        samples = []
        for i in range(n or self.probes):
            seq = 0x70000000 + (rt.generation << 12) + i
            sent, recv, reply = await self._request(sw, rt, time_probe_packet(seq), seq)
            if reply is not None:
                samples.append((sent, recv, reply["timestamp"]))
        if not samples:
            raise ControllerError(f"{sw.name}: no time probe answered (is the CPU port 255 set?)")
        return estimate_offset(samples, self.tb)

    async def _probe_clock_port(self, sw: fy.Switch, rt: SwitchRuntime, n: int | None = None) -> OffsetEstimate:
        """Two-way probes through the switch's clock port, on the data path only (clockport.py)."""
        from . import clockport as CP

        def run() -> list:
            # Bounds from every probe hold together (the offset is one number): keep probing, up
            # to CLOCK_PORT_ROUNDS rounds, until the proven bracket is narrow enough.
            samples: list = []
            with CP.ClockPort(rt.spec.clock_iface) as cp:
                for r in range(CLOCK_PORT_ROUNDS):
                    samples += cp.measure(max(CLOCK_PORT_PROBES, n or self.probes),
                                          first_seq=0x60000000 + (rt.generation << 12) + (r << 8))
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
                                  f"(is it wired to port {dp.CLOCK_PORT} of this switch?)")
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
            pkt = set_slot_packet(k, idx, seq=seq, ack=ack, at_us=at, night_us=night_us)
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
            rt.acks.append((scheduled, sent, recv, reply["timestamp"]))
        else:
            rt.refused += 1

    async def _trace_clock(self, sw: fy.Switch, rt: SwitchRuntime) -> None:
        """Clock mode: the switch moves by itself; trace the boundaries it follows (no spinning)."""
        if not self.trace.enabled:
            return
        now = self.tb.common_us(time.time_ns())
        for at, k, idx, night in rt.role.boundaries(self.t0_common_us, now):
            await self._sleep_until(at, spin=False)
            self.trace.write(t_ns=self.tb.wall_ns(at), switch=sw.name, slot=k, index=idx, night=night,
                             source="clock")

    # -- whole run -------------------------------------------------------------
    async def run(self, duration: float | None = None, connect_timeout: float = 10.0,
                  after_ready: Callable[["Controller"], Any] | None = None) -> None:
        """Run until ``duration`` seconds pass (None: forever) or a switch fails."""
        controller = fy.Controller(self.switches)
        task = asyncio.create_task(controller.run())
        try:
            await self._wait_ready(task, connect_timeout)
            if after_ready is not None:
                res = after_ready(self)
                if asyncio.iscoroutine(res):
                    await res
            if duration is None:
                await task
            else:
                done, _ = await asyncio.wait([task], timeout=duration)
                if task in done:
                    task.result()
                self._raise_switch_errors()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            self.trace.close()

    def _raise_switch_errors(self) -> None:
        errs = [rt.error for rt in self.runtimes.values() if rt.error is not None]
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

    def _acks(self, windows):
        for rt in self.runtimes.values():
            if rt.offset is None:
                continue
            for a in rt.acks:
                if windows is None or any(lo <= a[0] <= hi for lo, hi in windows):
                    yield rt, a

    def ack_delays_us(self, since: str = "scheduled",
                      windows: Sequence[tuple[int, int]] | None = None) -> list[float]:
        """Signal mode: when the pipeline applied each acked slot change, after its scheduled
        boundary (``since="scheduled"``: the boundary error) or after the controller sent it
        (``since="sent"``: the transport delay alone), in us.

        The pipeline's timestamp is local: the offset measured by time probes at start maps it
        to common time (clock port: within its proven bracket; PacketOut: within RTT/2).
        ``windows``: only changes scheduled within these (wall ns) intervals.
        """
        out = []
        for rt, (scheduled, sent, _recv, local) in self._acks(windows):
            ref = scheduled if since == "scheduled" else sent
            d = local + rt.offset.offset_us - (ref - self.tb.ref_ns) / 1000
            if self.signal_timed and since == "scheduled":
                # A timed change is applied at its start time, or on arrival if later.
                d = max(0.0, d)
            out.append(d)
        return out

    def timed_margins_us(self, windows: Sequence[tuple[int, int]] | None = None) -> list[float]:
        """Timed changes: how long before its start time each acked change reached the
        pipeline (negative: it arrived late and was applied on arrival)."""
        return [(s - self.tb.ref_ns) / 1000 - (local + rt.offset.offset_us)
                for rt, (s, _sent, _recv, local) in self._acks(windows)]


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


def percentile(xs: Sequence[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def summarize(xs: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50": percentile(xs, 50), "p99": percentile(xs, 99),
            "max": max(xs), "mean": statistics.fmean(xs)}
