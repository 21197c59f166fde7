"""workload/stability.py: within RotorLB's capacity (the model on the flows repeated) and the
fabric keeping up with the model; ``p4rotor workload stability``."""

from __future__ import annotations

import json
import random

import pytest

from p4rotor.cli import main
from p4rotor.workload import flowlist
from p4rotor.workload import stability as ST
from p4rotor.workload.generate import Flow
from p4rotor.workload.plane import stability_judge, stability_plane

SCHED, PLANE = stability_plane(100.0, 2)
HOSTS = sorted(PLANE.where)
UNIT = PLANE.unit_bytes  # one circuit's bytes in one slot


def _flows(per_slot_units: float, seconds: float, seed: int = 1, size_units: float = 4.0) -> list[Flow]:
    """Poisson bulk flows between random inter-rack hosts: ``per_slot_units`` offered per slot
    over the whole fabric (both planes)."""
    rng = random.Random(seed)
    rate = per_slot_units / size_units / PLANE.slot_s  # flows per second
    t, out = 0.0, []
    while t < seconds:
        t += rng.expovariate(rate)
        while True:
            a, b = rng.sample(HOSTS, 2)
            if PLANE.where[a][0] != PLANE.where[b][0]:
                break
        out.append(Flow(len(out), a, b, int(size_units * UNIT), t))
    return out


def test_plane_of_the_default_fabric():
    assert len(HOSTS) == 16 and {p for _, p in PLANE.where.values()} == {0, 1}
    assert PLANE.frames_per_unit == 5 and PLANE.slot_s == pytest.approx(0.1)


def test_trend_flat_vs_climbing():
    flat = [(t, 1000.0 + (50 if t % 2 else -50)) for t in range(40)]
    assert not ST.trend(flat)["rising"]
    climbing = [(t, 1000.0 * t) for t in range(40)]
    tr = ST.trend(climbing)
    assert tr["rising"] and tr["slope_bytes_per_s"] == pytest.approx(1000.0)


def test_light_load_within_capacity():
    # 8 units per slot over 2 planes x 8 racks x 4 uplinks (64 units): an eighth.
    cap = ST.capacity(SCHED, _flows(8, 60), 0, PLANE)
    assert cap["stable"] and abs(cap["growth"]) <= ST.GROWTH_MAX
    assert len(cap["mean_bytes"]) == ST.REPEATS


def test_overload_past_capacity():
    # 60 of the 64 units per slot: past what RotorLB delivers for random pairs (two hops).
    cap = ST.capacity(SCHED, _flows(60, 30), 0, PLANE)
    assert not cap["stable"] and cap["growth"] > 0.05
    assert cap["mean_bytes"] == sorted(cap["mean_bytes"])
    assert "past capacity above 1%" in cap["why"]


def test_one_burst_is_not_an_overload():
    # A heavy tail: one flow of 400 units (40 slots of all 4 uplinks) in a light load.  The
    # queue is high at the end of the list, the same at the end of every repetition.
    fl = _flows(4, 40)
    fl.append(Flow(len(fl), HOSTS[0], HOSTS[-1], 400 * UNIT, fl[-1].start - 1.0))
    cap = ST.capacity(SCHED, fl, 0, PLANE)
    assert max(cap["mean_bytes"]) > 20 * UNIT and cap["stable"]


def _judge(flows, pending, arrivals_s):
    return stability_judge(SCHED, 100.0, 2, 100.0, 10000.0)(flows, 0, pending, arrivals_s)


def test_fabric_that_keeps_up_is_stable():
    fl = _flows(8, 30)
    model = ST.tracking([], SCHED, fl, 0, PLANE, 30, 0)["model_curve"]
    st = _judge(fl, [(t, b * 1.1) for t, b in model], 30)
    assert st["stable"] and st["tracking"]["keeps_up"] and st["tracking"]["ratio"] == pytest.approx(1.1, rel=0.2)
    assert st["why"].startswith("measured stable") and "model: within RotorLB's capacity" in st["why"]


def test_a_queue_high_but_flat_is_stable_by_measurement_and_the_model_disagreement_is_shown():
    fl = _flows(8, 30)
    pending = [(k * 0.1, 50e6) for k in range(300)]  # 50 MB queued throughout: far above the model
    st = _judge(fl, pending, 30)
    assert st["stable"] and st["measured"]["stable"] and not st["model_stable"]
    assert st["capacity"]["stable"] and not st["tracking"]["keeps_up"]
    assert "model (disagrees): the fabric falls behind RotorLB" in st["why"]


def test_a_measured_queue_that_grows_past_the_bound_is_unstable():
    fl = _flows(8, 30)
    arrived = sum(f.size for f in fl if 3 <= f.start <= 30)
    pending = [(k * 0.1, 0.2 * arrived * k / 300) for k in range(300)]  # rises by ~20 % of what arrived
    st = _judge(fl, pending, 30)
    assert not st["stable"] and st["measured"]["share"] == pytest.approx(0.2 * 27 / 30, rel=0.1)
    assert st["why"].startswith("measured UNSTABLE")


def test_no_bulk_flows_is_stable():
    fl = _flows(8, 5)
    st = stability_judge(SCHED, 100.0, 2, 100.0, 10000.0)(fl, float("inf"), [], 5)
    assert st["stable"] and "no bulk flows" in st["why"]


