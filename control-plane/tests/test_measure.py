"""The measurement code itself, on synthetic traces."""

import pytest

from p4rotor.bench import measure as M
from p4rotor.experiments.frame_check import check_frames
from p4rotor.stats import summarize
from p4rotor import schedule as S
from p4rotor.host.traffic import Rx, make_frame, parse_frame

T0 = 1_000_000_000_000


def sched():
    return S.generate_rotornet(4, 1, 1000, 100)  # 3 matchings, slot 1000, night 100


PM = {0: 1, 1: 2, 2: 3, 3: 4}


def rx_at(t_us, m, in_rack=0, send_delta_us=20, seq=0):
    s = sched()
    j = s.rotors[0].matchings[m][in_rack]
    return Rx(rx_ns=T0 + int(t_us * 1000), out_port=PM[j], in_port=PM[in_rack], seq=seq,
              send_ns=T0 + int((t_us - send_delta_us) * 1000))


def test_frame_roundtrip():
    f = make_frame(3, 42, 123456789)
    assert len(f) == 64
    assert parse_frame(f) == (3, 42, 123456789)
    assert parse_frame(b"\0" * 64) is None


def test_check_frames_in_time_and_stale():
    s = sched()
    r = s.rotors[0]
    good = [rx_at(500, 0), rx_at(1500, 1), rx_at(3999, 0 if 3 % 3 == 0 else 1)]
    c = check_frames(good, s, r, PM, T0)
    assert c.stale == 0 and c.wrong_port == 0
    # slot 0 (matching 0) ends at 1000; received at 1030 on matching 0 -> 30 us late
    late = [rx_at(1030, 0)]
    c = check_frames(late, s, r, PM, T0)
    assert c.stale == 1 and c.worst_late_us == pytest.approx(30)
    assert check_frames(late, s, r, PM, T0, tolerance_us=50).stale == 0
    # a frame held a whole cycle: received in slot 3 (matching 0 again) during its night
    held = [rx_at(3050, 0)]
    assert check_frames(held, s, r, PM, T0).stale == 1
    # ... but it is 50 us before slot 3's day begins (night 100): within a 50 us tolerance it is
    # that day's, early (a switch clock ahead of the capture's), not a frame held since slot 0
    assert check_frames(held, s, r, PM, T0, tolerance_us=50).stale == 0
    assert check_frames(held, s, r, PM, T0, tolerance_us=40).stale == 1


def test_check_frames_wrong_port():
    s = sched()
    bad = Rx(rx_ns=T0 + 500_000, out_port=1, in_port=1, seq=0, send_ns=T0)
    assert check_frames([bad], s, s.rotors[0], PM, T0).wrong_port == 1


def test_boundary_errors_exact_and_shifted():
    s = sched()
    r = s.rotors[0]
    frames = []
    seq = 0
    for k in range(1, 4):
        day = k * 1000 + 100
        m = k % 3
        for dt in range(0, 200, 10):  # probes every 10 us from the day start
            frames.append(rx_at(day + dt + 5 + 20, m, seq=seq, send_delta_us=20))  # arrives day+dt+5
            seq += 1
    errs = M.boundary_errors(frames, s, r, PM, T0, one_way=0)
    assert len(errs) == 3
    assert errs == pytest.approx([5, 5, 5], abs=0.01)
    p = summarize(errs)
    assert p["p50"] == pytest.approx(5, abs=0.01)


def test_one_way_and_percentiles():
    frames = [Rx(rx_ns=1000 + 40_000, out_port=1, in_port=2, seq=i, send_ns=1000) for i in range(5)]
    assert M.one_way_us(frames) == 20
    assert summarize([]) == {"n": 0}
    p = summarize(range(101))
    assert p["p50"] == 50 and p["p99"] == 99 and p["max"] == 100


def test_departures_exact():
    s = sched()
    r = s.rotors[0]
    # matching 0 days: [100, 1000), [3100, 4000); matching 1: [1100, 2000)
    def key(i):
        return (1, i)
    j0 = PM[s.rotors[0].matchings[0][0]]
    st = M.SwitchTimes(arrivals={key(0): T0 + 500_000, key(1): T0 + 3_095_000, key(2): T0 + 990_000},
                       departures={key(0): (T0 + 600_000, j0), key(1): (T0 + 3_097_000, j0),
                                   key(2): (T0 + 1_004_000, j0)})
    c = M.check_departures(st, s, r, PM, T0)
    assert c.departed == 3
    # key 1 left 3 us before matching 0's next day (early); key 2 left 4 us after its day ended
    assert c.outside == 2 and sorted(c.outside_us) == pytest.approx([3, 4])
    assert c.misswitched == 1 and c.miss_us == pytest.approx([5])
    assert M.outside_day_us(s, r, 0, 500) == 0 and M.outside_day_us(s, r, 0, 1050) == pytest.approx(50)


