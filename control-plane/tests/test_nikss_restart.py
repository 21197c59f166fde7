"""A NIKSS pipeline that restarts (unloaded, then loaded again as the same id: the eBPF target's
switch crash) is seen by the controller's driver as finsy sees a P4Runtime server go and come
back: the switch's tasks are cancelled, the driver waits for every port, opens the new maps and
runs the ready handler again; a task that failed because its pipeline went is not the run's
failure, and a pipeline that comes back with other ports or not at all is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from p4rotor.control import nikss_switch as NS
from p4rotor.control.errors import ControllerError

HERE = Path(__file__).resolve().parent
P4INFO = HERE / "data" / "ebpf-rotor.p4info.txtpb"


class FakePipeline:
    """What the driver reads: the pins' inode (None: unloaded) and its ports (``pipeline show``
    at the first connect, the port DEVMAP after a restart)."""

    def __init__(self):
        self.ino: int | None = 1
        self.ports = {1: 2, 2: 3}

    def show(self, args):
        if self.ino is None:
            raise NS.NikssError("nikss-ctl pipeline show: no such pipeline")
        return json.dumps({"pipeline": {"ports": [{"name": f"r0-eth{p}", "port_id": i} for p, i in self.ports.items()]}})


class FakeAdapter:
    def __init__(self, name, pipeline, p4info, ports):
        self.ports, self.closed = dict(ports), False

    def close(self):
        self.closed = True


@pytest.fixture
def driver(monkeypatch):
    pipe = FakePipeline()
    monkeypatch.setattr(NS, "cli_runner", lambda netns: pipe.show)
    monkeypatch.setattr(NS, "NikssSwitch", FakeAdapter)
    monkeypatch.setattr(NS.NikssDriver, "pins_now", lambda self: pipe.ino)
    monkeypatch.setattr(NS, "missing_tables", lambda schema, show: [])
    monkeypatch.setattr(NS, "missing_pinned_tables", lambda schema, maps: [])
    # The port DEVMAP's cells: the PSA ports attached now (only those asked for, when asked).
    monkeypatch.setattr(NS.NikssDriver, "attached", lambda self, ports=None: None if pipe.ino is None else
                        {i for i in pipe.ports.values() if ports is None or i in set(ports)})
    readies = []

    async def ready(sw):
        readies.append(sw.adapter)
        await asyncio.sleep(3600)   # as a switch's long-lived tasks

    d = NS.NikssDriver("r0", 100, None, P4INFO, ready)
    events = []
    d.on_event = events.append
    return d, pipe, readies, events


def test_a_restarted_pipeline_is_reconnected_and_its_ready_handler_runs_again(driver):
    d, pipe, readies, events = driver

    async def go():
        await d.connect()
        first = d.adapter
        d.create_task(d.ready_handler(d))
        watch = asyncio.ensure_future(d.watch(every_s=0.001))
        await asyncio.sleep(0.01)
        pipe.ino, ports = None, pipe.ports   # unloaded
        await asyncio.sleep(0.01)
        assert d.adapter is None and first.closed and not d._tasks  # its tasks cancelled
        with pytest.raises(ControllerError, match="not connected"):
            d.live
        pipe.ino, pipe.ports = 2, {1: 2}     # loaded again, one port attached so far
        await asyncio.sleep(0.01)
        assert d.adapter is None, "reconnected before every port was back"
        pipe.ports = ports
        await asyncio.sleep(0.02)
        watch.cancel()
        await d.cancel_tasks()
        return first

    first = asyncio.run(go())
    assert len(readies) == 2 and readies[1] is not first and readies[1].ports == {1: 2, 2: 3}
    assert d._fresh   # loaded again, nothing written: a clear would find it empty
    assert d.reconnects == 1 and d.loaded_as == 2
    assert any("gone" in e for e in events) and any("back after" in e for e in events)


def test_a_task_failing_while_its_pipeline_is_away_is_not_the_runs_failure(driver):
    d, pipe, _, _ = driver
    errors = []
    d.on_error = errors.append

    async def fails():
        raise ControllerError("r0: map gone")

    async def go():
        await d.connect()
        pipe.ino = None
        await d.create_task(fails())

    with pytest.raises(ControllerError):
        asyncio.run(go())
    assert errors == []
    pipe.ino = 1

    async def again():
        await d.create_task(fails())

    with pytest.raises(ControllerError):
        asyncio.run(again())
    assert len(errors) == 1   # connected: a task's error is the run's


def test_a_pipeline_back_with_other_ports_or_not_back_fails(driver):
    d, pipe, _, _ = driver

    async def other_ports():
        await d.connect()
        pipe.ino = 3
        pipe.ports = {1: 2, 2: 3, 3: 4}
        await d.watch(every_s=0.001, timeout_s=0.05)

    with pytest.raises(ControllerError, match="not back with its ports"):
        asyncio.run(other_ports())
    pipe.ports = {1: 2, 2: 3}

    async def never():
        await d.connect()
        pipe.ino = None
        await d.watch(every_s=0.001, timeout_s=0.05)

    with pytest.raises(ControllerError, match="not back with its ports 0.05 s after it went"):
        asyncio.run(never())


def test_a_pipeline_loaded_again_is_not_cleared_until_written(driver, monkeypatch):
    d, pipe, _, _ = driver
    cleared = []

    class Adapter(FakeAdapter):
        def clear(self):
            cleared.append(1)

        def write(self, updates, over=False):
            pass

    monkeypatch.setattr(NS, "NikssSwitch", Adapter)

    async def go():
        await d.connect()
        await d.delete_all()            # connected at start: it may hold a run's entries
        d._fresh = True                 # as ``watch`` leaves it after a reload
        await d.delete_all()
        await d.write([])
        await d.delete_all()

    asyncio.run(go())
    assert len(cleared) == 2


# -- in the kernel --------------------------------------------------------------------------------

BUILD = HERE.parents[1] / "build" / "ebpf"


def _kernel_skip() -> str | None:
    import os

    from p4rotor.fabric.nikss import missing_tools

    miss = missing_tools()
    for f in ("rotor.o", "tor.p4info.txtpb"):
        if not (BUILD / f).exists():
            miss.append(f"{BUILD / f} (run 'make build-ebpf')")
    if os.geteuid() != 0:
        miss.append("root")
    return f"a restarted pipeline's ports not read: missing {', '.join(miss)}" if miss else None


@pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")
def test_the_driver_reads_a_loaded_pipelines_ports_and_program_from_its_pins():
    # What ``watch`` reads in-process after a restart: the ports add-port attached (the DEVMAP),
    # before the harness's load returns, and whether the pins are this P4Info's program.
    import subprocess

    import finsy as fy
    from p4rotor.fabric.nikss import Pipeline, leftovers

    ns = "p4rt-attached"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    pl = None
    try:
        ifaces = {}
        for port in (1, 2):
            subprocess.run(["ip", "-n", ns, "link", "add", f"r0-eth{port}", "index", str(port + 1), "type", "veth",
                            "peer", f"x{port}", "index", str(port + 101)], check=True)
            ifaces[port] = f"r0-eth{port}"
        pl = Pipeline.load("r0", BUILD / "rotor.o", f"/var/run/netns/{ns}", ifaces)
        d = NS.NikssDriver("r0", pl.id, f"/var/run/netns/{ns}", P4INFO, lambda sw: None)
        assert d.attached() == {2, 3} and d.attached([3]) == {3}
        maps = NS.BPFFS / f"pipeline{pl.id}" / "maps"
        assert NS.missing_pinned_tables(fy.P4Schema(P4INFO), maps) == []
        assert "TorIngress.routing.route" in NS.missing_pinned_tables(fy.P4Schema(BUILD / "tor.p4info.txtpb"), maps)
        assert not pl.unload()
        pl = None
        assert d.attached() is None
    finally:
        if pl is not None:
            pl.unload()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert not leftovers()
