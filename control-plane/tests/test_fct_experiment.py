"""The fct experiment's parts that need no fabric (experiments/fct): its options and bad input
(refused before any switch starts), the alone rounds' and calibration's timing, one mode's
accounting, the plots, and the switches' and agents' commands it relies on."""

from __future__ import annotations

import json

import pytest

from p4rotor.cli import main
from p4rotor.workload import fct as F
from p4rotor.workload import flowlist
from p4rotor.workload.generate import Flow


@pytest.mark.parametrize("args,msg", [(["--load", "1.5"], "load must be"),
                                      (["--load", "0"], "load must be"),
                                      (["--workload", "nosuch-file.cdf"], "cannot read"),
                                      (["--cutoff", "-1"], "--cutoff"),
                                      (["--modes", "opera,ideal"], "unknown mode 'ideal'"),
                                      (["--modes", "opera,opera"], "at most once"),
                                      (["--modes", ","], "at least one"),
                                      (["--epsilon-us", "900"], "--epsilon-us"),
                                      (["--switch-cpus", "4096"], "--switch-cpus: CPU list '4096'"),
                                      (["--switch-cpus", "one"], "is not a CPU number"),
                                      (["--warm-switches", "0"], "--warm-switches: warm period 0 ms is out of range"),
                                      (["--warm-switches", "fast"], "is not a number of ms"),
                                      (["--share-circuits", "yes"], "--share-circuits 'yes': must be"),
                                      (["--wall-budget", "0"], "--wall-budget"),
                                      (["--wall-budget", "1"], "not even 100 flows fit")])
def test_bad_input_refused_before_anything_starts(tmp_path, capsys, args, msg):
    """Exit 2 and one line; no fabric: the build directory does not even exist."""
    with pytest.raises(SystemExit) as ex:
        main(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"),
              "--output", str(tmp_path / "out"), *args])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flows,meta,msg", [
    ([Flow(0, "h0x0", "nobody", 100, 0.0)], {}, "host 'nobody' is not in this fabric"),
    ([Flow(0, "h0x0", "h0x0", 100, 0.0)], {}, "src and dst are the same host"),
    ([Flow(0, "h0x0", "h1x0", 100, 0.0)], {"scaling": {"factor": 123.0}}, "sizes scaled by 123"),
])
def test_a_flow_list_that_cannot_replay_here_is_refused_before_anything_starts(tmp_path, capsys, flows, meta, msg):
    flowlist.write(tmp_path / "flows.json", flows, meta)
    with pytest.raises(SystemExit) as ex:
        main(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"),
              "--output", str(tmp_path / "out"), "--flow-list", str(tmp_path / "flows.json")])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
    assert not (tmp_path / "out").exists()


def test_modes_default_to_all_three_in_order():
    from p4rotor.experiments.fct.options import parse_modes

    assert parse_modes(None) == ("opera", "rotornet", "packet-switch")
    assert parse_modes("packet-switch, opera") == ("packet-switch", "opera")


def test_alone_rounds_meet_every_pair_in_another_phase_of_the_hyperperiod():
    """56 pairs 100 ms apart are 28 hyperperiods of 200 ms exactly: without the shift every
    round met each pair in the same slice."""
    from p4rotor.experiments.fct.calibrate import alone_round_ns

    period = 200_000_000
    r = alone_round_ns(56, 100_000_000, 8, period)
    assert sorted((k * r) % period for k in range(8)) == [k * period // 8 for k in range(8)]
    assert alone_round_ns(56, 100_000_000, 4, None) == 5_600_000_000


def test_a_low_latency_flow_counts_from_when_its_sender_began_it(tmp_path):
    """The sender's timer fired late: the FCT starts at issued_ns (never before the plan), and
    the lag is reported; a flow without a tx record keeps its planned start."""
    from p4rotor.experiments.fct.calibrate import issued_starts
    from p4rotor.experiments.fct.mode import start_lag

    (tmp_path / "tx-h0.jsonl").write_text(
        json.dumps({"id": 1, "start_ns": 1000, "issued_ns": 8_001_000}) + "\n"
        + json.dumps({"id": 2, "start_ns": 2000, "issued_ns": 1500}) + "\n")  # a clock a hair behind
    planned = {1: 1000, 2: 2000, 3: 3000}
    got = issued_starts(planned, tmp_path, ["h0", "h1"])
    assert got == {1: 8_001_000, 2: 2000, 3: 3000}
    lag = start_lag(planned, got)
    assert lag["max_ms"] == 8.0 and lag["flows"] == 3 and lag["p50_ms"] == 0.0


def test_switches_run_realtime_only_when_asked_and_allowed(monkeypatch):
    """``realtime``: chrt --rr execs the switch (its PID stays the switch's); not allowed, or not
    asked: nice -10 as before."""
    from p4rotor.fabric import switch as SW

    monkeypatch.setattr(SW, "realtime_allowed", lambda: True)
    cmd = SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True)
    assert cmd[:3] == ["chrt", "--rr", str(SW.SWITCH_RT_PRIORITY)] and cmd[3] == "simple_switch_grpc"
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090)[:3] == ["nice", "-n", "-10"]
    monkeypatch.setattr(SW, "realtime_allowed", lambda: False)
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True)[:3] == ["nice", "-n", "-10"]


