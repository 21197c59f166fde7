"""Schedule generation and validation: no switch needed."""

import itertools
import json

import pytest

from p4rotor import schedule as S


def directed_meetings(s):
    return S.analyse(s).pair_meetings


@pytest.mark.parametrize("racks", [2, 3, 4, 5, 7, 8, 9, 16, 17, 32])
def test_round_robin_every_pair_once(racks):
    mats = S.round_robin_matchings(racks)
    seen = {}
    for m in mats:
        for i, j in enumerate(m):
            if j is not None:
                assert m[j] == i, "bidirectional"
                assert i != j
                seen[(i, j)] = seen.get((i, j), 0) + 1
    assert all(seen.get((i, j)) == 1 for i in range(racks) for j in range(racks) if i != j)
    if racks % 2:
        assert all(sum(x is None for x in m) == 1 for m in mats), "odd: one idle rack per matching"


@pytest.mark.parametrize("racks,rotors", [(4, 1), (4, 3), (8, 1), (8, 4), (8, 7), (9, 3), (16, 5), (32, 4)])
def test_rotornet_every_pair_meets_once_per_cycle(racks, rotors):
    s = S.generate_rotornet(racks, rotors, 1000, 100)
    assert len({len(r.matchings) for r in s.rotors}) == 1
    assert set(directed_meetings(s).values()) == {1}
    S.from_json(json.loads(s.dumps()))  # round-trips and validates


def test_rotornet_too_many_rotors():
    with pytest.raises(S.ScheduleError, match="rotors"):
        S.generate_rotornet(4, 4, 1000, 100)


@pytest.mark.parametrize("racks", [2, 4, 5, 8, 16, 100])
def test_selector_offsets(racks):
    s = S.generate_selector(racks, 2, 500, 50)
    offs = [1 << b for b in range((racks - 1).bit_length())]
    for r in s.rotors:
        assert len(r.matchings) == len(offs)
        for m, off in zip(r.matchings, offs):
            assert list(m) == [(i + off) % racks for i in range(racks)]
    S.from_json(json.loads(s.dumps()))


@pytest.mark.parametrize("racks,rotors,slot,night", [
    (8, 4, 1000, 100), (8, 4, 1000, 250), (16, 4, 2000, 400), (12, 4, 1200, 300), (108, 6, 600, 90),
])
def test_opera_one_dark_and_connected(racks, rotors, slot, night):
    s = S.generate_opera(racks, rotors, slot, night)
    a = S.analyse(s)
    assert a.max_dark <= 1
    assert all(a.connected)
    assert a.worst_diameter is not None and a.worst_diameter >= 1
    assert not S.night_overlaps(s)
    # every pair still meets directly at least once per cycle (spare slots repeat a matching)
    assert min(a.pair_meetings.values()) >= 1
    # dark at most one at every microsecond of the hyperperiod (brute force on a grid)
    for t in range(0, s.hyperperiod_us, max(1, night // 4)):
        assert sum(s.state_at(r, t + 0.5)[2] for r in s.rotors) <= 1


def test_opera_refuses_when_slices_cannot_be_connected():
    # 2 rotors whose night fills the slice slot/K: slices with one live matching are never connected.
    with pytest.raises(S.ScheduleError, match="keeps every slice connected"):
        S.generate_opera(12, 2, 1000, 500)


def test_opera_two_live_matchings_form_a_ring():
    # 12 racks, 3 rotors, night = slot/3: only 2 live matchings per slice.  The old circle-method
    # generator padded with idle matchings and could not connect them; the random factorisation
    # with a repeat in the spare slot makes every pair of consecutive matchings one 12-cycle.
    s = S.generate_opera(12, 3, 900, 300)
    a = S.analyse(s)
    assert all(a.connected) and a.worst_diameter == 6


def test_moore_bound():
    assert S.moore_diameter_bound(8, 3) == 2
    assert S.moore_diameter_bound(108, 5) == 4  # 1+5+20+80 = 106 < 108


def test_opera_refuses_overlapping_nights():
    with pytest.raises(S.ScheduleError, match="two rotors would be dark"):
        S.generate_opera(8, 4, 1000, 300)


def test_opera_deterministic():
    assert S.generate_opera(16, 4, 2000, 100).dumps() == S.generate_opera(16, 4, 2000, 100).dumps()


def test_state_at_and_slices():
    s = S.generate_opera(8, 4, 1000, 100)
    r1 = s.rotors[1]
    assert s.state_at(r1, 250) == (0, 0, True)
    assert s.state_at(r1, 349.9)[2] is True
    assert s.state_at(r1, 350) == (0, 0, False)
    assert s.state_at(r1, 1250) == (1, 1, True)
    sl = s.slices()
    assert sl[0].start_us == 0 and sl[-1].end_us == s.hyperperiod_us
    assert all(a.end_us == b.start_us for a, b in zip(sl, sl[1:]))


# ---------------------------------------------------------------- validation

def base():
    return {"version": 1, "kind": "custom", "racks": 4, "slot_us": 100, "reconfig_us": 10,
            "rotors": [{"name": "r0", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1]]}]}


