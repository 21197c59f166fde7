"""An agent's CPU priority follows what it holds (host/priority.py): SCHED_RR while it holds
bulk, the default policy while idle."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from p4rotor.host import loopback
from p4rotor.host.priority import BusyPriority


class Calls(list):
    def __call__(self, policy, prio):
        self.append((policy, prio))


def test_raised_while_busy_and_given_back_when_idle():
    calls = Calls()
    p = BusyPriority(5, setter=calls)
    p.set(False)
    p.set(True)
    p.set(True)  # no change: no system call
    p.set(False)
    assert calls == [(os.SCHED_RR, 5), (os.SCHED_OTHER, 0)]
    s = p.summary()
    assert s["raised"] == 1 and s["busy_now"] is False and s["error"] is None and s["busy_s"] >= 0


def test_started_under_rr_counts_as_busy_until_idle():
    calls = Calls()
    p = BusyPriority(5, setter=calls, started_rr=True)
    assert p.busy and calls == []
    p.set(False)
    assert calls == [(os.SCHED_OTHER, 0)]


def test_always_never_gives_it_back():
    calls = Calls()
    p = BusyPriority(5, always=True, setter=calls)
    p.set(False)
    p.set(True)
    assert calls == [(os.SCHED_RR, 5)]


def test_refused_says_why_once_and_stops_trying():
    calls = Calls()

    def refuse(policy, prio):
        calls.append(policy)
        raise PermissionError(1, "Operation not permitted")

    p = BusyPriority(5, setter=refuse)
    p.set(True)
    p.set(False)
    p.set(True)
    assert calls == [os.SCHED_RR]
    assert p.summary()["error"] == "cannot set SCHED_RR: Operation not permitted"
    assert p.summary()["rt_priority"] is None


def test_no_priority_changes_nothing_but_still_counts():
    p = BusyPriority(None, setter=lambda *a: pytest.fail("no system call without a priority"))
    p.set(True)
    p.set(False)
    assert p.summary()["raised"] == 0 and p.summary()["busy_now"] is False


def test_agents_are_busy_while_they_hold_bulk_and_idle_after():
    """Over the in-process fabric: the sender and the relays held frames for a while; the receiver
    of a direct-and-relayed flow held none (it only delivers); every agent ends idle."""
    res, _, _ = loopback.run_fabric([(0, 1)], frames=40, cycles=3)
    by = {r["rack"]: r["priority"] for r in res}
    assert by[0]["busy_s"] > 0
    assert by[1]["busy_s"] == 0
    assert sum(by[k]["busy_s"] for k in (2, 3)) > 0, "relays held frames"
    assert not any(p["busy_now"] for p in by.values())


def test_a_real_thread_moves_between_the_policies():
    from p4rotor.fabric.switch import realtime_allowed

    if not realtime_allowed():
        pytest.skip("SCHED_RR is not allowed here (needs root or CAP_SYS_NICE): the real system call is not tested")
    code = ("import os; from p4rotor.host.priority import BusyPriority; b = BusyPriority(5); "
            "b.set(True); print(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority); "
            "b.set(False); print(os.sched_getscheduler(0), b.summary()['error'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [f"{os.SCHED_RR} 5", f"{os.SCHED_OTHER} None"]


@pytest.mark.parametrize("args, why", [(["--rt-priority", "0"], "out of range"),
                                       (["--rt-always"], "needs --rt-priority")])
def test_agent_refuses_a_bad_priority(args, why):
    from p4rotor.host.agent_cli import main

    base = ["--schedule", "/nonexistent", "--t0-ns", "0", "--rack", "0", "--peers", "{}",
            "--stop-ns", "0", "--end-ns", "0", "--out", "/nonexistent/x.json"]
    out = subprocess.run([sys.executable, "-m", "p4rotor.host.agent_cli", *base, *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and why in out.stderr, out.stderr
    del main


def test_fct_run_sums_the_agents_priority():
    from p4rotor.workload.agents import agents_priority

    assert agents_priority([{"rack": 0}]) is None  # summaries from before host/priority.py
    ps = [{"priority": {"rt_priority": 5, "always": False, "raised": 3, "busy_s": 1.5, "busy_now": False,
                        "error": None}},
          {"priority": {"rt_priority": None, "always": False, "raised": 0, "busy_s": 0.25, "busy_now": False,
                        "error": "cannot set SCHED_RR: Operation not permitted"}}]
    assert agents_priority(ps) == {"agents": 2, "rt_priority": 5, "always": False, "raised": 3, "busy_s": 1.75,
                                   "errors": ["cannot set SCHED_RR: Operation not permitted"]}