def test_switches_pinned_to_cpus_only_when_asked(monkeypatch):
    """``cpus``: taskset execs the priority prefix, which execs the switch (the PID stays the
    switch's); without it the command is as before."""
    from p4rotor.fabric import switch as SW

    monkeypatch.setattr(SW, "realtime_allowed", lambda: True)
    cmd = SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True, cpus="1")
    assert cmd[:6] == ["taskset", "-c", "1", "chrt", "--rr", str(SW.SWITCH_RT_PRIORITY)]
    assert cmd[6] == "simple_switch_grpc"
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True, cpus=None)[0] == "chrt"


def test_switch_cpus_auto_none_or_a_checked_list():
    """``--switch-cpus``: auto = the upper half of this machine's CPUs, none (the default) = anywhere."""
    import os

    from p4rotor.experiments.fct.options import switch_cpu_choice
    from p4rotor.fabric.cpu import default_switch_cpus

    assert switch_cpu_choice("none") is None and switch_cpu_choice(None) is None
    assert switch_cpu_choice("auto") == default_switch_cpus()
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) >= 2:
        assert switch_cpu_choice(str(mine[-1])) == str(mine[-1])


def test_warm_switches_auto_on_off_or_a_checked_period():
    """``--warm-switches``: auto (the default) = on at a load of 5 % or less, off above or when the
    load is unknown (a user's own list); on = every 2 ms; off; else a period in ms."""
    from p4rotor.experiments.fct.options import WARM_MAX_LOAD, warm_choice
    from p4rotor.workload.cdf import WorkloadError

    assert WARM_MAX_LOAD == 0.05
    assert warm_choice("auto", 0.01) == 2.0 and warm_choice(None, 0.05) == 2.0
    assert warm_choice("auto", 0.1) is None and warm_choice("auto", None) is None
    assert warm_choice("off", 0.01) is None
    assert warm_choice("on", 0.4) == 2.0
    assert warm_choice("5", None) == 5.0 and warm_choice("0.5", 0.1) == 0.5
    for bad in ("0", "-2", "nan", "inf", "2000", "warm"):
        with pytest.raises(WorkloadError, match="--warm-switches"):
            warm_choice(bad, 0.01)


def test_share_circuits_auto_on_at_low_load_off_above():
    """``--share-circuits``: auto (the default) = the rack's hosts share its circuits at a load of
    1 % or less, a plane per host above or when the load is unknown; on (the bare flag); off."""
    from p4rotor.experiments.fct.options import SHARE_MAX_LOAD, share_choice
    from p4rotor.workload.cdf import WorkloadError

    assert SHARE_MAX_LOAD == 0.01
    assert share_choice("auto", 0.01) and share_choice(None, 0.01) and share_choice(True, 0.4)
    assert not share_choice("auto", 0.05) and not share_choice("auto", 0.1) and not share_choice(None, None) and not share_choice(False, 0.01)
    assert share_choice("on", 0.4) and not share_choice("off", 0.01)
    with pytest.raises(WorkloadError, match="--share-circuits"):
        share_choice("1", 0.01)


def test_calibration_flows_meet_every_phase_of_the_hyperperiod():
    """300 ms apart at a 200 ms hyperperiod, calibration flows met 2 phases; now 16."""
    from p4rotor.experiments.fct.calibrate import phase_gap_ns

    period = 200_000_000
    gap = phase_gap_ns(300_000_000, period)
    assert gap >= 300_000_000 and gap == 312_500_000
    assert len({(k * gap) % period for k in range(16)}) == 16
    for p in (200_000_000, 150_000_000, 1_100_000):
        g = phase_gap_ns(30_000_000, p)
        assert g >= 30_000_000 and len({(k * g) % p for k in range(16)}) == 16
    assert phase_gap_ns(300_000_000, None) == 300_000_000


