"""The CorrOpt-style monitor ([Zhuo19 §3.4.1]'s fast checker on rotor links): which lossy links are
disabled, why the others are kept, the masked schedule, ``p4rotor faults monitor``."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from p4rotor import schedule as S
from p4rotor.schedule import topology as TP
from p4rotor.control import fast_checker as M

OPERA = S.generate_opera(8, 4, 1000, 100)
ROTORNET = S.generate_rotornet(8, 1, 1000, 100)


def all_connected(s):
    return all(S.analyse(s).connected)


def test_opera_single_lossy_link_is_disabled():
    assert all_connected(OPERA)
    [d] = M.decide(OPERA, {("rotor1", 5): 0.01}, 1e-3)
    assert (d.action, d.link, d.rate) == ("disable", ("rotor1", 5), 0.01)
    assert "every slice keeps its connectivity" in d.reason()
    assert d.worst_diameter is not None and d.worst_diameter >= d.worst_diameter_before
    assert all_connected(M.masked_schedule(OPERA, [d.link]))


def test_rotornet_one_rotor_always_keeps_and_names_the_slice():
    # A one-rotor RotorNet slice is one matching: each circuit is its pair's only path.
    rates = {("rotor0", r): 0.01 + r / 1000 for r in range(8)}
    ds = M.decide(ROTORNET, rates, 1e-3)
    assert [d.action for d in ds] == ["keep"] * 8
    assert [d.rack for d in ds] == list(range(7, -1, -1))  # rate order
    slices = ROTORNET.slices()
    for d in ds:
        sl = slices[d.slice_index]
        assert d.slice_start_us == sl.start_us
        peer = ROTORNET.rotors[0].matchings[sl.live[0]][d.rack]
        assert d.component == tuple(sorted((d.rack, peer)))
        assert d.split == tuple(sorted(((d.rack,), (peer,))))
        # the first slice in time with a circuit on this link: the first day slice
        assert d.slice_index == 1 and sl.live[0] == 0
        assert f"slice 1 (t={sl.start_us} us) would split" in d.reason()
    assert M.masked_schedule(ROTORNET, M.disabled_links(ds)) == ROTORNET


def test_opera_keep_names_the_disconnecting_slice():
    # Rack 3 on every rotor: some slice must keep one of its circuits.
    ds = M.decide(OPERA, {(f"rotor{k}", 3): 0.1 - k / 100 for k in range(4)}, 0.01)
    assert [d.rotor for d in ds] == ["rotor0", "rotor1", "rotor2", "rotor3"]
    keep = [d for d in ds if d.action == "keep"]
    assert keep and ds[0].action == "disable"
    for d in keep:
        assert d.component == tuple(range(8))
        assert (3,) in d.split and sorted(sum(d.split, ())) == list(range(8))
        off = M.disabled_links(x for x in ds if ds.index(x) < ds.index(d)) + [d.link]
        s = M.masked_schedule(OPERA, off)
        sl = OPERA.slices()[d.slice_index]
        assert not all(S.analyse(s).connected[: d.slice_index + 1])
        assert all(S.analyse(s).connected[: d.slice_index])  # the first one that disconnects
        assert sl.start_us == d.slice_start_us


def _greedy_brute_force(sched, rates, threshold):
    """The greedy set by enumeration: among all subsets of the candidates that keep every slice
    connected (checked by analyse's BFS, not the monitor's), the first in rate order
    lexicographically.  Feasibility is downward closed, so that is what the greedy pass picks."""
    cand = sorted((x for x in rates if rates[x] > threshold), key=lambda x: (-rates[x], x))
    best = None
    for bits in itertools.product((1, 0), repeat=len(cand)):  # lexicographic, most first
        chosen = [c for c, b in zip(cand, bits) if b]
        if all_connected(M.masked_schedule(sched, chosen)):
            best = chosen
            break
    return cand, best


def test_exactly_the_greedy_feasible_links_are_disabled():
    rng = random.Random(7)
    links = [(f"rotor{k}", r) for k in range(4) for r in (2, 3)] + [("rotor1", 6), ("rotor2", 0)]
    rates = {x: rng.choice((1e-2, 3e-3, 5e-4, 1e-5)) * (1 + rng.random()) for x in links}
    threshold = 1e-4
    ds = M.decide(OPERA, rates, threshold)
    cand, best = _greedy_brute_force(OPERA, rates, threshold)
    assert [d.link for d in ds] == cand
    assert M.disabled_links(ds) == best
    assert any(d.action == "keep" for d in ds) and any(d.action == "disable" for d in ds)
    # maximal: no kept link can go on top of the disabled ones
    for d in ds:
        if d.action == "keep":
            assert not all_connected(M.masked_schedule(OPERA, best + [d.link]))


def test_links_at_or_below_threshold_untouched():
    rates = {("rotor0", 1): 0.05, ("rotor2", 4): 0.001, ("rotor3", 6): 0.0005}
    ds = M.decide(OPERA, rates, 0.001)
    assert [d.link for d in ds] == [("rotor0", 1)]
    masked = M.masked_schedule(OPERA, M.disabled_links(ds))
    for name in ("rotor2", "rotor3"):
        assert masked.rotor(name) == OPERA.rotor(name)
    assert M.decide(OPERA, rates, 0.9) == []


def test_ties_are_deterministic():
    rates = {("rotor2", 1): 0.01, ("rotor0", 5): 0.01, ("rotor0", 2): 0.01}
    assert [d.link for d in M.decide(OPERA, rates, 1e-3)] == [("rotor0", 2), ("rotor0", 5), ("rotor2", 1)]


@pytest.mark.parametrize("sched,off", [
    (OPERA, [("rotor0", 3), ("rotor2", 3), ("rotor1", 7)]),
    (ROTORNET, [("rotor0", 0), ("rotor0", 5)]),
])
def test_masked_schedule_validates_and_lacks_exactly_the_disabled_circuits(sched, off):
    masked = M.masked_schedule(sched, off)
    assert S.from_json(json.loads(masked.dumps())) == masked
    assert (masked.kind, masked.slices()) == (sched.kind, sched.slices())
    gone = {}
    for rotor, rack in off:
        gone.setdefault(rotor, set()).add(rack)
    for r0, r1 in zip(sched.rotors, masked.rotors):
        for m0, m1 in zip(r0.matchings, r1.matchings):
            for i, (j0, j1) in enumerate(zip(m0, m1)):
                cut = i in gone.get(r0.name, ()) or j0 in gone.get(r0.name, ())
                assert j1 == (None if cut else j0)
    assert M.masked_schedule(sched, []) == sched


@pytest.mark.parametrize("rates,threshold,msg", [
    ({("rotor9", 1): 0.1}, 0.01, "no rotor 'rotor9'"),
    ({("rotor0", 8): 0.1}, 0.01, "rack must be an integer in 0..7"),
    ({("rotor0", 1): 1.5}, 0.01, "rate must be a number in 0..1"),
    ({("rotor0", 1): float("nan")}, 0.01, "rate must be a number in 0..1"),
    ({"rotor0": 0.1}, 0.01, "a link is"),
    ({}, 0, "threshold must be a number in"),
    ({}, 1, "threshold must be a number in"),
])
def test_bad_input_one_line(rates, threshold, msg):
    with pytest.raises(M.MonitorError, match=msg) as ex:
        M.decide(OPERA, rates, threshold)
    assert "\n" not in str(ex.value)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "s.json").write_text(OPERA.dumps())
    (tmp_path / "t.json").write_text(TP.generate(OPERA, "s.json", hosts_per_rack=1).dumps())

    def loss(rotor, port, direction, rate):
        return {"kind": "loss", "start_us": 0, "rotor": rotor, "port": port, "direction": direction, "rate": rate}

    plan = {"version": 1, "faults": [
        loss("rotor0", 4, "out", 0.01), loss("rotor0", 4, "in", 0.04),  # rack 3: max of both directions
        loss("rotor1", 4, "in", 0.03), loss("rotor2", 4, "out", 0.02), loss("rotor3", 4, "out", 0.01),
        loss("rotor2", 1, "out", 1e-6)]}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    return tmp_path


def _cli(monkeypatch, *argv):
    import signal

    from p4rotor import cli

    monkeypatch.setattr(signal, "signal", lambda *a: None)
    return cli.main(["faults", "monitor", *argv])


def test_cli_prints_decisions_and_writes_masked_schedule(files, capsys, monkeypatch):
    out = files / "masked.json"
    assert _cli(monkeypatch, "--topology", str(files / "t.json"), "--plan", str(files / "p.json"),
                "--threshold", "1e-4", "-o", str(out)) == 0
    lines = capsys.readouterr().out.splitlines()
    rates = {("rotor0", 3): 0.04, ("rotor1", 3): 0.03, ("rotor2", 3): 0.02, ("rotor3", 3): 0.01,
             ("rotor2", 0): 1e-6}
    ds = M.decide(OPERA, rates, 1e-4)
    assert len(lines) == len(ds) + 1
    for line, d in zip(lines, ds):
        assert line.startswith(f"{d.action:<7} {d.rotor} rack 3 (port 4) rate {d.rate:.3g}: ")
        assert line.endswith(d.reason())
    assert lines[-1].startswith("5 lossy links, 4 above 0.0001:")
    assert "1 at or below the threshold untouched" in lines[-1]
    assert S.load(out) == M.masked_schedule(OPERA, M.disabled_links(ds))


@pytest.mark.parametrize("threshold", ["0", "1", "1.5", "-0.1", "x", "nan"])
def test_cli_bad_threshold_one_line_exit_2(files, capsys, monkeypatch, threshold):
    with pytest.raises(SystemExit) as ex:
        _cli(monkeypatch, "--topology", str(files / "t.json"), "--plan", str(files / "p.json"),
             "--threshold", threshold)
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("p4rotor: error: argument --threshold: must be a loss rate in (0, 1)")


def test_cli_bad_plan_one_line_exit_2(files, capsys, monkeypatch):
    (files / "bad.json").write_text(json.dumps({"version": 1, "faults": [
        {"kind": "loss", "start_us": 0, "rotor": "rotor0", "port": 99, "direction": "out", "rate": 0.1}]}))
    with pytest.raises(SystemExit) as ex:
        _cli(monkeypatch, "--topology", str(files / "t.json"), "--plan", str(files / "bad.json"),
             "--threshold", "0.01")
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no port 99" in err[0]