def _run_dir(tmp_path, flows, pending, arrivals_s):
    flowlist.write(tmp_path / "flows.json", flows, {"workload": "test", "load": 0.1})
    res = {"workload": "test", "load": 0.1, "flows": len(flows), "dilation": 100.0, "hosts_per_rack": 2,
           "modes": {"opera": {"cutoff_bytes": 0, "stable": False, "stability": {"rise_bytes": 1.0},
                               "pending_bytes": pending, "arrivals_s": arrivals_s, "unfinished": 0}}}
    (tmp_path / "fct.json").write_text(json.dumps(res))
    return tmp_path


def test_cli_judges_again_and_writes(tmp_path, capsys):
    fl = _flows(8, 20)
    model = ST.tracking([], SCHED, fl, 0, PLANE, 20, 0)["model_curve"]
    run = _run_dir(tmp_path, fl, model, 20)
    before = (run / "fct.json").read_text()
    assert main(["workload", "stability", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("opera: stable: measured stable")
    assert (run / "fct.json").read_text() == before  # judged, not written
    assert main(["workload", "stability", str(run), "--write"]) == 0
    m = json.loads((run / "fct.json").read_text())["modes"]["opera"]
    assert m["stable"] and "capacity" in m["stability"]


@pytest.mark.parametrize("missing", ["fct.json", "flows.json"])
def test_cli_missing_file_one_line_exit2(tmp_path, capsys, missing):
    run = _run_dir(tmp_path, _flows(4, 5), [], 5)
    (run / missing).unlink()
    with pytest.raises(SystemExit) as e:
        main(["workload", "stability", str(run)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert missing in err and "\n" not in err


def test_cli_flow_list_alone_before_a_run(tmp_path, capsys):
    light, heavy = tmp_path / "light.json", tmp_path / "heavy.json"
    flowlist.write(light, _flows(8, 20), {"workload": "test"})
    flowlist.write(heavy, _flows(60, 20), {"workload": "test"})
    assert main(["workload", "stability", str(light)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("opera (cutoff ") and "within RotorLB's capacity" in out[0]
    assert out[1].startswith("rotornet (cutoff 0 B, ") and "within" in out[1]
    assert main(["workload", "stability", str(heavy)]) == 0
    assert "PAST RotorLB's capacity" in capsys.readouterr().out


def test_rack_shared_plane_is_one_plane_of_whole_circuits():
    shared = PLANE.rack_shared()
    assert {p for _, p in shared.where.values()} == {0}
    assert all(shared.where[h][0] == PLANE.where[h][0] for h in HOSTS)
    assert shared.frames_per_unit == 2 * PLANE.frames_per_unit


def test_cli_flow_list_rack_shared_queues_less(tmp_path, capsys):
    # The same flows on racks whose hosts share their circuits: a unit is twice the frames, so
    # the model's queue (in bytes) is never longer, and shorter when a host's plane was the limit.
    fl = tmp_path / "f.json"
    flowlist.write(fl, _flows(8, 20), {"workload": "test"})
    from p4rotor.workload.judge import capacity_of

    planes, shared = capacity_of(str(fl)), capacity_of(str(fl), rack_shared=True)
    assert shared["rotornet"]["mean_bytes"][-1] < planes["rotornet"]["mean_bytes"][-1]
    assert main(["workload", "stability", str(fl), "--rack-shared"]) == 0
    assert "the rack's hosts sharing its circuits): within RotorLB's capacity" in capsys.readouterr().out


@pytest.mark.parametrize("args, needle", [
    (["--write"], "--write: only for a run's directory"),
    (["--hosts-per-rack", "1"], "is not in the default fabric with 1 hosts per rack"),
])
def test_cli_flow_list_alone_bad_input(tmp_path, capsys, args, needle):
    fl = tmp_path / "f.json"
    flowlist.write(fl, _flows(8, 5), {"workload": "test"})
    with pytest.raises(SystemExit) as e:
        main(["workload", "stability", str(fl), *args])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and needle in err and "\n" not in err


def test_cli_no_such_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["workload", "stability", str(tmp_path / "nope")])
    assert e.value.code == 2 and "no such file or directory" in capsys.readouterr().err


def test_cli_judges_bulk_again_against_rotorlb_alone(tmp_path, capsys):
    fl = _flows(8, 20)
    model = ST.tracking([], SCHED, fl, 0, PLANE, 20, 0)["model_curve"]
    run = _run_dir(tmp_path, fl, model, 20)
    r = json.loads((run / "fct.json").read_text())
    # Every flow took 2 s (20 slots): the bound and the model judge it again from per_flow.
    r["modes"]["opera"]["per_flow"] = [[f.id, "bulk", "100KB-10MB", 2.0, f.size] for f in fl]
    r["modes"]["opera"]["bulk_bound"] = {"bulk_mbps": 4.6144, "duty": 0.5, "wait_s": 0.3}
    (run / "fct.json").write_text(json.dumps(r))
    assert main(["workload", "stability", str(run), "--write"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("opera: bulk within the low-load bound: "))
    assert f"every flow 0/{len(fl)}" in line and "RotorLB alone (model)" in line
    bb = json.loads((run / "fct.json").read_text())["modes"]["opera"]["bulk_bound"]
    assert bb["flows"] == len(fl) and bb["rotorlb_alone"]["excess_slots_median"] > 0
    assert len(bb["rotorlb_alone"]["per_flow"]) == len(fl) and (run / "bulk.png").is_file()


def test_cli_rack_shared_on_a_run_one_line_exit2(tmp_path, capsys):
    fl = _flows(8, 5)
    run = _run_dir(tmp_path, fl, [], 5)
    before = (run / "fct.json").read_text()
    with pytest.raises(SystemExit) as e:
        main(["workload", "stability", str(run), "--rack-shared", "--write"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--rack-shared: only for a flow list alone" in err and "\n" not in err
    assert (run / "fct.json").read_text() == before
