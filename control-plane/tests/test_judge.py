"""A finished fct run judged again without a fabric: the model's numbers (workload/plane.py),
one-packet flows by path (workload/paths.py, ``p4rotor workload paths``), the agents' summaries
(workload/agents.py) and the plots from fct.json (workload/plots.py)."""

from __future__ import annotations

import json

import pytest

from p4rotor.cli import main
from p4rotor.workload import fct as F
from p4rotor.workload.generate import Flow


def test_the_bulk_bounds_duty_is_what_the_agents_send_in():
    """Whole frames per window (day less guards, less the agents' slack) over a slot's frames."""
    from p4rotor import schedule as S
    from p4rotor.workload.plane import agent_duty

    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100)  # slot 100 ms, day 90 ms
    assert agent_duty(ds, 100, 10_000) == pytest.approx(0.5)  # 5 frames of a 70 ms window, 10 per slot
    assert agent_duty(ds, 1000, 0) == pytest.approx(0.72)    # 72 of 90 ms


def test_bulk_plot_draws_what_the_check_kept(tmp_path):
    from p4rotor.workload.plots import bulk_plot

    ra = {"per_flow": [[0, 200_000, 3.0, 2.9, 2.5, 2.8], [1, 900_000, 9.0, 8.8, 7.9, 8.0]]}
    assert bulk_plot({"modes": {"opera": {"bulk_bound": {"rotorlb_alone": ra}}}}, tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000
    # Runs before the check kept per-flow numbers (or with no bulk flows): nothing drawn.
    assert not bulk_plot({"modes": {"packet-switch": {}}}, tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_a_dead_agents_whole_flows_finish_from_its_last_progress():
    """A flow its agent received whole finishes at its last frame, from the summary or, if the
    agent died before writing one, from its last progress file; a flow short of frames does not."""
    from p4rotor.workload.agents import finished_bulk

    frames = {7: 3, 8: 5, 9: 2}
    summaries = [{"flows_rx": {"0:7": [3, 100], "1:8": [4, 200]}}]
    dead = [{"1:9": (2, 300), "1:8": (4, 250)}, {"0:9": (2, None)}]
    assert finished_bulk(summaries, dead, frames) == {7: 100, 9: 300}
    assert finished_bulk(summaries, [], frames) == {7: 100}


class _Keys:
    """PathKeys' interface on a table: (src rack, dst rack) -> path class, whatever the time."""

    def __init__(self, table, racks):
        self.table, self.racks = table, racks

    def __call__(self, a, b, t):
        return self.table.get((a, b))

    def of(self, d):
        return self(self.racks[d.flow.src], self.racks[d.flow.dst], d.start_ns)


def test_a_one_packet_flow_is_judged_against_the_alone_on_its_own_path():
    """Seed 001 §5.4's OPT(i): the flow alone in the network, which for Opera is on the path of
    the slice it starts in.  Racks 0-1 direct, 0-2 three hops: a 3-hop flow is no longer judged
    against the direct pair's alone; a run flow faster than the alone ones counts in its path's
    alone (no slowdown below 1); larger flows keep the size curve.  With two to four flows a
    path, its 5th percentile is its fastest."""
    from p4rotor.workload.paths import alone_by_path, one_packet

    racks = {"a": 0, "b": 1, "c": 2}
    keys = _Keys({(0, 1): "1-1", (0, 2): "3-3"}, racks)
    floor = 0.002
    samples = [(0, 1, 0, 0.002), (0, 1, 0, 0.003), (0, 2, 0, 0.005), (0, 2, 0, 0.006)]
    done = [F.Done(Flow(1, "a", "b", 100, 0.0), "low-latency", 0, int(0.004e9), floor, 0.0),
            F.Done(Flow(2, "a", "c", 100, 0.0), "low-latency", 0, int(0.0045e9), floor, 0.0),  # beats alone
            F.Done(Flow(3, "a", "c", 100, 0.0), "low-latency", 0, int(0.009e9), floor, 0.0),
            F.Done(Flow(4, "a", "c", 50_000, 0.0), "low-latency", 0, int(0.05e9), floor, 0.01),
            F.Done(Flow(5, "a", "c", 50_000, 0.0), "bulk", 0, int(2e9))]
    offsets, info = alone_by_path(done, floor, samples, keys)
    assert offsets == pytest.approx({"1-1": 0.0, "3-3": 0.0025}, abs=2e-9)
    assert info["3-3"]["alone_s"] == info["3-3"]["fastest_s"] == pytest.approx(floor + 0.0025)
    assert {k: v for k, v in info["3-3"].items() if not k.endswith("fct_s") and k not in ("alone_s", "fastest_s")} == \
        {"offset_s": offsets["3-3"], "percentile": 5.0, "alone_samples": 2, "run_flows": 2,
         "fastest_offset_s": pytest.approx(0.0025, abs=2e-9)}
    assert info["3-3"]["alone_fct_s"]["p0"] == 0.005 and info["3-3"]["run_fct_s"]["p100"] == 0.009
    assert [one_packet(d) for d in done] == [True, True, True, False, False]
    judged = {d.flow.id: d.slowdown(1e6) for d in
              (__import__("dataclasses").replace(d, alone_s=floor + offsets.get(keys.of(d), 0.0))
               if one_packet(d) else d for d in done)}
    assert judged[1] == pytest.approx(2.0) and judged[2] == pytest.approx(1.0) and judged[2] >= 1
    assert judged[3] == pytest.approx(2.0)               # 9 ms on 3 hops, whose fastest took 4.5
    assert judged[4] == pytest.approx(0.05 / 0.012)      # the size curve, as before


def test_judge_by_path_keeps_the_strict_means_beside_the_percentile():
    """What fct.json keeps: the class's mean against each path's p5, the flows counted at 1, and
    the two stricter means (each path's fastest, any path's fastest), in that order of size."""
    from p4rotor.workload.paths import judge_by_path

    racks = {"a": 0, "b": 1, "c": 2}
    keys = _Keys({(0, 1): "1-1", (0, 2): "3-3"}, racks)
    floor = 0.002
    samples = [(0, 1, 0, 0.002 + i * 1e-5) for i in range(40)] + [(0, 2, 0, 0.004 + i * 1e-5) for i in range(40)]
    done = [F.Done(Flow(i, "a", "bc"[i % 2], 100, 0.0), "low-latency", 0, int((0.003 + i * 1e-4) * 1e9), floor, 0.0)
            for i in range(20)] + [F.Done(Flow(99, "a", "b", 10**6, 0.0), "bulk", 0, int(2e9))]
    judged, info = judge_by_path(done, floor, samples, keys, done, 1e6, 1.0)
    assert info["alone_by_path"]["3-3"]["fastest_offset_s"] < info["alone_by_path"]["3-3"]["offset_s"]
    mean = F.class_mean(F.summarize(judged, 1e6, 1.0)["low-latency"])
    assert 1.0 <= mean <= info["low_latency_vs_fastest"] <= info["low_latency_vs_floor"]
    off = {k: v["offset_s"] for k, v in info["alone_by_path"].items()}
    faster = sum(d.fct_s < floor + off[keys.of(d)] for d in done[:20])
    assert info["low_latency_within_spread"] == faster > 0
    assert all(d.slowdown(1e6) >= 1 for d in judged[:20])
    assert judged[-1] == done[-1]


def test_workload_paths_judges_the_packet_switch_alike(tmp_path, capsys):
    """A packet-switch run (no fabric mode) is judged again the same way, on its one path: its
    one-packet flows against the 5th percentile of theirs through the switch; beside a fabric
    mode it is left as the run judged it (its own floor and curve are not in fct.json)."""
    run = tmp_path / "ps"
    for d in ("alone-packet-switch", "packet-switch"):
        (run / d).mkdir(parents=True)
    hosts = {f"h{k}x0": {"ip": f"10.0.{k}.1", "rack": k} for k in range(8)}
    (run / "flows.json").write_text(json.dumps({"version": 1, "columns": ["id", "src", "dst", "size", "start"],
                                                "meta": {"hosts": hosts},
                                                "flows": [{"id": i, "src": "h0x0", "dst": f"h{1 + i % 7}x0",
                                                           "size": 1000, "start": i * 0.1} for i in range(40)]}))
    # The run's flows take 1.0-1.39 ms, 40 alone 0.6-0.99 ms: the p5 of the 80 is 0.63-0.64 ms.
    (run / "packet-switch" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": i, "issued_ns": 10**9 * i}) + "\n"
                                                                 for i in range(40)))
    (run / "packet-switch" / "rx-h1x0.jsonl").write_text("".join(
        json.dumps({"id": i, "done_ns": 10**9 * i + 1_000_000 + i * 10_000}) + "\n" for i in range(40)))
    (run / "alone-packet-switch" / "flows-h0x0.json").write_text(json.dumps(
        [{"id": 100 + k, "dst": f"10.0.{1 + k % 7}.1", "size": 1, "start_ns": 0} for k in range(40)]))
    (run / "alone-packet-switch" / "tx-h0x0.jsonl").write_text("".join(
        json.dumps({"id": 100 + k, "issued_ns": k * 10**9}) + "\n" for k in range(40)))
    (run / "alone-packet-switch" / "rx-h1x0.jsonl").write_text("".join(
        json.dumps({"id": 100 + k, "done_ns": k * 10**9 + 600_000 + k * 10_000}) + "\n" for k in range(40)))
    bucket = {"flows": 40, "unfinished": 0, "slowdown_mean": 1.98, "slowdown_min": 1.67}
    fct = {"load": 0.01, "flows": 40, "access_mbps": 5.768, "scaling_factor": 0.05768,
           "alone_one_packet_s": {"floor": 0.0006}, "alone_curve": {"points": [[1460, 0.0]], "tail_mbps": 5.768},
           "modes": {"packet-switch": {"per_flow": [[i, "low-latency", "<100KB", 0.001, 1000] for i in range(40)],
                                       "classes": {"low-latency": {"<100KB": bucket}}}}}
    (run / "fct.json").write_text(json.dumps(fct))
    assert main(["workload", "paths", str(run), "--write"]) == 0
    out = capsys.readouterr().out
    assert "packet-switch: path switch: floor +0.04 ms (p5" in out
    m = json.loads((run / "fct.json").read_text())["modes"]["packet-switch"]
    alone = 0.0006 + m["alone_by_path"]["switch"]["offset_s"]
    assert m["low_latency_within_spread"] == 0 and 0.63e-3 <= alone <= 0.64e-3
    assert F.class_mean(m["classes"]["low-latency"]) == pytest.approx(sum((1.0 + i / 100) * 1e-3 / alone
                                                                          for i in range(40)) / 40)
    assert m["low_latency_vs_floor"] > F.class_mean(m["classes"]["low-latency"])
    fct["modes"]["rotornet"] = {}
    (run / "fct.json").write_text(json.dumps(fct))
    with pytest.raises(SystemExit):
        main(["workload", "paths", str(run)])
    assert "no Opera or packet-switch run" in capsys.readouterr().err


def test_workload_paths_rejudges_a_run_from_its_logs(tmp_path, capsys):
    """``p4rotor workload paths RUN``: the low-latency class of an earlier run against each path's
    fastest, from its files; a run without its logs is one line and exit 2."""
    from p4rotor import schedule as S

    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100.0)
    run = tmp_path / "run1"
    for d in ("alone", "opera", "run"):
        (run / d).mkdir(parents=True)
    (run / "run" / "schedule.json").write_text(ds.dumps())
    (run / "run" / "status.json").write_text(json.dumps({"t0_ns": 0}))
    hosts = {f"h{k}x0": {"ip": f"10.0.{k}.1", "rack": k} for k in range(8)}
    (run / "flows.json").write_text(json.dumps({"version": 1, "columns": ["id", "src", "dst", "size", "start"],
                                                "meta": {"hosts": hosts},
                                                "flows": [{"id": i, "src": "h0x0", "dst": f"h{1 + i % 7}x0",
                                                           "size": 1000, "start": i * 0.1} for i in range(14)]}))
    t = [int(i * 0.1e9) for i in range(14)]
    (run / "opera" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": i, "issued_ns": t[i], "retrans": 0,
                                                                      "dsack": 0}) + "\n" for i in range(14)))
    (run / "opera" / "rx-h1x0.jsonl").write_text("".join(json.dumps({"id": i, "rx_ns": t[i] + 3_000_000,
                                                                      "done_ns": t[i] + 3_500_000, "retrans": 0}) + "\n"
                                                         for i in range(14)))
    (run / "alone" / "flows-h0x0.json").write_text(json.dumps([{"id": 100 + k, "dst": f"10.0.{k}.1", "size": 1,
                                                                "start_ns": 0} for k in range(1, 8)]))
    (run / "alone" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": 100 + k, "issued_ns": k * 10**9})
                                                         + "\n" for k in range(1, 8)))
    (run / "alone" / "rx-h1x0.jsonl").write_text("".join(json.dumps({"id": 100 + k, "done_ns": k * 10**9 + 2_000_000})
                                                         + "\n" for k in range(1, 8)))
    bucket = {"flows": 14, "unfinished": 0, "slowdown_mean": 1.5, "slowdown_min": 1.0}
    (run / "fct.json").write_text(json.dumps({
        "load": 0.01, "flows": 14, "access_mbps": 5.768, "scaling_factor": 0.05768, "dilation": 100.0,
        "epsilon_us": 150.0, "alone_one_packet_s": {"floor": 0.002},
        "alone_curve": {"points": [[1460, 0.0]], "tail_mbps": 5.768},
        "modes": {"opera": {"per_flow": [[i, "low-latency", "<100KB", 0.003, 1000] for i in range(14)],
                            "classes": {"low-latency": {"<100KB": bucket}}}}}))
    assert main(["workload", "paths", str(run)]) == 0
    out = capsys.readouterr().out
    assert "on any path: 1.50" in out and "against the p5 of the one-packet FCTs on its own path" in out
    mean = float(out.split("pass: mean ")[1].split()[0])  # each flow against its own path's alone
    assert 1.0 <= mean <= 1.5
    assert main(["workload", "paths", str(run), "--write"]) == 0
    assert (run / "paths.png").stat().st_size > 0 and "paths.png" in capsys.readouterr().out
    r = json.loads((run / "fct.json").read_text())
    assert r["modes"]["opera"]["low_latency_vs_floor"] == pytest.approx(1.5)
    assert set(r["modes"]["opera"]["alone_by_path"]) <= {"1-1", "2-2", "3-3"}
    assert r["modes"]["opera"]["low_latency_within_spread"] >= 0
    assert mean <= r["modes"]["opera"]["low_latency_vs_fastest"] <= 1.5

    (run / "alone" / "rx-h1x0.jsonl").unlink()
    import shutil
    shutil.rmtree(run / "alone")
    with pytest.raises(SystemExit) as ex:
        main(["workload", "paths", str(run)])
    err = capsys.readouterr().err.strip()
    assert ex.value.code == 2 and "no alone" in err and "\n" not in err


