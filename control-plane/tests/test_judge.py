"""A finished fct run judged again without a fabric: the model's numbers (workload/plane.py),
the agents' summaries
(workload/agents.py) and the plots from fct.json (workload/plots.py)."""

from __future__ import annotations

import pytest

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
