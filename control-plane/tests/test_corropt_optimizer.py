"""CorrOpt's optimizer ([Zhuo19 §3.4.1]) on rotor links: the trade the fast checker cannot make,
exactness, the constraint, never worse than the fast checker, the work limits, the CLI.  The
committed comparison table: test_results.py."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from p4rotor import schedule as S
from p4rotor.control import corropt_optimizer as O
from p4rotor.control import fast_checker as M
from p4rotor.faults import corropt_compare as C
from p4rotor.schedule import topology as TP

OPERA = S.generate_opera(8, 4, 1000, 100)
ROTORNET4 = S.generate_rotornet(8, 4, 1000, 100)
# On OPERA, rotor2's links of racks 5, 6, 7: either 5 alone or 6 and 7 together can go, not 5 with
# either other (asserted below).  Rate order disables 5 first and then can take nothing else.
TRADE = {("rotor2", 5): 0.05, ("rotor2", 6): 0.03, ("rotor2", 7): 0.03}


def _kept(rates, off):
    return O.penalty(rates, [x for x in rates if x not in off])


def test_trades_one_high_rate_link_for_two_lower_ones():
    conn = M.Connectivity(OPERA)
    a, b, c = TRADE
    assert conn.first_break({a}) is None and conn.first_break({b, c}) is None
    assert conn.first_break({a, b}) is not None and conn.first_break({a, c}) is not None
    assert M.disabled_links(M.decide(OPERA, TRADE, 1e-3)) == [a]      # keeps 0.06
    res = O.optimise(OPERA, TRADE, 1e-3)
    assert sorted(res.disabled) == [b, c] and res.kept == [a] and res.optimal
    assert res.penalty_kept == pytest.approx(0.05)
    [keep] = [x for x in res.choices if x.action == "keep"]
    assert "would split" in keep.reason() and keep.split.links >= {a}


def _random_sets(sched, n, seed):
    rng = random.Random(seed)
    links = [(r.name, i) for r in sched.rotors for i in range(sched.racks)]
    for _ in range(n):
        ch = rng.sample(links, rng.randint(2, 11))
        yield {x: 10 ** rng.uniform(-6, -1) for x in ch}


@pytest.mark.parametrize("sched", [OPERA, ROTORNET4], ids=["opera8x4", "rotornet8x4"])
def test_exact_against_every_subset(sched):
    conn = M.Connectivity(sched)
    for rates in _random_sets(sched, 15, 3):
        best = min(_kept(rates, set(sub)) for k in range(len(rates) + 1)
                   for sub in itertools.combinations(rates, k) if conn.first_break(set(sub)) is None)
        assert O.optimise(sched, rates, 1e-9).penalty_kept == pytest.approx(best, rel=1e-12, abs=0)


@pytest.mark.parametrize("sched", [OPERA, ROTORNET4, S.generate_opera(16, 4, 1000, 100)],
                         ids=["opera8x4", "rotornet8x4", "opera16x4"])
def test_never_violates_and_never_worse_than_the_fast_checker(sched):
    for rates in _random_sets(sched, 10, 5):
        res = O.optimise(sched, rates, 1e-9)
        assert C.violations(sched, res.disabled) == 0
        greedy = M.decide(sched, rates, 1e-9)
        assert res.penalty_kept <= _kept(rates, M.disabled_links(greedy)) * (1 + 1e-12)


def test_pruning_disables_a_link_no_failing_constraint_involves():
    res = O.optimise(OPERA, {("rotor1", 5): 0.01}, 1e-3)
    assert (res.safe, res.in_danger, res.checks, res.disabled) == (1, 0, 0, [("rotor1", 5)])
    assert res.choices[0].why == "safe"


@pytest.mark.parametrize("limits,start", [({"max_links": 2}, "refused: 3 links in danger"),
                                          ({"max_work": 1}, "stopped after")])
def test_work_limits_fall_back_with_the_reason(limits, start):
    res = O.optimise(OPERA, TRADE, 1e-3, **limits)
    assert not res.optimal and res.reason.startswith(start)
    assert res.disabled == [("rotor2", 5)]  # the fast checker's choice: never worse than it


@pytest.mark.parametrize("kw,msg", [({"max_links": -1}, "max_links must be"), ({"max_work": 1.5}, "max_work must be")])
def test_bad_limits_one_line(kw, msg):
    with pytest.raises(O.OptimizerError, match=msg) as ex:
        O.optimise(OPERA, TRADE, 1e-3, **kw)
    assert "\n" not in str(ex.value)


def test_violations_are_recounted_independently():
    rn = S.generate_rotornet(8, 1, 1000, 100)  # every circuit is its pair's only path
    assert C.violations(rn, [("rotor0", 0)]) > 0 and C.violations(rn, []) == 0


# ---- the CLI -----------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path):
    (tmp_path / "s.json").write_text(OPERA.dumps())
    topo = TP.generate(OPERA, "s.json", hosts_per_rack=1)
    (tmp_path / "t.json").write_text(topo.dumps())
    ports = {x.name: x.ports for x in topo.rotors}
    faults = [{"kind": "loss", "start_us": 0, "rotor": r, "port": ports[r][k], "direction": "out", "rate": v}
              for (r, k), v in TRADE.items()]
    (tmp_path / "p.json").write_text(json.dumps({"version": 1, "faults": faults}))
    return tmp_path


def _cli(monkeypatch, *argv):
    import signal

    from p4rotor import cli

    monkeypatch.setattr(signal, "signal", lambda *a: None)
    return cli.main(["faults", *argv])


def test_cli_optimise_prints_choices_and_writes_masked_schedule(files, capsys, monkeypatch):
    out = files / "masked.json"
    assert _cli(monkeypatch, "optimise", "--topology", str(files / "t.json"), "--plan", str(files / "p.json"),
                "--threshold", "1e-3", "-o", str(out)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [x.split()[:4] for x in lines[:3]] == [["keep", "rotor2", "rack", "5"], ["disable", "rotor2", "rack", "6"],
                                                  ["disable", "rotor2", "rack", "7"]]
    assert lines[-1].startswith("3 lossy links, 3 above 0.001: 2 disabled, 1 kept, penalty kept 0.05 "
                                "(the fast checker alone: 1 disabled, 0.06); optimal")
    assert S.load(out) == M.masked_schedule(OPERA, [("rotor2", 6), ("rotor2", 7)])


@pytest.mark.parametrize("argv,msg", [
    (["optimise", "--plan", "{p}", "--threshold", "0"], "argument --threshold"),
    (["optimise", "--plan", "{p}", "--threshold", "0.1", "--max-links", "-1"], "argument --max-links"),
    (["optimise", "--plan", "{t}", "--threshold", "0.1"], "t.json"),
    (["compare-corropt", "--output", "{d}/none"], "not an existing directory"),
    (["compare-corropt", "--output", "{d}", "--fraction", "0"], "argument --fraction"),
    (["compare-corropt", "--output", "{d}", "--sets", "0"], "argument --sets"),
])
def test_cli_bad_input_one_line_exit_2_nothing_written(files, capsys, monkeypatch, argv, msg):
    before = sorted(files.iterdir())
    argv = [a.format(p=files / "p.json", t=files / "t.json", d=files) for a in argv]
    with pytest.raises(SystemExit) as ex:
        _cli(monkeypatch, argv[0], "--topology", str(files / "t.json"), *argv[1:])
    err = capsys.readouterr().err.strip().splitlines()
    assert ex.value.code == 2 and len(err) == 1 and msg in err[0]
    assert sorted(files.iterdir()) == before


def test_cli_compare_writes_results_with_no_violation(files, capsys, monkeypatch):
    d = files / "cmp"
    d.mkdir()
    assert _cli(monkeypatch, "compare-corropt", "--topology", str(files / "t.json"), "--fraction", "0.3",
                "--sets", "2", "--output", str(d)) == 0
    doc = json.loads((d / "optimiser.json").read_text())
    [g] = doc["groups"]
    assert [r["seed"] for r in g["sets"]] == [1, 2]
    assert g["summary"]["checker_violations_total"] == g["summary"]["optimiser_violations_total"] == 0
    assert (d / "table.md").read_text() == C.table(doc) == capsys.readouterr().out
    assert json.loads((d / "run.json").read_text())["command"].startswith("p4rotor faults compare-corropt --topology")

