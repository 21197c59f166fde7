"""The controller's real-time priority while a switch comes back (control/recovery_priority.py):
raised from a channel going down until that switch is installed again, on every thread, and
the default policy otherwise; a refusal is reported once and changes nothing."""

from __future__ import annotations

import os
import threading

import pytest

from p4rotor.control.recovery_priority import RecoveryPriority


class Threads:
    def __init__(self, tids):
        self.tids = list(tids)
        self.policy = {t: (os.SCHED_OTHER, 0) for t in self.tids}
        self.refuse = None

    def set(self, tid, policy, priority):
        if self.refuse is not None:
            raise self.refuse
        if tid not in self.tids:
            raise ProcessLookupError(tid)
        self.policy[tid] = (policy, priority)

    def list(self):
        return list(self.tids)


def _rp(threads, events=None):
    return RecoveryPriority(4, set_policy=threads.set, threads=threads.list,
                            on_event=(events.append if events is not None else lambda m: None))


def test_every_thread_raised_while_a_switch_is_down_and_lowered_once_it_is_installed():
    th = Threads([10, 11, 12])
    rp = _rp(th)
    assert set(th.policy.values()) == {(os.SCHED_OTHER, 0)}
    rp.switch_down("rotor1")
    assert set(th.policy.values()) == {(os.SCHED_RR, 4)}
    th.tids.append(13)  # a thread started meanwhile (gRPC's): inherits, and is lowered with the rest
    th.policy[13] = (os.SCHED_RR, 4)
    rp.switch_installed("rotor1")
    assert set(th.policy.values()) == {(os.SCHED_OTHER, 0)}
    assert rp.summary()["raised"] == 1 and rp.summary()["down"] == [] and rp.summary()["raised_ms"] >= 0


def test_two_switches_down_lowered_only_after_both_are_back():
    th = Threads([1])
    rp = _rp(th)
    rp.switch_down("rotor1")
    rp.switch_down("tor4")
    rp.switch_installed("rotor1")
    assert th.policy[1] == (os.SCHED_RR, 4)
    rp.switch_installed("tor4")
    assert th.policy[1] == (os.SCHED_OTHER, 0)
    assert rp.raised == 1


def test_an_install_with_no_switch_down_changes_nothing():
    """A first install or an adoption (a restarted controller's) runs at the default policy."""
    th = Threads([1])
    rp = _rp(th)
    rp.switch_installed("rotor0")
    assert th.policy[1] == (os.SCHED_OTHER, 0) and rp.raised == 0


def test_a_thread_gone_meanwhile_is_skipped():
    th = Threads([1, 2])
    rp = RecoveryPriority(4, set_policy=th.set, threads=lambda: [1, 2, 99])
    rp.switch_down("rotor1")
    assert th.policy == {1: (os.SCHED_RR, 4), 2: (os.SCHED_RR, 4)} and rp.error is None


def test_a_refused_change_is_reported_once_and_the_default_kept():
    th = Threads([1])
    th.refuse = PermissionError(1, "Operation not permitted")
    events: list[str] = []
    rp = _rp(th, events)
    rp.switch_down("rotor1")
    rp.switch_installed("rotor1")
    rp.switch_down("rotor2")
    assert rp.error == "sched_setscheduler: Operation not permitted" and rp.raised == 0
    assert sum("cannot change the scheduling policy" in e for e in events) == 1
    assert th.policy[1] == (os.SCHED_OTHER, 0)


@pytest.mark.parametrize("prio", [0, 100, -1])
def test_a_priority_outside_1_to_99_is_refused(prio):
    with pytest.raises(ValueError, match="1 to 99"):
        RecoveryPriority(prio)


def test_the_real_policy_of_this_thread_is_raised_and_lowered():
    """On the machine's own scheduler (root: CAP_SYS_NICE), this thread alone."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:
        pytest.skip("SKIPPED: SCHED_RR not allowed here (needs CAP_SYS_NICE)")
    rp = RecoveryPriority(3, threads=lambda: [threading.get_native_id()])
    try:
        rp.switch_down("rotor1")
        assert os.sched_getscheduler(0) == os.SCHED_RR and os.sched_getparam(0).sched_priority == 3
    finally:
        rp.switch_installed("rotor1")
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