def test_the_fct_epsilon_costs_the_low_latency_class_no_path_length():
    """The fct default epsilon keeps frames further off a rotor's night at no cost in hops: at
    the default 8 x 4 every slice stays connected and the paths are those of epsilon 50."""
    from p4rotor import schedule as S
    from p4rotor.experiments.fct.options import EPSILON_US
    from p4rotor.schedule import routes as R

    s = S.generate_opera(8, 4, 1000, 100)

    def hops(eps):
        rs = R.compute(s, epsilon_us=eps)
        assert all(sr.ll_diameter is not None and len(sr.ll_rotors) >= 3 for sr in rs)
        return sum((sr.slice.end_us - sr.slice.start_us) * (len(h.path) - 1)
                   for sr in rs for (_, _, t), h in sr.hops.items() if t == 1)

    assert hops(EPSILON_US) == hops(50)
    with pytest.raises(AssertionError):
        hops(175)  # a slice with no low-latency path for some pair


def test_bulk_flows_whole_from_the_agents_progress(tmp_path):
    """A run ends early once every bulk flow's frames are at their destination: the agents'
    progress files, summed (a flow's frames may reach two agents of its rack over the run)."""
    import subprocess
    import sys

    from p4rotor.experiments.fct.mode import bulk_whole
    from p4rotor.fabric.agents import Agents

    (tmp_path / "agent-a.progress").write_text(json.dumps({"flows_rx": {"0:7": [3, 10], "1:8": [5, 20]}}))
    (tmp_path / "agent-b.progress").write_text(json.dumps({"flows_rx": {"0:7": 2}}))  # an older agent: counts only
    (tmp_path / "agent-c.progress").write_text("{")  # being written: counts nothing
    idle = subprocess.Popen([sys.executable, "-c", "pass"])
    idle.wait()
    agents = Agents(tmp_path, procs=[("a", idle), ("b", idle), ("c", idle), ("d", idle)])
    got = agents.received()
    assert got == {"0:7": 5, "1:8": 5}
    assert agents.progress_of("a") == {"0:7": (3, 10), "1:8": (5, 20)} and agents.progress_of("c") == {}
    assert agents.progress_of("b") == {"0:7": (2, None)}
    assert bulk_whole(got, {7: 5, 8: 6}) == 1
    assert bulk_whole(got, {7: 5, 8: 5}) == 2
    assert bulk_whole({}, {7: 1}) == 0


def test_drain_is_the_backlog_but_no_longer_than_the_arrivals_or_the_largest_flow():
    from p4rotor.experiments.fct.mode import drain_after_arrivals

    # No bulk: ten cycles and 5 s.
    assert drain_after_arrivals([], 100.0, 0.8, 1000.0, 8) == pytest.approx(13.0)
    # A small backlog: every byte twice over one circuit per rack (2 * 8000 / 1000 / 8 = 2 s).
    assert drain_after_arrivals([4000, 4000], 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 2 + 5)
    # A large backlog after short arrivals: the arrivals' length bounds it ...
    assert drain_after_arrivals([1000] * 10_000, 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 100 + 5)
    # ... unless the largest flow alone takes longer on one circuit.
    assert drain_after_arrivals([1000] * 10_000 + [500_000], 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 500 + 5)
    # TCP flows (the packet switch carries every flow): twice the largest at the access rate.
    assert drain_after_arrivals([], 100.0, 0.8, 1000.0, 8, tcp_sizes=[10, 78_000], access_Bps=1000.0) \
        == pytest.approx(8 + 156 + 5)
    assert drain_after_arrivals([4000, 4000], 100.0, 0.8, 1000.0, 8, tcp_sizes=[3000], access_Bps=1000.0) \
        == pytest.approx(8 + 6 + 5)


