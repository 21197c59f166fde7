"""fabric/agents.py: what each agent is started with, a plane per host or sharing the rack's
circuits (no Mininet: a stand-in emulation records the command lines)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.schedule import topology as TP
from p4rotor.fabric import agents as AG
from p4rotor.fabric.agents import start_agents


class _Proc:
    def poll(self):
        return None

    def kill(self):
        pass

    def wait(self, timeout=None):
        return 0

    def send_signal(self, sig):
        pass


class _Emu:
    """Starts nothing: records each agent's arguments and writes its ready file at once."""

    t0_ns = 0

    def __init__(self):
        self.args: dict[str, list[str]] = {}

    def popen(self, host, args, **kw):
        self.args[host] = args
        ready = args[args.index("--ready") + 1]
        with open(ready, "w") as f:
            json.dump({"ready_ns": time.time_ns()}, f)
        return _Proc()


def _start(tmp_path, shared):
    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=2)
    emu = _Emu()
    start_agents(emu, topo, ds, tmp_path, rate=200, guard_us=10_000, flows={}, shared=shared,
                 start_ns=time.time_ns() + 60 * 10**9)
    return emu.args


def _opt(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize("shared", [False, True], ids=["plane-per-host", "shared"])
def test_agents_rate_and_share(tmp_path, shared):
    args = _start(tmp_path, shared)
    assert len(args) == 16
    a = args["h3x1"]
    if not shared:  # each plane: half of every circuit, no claims, no host cap
        assert float(_opt(a, "--rate")) == 100 and "--share" not in a and "--host-rate" not in a
        return
    # The whole circuit, claimed through the rack's file; the host's link: its plane's 4 circuits.
    assert float(_opt(a, "--rate")) == 200
    assert Path(_opt(a, "--share")).name == "share-rack3.shm"
    assert (_opt(a, "--share-member"), _opt(a, "--share-members")) == ("1", "2")
    assert float(_opt(a, "--host-rate")) == 4 * 100
    assert _opt(args["h3x0"], "--share") == _opt(a, "--share") and _opt(args["h3x0"], "--share-member") == "0"


@pytest.mark.parametrize("realtime", [False, True], ids=["default", "realtime"])
def test_agents_realtime_under_sched_rr_below_the_switches(tmp_path, monkeypatch, realtime):
    """``realtime``: every agent starts under SCHED_RR at AGENT_RT_PRIORITY (below the switches
    and the FCT run's TCP processes: a woken receiver never waits for an agent), where that is
    allowed, else at nice 0; without it, as it is."""
    from p4rotor.fabric import switch

    monkeypatch.setattr(switch, "realtime_allowed", lambda: True)
    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=2)
    emu = _Emu()
    start_agents(emu, topo, ds, tmp_path, rate=200, guard_us=10_000, flows={}, realtime=realtime,
                 start_ns=time.time_ns() + 60 * 10**9)
    for args in emu.args.values():
        head = args[:args.index("-m")]
        if realtime:
            assert head[:3] == ["chrt", "--rr", str(switch.AGENT_RT_PRIORITY)]
            assert 0 < switch.AGENT_RT_PRIORITY < switch.HOST_RT_PRIORITY < switch.SWITCH_RT_PRIORITY
            # ... and keeps it, idle too (the default; host/priority.py)
            assert _opt(args, "--rt-priority") == str(switch.AGENT_RT_PRIORITY) and "--rt-always" in args
        else:
            assert "chrt" not in head and "nice" not in head and "--rt-priority" not in args
    if realtime:  # only while it holds bulk
        emu = _Emu()
        start_agents(emu, topo, ds, tmp_path, rate=200, guard_us=10_000, flows={}, realtime=True,
                     rt_always=False, start_ns=time.time_ns() + 60 * 10**9)
        assert not any("--rt-always" in a for a in emu.args.values())
    monkeypatch.setattr(switch, "realtime_allowed", lambda: False)
    emu = _Emu()
    start_agents(emu, topo, ds, tmp_path, rate=200, guard_us=10_000, flows={}, realtime=realtime,
                 start_ns=time.time_ns() + 60 * 10**9)
    assert all(("chrt" in a) is False and "--rt-priority" not in a for a in emu.args.values())


def test_agents_keep_their_live_files_on_tmpfs_and_the_run_keeps_them_after(tmp_path, monkeypatch):
    """Claims and progress, rewritten many times a second, live under LIVE_ROOT (tmpfs: on ext4 a
    rewrite can wait on the journal); once the agents end, they are kept in the run's directory
    and the live directory goes.  No such root: they stay in the run's directory."""
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(AG, "LIVE_ROOT", shm)
    out = tmp_path / "run"
    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=2)
    emu = _Emu()
    agents = start_agents(emu, topo, ds, out, rate=200, guard_us=10_000, flows={}, shared=True,
                          start_ns=time.time_ns() + 60 * 10**9)
    a = emu.args["h3x1"]
    live = Path(_opt(a, "--progress")).parent
    assert live.parent == shm and Path(_opt(a, "--share")).parent == live
    Path(_opt(a, "--progress")).write_text(json.dumps({"t_ns": 1, "flows_rx": {"3:7": [5, 9]}}))
    Path(_opt(a, "--share")).write_text("{}")
    assert agents.progress_of("h3x1") == {"3:7": (5, 9)}  # read live while they run
    agents.stop(timeout=0.1)
    assert not live.exists() and (out / "share-rack3.shm").exists()
    assert agents.progress_of("h3x1") == {"3:7": (5, 9)}  # and from the run's directory after
    monkeypatch.setattr(AG, "LIVE_ROOT", tmp_path / "none")
    emu = _Emu()
    start_agents(emu, topo, ds, out, rate=200, guard_us=10_000, flows={}, shared=True,
                 start_ns=time.time_ns() + 60 * 10**9)
    assert Path(_opt(emu.args["h3x1"], "--share")) == out / "share-rack3.shm"