def _train_times(trains):
    """SwitchTimes from {train: [(arrival us, matching index or None if dropped)]} on in-port 1."""
    from p4rotor.host.traffic import TRAIN_SEQ_BASE

    s = sched()
    arr, dep = {}, {}
    for i, frames in trains.items():
        for j, (t_us, m) in enumerate(frames):
            key = (1, TRAIN_SEQ_BASE + (i << 16) + j)
            arr[key] = T0 + int(t_us * 1000)
            if m is not None:
                dep[key] = (T0 + int((t_us + 30) * 1000), PM[s.rotors[0].matchings[m][0]])
    return M.SwitchTimes(arr, dep)


def test_train_boundary_error_late_early_and_unresolved():
    from p4rotor.host.traffic import TRAIN_SEQ_BASE

    s = sched()
    b5, b8 = 5 * 1000 + 100, 8 * 1000 + 100  # day starts of slots 5 (matching 2) and 8 (matching 2)
    st = _train_times({
        # late by ~3 us: frames before and at the boundary dropped (night), B+4 on the new matching
        0: [(b5 - 200, 1), (b5 - 8, None), (b5 - 4, None), (b5, None), (b5 + 4, 2), (b5 + 8, 2)],
        # early: the frame 4 us before the boundary already on the new matching
        1: [(b8 - 8, None), (b8 - 4, 2), (b8, 2)],
        # nothing left on the new matching (e.g. all stale at a tiny slot)
        2: [(b8 + 3000 - 4, None), (b8 + 3000, None)],
    })
    res = M.train_boundary_errors(st, s, s.rotors[0], PM, T0, 1, [(0, 5), (1, 8), (2, 11)], TRAIN_SEQ_BASE)
    assert [r.slot for r in res] == [5, 8, 11]
    assert res[0].error_us == pytest.approx(4) and res[0].resolution_us == pytest.approx(4)
    assert res[0].frames == 6
    assert res[1].error_us == pytest.approx(-4) and res[1].resolution_us == pytest.approx(4)
    assert res[2].error_us is None and res[2].frames == 2


def test_train_frame_on_old_matching_is_not_the_new_one():
    """A frame forwarded on the previous matching after the boundary does not count as switched."""
    from p4rotor.host.traffic import TRAIN_SEQ_BASE

    s = sched()
    b = 4 * 1000 + 100  # slot 4: matching 1; slot 3's matching is 0
    st = _train_times({0: [(b - 2, 0), (b + 2, 0), (b + 6, 1)]})
    (r,) = M.train_boundary_errors(st, s, s.rotors[0], PM, T0, 1, [(0, 4)], TRAIN_SEQ_BASE)
    assert r.error_us == pytest.approx(6)


def test_agents_bench_section_renders_and_merges():
    from p4rotor.bench import report, run
    row = {"rate_fps": 1000, "frame_bytes": 1000, "delivered_frames": 10, "relayed_frames": 5, "cpu_s": 0.1,
           "cpu_ms_per_mb": 10.0, "cpu_ms_per_relayed_mb": 20.0, "ratio_vs_one_hop": 2.9, "keeps_up": True,
           "missed": 0}
    res = {"machine": {"cores": 2, "python": "3", "kernel": "k"}, "started": "s", "rate_pps": 1000, "agents": [row]}
    md = report.markdown(res)
    assert "RotorLB agents" in md and "| 1000 | 1000 | 2.90 | yes | 5 | 20 | 10 | 0 |" in md
    merged = run.merge_results({"started": "old", "scale": []}, dict(res, started="new"), {"agents"}, "p4rotor bench --only agents")
    assert merged["agents"] == [row] and merged["scale"] == []


def test_claims_bench_measures_each_place_and_renders(tmp_path):
    """Two places, two agents for half a second each (the real loop, files in fresh directories
    that are removed); the section renders with the ratio and merges like the others."""
    from p4rotor.bench import agents, report, run
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rows = agents.run_claims({"disk": tmp_path / "a", "tmpfs": tmp_path / "b"}, agents=2, per_s=20, seconds=0.5)
    assert [r["where"] for r in rows] == ["disk", "tmpfs"] and all(r["claims"] >= 10 for r in rows)
    assert all(r["worst_ms"] * 1e3 >= r["median_us"] > 0 for r in rows)
    assert not list((tmp_path / "a").iterdir()) and agents.fs_type(tmp_path) != "?"
    res = {"machine": {"cores": 2, "python": "3", "kernel": "k"}, "started": "s", "rate_pps": 1000, "claims": rows}
    md = report.markdown(res)
    assert "the rack's file on the disk or on tmpfs" in md and "Worst claim on the disk / on tmpfs" in md
    merged = run.merge_results({"started": "old"}, dict(res, started="new"), {"claims"}, "p4rotor bench --only claims")
    assert merged["claims"] == rows


