"""RotorLB fluid model and ``p4rotor model rotorlb``: Figure 2.10's end points, trend, errors."""

import json
import signal
import statistics

import pytest

from p4rotor import cli
from p4rotor.cliutil import EXIT_BAD_INPUT
from p4rotor import schedule as S
from p4rotor.rotorlb import model as M

RN8 = S.generate_rotornet(8, 1, 1000, 0)
EVERY = [(i, j) for i in range(8) for j in range(8) if i != j]


def test_one_heavy_pair_gets_all_paths():
    r = M.evaluate(RN8, [(2, 5)])
    assert r.ratio == pytest.approx(7.0, rel=0.01)  # N_R - 1
    assert r.rotorlb.delivered_per_slot == pytest.approx(1.0)
    assert r.onehop.fraction == pytest.approx(1 / 56)
    # Relayed data waits at most one cycle (7 slots) at its relay (seed 000: N_m + 1 bound).
    assert set(r.rotorlb.relay_delay) <= set(range(1, 8))
    assert sum(r.rotorlb.relay_delay.values()) == pytest.approx(1.0)


def test_uniform_converges_to_one_hop():
    r = M.evaluate(RN8, EVERY)
    assert r.ratio == pytest.approx(1.0, abs=1e-9)
    assert r.rotorlb.fraction == pytest.approx(1.0)
    assert r.rotorlb.relayed_per_slot == 0


def test_ratio_falls_with_density():
    means = [statistics.fmean(M.evaluate(RN8, m, warmup_cycles=4, measure_cycles=4).ratio
                              for m in M.random_matrices(8, k, 3, 1)) for k in (1, 4, 16, 40, 56)]
    assert means == sorted(means, reverse=True)
    assert all(x >= 1 - 1e-9 for x in means)


def test_random_matrices_seeded_distinct():
    a = M.random_matrices(8, 10, 4, 7)
    assert a == M.random_matrices(8, 10, 4, 7) and a != M.random_matrices(8, 10, 4, 8)
    assert all(len(set(m)) == 10 and all(s != d for s, d in m) for m in a)
    assert M.random_matrices(8, 56, 1, 0)[0] == tuple(EVERY)


@pytest.mark.parametrize("call,needle", [
    (lambda: M.random_matrices(8, 57, 1, 1), "density must be in 1..56"),
    (lambda: M.random_matrices(8, 0, 1, 1), "density must be in 1..56"),
    (lambda: M.evaluate(RN8, [(0, 8)]), "rack 8 outside the schedule's racks 0..7"),
    (lambda: M.evaluate(RN8, [(3, 3)]), "both rack 3"),
    (lambda: M.evaluate(RN8, []), "non-empty"),
    (lambda: M.evaluate(S.generate_rotornet(7, 1, 100, 0), [(0, 1)]), "perfect permutation"),
    (lambda: M.evaluate(S.generate_rotornet(8, 2, 100, 0), [(0, 1)]), "perfect permutation"),
    (lambda: M.evaluate(S.generate_selector(8, 1, 100, 0), [(0, 1)]), "one-way"),
])
def test_bad_input_one_line(call, needle):
    with pytest.raises(M.ModelError, match=needle) as ex:
        call()
    assert "\n" not in str(ex.value)


@pytest.fixture(autouse=True)
def _keep_signals():
    """cli.main() installs process-wide SIGPIPE/SIGTERM handlers: give pytest its own back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGPIPE, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_cli_good(tmp_path, capsys):
    mats = tmp_path / "m.json"
    mats.write_text(json.dumps([[[0, 1]], [list(p) for p in EVERY]]))
    out = tmp_path / "o.json"
    assert cli.main(["model", "rotorlb", "--matrices", str(mats), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [round(m["ratio"], 6) for m in doc["matrices"]] == [7.0, 1.0]
    assert "7.000" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["--density", "57"], "density must be in 1..56"),
    (["--racks", "7", "--density", "1"], "perfect permutation"),
    (["--matrices", "MATS"], "rack 9 outside"),
])
def test_cli_bad_exit2_nothing_written(tmp_path, capsys, args, needle):
    mats = tmp_path / "m.json"
    mats.write_text("[[[0, 9]]]")
    out = tmp_path / "o.json"
    args = [str(mats) if x == "MATS" else x for x in args]
    with pytest.raises(SystemExit) as ex:
        cli.main(["model", "rotorlb", *args, "-o", str(out)])
    assert ex.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
