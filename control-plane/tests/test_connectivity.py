"""The connectivity check's judging and re-probe planning, on synthetic probe counts and logs (no switch)."""

import subprocess
import sys
import time

import pytest

from p4rotor.experiments import connectivity as E
from p4rotor.host import probe as P
from p4rotor import schedule as S
from p4rotor.schedule import dilate

T0 = 1_000_000_000_000_000


def grid(slots, n, cells=()):
    g = [[[0] * n for _ in range(n)] for _ in range(slots)]
    for k, i, j, v in cells:
        g[k][i][j] = v
    return g


def pred(slots, n, live):
    p = [[[False] * n for _ in range(n)] for _ in range(slots)]
    for k, i, j in live:
        p[k][i][j] = True
    return p


def test_judge_cells_every_kind():
    live = [(0, 0, 1), (0, 1, 0), (1, 0, 2)]
    predicted = pred(2, 3, live)
    sent = grid(2, 3, [(k, i, j, 2) for k in range(2) for i in range(3) for j in range(3) if i != j])
    sent[1][2][1] = 0  # nothing sent: not judged
    got = grid(2, 3, [(0, 0, 1, 2),   # live, received: agree
                      (1, 0, 2, 1),   # live, one of two received: agree
                      (0, 2, 0, 1)])  # dark, received: a false positive
    # (0, 1, 0) is live but every probe was lost: undecided
    j = E.judge_cells(sent, got, predicted)
    assert j.false_positive == [(0, 2, 0)]
    assert j.undecided == [(0, 1, 0)]
    assert j.unprobed == [(1, 2, 1)]
    assert (0, 0, 1) in j.agree and (1, 0, 2) in j.agree and (0, 1, 2) in j.agree  # dark, nothing received
    assert j.cells == 2 * 3 * 2 - 1
    assert len(j.agree) == j.cells - 2
    assert not any(i == k for _, i, k in j.agree + j.false_positive + j.undecided + j.unprobed)


def test_a_received_probe_counts_even_if_its_send_was_not_logged():
    j = E.judge_cells(grid(1, 2), grid(1, 2, [(0, 0, 1, 1)]), pred(1, 2, []))
    assert j.false_positive == [(0, 0, 1)] and j.unprobed == [(0, 1, 0)]


def test_reprobe_evidence_resolves_lost_cells_but_never_a_false_positive():
    predicted = pred(1, 3, [(0, 0, 1), (0, 1, 0)])
    sent = grid(1, 3, [(0, i, j, 1) for i in range(3) for j in range(3) if i != j])
    got = grid(1, 3, [(0, 2, 1, 1)])  # dark circuit crossed
    first = E.judge_cells(sent, got, predicted)
    assert sorted(first.undecided) == [(0, 0, 1), (0, 1, 0)] and first.false_positive == [(0, 2, 1)]
    # a re-probe round: (0, 0, 1) gets through, (0, 1, 0) is lost again
    E._add(sent, grid(1, 3, [(0, 0, 1, 4), (0, 1, 0, 4)]))
    E._add(got, grid(1, 3, [(0, 0, 1, 3)]))
    after = E.judge_cells(sent, got, predicted)
    assert after.undecided == [(0, 1, 0)]  # still nothing: a failure if this was the last round
    assert after.false_positive == [(0, 2, 1)]  # stays a failure whatever more rounds show
    assert len(after.agree) == after.cells - 2
    assert E._total(sent) == 6 + 8 and E._total(got) == 1 + 3


def test_predicted_circuits_rotornet():
    s = S.generate_rotornet(8, 2, 1000, 100)
    p = E.predicted_circuits(s)
    assert len(p) == 8  # 4 slots (7 matchings dealt to 2 rotors, one idle), each a night and a day
    for i in range(8):
        assert not any(p[k][i][i] for k in range(len(p)))
        assert not any(p[k][i][j] for k in range(0, 8, 2) for j in range(8))  # nights: dark
        for j in range(8):
            if i != j:  # RotorNet: every pair has exactly one direct slice per cycle
                assert sum(p[k][i][j] for k in range(len(p))) == 1


def _staggered():
    """Rotor b is offset half a slot: during the first half of slot 0 it still has its slot -1's
    matching (index 1), not index 0."""
    return S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": 1000, "reconfig_us": 100,
                        "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                   {"name": "b", "offset_us": 500, "matchings": [[2, 3, 0, 1], [3, 2, 1, 0]]}]})


