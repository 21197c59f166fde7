"""Opera schedules whose every slice is an expander ([McGuinness21 §2.6.1]; issue #15 item 1).

What is held: at least K-1 live matchings in every slice, every slice connected with a diameter
at most one hop above the median random regular graph of its size and degree, every rack pair
meeting directly once per cycle, the same schedule for the same seed (CLI too), and a random
1-factorisation underneath that is a true one.
"""

import json
import random
import subprocess
import sys

import networkx as nx
import pytest

from p4rotor import cli as cli_mod
from p4rotor import schedule as S
from p4rotor.schedule import routes as R
from p4rotor.schedule.analysis import (degree_table, graph_diameter, live_matchings, reference_diameter,
                                       slice_reference)
from p4rotor.schedule.factorisation import random_one_factorisation
from p4rotor.schedule.quality import measure, parse_sizes


def run(*args):
    return subprocess.run([sys.executable, "-m", "p4rotor.cli", *args], capture_output=True, text=True)


def assert_expander_schedule(s: S.Schedule) -> None:
    k = len(s.rotors)
    a = S.analyse(s)
    assert a.max_dark <= 1
    assert all(a.connected)
    assert min(live_matchings(s, x) for x in a.slices) >= k - 1
    # every matching a perfect matching (even racks): an involution without fixed points
    if s.racks % 2 == 0:
        for r in s.rotors:
            for m in r.matchings:
                assert all(j is not None and j != i and m[j] == i for i, j in enumerate(m))
    for row in degree_table(s, a):
        assert row.worst is not None and row.worst <= int(row.reference) + 1, row
    assert min(a.pair_meetings.values()) >= 1
    S.from_json(json.loads(s.dumps()))    # validation still passes


@pytest.mark.parametrize("racks,rotors", [(16, 4), (32, 4)])
def test_expander_target(racks, rotors):
    s = S.generate_opera(racks, rotors, 1200, 100, seed=1)
    assert_expander_schedule(s)
    # both slice kinds exist: K-1 live (one rotor dark) and K live
    assert {row.degree for row in degree_table(s)} == {rotors - 1, rotors}


@pytest.mark.parametrize("racks,rotors", [(16, 4), (32, 4)])
def test_deterministic_per_seed_and_seeds_differ(racks, rotors):
    a = S.generate_opera(racks, rotors, 1200, 100, seed=7).dumps()
    assert a == S.generate_opera(racks, rotors, 1200, 100, seed=7).dumps()
    assert a != S.generate_opera(racks, rotors, 1200, 100, seed=8).dumps()


def test_108_racks_meets_target():
    s = S.generate_opera(108, 6, 1200, 100, seed=1)
    assert_expander_schedule(s)


@pytest.mark.parametrize("racks,rotors,slot,night", [
    (4, 2, 1000, 0), (4, 3, 900, 100), (6, 2, 1000, 0), (6, 3, 900, 100),
    (6, 4, 1000, 100), (8, 3, 900, 100), (8, 4, 1000, 100), (8, 4, 1000, 250),
])
def test_small_fabrics(racks, rotors, slot, night):
    s = S.generate_opera(racks, rotors, slot, night)
    a = S.analyse(s)
    assert all(a.connected) and min(a.pair_meetings.values()) >= 1
    assert min(live_matchings(s, x) for x in a.slices) >= rotors - 1
    S.from_json(json.loads(s.dumps()))


@pytest.mark.parametrize("racks", [5, 7, 9])
def test_odd_racks_keep_one_idle_rack_per_matching(racks):
    s = S.generate_opera(racks, 4, 1200, 100)
    for r in s.rotors:
        for m in r.matchings:
            assert sum(1 for j in m if j is None) == 1
    a = S.analyse(s)
    assert all(a.connected) and min(a.pair_meetings.values()) >= 1


def test_two_rotors_with_a_long_night_refused():
    with pytest.raises(S.ScheduleError, match="use more rotors"):
        S.generate_opera(8, 2, 1000, 100)


@pytest.mark.parametrize("racks,rotors", [(4, 4), (5, 6), (8, 8)])
def test_more_rotors_than_matchings_refused(racks, rotors):
    with pytest.raises(S.ScheduleError, match="rotors but only"):
        S.generate_opera(racks, rotors, 1200 * rotors, 10)


def test_more_rotors_than_matchings_cli_one_line():
    r = run("schedule", "generate", "opera", "--racks", "4", "--rotors", "4", "--slot-us", "1200")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "4 rotors but only 3 matchings" in r.stderr


