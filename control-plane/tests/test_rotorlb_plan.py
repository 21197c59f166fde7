"""One agent run for many traffic matrices (experiments/rotorlb_plan.py, ``--agents once``): the
phases' times and flows, the agents' modes and snapshots, and how a phase's frames are told from
earlier phases' frames."""

from __future__ import annotations

import json
import time

import pytest

from p4rotor import schedule as S
from p4rotor.experiments import rotorlb_plan as P
from p4rotor.host import agent_cli
from p4rotor.host.agent import Agent
from p4rotor.rotorlb.model import ModelError

H = 7_000_000  # a cycle, ns


def chunk():
    return [(1, ((0, 1),)), (2, ((0, 2), (3, 4)))]


def test_phases_run_back_to_back_from_the_cycle_boundary():
    ph = P.phases_for(chunk(), 10, 1_000_000, H, cycles=3)
    assert [(p["id"], p["matrix"], p["mode"]) for p in ph] == [
        (20, 10, "rotorlb"), (21, 10, "one-hop"), (22, 11, "rotorlb"), (23, 11, "one-hop")]
    assert ph[0]["start_ns"] == 1_000_000
    for p in ph:
        assert p["m0_ns"] - p["start_ns"] == P.WARM_CYCLES * H and p["m1_ns"] - p["m0_ns"] == 3 * H
    for a, b in zip(ph, ph[1:]):
        assert b["start_ns"] == a["m1_ns"], "the next phase starts as this one stops"


def test_each_phase_has_its_own_saturated_flows_living_for_it():
    ph = P.phases_for(chunk(), 0, 0, H, cycles=3)
    flows = P.flows_for(ph, 8)
    assert set(flows) == {(r, 0) for r in range(8)}
    ids = [f["flow"] for f in flows[(0, 0)]]
    assert len(ids) == len(set(ids)) == 4  # (0,1) twice and (0,2) twice, one per phase
    for f in flows[(0, 0)]:
        p = next(p for p in ph if p["id"] + 1 == f["flow"] // P.FLOW_STRIDE)
        assert f["dst"] == f["flow"] % P.FLOW_STRIDE and f["frames"] == -1
        assert (f["start_ns"], f["stop_ns"]) == (p["start_ns"], p["m1_ns"])
    assert [f["dst"] for f in flows[(3, 0)]] == [4, 4]


def test_agents_switch_mode_at_each_phase_and_count_before_each_boundary():
    ph = P.phases_for(chunk(), 0, 0, H, cycles=3)
    doc = P.agent_phases(ph, early_ns=10_000_000)
    assert doc["one_hop_from"] == [[p["start_ns"], int(p["mode"] == "one-hop")] for p in ph]
    assert doc["snapshots"] == sorted(t - 10_000_000 for p in ph for t in (p["m0_ns"], p["m1_ns"]))
    assert agent_cli._phases(json.dumps(doc)) == doc


def test_a_phase_counts_its_own_frames_and_earlier_ones_apart():
    ph = P.phases_for(chunk(), 0, 0, H, cycles=3)
    early = 5
    t = ph[1]["m1_ns"] - early  # the one-hop phase of matrix 0
    own, old = P.FLOW_STRIDE * (ph[1]["id"] + 1) + 1, P.FLOW_STRIDE * (ph[0]["id"] + 1) + 1
    summaries = [{"snapshots": [{"t_ns": t, "late_ns": 3_000_000, "rx": {f"0:{own}": 70, f"0:{old}": 4}}]},
                 {"snapshots": [{"t_ns": t, "late_ns": 1_000_000, "rx": {}}]}]
    c = P.phase_counts(ph, summaries, early)[ph[1]["id"]]
    assert c == {"own": 70, "earlier": 4, "receivers": 2, "late_ms": 3.0}
    missing = P.phase_counts(ph, summaries, early)[ph[2]["id"]]
    assert missing["receivers"] == 0 and missing["late_ms"] is None, "a snapshot no agent took is visible"


def _agent(**kw):
    s = S.dilate(S.generate_rotornet(8, 1, 1000, 100), 100)
    now = time.time_ns()
    return Agent(s, now, 0, {r: f"10.0.{r}.1" for r in range(8)}, rate=1000, frame=1400, guard_us=0,
                 flows=kw.pop("flows", []), one_hop=False, stop_ns=now + 10**12, end_ns=now + 10**12,
                 measure=(0, 0), **kw), now


def test_an_agent_takes_each_window_s_mode_from_the_last_change_before_it():
    now = time.time_ns()
    a, _ = _agent(phases={"one_hop_from": [[now + 100, 1], [now + 300, 0]]})
    assert [a.one_hop_at(now + d) for d in (0, 99, 100, 299, 300, 10**9)] == [False, False, True, True, False, False]


def test_an_agent_makes_data_only_for_its_phases_flows_live_now():
    now = time.time_ns()
    flows = [{"flow": 100, "dst": 1, "frames": -1, "start_ns": now - 10**9, "stop_ns": now + 10**12},
             {"flow": 200, "dst": 2, "frames": -1, "start_ns": now + 10**12, "stop_ns": now + 2 * 10**12},
             {"flow": 300, "dst": 3, "frames": -1, "start_ns": now - 10**9, "stop_ns": now - 1}]
    a, _ = _agent(flows=flows)
    a._refill()
    assert a.accepted[100] == 2 * a.capacity > 0
    assert a.accepted[200] == 0 and a.accepted[300] == 0


@pytest.mark.parametrize("bad", ['{"one_hop_from": [[1, 2]]}', '{"snapshots": ["x"]}', '{"other": []}', "[]",
                                 '{"snapshots": [-1]}', "{not json"])
def test_bad_phases_are_refused(bad):
    with pytest.raises(ValueError):
        agent_cli._phases(bad)


def test_the_agent_cli_refuses_bad_phases_in_one_line(tmp_path, capsys):
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_rotornet(4, 1, 1000, 100).dumps())
    rc = agent_cli.main(["--schedule", str(sched), "--t0-ns", "0", "--rack", "0", "--peers", '{"0": "10.0.0.1"}',
                         "--stop-ns", "1", "--end-ns", "2", "--out", str(tmp_path / "out.json"),
                         "--phases", '{"one_hop_from": [[1, 7]]}'])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: --phases:") and "\n" not in err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("kw", [{"agents": "twice"}, {"agents": "once", "per_run": 0}])