def test_predicted_circuits_count_rotor_offsets():
    """An Opera schedule through the prediction: at t = 300 us rotor b is live with matching 1
    (0 <-> 3), not matching 0 (0 <-> 2) as a per-slot, offset-0 reading would say."""
    s = _staggered()
    p = E.predicted_circuits(s)
    clock = S.SliceClock(s)
    k = clock.index(300)
    assert p[k][0][1] and p[k][0][3] and not p[k][0][2]
    k2 = clock.index(550)  # b in the night of its slot 0 ([500, 600)): only a
    assert p[k2][0][1] and not p[k2][0][3] and not p[k2][0][2]
    assert p[clock.index(700)][0][2]  # b's slot 0 (matching 0) has its day from 600 to 1500
    assert p[clock.index(1700)][0][3]  # b's slot 1 (matching 1) from 1600


def _ds():
    # 4 racks, 1 rotor, 3 matchings; dilated x1000: slot 1 s, night 0.1 s, margin 0.135 s.
    # Slices: night of slot k = 2k, day of slot k = 2k + 1 (nights are too short to judge).
    s = S.generate_rotornet(4, 1, 1000, 100)
    return s, dilate(s, 1000.0)


def test_tally_counts_by_send_slice_inside_the_judged_window():
    s, ds = _ds()
    margin = 0.15 * ds.day_us
    ips = ["10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"]
    names = ["h0", "h1", "h2", "h3"]
    us = 1000
    logs = {
        "h0.tx": [{"tx": T0 + 500_000 * us, "dst": ips[1]},              # day of slot 0 (slice 1)
                  {"tx": T0 + 3_500_000 * us, "dst": ips[1]},            # slot 3 = slot 0 of the next cycle
                  {"tx": T0 + 1_050_000 * us, "dst": ips[2]},            # night of slot 1: not judged
                  {"tx": T0 + 1_200_000 * us, "dst": ips[2]},            # day but within the margin: not judged
                  {"tx": T0 + 1_990_000 * us, "dst": ips[2]},            # just before the end of slot 1: not judged
                  {"tx": T0 + 1_500_000 * us, "dst": ips[3]}],           # day of slot 1 (slice 3)
        "h1.rx": [{"rx": T0 + 600_000 * us, "src": 0, "tx": T0 + 500_000 * us}],  # counted in its send slice
        "h3.rx": [{"rx": T0 + 2_600_000 * us, "src": 0, "tx": T0 + 1_500_000 * us}],  # arrived a slice late
    }
    late = []
    sent, got = E.tally(ds, logs, names, ips, T0, margin, late)
    assert sent[1][0][1] == 2 and sent[3][0][3] == 1 and sent[3][0][2] == 0
    assert got[1][0][1] == 1 and E._total(got) == 1 and E._total(sent) == 3
    assert late == [(0, 3, 1_500_000, 2_600_000)]  # no evidence for slice 3 either way


def test_a_late_probe_fails_only_if_no_slice_of_its_life_had_its_circuit():
    """Sent in slot 1, received in slot 2: it may have crossed in either; a circuit live in slot 2
    only is no failure, a circuit live in neither is one (in the cell it was sent in)."""
    s, ds = _ds()
    pred = E.predicted_circuits(s)
    clock = S.SliceClock(ds)
    # Which slices have 0 -> j live: one rack per slot (a 4-rack, 1-rotor RotorNet).
    live = {j: [k for k in range(len(pred)) if pred[k][0][j]] for j in (1, 2, 3)}
    k1, k2 = clock.index(1_500_000), clock.index(2_500_000)  # days of slots 1 and 2
    j_next = next(j for j in (1, 2, 3) if k2 in live[j])  # live in slot 2, dark in slot 1
    j_none = next(j for j in (1, 2, 3) if k1 not in live[j] and k2 not in live[j])
    late = [(0, j_next, 1_500_000, 2_500_000), (0, j_none, 1_500_000, 2_500_000)]
    assert E.late_across_dark(late, ds, pred) == [(k1, 0, j_none)]


def test_nights_have_no_unprobed_cells():
    s, ds = _ds()
    clock = S.SliceClock(ds)
    judgeable = [clock.judged_window(k, 0.15 * ds.day_us) is not None for k in range(len(clock.slices))]
    assert judgeable == [False, True] * 3
    n = 4
    zero = [[[0] * n for _ in range(n)] for _ in range(6)]
    j = E.judge_cells(zero, zero, E.predicted_circuits(s), judgeable)
    assert j.unprobed and all(k % 2 == 1 for k, _, _ in j.unprobed)


