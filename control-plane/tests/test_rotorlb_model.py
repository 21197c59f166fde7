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
    # Relayed data waits at most one cycle (7 slots) at its relay ([McGuinness21]: N_m + 1 bound).
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


# --- replay: RotorLB on a list of arrivals (workload/stability.py's model) ---------------------

OPERA = S.generate_opera(8, 4, 1000, 100)


def test_replay_delivers_everything_and_empties():
    ev = [(0, 1, 2, 3.0), (0, 4, 7, 0.5), (5, 2, 1, 8.0), (40, 0, 3, 1.0)]
    b = M.replay(OPERA, ev)
    assert b.arrived == pytest.approx(12.5)
    assert b.delivered == pytest.approx(12.5)
    assert b.last_arrival == 40 and b.empty_at is not None and b.empty_at >= 40
    assert b.level(b.empty_at) == 0


def test_replay_skips_idle_stretches():
    b = M.replay(OPERA, [(0, 1, 2, 1.0), (1_000_000, 3, 4, 1.0)])
    assert len(b.pending) < 50  # two short busy periods, not a million slots
    assert b.level(500_000) == 0 and b.empty_at >= 1_000_000


def test_replay_one_pair_at_the_models_rate():
    # One pair alone gets 3.5 of the 4 uplinks per slot (docs/notes/bulk-bound.md).
    b = M.replay(OPERA, [(0, 0, 5, 70.0)])
    assert 70 / 4 <= b.empty_at + 1 <= 70 / 3.5 + 4


def test_replay_queue_grows_past_capacity():
    # 10 units per slot from every rack to one destination: its 4 downlinks take at most 4.
    ev = [(k, a, 0, 10 / 7) for k in range(200) for a in range(1, 8)]
    b = M.replay(OPERA, ev, max_slots=0)
    assert b.level(199) > b.level(99) * 1.5 > 0


@pytest.mark.parametrize("ev", [[(0, 1, 1, 1.0)], [(-1, 0, 1, 1.0)], [(0, 0, 8, 1.0)]])
def test_replay_bad_arrival_one_line(ev):
    with pytest.raises(M.ModelError) as e:
        M.replay(OPERA, ev)
    assert "\n" not in str(e.value)


# --- alone_slots: one flow in an empty fabric (the bulk bound's "RotorLB alone") ----------------

def _pairs():
    return [(a, b) for a in range(8) for b in range(8) if a != b]


def test_alone_one_frame_waits_for_its_direct_circuit_or_a_relay():
    # A fraction of a slot's capacity goes direct if its circuit is live in the first slot,
    # else to a relay: never more than a cycle and a slot.
    for a, b in _pairs():
        assert 1.0 <= M.alone_slots(OPERA, a, b, 0.2) <= 3.0


def test_alone_a_host_plane_is_capped_at_the_pairs_share():
    # One plane per host: a large flow drains at 3.5 of the 4 uplinks (48 pairs), so it misses
    # the bound (units / 4 + matchings + 1 slots) -- docs/notes/bulk-bound.md.
    units, bound = 100.0, 100 / 4 + 3
    slots = [M.alone_slots(OPERA, a, b, units) for a, b in _pairs()]
    assert sum(s > bound for s in slots) == 48
    assert all(units / 4 <= s <= units / 3.5 + 3 for s in slots)


def test_alone_hosts_sharing_their_racks_circuits_meet_the_bound():
    # Two hosts share each rack circuit (capacity 2 units), a host feeds 4 units a slot: the host's
    # link is the bottleneck, and every pair meets the bound, the biggest flow too.
    for units in (21.0, 40.0, 100.0, 250.0):
        bound = units / 4 + 3
        assert all(M.alone_slots(OPERA, a, b, units, capacity=2.0, feed=4.0) <= bound for a, b in _pairs())


@pytest.mark.parametrize("kw", [dict(units=0.0), dict(units=1.0, capacity=0.0), dict(units=1.0, feed=-1.0)])
def test_alone_bad_input_one_line(kw):
    with pytest.raises(M.ModelError) as e:
        M.alone_slots(OPERA, 0, 1, **kw)
    assert "\n" not in str(e.value)
