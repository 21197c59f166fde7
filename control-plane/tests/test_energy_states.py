"""The state-time arithmetic (energy/states.py) on cases worked out by hand, and the power
model's validation (energy/model.py)."""

from __future__ import annotations

import json

import pytest

from p4rotor.energy import model as M
from p4rotor.energy import states as ST

# One class with round numbers: L0s enters in 1 us, exits in 2, after a 10 us runway;
# L1 enters in 4 (+1 handshake), exits in 20 (+1), after 100 us.
DOC = {"version": 1, "classes": {c: {
    "L0": {"power_w": 1.0},
    "L0s": {"power_w": 0.5, "entry_us": 1, "exit_us": 2, "runway_us": 10},
    "L1": {"power_w": 0.1, "entry_us": 4, "exit_us": 20, "runway_us": 100, "handshake_us": 1},
    "off": {"power_w": 0.0, "entry_us": None, "exit_us": None}} for c in M.CLASSES}}
MODEL = M.from_json(DOC, "t.json")
CLS = MODEL.classes["rotor-port"]
L0S, L1 = CLS.states["L0s"], CLS.states["L1"]


def test_idle_for_exactly_one_runway_never_sleeps():
    # frames [0, 1) and [11, 12): idle exactly 10 us = the runway; then 10 us to the horizon
    frames = [(0.0, 1.0, 0), (11.0, 1.0, 0)]
    (o,) = ST.reactive(frames, 1, 22.0, L0S)
    assert o.time_us == {"L0": 22.0, "L0s": 0.0}
    assert (o.delayed, o.added_delay_us, o.wakes) == (0, 0.0, 0)


def test_idle_a_little_past_the_runway_sleeps_the_rest_and_the_frame_waits_the_exit():
    # idle 20 us after [0, 1): runway 10, entry 1, asleep 9 us; the frame at 21 waits 2 us (exit)
    frames = [(0.0, 1.0, 0), (21.0, 1.0, 0)]
    (o,) = ST.reactive(frames, 1, 24.0, L0S)
    assert o.time_us["L0s"] == pytest.approx(9.0)
    assert o.time_us["L0"] == pytest.approx(15.0)
    assert (o.delayed, o.added_delay_us, o.wakes) == (1, pytest.approx(2.0), 1)
    # the idle tail after the delayed frame (free at 25 > horizon 24) sleeps nothing
    assert o.energy(CLS) == pytest.approx((15.0 + 0.5 * 9.0) / 1e6)


def test_a_frame_met_mid_entry_waits_for_the_entry_and_the_exit():
    # idle 10.5 us: past the runway, inside the 1 us entry: asleep 0, the frame waits 0.5 + 2
    (o,) = ST.reactive([(0.0, 1.0, 0), (11.5, 1.0, 0)], 1, 12.5 + 2.5, L0S)
    assert o.time_us["L0s"] == 0.0
    assert o.added_delay_us == pytest.approx(2.5)


def test_trs_wake_that_overlaps_a_night_waits_for_the_day():
    # Nights [1000k, 1000k + 100).  Frame A [100, 101) on channel 0, then nothing until B at 985
    # on channel 1: both directions idle past the 100 us runway, so the link slept; waking takes
    # 20 + 1 us, ready at 1006, inside the night: B's circuit is not there until 1100.
    night = ST.Dark(0.0, 1000.0, 100.0)
    frames = [(100.0, 1.0, 0), (985.0, 1.0, 1)]
    o0, o1 = ST.reactive(frames, 2, 1200.0, L1, night)
    # asleep from 101 + 100 + 5 = 206 to 985: 779 us, on both channels (L1 puts both ends to sleep)
    assert o0.time_us["L1"] == pytest.approx(779.0) and o1.time_us["L1"] == pytest.approx(779.0)
    # B: ready at 985 + 21 = 1006, inside the night [1000, 1100): starts 1100, 115 us late
    assert (o1.delayed, o1.added_delay_us) == (1, pytest.approx(115.0))
    assert o0.delayed == 0
    # after B ([1100, 1101)) the link idles 99 us to the horizon: under the runway, no sleep
    assert o0.time_us["L0"] == pytest.approx(1200.0 - 779.0)