BAD = [
    (lambda d: d.update(version=2), "unknown schedule version"),
    (lambda d: d.pop("version"), "missing field 'version'"),
    (lambda d: d.update(kind="mesh"), "unknown kind"),
    (lambda d: d.update(racks="4"), "racks must be an integer"),
    (lambda d: d.update(racks=1), "racks must be >= 2"),
    (lambda d: d.update(reconfig_us=100), "night must be shorter than the slot"),
    (lambda d: d.update(slot_us=0), "slot_us must be >= 1"),
    (lambda d: d.update(rotors=[]), "rotors must be a non-empty list"),
    (lambda d: d["rotors"][0]["matchings"][0].pop(), "wrong length 3"),
    (lambda d: d["rotors"][0]["matchings"].__setitem__(0, [1, 1, 3, 2]), "not a permutation"),
    (lambda d: d["rotors"][0]["matchings"].__setitem__(0, [1, 0, 3, 4]), "out of range"),
    (lambda d: d["rotors"][0]["matchings"].__setitem__(0, [1, 0, 3, "2"]), "rack number or null"),
    (lambda d: d["rotors"][0].update(matchings=[]), "matchings must be a non-empty list"),
    (lambda d: d["rotors"].append(dict(d["rotors"][0])), "duplicate rotor name"),
    (lambda d: d["rotors"][0].update(name="a b"), "name must be a non-empty word"),
    (lambda d: d["rotors"][0].update(offset_us=-1), "offset_us must be >= 0"),
    (lambda d: (d.update(kind="rotornet"), d["rotors"][0]["matchings"].__setitem__(0, [1, 2, 3, 0])),
     "bidirectional"),
    (lambda d: (d.update(kind="opera"), d["rotors"].append({"name": "r1", "offset_us": 5,
                                                             "matchings": [[1, 0, 3, 2]]})),
     "dark at the same time"),
]


@pytest.mark.parametrize("mutate,msg", BAD)
def test_bad_schedules_one_line_error(mutate, msg):
    d = base()
    mutate(d)
    with pytest.raises(S.ScheduleError) as ei:
        S.from_json(d)
    assert msg in str(ei.value)
    assert "\n" not in str(ei.value)


def test_good_custom_schedule_with_idle_ports():
    d = base()
    d["rotors"][0]["matchings"].append([None, 2, 1, None])
    s = S.from_json(d)
    assert s.rotors[0].matchings[2] == (None, 2, 1, None)


def test_opera_nights_wraparound_overlap():
    d = base()
    d["kind"] = "opera"
    d["rotors"].append({"name": "r1", "offset_us": 95, "matchings": [[1, 0, 3, 2]]})
    with pytest.raises(S.ScheduleError, match="dark at the same time"):
        S.from_json(d)
    d["rotors"][1]["offset_us"] = 50
    S.from_json(d)


def test_load_bad_json(tmp_path):
    p = tmp_path / "s.json"
    p.write_text("{ nope")
    with pytest.raises(S.ScheduleError, match="bad JSON at line 1"):
        S.load(p)
    with pytest.raises(S.ScheduleError, match="cannot read"):
        S.load(tmp_path / "missing.json")


def test_hyperperiod_mixed_cycle_lengths():
    d = base()
    d["rotors"].append({"name": "r1", "offset_us": 0, "matchings": [[1, 0, 3, 2]] * 3})
    s = S.from_json(d)
    assert s.hyperperiod_us == 600
