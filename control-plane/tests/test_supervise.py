"""fabric/supervise.py: a dead agent noticed by its PID and started again with its flags as the
next incarnation (no Mininet: a stand-in emulation runs a small process per host)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from p4rotor.fabric.agents import Agents
from p4rotor.fabric.supervise import Supervisor

# An "agent": writes its ready file and its progress, then waits; exits 0 when asked by a file.
AGENT = """
import json, sys, time, pathlib
a = sys.argv[1:]
ready, progress = pathlib.Path(a[a.index("--ready") + 1]), pathlib.Path(a[a.index("--progress") + 1])
progress.write_text(json.dumps({"flows_rx": {"3:1": [7, 0]}, "args": a}))
ready.write_text(json.dumps({"ready_ns": time.time_ns()}))
stop = ready.with_suffix(".stop")
while not stop.exists():
    time.sleep(0.02)
"""


class _Emu:
    def popen(self, host, args, **kw):
        return subprocess.Popen(args, start_new_session=True, **kw)


def _agents(tmp_path, names):
    ag = Agents(tmp_path, live=tmp_path, emu=_Emu())
    for n in names:
        args = [sys.executable, "-c", AGENT, "--start-ns", "0", "--ready", str(tmp_path / f"agent-{n}.ready"),
                "--progress", str(tmp_path / f"agent-{n}.progress")]
        ag.args[n] = args
        ag.procs.append((n, _Emu().popen(n, args)))
        ag.where[n] = (len(ag.where), 0)
    for n in names:
        while not (tmp_path / f"agent-{n}.ready").exists():
            time.sleep(0.02)
    return ag


def _wait(cond, timeout=20):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_killed_agent_is_noticed_and_restarted_with_its_flags_as_the_next_incarnation(tmp_path):
    ag = _agents(tmp_path, ["h0x0", "h1x0"])
    events = []
    sup = Supervisor(ag, t0_ns=time.time_ns(), hyperperiod_ns=50_000_000,
                     note=lambda host, what, **kw: events.append((host, what, kw))).start()
    try:
        old = ag.proc("h1x0").pid
        pid = sup.kill("h1x0", restart_after_s=0.2)
        assert pid == old
        _wait(lambda: any(w == "listening" for _, w, _ in events))
        new = ag.proc("h1x0")
        assert new.pid != old and new.poll() is None and ag.incarnation == {"h1x0": 1}
        (host, what, kw), = [e for e in events if e[1] == "noticed"]
        assert host == "h1x0" and kw["exit"] == -9 and kw["after_kill_ms"] < 500
        (_, _, r), = [e for e in events if e[1] == "restarted"]
        assert r["after_kill_ms"] >= 200 and r["incarnation"] == 1
        # its first window on a cycle boundary (t0 + k x 50 ms), its start-up lead ahead
        assert (r["first_window_ns"] - sup.t0_ns) % 50_000_000 == 0
        args = json.loads((tmp_path / "agent-h1x0.progress").read_text())["args"]
        assert args[-2:] == ["--incarnation", "1"] and args[args.index("--start-ns") + 1] == str(r["first_window_ns"])
        # the dead one's last progress is kept: what the run has of what it received
        assert json.loads((tmp_path / "agent-h1x0.inc0.progress").read_text())["flows_rx"] == {"3:1": [7, 0]}
        assert [n for n, _ in ag.procs] == ["h0x0", "h1x0"] and ag.proc("h0x0").poll() is None
    finally:
        sup.stop()
        for n in ("h0x0", "h1x0"):
            (tmp_path / f"agent-{n}.stop").write_text("")
        for _, p in ag.procs:
            p.wait(10)
    assert not sup.errors


def test_an_agent_that_ends_by_itself_is_left_alone_and_a_kill_without_restart_stays_dead(tmp_path):
    ag = _agents(tmp_path, ["h0x0", "h1x0"])
    events = []
    sup = Supervisor(ag, t0_ns=0, hyperperiod_ns=50_000_000,
                     note=lambda host, what, **kw: events.append((host, what))).start()
    try:
        (tmp_path / "agent-h0x0.stop").write_text("")   # ends by itself: exit 0
        sup.kill("h1x0", restart_after_s=None)
        _wait(lambda: ("h1x0", "noticed") in events)
        ag.proc("h0x0").wait(10)
        time.sleep(0.3)
    finally:
        sup.stop()
    assert events == [("h1x0", "noticed")] and ag.incarnation == {}
    ag.summaries()
    assert {d["host"]: d["exit"] for d in ag.dead}["h1x0"] == -9  # reported dead, as before