def test_reprobe_plan_windows_are_the_judged_part_of_the_slice():
    s, ds = _ds()
    margin = 0.15 * ds.day_us
    clock = S.SliceClock(ds)
    cells = [(1, 0, 1), (5, 0, 1), (5, 0, 3), (3, 2, 3)]
    plan = E.reprobe_plan(cells, ds, margin, per_cell=4)
    assert set(plan) == {0, 2}
    assert sorted(plan[0]["open"]) == [1, 3] and list(plan[2]["open"]) == [3]
    period = ds.hyperperiod_us * 1000
    for i, p in plan.items():
        for j, ws in p["open"].items():
            for a, b in ws:
                assert 0 <= a < b <= period
                k = clock.index(a / 1000)
                assert (k, i, j) in cells
                # every gated send time falls in the judged window of that slice (what tally counts)
                for t in (a, (a + b) // 2, b - 1):
                    assert clock.judged(t / 1000, margin) == k
                assert clock.judged((a - 1000) / 1000, margin) is None
                assert clock.judged((b + 1000) / 1000, margin) is None
    window_s = (ds.day_us - 2 * margin) / 1e6
    assert plan[0]["rate"] == pytest.approx(4 * 2 / window_s)  # two destinations share slice 5
    assert plan[2]["rate"] == pytest.approx(4 * 1 / window_s)


def test_direct_windows_count_offsets_and_guard():
    s = _staggered()
    # 0 -> 2 only through b's matching 0: b's slot 0 is [500, 1500), its day [600, 1500)
    assert S.direct_windows(s, 0, 2) == [(600, 1500)]
    # 0 -> 3 through b's matching 1: slot -1 (= slot 1 of the cycle) [1500, 2500) wraps at H = 2000
    assert S.direct_windows(s, 0, 3, guard_us=100) == [(0.0, 400), (1600, 2000)]


def test_gated_sends_go_round_robin_to_open_destinations():
    gate = {"t0_ns": 0, "period_ns": 100, "open": {"a": [[0, 50]], "b": [[0, 100]], "c": [[50, 100]]}}
    assert P._next_open(gate, ["a", "b", "c"], 0, 10) == 0
    assert P._next_open(gate, ["a", "b", "c"], 1, 10) == 1
    assert P._next_open(gate, ["a", "b", "c"], 2, 10) == 0  # c closed: wraps to a
    assert P._next_open(gate, ["a", "c"], 1, 110) == 0      # period wraps: phase 10
    assert P._next_open(gate, ["c"], 0, 20) is None


def test_probe_waits_for_go_after_reporting_ready(tmp_path):
    ready, go = tmp_path / "r", tmp_path / "go"
    p = subprocess.Popen([sys.executable, "-m", "p4rotor.host.probe", "--me", "0", "--duration", "0.2", "--linger", "0",
                          "--ready", str(ready), "--go", str(go), "--go-timeout", "20"])
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)
        assert p.poll() is None  # waits for the start time
        start = time.time_ns() + 200_000_000
        (tmp_path / "go.tmp").write_text(str(start))
        (tmp_path / "go.tmp").rename(go)
        assert p.wait(10) == 0
        assert time.time_ns() >= start + 200_000_000  # ran until start + duration
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_cell_span_is_the_day_for_rotornet_and_the_shortest_live_slice_for_opera():
    """Opera's cells last 100 us (one rotor's night to the next's), not a day: judged with a
    day-sized margin, every one of its slices was shorter than two margins and nothing was judged."""
    assert E.cell_span_us(S.generate_rotornet(8, 4, 1000, 100)) == 900
    op = S.generate_opera(16, 4, 1200, 100)
    assert E.cell_span_us(op) == 100  # staggered by 300 us: 100 us with one rotor dark, 200 us all live
    assert E.cell_span_us(dilate(op, 10)) == 1000
    big = S.generate_opera(108, 6, 1200, 100)
    clock = S.SliceClock(big)
    margin = 0.15 * E.cell_span_us(big)
    assert all(clock.judged_window(k, margin) for k in range(len(clock.slices)))


def test_probe_rate_puts_two_probes_into_every_opera_cell():
    """The first pass's rate, from the shortest cell: round-robin over the other racks reaches each
    of them at least once inside the middle 70 % of every slice."""
    op = dilate(S.generate_opera(16, 4, 1200, 100), 2000)
    span_s = E.cell_span_us(op) / 1e6
    period = 15 / (E.MIN_PER_CELL * 15 / span_s)  # one probe to a given rack every period
    assert period <= 0.7 * span_s
