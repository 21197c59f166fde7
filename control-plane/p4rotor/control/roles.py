"""What the controller drives: switch addresses, roles (what to install, when slots change), traces."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable

import finsy as fy

from ..schedule import Schedule, ScheduleError
from .entities import default_port_map, rotor_entities, sleep_entries, write_batched
from .errors import ControllerError
from .target import Target
from .timebase import OffsetEstimate, boundary_times

_PIPE_RE = re.compile(r"^(?P<name>[A-Za-z0-9_-]+)=(?P<id>\d+)(@(?P<netns>[A-Za-z0-9_.-]+))?$")
_SPEC_RE = re.compile(r"^(?P<name>[A-Za-z0-9_-]+)=(?P<host>[^:@\s]+|\[[^\]]+\]):(?P<port>\d+)(@(?P<dev>\d+))?$")


@dataclasses.dataclass(frozen=True)
class SwitchSpec:
    """Where a switch is: ``NAME=HOST:PORT[@DEVICE_ID]`` (P4Runtime), or on target ebpf
    ``NAME=ID[@NETNS]``: the NIKSS pipeline id and the network namespace its ports are in."""

    name: str
    host: str
    port: int
    device_id: int = 1
    clock_iface: str | None = None   # host interface wired to the switch's clock port, if any
    pipeline: int | None = None      # NIKSS pipeline id (target ebpf)
    netns: str | None = None         # where its ports are (None: the controller's namespace)

    @property
    def address(self) -> str:
        if self.pipeline is not None:
            return f"NIKSS pipeline {self.pipeline}" + (f" in netns {self.netns}" if self.netns else "")
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

    @classmethod
    def parse_pipeline(cls, text: str) -> "SwitchSpec":
        """``--pipeline NAME=ID[@NETNS]`` (target ebpf)."""
        m = _PIPE_RE.match(text.strip())
        if not m:
            raise ControllerError(f"bad --pipeline {text!r}: expected NAME=ID[@NETNS]")
        return cls(m["name"], "", 0, pipeline=int(m["id"]), netns=m["netns"])


def pipeline_specs(items: Iterable[str]) -> dict[str, "SwitchSpec"]:
    """``--pipeline`` options (repeated) by switch name; a name or id given twice is an error."""
    out: dict[str, SwitchSpec] = {}
    for it in items:
        sp = SwitchSpec.parse_pipeline(it)
        if sp.name in out:
            raise ControllerError(f"--pipeline {it!r}: {sp.name} given twice")
        dup = [o.name for o in out.values() if o.pipeline == sp.pipeline]
        if dup:
            raise ControllerError(f"--pipeline {it!r}: pipeline {sp.pipeline} is {dup[0]}'s already (ids are global)")
        out[sp.name] = sp
    return out


def with_pipelines(roles: list["Role"], pipelines: dict[str, SwitchSpec]) -> list["Role"]:
    """Each role's switch at its NIKSS pipeline; a driven switch without one, or a pipeline for
    a switch not driven, is an error."""
    names = {r.spec.name for r in roles}
    extra = sorted(set(pipelines) - names)
    if extra:
        raise ControllerError(f"--pipeline {extra[0]}=...: no switch {extra[0]!r} is driven")
    missing = [r.spec.name for r in roles if r.spec.name not in pipelines]
    if missing:
        raise ControllerError(f"target ebpf: no --pipeline for {', '.join(missing)} (NAME=ID[@NETNS] each)")
    return [dataclasses.replace(r, spec=dataclasses.replace(r.spec, pipeline=pipelines[r.spec.name].pipeline,
                                                           netns=pipelines[r.spec.name].netns))
            for r in roles]



class Trace:
    """One JSON line per slot change: wall ns, switch, slot, index, night, source; and one per
    clock event (``event``: "resync" check, "clock-skew" change), not counted in ``records``."""

    def __init__(self, path: Path | None):
        self._f = open(path, "w", buffering=1) if path else None
        self.records = 0  # slot changes sent (signal mode) or traced (clock mode with a file)

    @property
    def enabled(self) -> bool:
        return self._f is not None

    def write(self, **rec: Any) -> None:
        self.records += 1
        if self._f:
            self._f.write(json.dumps(rec) + "\n")

    def write_many(self, recs: list[dict[str, Any]]) -> None:
        """Several slot changes in one write (clock mode's batches)."""
        self.records += len(recs)
        if self._f and recs:
            self._f.write("".join(json.dumps(r) + "\n" for r in recs))

    def event(self, **rec: Any) -> None:
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
    # (mode, offset_us, epoch_us, generation, target) -> updates, config last (target.py: the
    # builders convert the microseconds into the target's units)
    entities: Callable[[int, int, int, int, Target], list[Any]]
    # (t0_common_us, from_common_us) -> (at, slot k, index, night) boundaries (signal mode / trace)
    boundaries: Callable[[int, float], Iterable[tuple[int, int, int, bool]]]
    epoch_offset_us: int = 0        # this switch's slot 0 relative to the schedule's t0
    # The ports its links use: the per-port counters are read at these indices only (None: the
    # whole array).  Wildcard reads of two 512-entry arrays every second, on 12 switches, cost
    # the controller a fifth of a core and BMv2 its time with frames in its queues.
    data_ports: tuple[int, ...] | None = None
    # Its ports as the energy accounting names them (activity_recorder.EnergyPorts; None: unknown,
    # the switch is not recorded).
    energy: Any = None


@dataclasses.dataclass
class SwitchRuntime:
    role: Role
    offset: OffsetEstimate | None = None
    generation: int = 0
    ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    waiters: dict[int, asyncio.Future] = dataclasses.field(default_factory=dict)
    # (scheduled, sent, recv ns, local us)
    acks: list[tuple[int, int, int, float]] = dataclasses.field(default_factory=list)
    error: BaseException | None = None
    install_ms: float | None = None
    # Where the last install's time went (ms): ready (the handler began, wall ns), probe, read,
    # clear, write; what a restarted switch's recovery is made of (docs/faults.md).
    install_phases: dict[str, float] = dataclasses.field(default_factory=dict)
    entities: int = 0
    # Adoption (clock mode): this switch's own slot 0 (common us) when it runs a clock another run
    # installed (None: the controller's t0); entity updates written and clears done by this run.
    t0_common_us: int | None = None
    adopted: bool = False
    writes: int = 0
    clears: int = 0
    was_primary: bool = False
    refused: int = 0  # acked slot changes the switch refused (OP_ERROR)
    # Clock mode: ``offset`` is the estimate the slot config is built on (the controller's view
    # of the switch's clock, emulated skew included: skew.py); the config holds
    # ``config_offset_us`` = offset + ``injected_skew_us``, what the switch adds to its raw clock.
    injected_skew_us: int = 0
    config_offset_us: int | None = None
    resyncs: int = 0  # config rewrites by the periodic re-sync
    # One probe or config rewrite at a time per switch: the re-sync, the skew task and the
    # after-start skew report share the probe sequence numbers and the offset.
    clock_lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    # gRPC allows one write at a time on the P4Runtime stream; finsy does not serialise them.
    send_lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)

    async def send(self, sw: fy.Switch, pkt: fy.P4PacketOut) -> None:
        async with self.send_lock:
            await sw.write([pkt])

    async def write(self, sw: fy.Switch, updates: list[Any]) -> None:
        """Entity updates, in batches (``write_batched``), counted in ``writes``."""
        await write_batched(sw, updates)
        self.writes += len(updates)

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

    def ents(mode, offset, epoch, gen, target):
        return rotor_entities(sched, rotor, pm, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                              egress_guard_us=egress_guard_us, link_mtus=link_mtus, target=target)

    return Role(spec=spec, kind="rotor", p4info=p4info, p4blob=p4blob, entities=ents,
                boundaries=lambda t0, now: boundary_times(sched, rotor, t0, now),
                epoch_offset_us=rotor.offset_us, data_ports=tuple(sorted(pm.values())))


def with_sleep(role: Role, plan: dict[int, dict[str, list[int]]]) -> Role:
    """``role`` with its sleep plan (entities.sleep_entries) installed before its config."""
    base = role.entities

    def ents(mode, offset, epoch, gen, target):
        e = base(mode, offset, epoch, gen, target)
        return e[:-1] + [+x for x in sleep_entries(role.kind, plan)] + e[-1:]

    return dataclasses.replace(role, entities=ents)