def test_agents_stop_shares_one_deadline_and_reports_an_agent_without_a_summary(tmp_path):
    """SIGTERMed agents get one deadline together (not a short one each, in turn); one that
    does not end by then is killed and listed in ``dead`` -- never a silent loss."""
    import signal
    import subprocess
    import sys
    import time

    from p4rotor.fabric.agents import Agents

    summary = json.dumps({"flows_rx": {}})
    well = subprocess.Popen([sys.executable, "-c",
                             "import signal, sys, time, pathlib\n"
                             "def bye(*_):\n"
                             f"    pathlib.Path(sys.argv[1]).write_text({summary!r}); sys.exit(0)\n"
                             "signal.signal(signal.SIGTERM, bye)\n"
                             "pathlib.Path(sys.argv[2]).touch()\n"
                             "time.sleep(60)\n", str(tmp_path / "agent-well.json"), str(tmp_path / "well-ready")],
                            start_new_session=True)
    stuck = subprocess.Popen([sys.executable, "-c",
                              "import signal, sys, time, pathlib\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "pathlib.Path(sys.argv[1]).touch()\n"
                              "time.sleep(60)\n", str(tmp_path / "stuck-ready")], start_new_session=True)
    for _ in range(600):  # both have set their handlers (a fixed wait was too short on a loaded machine)
        if (tmp_path / "well-ready").exists() and (tmp_path / "stuck-ready").exists():
            break
        time.sleep(0.05)
    agents = Agents(tmp_path, procs=[("stuck", stuck), ("well", well)], where={"stuck": (0, 0), "well": (1, 0)})
    t = time.monotonic()
    got = agents.stop(timeout=1.0)
    assert time.monotonic() - t < 10
    assert [s["host"] for s in got] == ["well"]
    assert [d["host"] for d in agents.dead] == ["stuck"]
    assert agents.dead[0]["exit"] == -signal.SIGKILL


def testfct_plot_say_no_flow_finished_instead_of_failing(tmp_path):
    # A run whose every flow stayed unfinished (the agents starved) still gets its
    # fct.png: a log axis of nothing made matplotlib raise after fct.json was written.
    from p4rotor.experiments.fct.report import fct_plot

    f = Flow(0, "h0x0", "h2x0", 150_000, 0.0)
    runs = {"opera": {"done": [F.Done(f, "bulk", 0, None)], "pending": [(0.0, 150_000), (1.0, 150_000)]}}
    fct_plot(runs, 5.768e6, tmp_path)
    assert (tmp_path / "fct.png").stat().st_size > 1000


def test_primer_counts_from_both_ends_logs(tmp_path):
    """A run's primers as fct.json keeps them: sent (the senders' records), answered, failed
    (an error or no answer), and the median primer FCT from the receivers' stamps."""
    from p4rotor.experiments.fct.hosts import PRIMER_US, primer_counts
    from p4rotor.host.flows import PRIMER_BIT

    a, b = PRIMER_BIT | 1, PRIMER_BIT | 2
    (tmp_path / "primers-h0.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"side": "tx", "id": a, "issued_ns": 1_000_000, "ack_ns": 3_000_000, "error": None},
        {"side": "tx", "id": b, "issued_ns": 5_000_000, "ack_ns": None, "error": "TimeoutError"},
        {"side": "rx", "id": PRIMER_BIT | 9, "rx_ns": 1, "bytes": 1})) + "\n")
    (tmp_path / "primers-h1.jsonl").write_text(json.dumps({"side": "rx", "id": a, "rx_ns": 1_500_000, "bytes": 1}) + "\n")
    c = primer_counts(tmp_path, ["h0", "h1", "h2"])  # h2 wrote nothing
    assert c == {"primer_us": PRIMER_US, "sent": 2, "answered": 1, "failed": 1, "p50_ms": 0.5}


def test_a_wall_budget_keeps_the_flows_that_fit():
    """Web Search 1 % as run (1 000 flows, ~870 s of arrivals, Opera, 100 replayed, its own
    calibration: 23 min 49 s): expected ~23 min, so all fit 30 min; of 10 000 (8 700 s), the
    90 % of 30 min, less the calibration, the mode's overhead and its replays, over 0.87 s a flow."""
    from p4rotor.experiments.fct import budget as B
    from p4rotor.workload.cdf import WorkloadError

    assert B.estimate_s(870, 1, 100, calibrated=False) == pytest.approx(1390)
    assert B.fit(1000, 870, 1, 100, False, 1800) == 1000
    assert B.fit(10000, 8700, 1, 100, False, 1800) == (0.9 * 1800 - 300 - 60 - 160) // 0.87
    assert B.fit(10000, 8700, 1, 100, True, 1800) == (0.9 * 1800 - 60 - 160) // 0.87   # no calibration to run
    assert B.fit(10000, 8700, 3, 100, False, 1800) == (0.9 * 1800 - 300 - 3 * 220) // (3 * 0.87)
    with pytest.raises(WorkloadError, match="not even 100 flows"):
        B.fit(10000, 8700, 3, 250, False, 1800)