def test_the_experiment_refuses_bad_agent_options_before_starting(tmp_path, kw):
    from p4rotor.experiments.rotorlb import rotorlb

    with pytest.raises(ModelError):
        rotorlb(tmp_path / "build", tmp_path / "out", **kw)
    assert not (tmp_path / "out").exists()


def _rows(earlier: int):
    """One uniform matrix (56 pairs): 2 000 frames/s in each phase (a window a pair a cycle), 4 200
    frames in 3 cycles of 0.7 s."""
    pairs = [[o, d] for o in range(8) for d in range(8) if o != d]

    def phase(pid, e):
        return {"id": pid, "throughput_fps": 2000.0, "earlier_in_window": e, "capacity_frames": 25,
                "receivers": 8, "snapshot_late_ms": 3.0}
    return [{"density": 56, "pairs": pairs, "model_ratio": 1.0, "ratio": 1.0,
             "rotorlb": phase(0, 0), "one_hop": phase(1, earlier)}]


@pytest.mark.parametrize("earlier,over", [(42, []), (43, [1])])
def test_earlier_frames_are_judged_against_the_phase_s_own_frames(tmp_path, earlier, over):
    from p4rotor.experiments.rotorlb import _report

    sched = S.generate_rotornet(8, 1, 1000, 100)
    runs = [{"lost": 0, "duplicates": 0, "retransmitted": 0, "relay_delay_slots": {"2": 10}}]
    res = _report(_rows(earlier), sched, 100.0, 1000.0, 20000.0, 3, tmp_path, agent_runs=runs)
    assert res["phases_with_earlier_frames_over_bound"] == over  # bound: 1 % of 4 200 frames
    assert res["phases_with_late_snapshots"] == []
    assert ("FAIL" in res["verdict"]) == bool(over)


def test_a_late_snapshot_fails_the_run(tmp_path):
    from p4rotor.experiments.rotorlb import _report

    rows = _rows(0)
    rows[0]["one_hop"]["snapshot_late_ms"] = 41.0  # a night (10 ms) and 1.5 guards (30 ms) at dilation 100
    runs = [{"lost": 0, "duplicates": 0, "retransmitted": 0, "relay_delay_slots": {}}]
    res = _report(rows, S.generate_rotornet(8, 1, 1000, 100), 100.0, 1000.0, 20000.0, 3, tmp_path, agent_runs=runs)
    assert res["phases_with_late_snapshots"] == [1] and res["verdict"].endswith("FAIL")