def test_trs_needs_both_directions_idle():
    # channel 0 sends every 50 us (under the runway), channel 1 never: the link never sleeps
    frames = [(50.0 * k, 1.0, 0) for k in range(20)]
    o0, o1 = ST.reactive(frames, 2, 1000.0, L1)
    assert o0.time_us["L1"] == 0.0 and o1.time_us["L1"] == 0.0
    # ... while TOS sleeps channel 1 from its runway on (10 + 1: asleep 989 us)
    (t1,) = ST.reactive([], 1, 1000.0, L0S)
    assert t1.time_us["L0s"] == pytest.approx(989.0)


def test_always_on_is_all_l0_with_no_delay():
    (o,) = ST.reactive([(0.0, 1.0, 0), (500.0, 1.0, 0)], 1, 1000.0, None)
    assert o.time_us == {"L0": 1000.0} and o.delayed == 0


def test_predictive_window_shorter_than_the_l1_exit_takes_l0s():
    # busy [0, 100) and [115, 200): a 15 us window; L1 needs 5 + 21 = 26, L0s 1 + 2 = 3: L0s for 12
    busy = [[(0.0, 100.0), (115.0, 200.0)], [(0.0, 100.0), (115.0, 200.0)]]
    o0, o1 = ST.predictive(busy, [CLS, CLS], 200.0)
    assert o0.time_us == {"L0": pytest.approx(188.0), "L0s": pytest.approx(12.0)}
    assert o1.time_us == o0.time_us
    assert o0.delayed == 0 and o0.added_delay_us == 0.0


def test_predictive_long_window_takes_l1_and_one_sided_window_l0s():
    # channel 0 busy [0, 100); channel 1 busy [0, 100) and [500, 600); horizon 1000.
    # both idle: [100, 500) (400 us: L1 for 400 - 26 = 374) and [600, 1000) (L1 374).
    # channel 0 alone idle: [500, 600): L0s for 100 - 3 = 97.
    busy = [[(0.0, 100.0)], [(0.0, 100.0), (500.0, 600.0)]]
    o0, o1 = ST.predictive(busy, [CLS, CLS], 1000.0)
    assert o0.time_us["L1"] == pytest.approx(748.0) and o0.time_us["L0s"] == pytest.approx(97.0)
    assert o1.time_us["L1"] == pytest.approx(748.0) and "L0s" not in o1.time_us
    assert o0.time_us["L0"] == pytest.approx(1000.0 - 748.0 - 97.0)


def test_dark_release():
    d = ST.Dark(250.0, 1000.0, 100.0)
    assert d.release(260.0) == 350.0 and d.release(350.0) == 350.0 and d.release(1300.0) == 1350.0
    assert d.release(100.0) == 100.0


# ---- the model's validation ---------------------------------------------------------------------
def _bad(mutate) -> str:
    doc = json.loads(json.dumps(DOC))
    mutate(doc)
    with pytest.raises(M.EnergyError) as ex:
        M.from_json(doc, "m.json")
    return str(ex.value)


def test_model_refusals_are_one_line():
    msgs = [
        _bad(lambda d: d["classes"]["host-link"]["L0s"].update(power_w=-1)),
        _bad(lambda d: d["classes"]["host-link"].update(L2={"power_w": 0.2})),
        _bad(lambda d: d["classes"].update(spine={})),
        _bad(lambda d: d["classes"]["rotor-port"]["L1"].update(power_w=2.0)),
        _bad(lambda d: d["classes"]["rotor-port"]["L1"].update(exit_us=None)),
        _bad(lambda d: d.update(version=2)),
    ]
    assert "must be >= 0" in msgs[0] and "unknown state 'L2'" in msgs[1] and "unknown port class" in msgs[2]
    assert all("\n" not in m and m.startswith("m.json") for m in msgs)


def test_exit_longer_than_a_slot_is_refused():
    MODEL.check_slot(1000.0)
    with pytest.raises(M.EnergyError, match="longer than the schedule's slot"):
        MODEL.check_slot(20.0)


def test_the_shipped_model_loads():
    m = M.load()
    assert m.classes["host-link"].states["L0s"].power_w == 0.45
    assert not m.classes["rotor-port"].states["off"].usable