def test_emulation_schedule_routes():
    """The 8x4 schedule the emulation tests use: low-latency paths for every pair in every slice."""
    s = S.generate_opera(8, 4, 1000, 100)
    for eps in (0, 50):
        for sr in R.compute(s, epsilon_us=eps):
            assert sr.ll_diameter is not None
            ll = {(a, b) for (a, b, c) in sr.hops if c == R.TCLASS_LOW_LATENCY}
            assert len(ll) == 8 * 7


@pytest.mark.parametrize("n", [2, 4, 6, 8, 16, 64])
def test_random_one_factorisation(n):
    ms = random_one_factorisation(n, random.Random(n))
    assert len(ms) == n - 1
    seen = set()
    for m in ms:
        assert all(m[j] == i and j != i for i, j in enumerate(m))
        seen |= {(i, j) for i, j in enumerate(m) if i < j}
    assert len(seen) == n * (n - 1) // 2


def test_random_one_factorisation_refuses_odd():
    with pytest.raises(S.ScheduleError, match="even number of racks"):
        random_one_factorisation(7, random.Random(1))


def test_graph_diameter_matches_networkx():
    rng = random.Random(3)
    for n, p in [(10, 0.3), (30, 0.1), (40, 0.05), (70, 0.08)]:
        g = nx.gnp_random_graph(n, p, seed=rng.randrange(1000))
        adj = [list(g.adj[v]) for v in range(n)]
        want = nx.diameter(g) if nx.is_connected(g) else None
        assert graph_diameter(adj) == want
        if want is not None:
            assert graph_diameter(adj, cap=want) == want
            assert graph_diameter(adj, cap=want - 1) is None


def test_references():
    assert reference_diameter(16, 3) == 4
    assert reference_diameter(7, 3) is None          # no 3-regular graph on 7 nodes
    assert slice_reference(7, 3) == reference_diameter(8, 3)
    assert slice_reference(9, 2) == 8                # odd racks: a path
    assert slice_reference(12, 2) == 6               # the one connected 2-regular graph: a ring
    assert slice_reference(4, 4) == 1                # complete


def test_quality_row_and_parse():
    row = measure(16, 4, 1200, 100, seed=1)
    assert row.meets_target and row.pairs_covered == row.pairs == 120 and row.min_live == 3
    assert parse_sizes("16x4, 32x4") == [(16, 4), (32, 4)]
    with pytest.raises(S.ScheduleError, match="not RACKSxROTORS"):
        parse_sizes("16by4")


def cli(capsys, *argv):
    """Run a p4rotor command in this process: (exit status, stdout, stderr)."""
    a = cli_mod.build_parser().parse_args(list(argv))
    try:
        rc = a.fn(a)
    except SystemExit as ex:
        rc = ex.code
    out = capsys.readouterr()
    return rc, out.out, out.err


GEN16 = ("schedule", "generate", "opera", "--racks", "16", "--rotors", "4", "--slot-us", "1200",
         "--reconfig-us", "100")


def test_cli_seed_end_to_end():
    a = run(*GEN16, "--seed", "3")
    assert a.returncode == 0, a.stderr
    assert a.stdout == S.generate_opera(16, 4, 1200, 100, seed=3).dumps()


def test_cli_seed(capsys):
    a, b, c = cli(capsys, *GEN16, "--seed", "3"), cli(capsys, *GEN16, "--seed", "3"), cli(capsys, *GEN16, "--seed", "4")
    assert a[0] == 0 and a[1] == b[1] != c[1]
    rc, _, err = cli(capsys, "schedule", "generate", "rotornet", "--racks", "4", "--slot-us", "100", "--seed", "3")
    assert rc == 2 and err.startswith("p4rotor: error: --seed only applies to opera")


def test_cli_quality(capsys):
    rc, out, _ = cli(capsys, "schedule", "quality", "--sizes", "8x4,12x3")
    assert rc == 0
    assert "| 8x4 | 3 |" in out and "| 12x3 | 2 |" in out and "NO" not in out
    rc, _, err = cli(capsys, "schedule", "quality", "--sizes", "8x")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not RACKSxROTORS" in err
    rc, _, err = cli(capsys, "schedule", "quality", "--sizes", "8x2")
    assert rc == 2 and "use more rotors" in err


def test_show_prints_reference_table(tmp_path, capsys):
    p = tmp_path / "o.json"
    p.write_text(S.generate_opera(16, 4, 1200, 100).dumps())
    rc, out, _ = cli(capsys, "schedule", "show", str(p))
    assert rc == 0
    assert "degree  slices  worst  reference" in out
    assert "       3      16      4          4" in out