def test_scale_specs_parse_and_reject_bad_input():
    from p4rotor.bench import run
    specs = run.parse_scale_sizes("16, 108x6", "opera", "one-switch")
    assert [s.key for s in specs] == [(16, 4, "opera", "one-switch", "bmv2"), (108, 6, "opera", "one-switch", "bmv2")]
    assert specs[1].label == "108x6-opera-one-switch" and run.ScaleSpec(128).label == "128x4"
    assert run.parse_scale_sizes("108x6", "opera", "multi-switch", "ebpf")[0].label == "108x6-opera-ebpf"
    with pytest.raises(ValueError, match="no one-switch"):
        run.parse_scale_sizes("16", "opera", "one-switch", "ebpf")
    for bad, kind, fabric in (("16,x", "rotornet", "multi-switch"), ("1", "rotornet", "multi-switch"),
                              ("16", "selector", "multi-switch"), ("16", "opera", "two-switch")):
        with pytest.raises(ValueError):
            run.parse_scale_sizes(bad, kind, fabric)


def test_scale_dilation_keeps_the_probe_rate_near_the_target():
    from p4rotor.bench import run
    from p4rotor.experiments.connectivity import MIN_PER_CELL, cell_span_us
    sched, d = run.scale_schedule(run.ScaleSpec(128))
    assert (sched.kind, d) == ("rotornet", 2000.0)
    sched, d = run.scale_schedule(run.ScaleSpec(108, 6, "opera", "one-switch"))
    pps = MIN_PER_CELL * 108 * 107 / (cell_span_us(sched) * d / 1e6)
    assert sched.kind == "opera" and 0.8 * run.SCALE_PROBE_PPS < pps <= run.SCALE_PROBE_PPS


def test_scale_rows_merge_by_size_kind_and_fabric_and_render():
    from p4rotor.bench import report, run
    old_row = {"racks": 128, "rotors": 4, "passed": False, "wall_s": 5.0}  # before rows had kind/fabric
    one = {"racks": 108, "rotors": 6, "kind": "opera", "fabric": "one-switch", "dilation": 39000.0,
           "passed": True, "wall_s": 900.0, "launch_s": 280.0, "switches": 1, "bmv2_rss_mib": 2900.0,
           "agree": 10, "cells": 10, "cells_total": 10}
    new128 = dict(old_row, kind="rotornet", fabric="multi-switch", passed=True)
    res = {"machine": {"cores": 2, "python": "3", "kernel": "k"}, "started": "s", "rate_pps": 1000}
    merged = run.merge_results({"scale": [old_row]}, dict(res, scale=[one]), {"scale"}, "c1")
    assert len(merged["scale"]) == 2
    merged = run.merge_results(merged, dict(res, scale=[new128]), {"scale"}, "c2")
    assert sorted((r["racks"], r["passed"]) for r in merged["scale"]) == [(108, True), (128, True)]
    md = report.markdown(dict(res, scale=merged["scale"]))
    assert "| 108 x 6 | opera, one-switch, 39000 | 1 BMv2 | 10/10 (of 10) |" in md and "| 280 | 900 |" in md
    ebpf = dict(one, fabric="multi-switch", target="ebpf", switches=114, map_memlock_mib=1500.0)
    merged = run.merge_results(merged, dict(res, scale=[ebpf]), {"scale"}, "c3")
    assert len(merged["scale"]) == 3  # beside the BMv2 row of the same size
    md = report.markdown(dict(res, scale=merged["scale"]))
    assert "| 108 x 6 | opera, multi-switch, 39000 | 114 eBPF | 10/10 (of 10) |" in md and "| 1500 (maps) |" in md


def test_fabric_tcp_section_renders_failures_and_the_ratio():
    from p4rotor.bench import report

    ok = {"gbps": 1.5, "min_interval_gbps": 1.2, "retransmits": 3}
    res = {"machine": {"cores": 2, "python": "3", "kernel": "k"}, "started": "s", "rate_pps": 1,
           "fabric_tcp": [{"target": "bmv2", "low-latency": dict(ok, gbps=0.05), "bulk": {"error": "iperf3: refused"},
                           "ping_low_latency": {"received": 50, "sent": 50, "rtt_min_ms": 1.4, "rtt_avg_ms": 2.0}},
                          {"target": "ebpf", "low-latency": ok, "bulk": ok,
                           "ping_low_latency": {"received": 49, "sent": 50}}]}
    md = report.markdown(res)
    assert "| bmv2 | 0.050 (1.200) | 3 | error: iperf3: refused |" in md
    assert "| ebpf | 1.500 (1.200) | 3 | 1.500 (1.200) | 3 | 49/50 |" in md
    assert "eBPF / BMv2: 30x" in md


def test_bracket_error_is_zero_when_the_bracket_reaches_the_day_and_the_gap_otherwise():
    from p4rotor.bench.kernel import bracket_error_ns

    # days [110, 200) + k * 200: a frame sent at 90 (in the night) and seen at 115 is explained
    assert bracket_error_ns(90, 115, 110, 200, 200) == 0
    # sent at 90 and seen at 100: the pipeline must have been 10 early at least
    assert bracket_error_ns(90, 100, 110, 200, 200) == 10
    # sent after the day (at 205, the next slot) but switched in it: late by 6 at least
    assert bracket_error_ns(205, 215, 110, 200, 200) == 6
    # the nearest day may be a cycle away on either side
    assert bracket_error_ns(395, 400, 110, 200, 200) == 0
    assert bracket_error_ns(-95, -92, 110, 200, 200) == 2
