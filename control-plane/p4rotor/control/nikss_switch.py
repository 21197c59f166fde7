"""A NIKSS pipeline as the controller's switch (target ebpf).

``NikssDriver`` answers the calls the controller makes on a ``finsy.Switch`` (write, read,
delete_all, create_task, read_packets) through the adapter in ``nikss.py``, which turns each
entity into ``nikss-ctl`` commands; ``NikssFabric`` stands for ``finsy.Controller`` (connect every
switch, run its ready handler, end the run at the first error of a switch's task).  Nothing above
this module knows the switch is not a P4Runtime server.

What a switch is (the harness's contract, docs/targets.md): ``--pipeline NAME=ID[@NETNS]``, the
pipeline the harness loaded and whose ports it attached in network namespace NETNS; the interface
of logical port P is named ``NAME-ethP`` (Mininet's naming).  The controller never loads, attaches
or unloads anything: it reads the port map (``pipeline show`` in NETNS; after a restart, the
pipeline's port DEVMAP) and writes entries.
Entries and counters live in pinned BPF maps, which no network namespace hides: exact tables and
default actions are written straight into them (``nikss_maps.py``, tens of thousands a second),
the rest through ``nikss-ctl``.

No gRPC: no election (always primary), no PacketIn (``read_packets`` yields nothing), no device
config.  Every nikss-ctl call is a process: a batch runs in a worker thread, in order; a failed
command fails the write with one line naming the switch, the command and NIKSS's reason.

A switch that crashes and restarts on this target is its pipeline unloaded, then loaded again
(empty) as the same id with the same ports (the harness's ``switch-crash``).  ``watch`` sees it
as finsy sees a P4Runtime server go and come back: the switch's tasks are cancelled when its
pins go (or are replaced), and once it holds its ports again the adapter is opened on the new
maps and the ready handler runs again (which re-installs it).  An error of a task while the
pipeline is away is that, not the run's failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence

import finsy as fy

from . import bpf_maps
from .bpf_maps import BPFFS
from .errors import ControllerError
from .nikss import (ABSENT_COUNTERS, SLOT_PORT_COUNTERS, NikssError, NikssSwitch, cli_runner, counter_name,
                    nikss_name)


def pipeline_ports(show: str, switch: str) -> dict[int, int]:
    """{logical port: PSA port} from ``nikss-ctl pipeline show``: ports named ``SWITCH-ethP``."""
    prefix = f"{switch}-eth"
    got = {}
    for p in json.loads(show).get("pipeline", {}).get("ports", []):
        name = str(p.get("name", ""))
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            got[int(name[len(prefix):])] = int(p["port_id"])
    return got


def missing_tables(schema: fy.P4Schema, show: str) -> list[str]:
    """The P4Info's tables a loaded pipeline lacks (it runs another program)."""
    have = set(json.loads(show).get("pipeline", {}).get("objects", []))
    if not have:
        return []  # this nikss-ctl lists no objects: nothing to compare
    return [t.name for t in schema.tables if nikss_name(t.name) not in have]


def missing_pinned_tables(schema: fy.P4Schema, maps: Path) -> list[str]:
    """``missing_tables`` from the pipeline's pinned maps (``maps``: its maps directory), with no
    process: a table is its map, or the maps named after it (a ternary table's ``_prefixes``,
    ``_tuple``, ..., every table's ``_defaultAction``)."""
    try:
        have = [m.name for m in maps.iterdir()]
    except OSError:
        return [t.name for t in schema.tables]
    return [t.name for t in schema.tables
            if not any(m == nikss_name(t.name) or m.startswith(nikss_name(t.name) + "_") for m in have)]


PORT_MAP = "tx_port"    # NIKSS's DEVMAP of the attached ports: cell ifindex % PORT_CELLS -> ifindex
PORT_CELLS = 256


