"""Fault plans as data: validation with one-line errors, [Zhuo19]'s corruption generator, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.schedule import topology as TP
from p4rotor.faults import corropt
from p4rotor.control import fault_plan as FP

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def topo(tmp_path):
    s = S.generate_opera(8, 4, 1000, 100)
    (tmp_path / "s.json").write_text(s.dumps())
    t = TP.generate(s, "s.json", hosts_per_rack=2)
    (tmp_path / "t.json").write_text(t.dumps())
    return TP.load(tmp_path / "t.json")


GOOD = {"version": 1, "faults": [
    {"kind": "loss", "start_us": 0, "end_us": 2000000, "rotor": "rotor0", "port": 3, "direction": "out", "rate": 0.01},
    {"kind": "link-down", "start_us": 500000, "end_us": 900000, "switch": "tor2", "port": 1},
    {"kind": "switch-crash", "start_us": 1000000, "switch": "rotor1", "restart_after_us": 300000},
    {"kind": "controller-crash", "start_us": 1000000},
    {"kind": "clock-skew", "start_us": 0, "switch": "tor3", "offset_us": -200},
    {"kind": "host-pause", "start_us": 200000, "end_us": 400000, "host": "h0x0"}]}


def test_good_plan_roundtrips(topo):
    plan = FP.from_json(GOOD, topo)
    assert [f.kind for f in plan.faults][0] in ("loss", "clock-skew")  # sorted by start
    assert FP.from_json(json.loads(plan.dumps()), topo) == plan
    assert FP.link_losses(plan, "rotor0")[0].rate == 0.01


def _with(i, **kw):
    d = json.loads(json.dumps(GOOD))
    d["faults"][i].update(kw)
    return d


@pytest.mark.parametrize("d,msg", [
    (_with(0, kind="meteor"), "unknown kind 'meteor'"),
    (_with(0, rate=1.5), "rate must be a number in 0..1"),
    (_with(0, rate="0.1"), "rate must be a number in 0..1"),
    (_with(0, port=99), "rotor rotor0 has no port 99"),
    (_with(0, rotor="rotor9"), "rotor 'rotor9' is not in the topology"),
    (_with(0, direction="up"), "direction must be 'in' or 'out'"),
    (_with(0, matching=7), "matching must be an integer in 0..1"),
    (_with(1, end_us=100), "end_us 100 must be after start_us 500000"),
    (_with(1, port=7), "tor2 has no port 7"),
    (_with(2, switch="tor99"), "switch 'tor99' is not in the topology"),
    (_with(4, offset_us=10 ** 12), "offset_us must be an integer"),
    (_with(5, end_us=None), "a host pause needs end_us"),
    (_with(3, host="h0x0"), "unexpected field(s) host"),
    (_with(0, start_us=-1), "start_us must be an integer in 0.."),
    (_with(0, start_us=True), "start_us must be an integer"),
    ({"version": 2, "faults": []}, "unknown fault plan version"),
    ({"version": 1, "faults": {}}, "'faults' must be a list"),
    ([], "a fault plan is a JSON object"),
])
def test_bad_plan_one_line(topo, d, msg):
    with pytest.raises(FP.FaultPlanError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("..", r"\.\.")) as ex:
        FP.from_json(d, topo)
    assert "\n" not in str(ex.value)


@pytest.mark.parametrize("content,msg", [(b"\xff\xfe{", "not UTF-8"), (b'{"version": 1, "faults": [', "bad JSON"),
                                         (b"[" * 100000, "nested too deeply|bad JSON")])
def test_bad_file_one_line(topo, tmp_path, content, msg):
    p = tmp_path / "plan.json"
    p.write_bytes(content)
    with pytest.raises(FP.FaultPlanError, match=msg):
        FP.load(p, topo)


def test_corruption_rates_follow_table_3_1():
    import random

    rng = random.Random(7)
    rates = [corropt.draw_rate(rng) for _ in range(20000)]
    share = lambda lo, hi: sum(lo <= r < hi for r in rates) / len(rates)  # noqa: E731
    for (lo, hi, p) in corropt.BUCKETS:
        assert abs(share(lo, hi if hi < 1e-1 else 1.0) - p) < 0.015, (lo, hi)


def test_corrupt_links_fraction_one_way_and_seeded(topo):
    plan = corropt.corrupt_links(topo, 1.0, seed=3)
    links = {(f.rotor, f.port) for f in plan.faults}
    assert len(links) == 4 * 8
    both = sum(1 for r, p in links if len([f for f in plan.faults if (f.rotor, f.port) == (r, p)]) == 2)
    assert both / len(links) < 0.3  # 8.2% in expectation
    assert corropt.corrupt_links(topo, 1.0, seed=3) == plan
    assert corropt.corrupt_links(topo, 1.0, seed=4) != plan
    FP.from_json(plan.to_json(), topo)
    with pytest.raises(FP.FaultPlanError, match="fraction"):
        corropt.corrupt_links(topo, 0.0, seed=1)


def test_cli_generate_and_check(tmp_path, topo, capsys, monkeypatch):
    import signal

    from p4rotor import cli

    monkeypatch.setattr(signal, "signal", lambda *a: None)
    t = tmp_path / "t.json"
    out = tmp_path / "plan.json"
    assert cli.main(["faults", "generate", "--topology", str(t), "--fraction", "0.25", "-o", str(out)]) == 0
    assert cli.main(["faults", "check", str(out), "--topology", str(t)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_with(0, rate=2)))
    capsys.readouterr()
    with pytest.raises(SystemExit) as ex:
        cli.main(["faults", "check", str(bad), "--topology", str(t)])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("p4rotor: error:") and "rate" in err[0]