def test_bulk_paths_say_how_long_the_agents_loops_stood_still_while_a_flow_ran():
    """A flow's sender's longest loop stall while it ran, and any agent's, from the agents' pending
    samples (one a slot): a sample 0.6 s late over a flow is its stall; a flow after it has none;
    the run's agents together in ``agents_loops``."""
    from p4rotor.workload.agents import agents_loops, bulk_paths, loop_stalls

    ms = 1_000_000
    regular = [(i * 100 * ms, 0, 0) for i in range(40)]
    stalled = [(t, 0, 0) for t, _, _ in regular if not 1000 * ms < t < 1700 * ms]  # 1.0 s -> 1.7 s: 600 ms late
    sender = {"flows_tx": {"5": [950 * ms, 1800 * ms, 3, 0, 0], "6": [2100 * ms, 2200 * ms, 3, 0, 0]},
              "pending": stalled, "loop_stalls": {"samples": 30, "over_50ms": 1, "worst_ms": 600.0, "worst_at_ns": 0},
              "gc": {"2": {"collections": 3, "total_ms": 9.0, "worst_ms": 4.0}}, "windows_open_max": 3}
    receiver = {"flows_rx": {"0:5": [3, 1900 * ms], "0:6": [3, 2300 * ms]},
                "flows_rx_via": {"0:5": [0, 0, 960 * ms, 0], "0:6": [0, 0, 2110 * ms, 0]}, "pending": regular}
    assert loop_stalls(sender) == [(1700 * ms, 600.0)] and loop_stalls(receiver) == []
    p = bulk_paths([sender, receiver], {5: 900 * ms, 6: 2000 * ms}, {5: 3, 6: 3})
    assert p[5]["sender_stall_ms"] == 600.0 and p[5]["worst_stall_ms"] == 600.0
    assert p[6]["sender_stall_ms"] == 0.0 and p[6]["worst_stall_ms"] == 0.0
    assert agents_loops([sender, receiver]) == {"agents": 1, "stalls_over_50ms": 1, "worst_stall_ms": 600.0,
                                                "full_collections": 3, "worst_full_collection_ms": 4.0,
                                                "windows_open_max": 3}
    assert agents_loops([receiver]) is None  # summaries from before: nothing to say



def test_workload_imports_nothing_above_it():
    """The package layering: workload (rank 3) imports no experiments, fabric, host or other
    package above it, not even lazily inside a function."""
    import ast
    from pathlib import Path

    import p4rotor.workload

    above = {"control", "fabric", "host", "faults", "experiments", "bench", "cli"}
    for f in Path(p4rotor.workload.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                top = (node.module or "").split(".")[0] or (node.names[0].name if node.names else "")
                assert top not in above, f"{f.name}: from {'.' * node.level}{node.module} import ..."