class NikssDriver:
    """One NIKSS pipeline, driven like a ``finsy.Switch`` (the subset the controller uses)."""

    is_primary = True   # no election: nothing else writes a pipeline the harness gave us
    primary_id = 0

    def __init__(self, name: str, pipeline: int, netns: str | None, p4info: Path,
                 ready_handler: Callable[["NikssDriver"], Awaitable[None]]):
        self.name = name
        self.pipeline = pipeline
        self.netns = netns
        self.p4info_path = Path(p4info)
        self.p4info = fy.P4Schema(self.p4info_path)
        self.ready_handler = ready_handler
        self.adapter: NikssSwitch | None = None
        self.on_error: Callable[[BaseException], None] = lambda ex: None
        self.on_event: Callable[[str], None] = lambda msg: None
        self._tasks: set[asyncio.Task] = set()
        self._lock = asyncio.Lock()   # one nikss-ctl batch at a time per switch
        self.loaded_as: int | None = None   # the pipeline's pin directory (inode) connected to
        self.ports: dict[int, int] = {}
        self.reconnects = 0
        self._over = False   # ``writing_over``
        self._fresh = False  # loaded again (``watch``) and not written since: as empty as a clear leaves it

    def pins_now(self) -> int | None:
        """The inode of the pipeline's pin directory now (a new one each load); None: not loaded."""
        try:
            return os.stat(BPFFS / f"pipeline{self.pipeline}").st_ino
        except OSError:
            return None

    @property
    def live(self) -> NikssSwitch:
        """The adapter of the pipeline connected to; none while it is away (``watch``)."""
        if self.adapter is None:
            raise ControllerError(f"{self.name}: pipeline {self.pipeline} is not connected (restarting)")
        return self.adapter

    @property
    def away(self) -> bool:
        """The pipeline this driver connected to is gone (unloaded, or loaded again since)."""
        return self.loaded_as is not None and self.pins_now() != self.loaded_as

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        async with self._lock:
            try:
                return await asyncio.to_thread(fn, *args)
            except NikssError as ex:
                msg = str(ex)
                raise ControllerError(msg if msg.startswith(self.name) else f"{self.name}: {msg}") from None

    def attached(self, ports: Iterable[int] | None = None) -> set[int] | None:
        """The PSA ports attached to the pipeline now, read in-process from its port DEVMAP
        (add-port writes a port's cell once its XDP program is on the interface); only ``ports``
        are looked up when given.  None: the map is not there (not loaded, or loading).  A
        ``pipeline show`` is a process of 10-20 ms; a restarted switch's driver polls this every
        2 ms while the harness attaches its ports."""
        cells = sorted({p % PORT_CELLS for p in ports}) if ports is not None else list(range(PORT_CELLS))
        try:
            got = bpf_maps.lookup_array(BPFFS / f"pipeline{self.pipeline}" / "maps" / PORT_MAP, cells)
        except OSError:
            return None
        return {int.from_bytes(v[:4], "little") for v in got.values()}

    async def connect(self) -> None:
        """Check the pipeline is loaded and runs this program; read its port map."""
        where = f"pipeline {self.pipeline}" + (f" in netns {self.netns}" if self.netns else "")
        loaded_as = self.pins_now()
        if self.ports and loaded_as is not None:
            # Loaded again: ``watch`` saw exactly its ports back (``_ports_back``); what is left to
            # check is the program, from its pinned maps, without a process.
            missing = missing_pinned_tables(self.p4info, BPFFS / f"pipeline{self.pipeline}" / "maps")
            if missing:
                raise ControllerError(f"{self.name}: {where} does not run {self.p4info_path.name}'s program: it "
                                      f"has no {', '.join(missing[:3])}")
            self.adapter = NikssSwitch(self.name, self.pipeline, self.p4info_path, self.ports)
            self.loaded_as = loaded_as
            return
        try:
            show = await asyncio.to_thread(cli_runner(self.netns), ["pipeline", "show", "id", str(self.pipeline)])
            ports = pipeline_ports(show, self.name)
            missing = missing_tables(self.p4info, show)
        except NikssError as ex:
            raise ControllerError(f"{self.name}: {where}: {ex}") from None
        except (ValueError, KeyError, TypeError) as ex:
            raise ControllerError(f"{self.name}: {where}: unreadable pipeline show ({ex})") from None
        if missing:
            raise ControllerError(f"{self.name}: {where} does not run {self.p4info_path.name}'s program: it has "
                                  f"no {', '.join(missing[:3])}")
        if not ports:
            raise ControllerError(f"{self.name}: {where} has no port named {self.name}-ethP attached")
        if self.ports and ports != self.ports:
            raise ControllerError(f"{self.name}: {where} came back with ports {sorted(ports.items())}, not "
                                  f"{sorted(self.ports.items())}")
        # Exact tables and defaults in-process on the pinned maps, the rest by nikss-ctl (nikss_maps.py).
        self.adapter = NikssSwitch(self.name, self.pipeline, self.p4info_path, ports)
        self.ports, self.loaded_as = ports, loaded_as

    async def watch(self, every_s: float = 0.002, timeout_s: float = 60.0) -> None:
        """Poll the pipeline's pins; on a restart, reconnect and run the ready handler again
        (module docstring).  A pipeline not back with all its ports within ``timeout_s`` of
        going fails the run."""
        while True:
            await asyncio.sleep(every_s)
            if not self.away:
                continue
            self.on_event(f"{self.name}: pipeline {self.pipeline} gone (unloaded or reloaded): waiting for it")
            await self.cancel_tasks()
            gone = time.monotonic()
            while True:
                if self.pins_now() is not None and await self._ports_back():
                    break
                if time.monotonic() - gone > timeout_s:
                    raise ControllerError(f"{self.name}: pipeline {self.pipeline} not back with its ports "
                                          f"{timeout_s:g} s after it went")
                await asyncio.sleep(every_s)
            await self.connect()
            self._fresh = True
            self.reconnects += 1
            self.on_event(f"{self.name}: pipeline {self.pipeline} back after {time.monotonic() - gone:.3f} s: "
                          "re-installing")
            self.create_task(self.ready_handler(self))

    async def running_clock(self) -> dict[str, int] | None:
        """The slot config the pipeline holds (its default action): {mode, epoch, offset, gen,
        cycle, matchings} in the target's units; None when it holds none (a fresh pipeline) or no such
        table.  What a new controller keeps when it cannot read the tables back (installer.py)."""
        table = next((nikss_name(t.name) for t in self.p4info.tables if t.name.endswith(".slot_state.config")), None)
        if table is None:
            return None
        out = await self._call(cli_runner(self.netns), ["table", "default", "get", "pipe", str(self.pipeline), table])
        try:
            act = json.loads(out)[table]["default_action"]["action"]
            if not str(act.get("name", "")).endswith("slot_state_configure"):
                return None
            p = {str(x["name"]): int(str(x["value"]), 16) for x in act.get("parameters", [])}
            return {"mode": p["mode"], "epoch": p["epoch_us"], "offset": p["offset"], "gen": p["gen"],
                    "cycle": p["cycle"], "matchings": p["num_matchings"]}
        except (ValueError, KeyError, TypeError, AttributeError) as ex:
            raise ControllerError(f"{self.name}: unreadable slot config ({ex})") from None

    async def _ports_back(self) -> bool:
        """All the ports it had attached again, and no other (the harness attaches them after the
        load): the few cells it had polled, then the whole map once they are all there."""
        want = set(self.ports.values())
        now = self.attached(want)
        if now is None or not want <= now:
            return False
        return self.attached() == want

    # -- what the controller calls -----------------------------------------------------------
    def create_task(self, coro: Awaitable[Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        # A task that failed because its pipeline went away is the restart's (``watch``).
        if not task.cancelled() and task.exception() is not None and not self.away:
            self.on_error(task.exception())

    async def cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None

    async def write(self, updates: Iterable[Any]) -> None:
        self._fresh = False
        await self._call(self.live.write, list(updates), self._over)

    @contextlib.contextmanager
    def writing_over(self) -> Iterator[None]:
        """Inserts in this block update an entry the pipeline holds already (not cleared first)."""
        self._over = True
        try:
            yield
        finally:
            self._over = False

    async def delete_all(self) -> None:
        """Clear the pipeline; nothing to do on one just loaded again and not written since (a
        restarted switch: its re-install is that much sooner)."""
        if not self._fresh:
            await self._call(self.live.clear)

    async def read(self, entities: Any) -> AsyncIterator[Any]:
        """Counters (whole arrays or listed indices, logical ports), as finsy entities; tables
        cannot be read back from NIKSS here (nothing the eBPF controller does needs it)."""
        if not isinstance(entities, (list, tuple)):
            entities = [entities]
        wanted: dict[str, set[int] | None] = {}
        for e in entities:
            if not isinstance(e, fy.P4CounterEntry) or not e.counter_id:
                raise ControllerError(f"{self.name}: {type(e).__name__} cannot be read from a NIKSS pipeline")
            name = str(e.counter_id)
            if e.index is None:
                wanted[name] = None
            elif wanted.get(name, set()) is not None:
                wanted.setdefault(name, set()).add(e.index)
        for name, idx in wanted.items():
            if name in ABSENT_COUNTERS:
                continue
            if name in SLOT_PORT_COUNTERS and idx is not None:   # a few cells of 65 536
                cells = await self.read_cells(name, idx)
            else:
                cells = await self._call(self.live.counter, counter_name(name, self.live.kind))
            for i in sorted(cells if idx is None else idx):
                pk, by = cells.get(i, (0, 0))
                yield fy.P4CounterEntry(name, index=i, data=fy.P4CounterData(byte_count=by, packet_count=pk))

    async def read_cells(self, counter: str, cells: Sequence[int]) -> dict[int, tuple[int, int]]:
        """{cell: (packets, bytes)} of a per-slot counter at ``cells`` (logical ports), without
        finsy's entities: the activity recorder's read of a few thousand cells per switch each
        time (control/activity_recorder.py).  A cell that counted nothing may be left out."""
        if counter in ABSENT_COUNTERS:
            return {}
        if counter not in SLOT_PORT_COUNTERS:
            raise ControllerError(f"{self.name}: {counter} is not a per-slot counter")
        return await self._call(self.live.slot_cells, counter_name(counter, self.live.kind), sorted(cells))

    async def read_packets(self) -> AsyncIterator[Any]:
        """No PacketIn on NIKSS."""
        return
        yield  # noqa: an async generator that yields nothing


class NikssFabric:
    """Stands for ``finsy.Controller``: connects every switch, runs each ready handler as one of
    its tasks, and ends (raising it) at the first error of any switch's task."""

    def __init__(self, switches: Sequence[NikssDriver], on_event: Callable[[str], None] | None = None):
        self.switches = list(switches)
        self.on_event = on_event

    async def run(self) -> None:
        on_event = self.on_event
        failed: asyncio.Future = asyncio.get_running_loop().create_future()

        def fail(ex: BaseException) -> None:
            if not failed.done():
                failed.set_result(ex)

        watches: list[asyncio.Task] = []
        try:
            for sw in self.switches:
                sw.on_error = fail
                if on_event is not None:
                    sw.on_event = on_event
                await sw.connect()
            for sw in self.switches:
                sw.create_task(sw.ready_handler(sw))
                watch = asyncio.ensure_future(sw.watch())
                watch.add_done_callback(lambda t: t.cancelled() or t.exception() is None or fail(t.exception()))
                watches.append(watch)
            raise await failed
        finally:
            for w in watches:
                w.cancel()
            for sw in self.switches:
                await sw.cancel_tasks()
