"""CorrOpt's optimizer against its fast checker alone ([Zhuo19 §3.6.1], "Fast checker vs.
optimizer"), on fault sets drawn from [Zhuo19 Table 3.1] (``corropt.corrupt_links``): per set, the
links each keeps, the penalty kept (I(f) = f: the sum of the kept links' rates), the constraint
violations and the time each took to decide (CPU time of this process, so that other work on the
machine does not count); and the markdown table docs/faults.md shows.

The violations are counted here, not by the code under test: each choice is applied with
``masked_schedule`` and every slice's components are compared with the original's by networkx,
so a bug in ``fast_checker.Connectivity`` (which both deciders use) would show as a violation.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from typing import Iterable

import networkx as nx

from ..control import corropt_optimizer as O
from ..control import fast_checker as M
from ..schedule.model import Schedule
from ..schedule.topology import Topology
from . import corropt

MAX_SETS = 1000        # fault sets per (topology, fraction)
MAX_FRACTIONS = 10


def violations(schedule: Schedule, disabled: Iterable[M.Link]) -> int:
    """(slice, component) pairs of ``schedule`` that ``disabled`` splits: the capacity constraint
    recounted on the masked schedule, independently of ``fast_checker.Connectivity``."""
    masked = M.masked_schedule(schedule, disabled)
    n = 0
    for sl in schedule.slices():
        after = {v: k for k, c in enumerate(nx.connected_components(masked.slice_graph(sl))) for v in c}
        for c in nx.connected_components(schedule.slice_graph(sl)):
            n += len({after[v] for v in c}) > 1
    return n


def compare_set(topo: Topology, fraction: float, seed: int, threshold: float, *,
                max_links: int = O.MAX_LINKS, max_work: int = O.MAX_WORK) -> dict:
    """One fault set: the fast checker (``decide``, what ``faults monitor`` runs, reasons and
    all) and the optimizer on the same rates."""
    sched = topo.schedule
    plan = corropt.corrupt_links(topo, fraction, seed)
    rates = corropt.plan_rates(plan, topo)
    t = time.process_time()
    ds = M.decide(sched, rates, threshold)
    t_checker = time.process_time() - t
    t = time.process_time()
    res = O.optimise(sched, rates, threshold, max_links=max_links, max_work=max_work)
    t_opt = time.process_time() - t
    checker_off = M.disabled_links(ds)
    checker_kept = [d.link for d in ds if d.action == "keep"]
    # Where the two differ (links named "rotor:rack"): small, and enough to replay a set.
    only = sorted(set(checker_off) ^ set(res.disabled))
    return {
        "seed": seed, "links": sum(len(r.ports) for r in topo.rotors), "lossy": len(rates),
        "candidates": len(ds),
        "checker": {"disabled": len(checker_off), "kept": len(checker_kept),
                    "penalty_kept": O.penalty(rates, checker_kept),
                    "violations": violations(sched, checker_off), "time_s": round(t_checker, 6)},
        "optimiser": {"disabled": len(res.disabled), "kept": len(res.kept), "penalty_kept": res.penalty_kept,
                      "violations": violations(sched, res.disabled), "time_s": round(t_opt, 6),
                      "optimal": res.optimal, "reason": res.reason, "safe": res.safe,
                      "in_danger": res.in_danger, "nodes": res.nodes, "work": res.work, "checks": res.checks,
                      "cache_hits": res.cache_hits, "cache_size": res.cache_size},
        "differ": {"checker_only": [f"{r}:{k}" for r, k in only if (r, k) in checker_off],
                   "optimiser_only": [f"{r}:{k}" for r, k in only if (r, k) not in checker_off]},
    }


def compare(topos: list[tuple[str, Topology]], fractions: list[float], sets: int, seed: int,
            threshold: float, **limits) -> dict:
    """Every topology x fraction: ``sets`` fault sets, seeds ``seed`` .. ``seed + sets - 1``."""
    groups = []
    for name, topo in topos:
        for fraction in fractions:
            rows = [compare_set(topo, fraction, seed + i, threshold, **limits) for i in range(sets)]
            groups.append({"topology": name, "kind": topo.schedule.kind, "racks": topo.schedule.racks,
                           "rotors": len(topo.schedule.rotors), "fraction": fraction,
                           "summary": summarise(rows), "sets": rows})
    return {"threshold": threshold, "penalty": "sum of the kept links' loss rates, I(f) = f [Zhuo19 §3.6.1]",
            "groups": groups}


def summarise(rows: list[dict]) -> dict:
    def col(who: str, key: str) -> list:
        return [r[who][key] for r in rows]

    def better(r: dict) -> bool:
        return r["optimiser"]["penalty_kept"] < r["checker"]["penalty_kept"] * (1 - 1e-9)

    def saved(r: dict) -> float:
        c = r["checker"]["penalty_kept"]
        return 1 - r["optimiser"]["penalty_kept"] / c if c else 0.0

    return {
        "sets": len(rows), "candidates_mean": statistics.fmean(r["candidates"] for r in rows),
        **{f"{who}_{k}": v for who in ("checker", "optimiser") for k, v in (
            ("kept_mean", statistics.fmean(col(who, "kept"))),
            ("penalty_kept_total", math.fsum(col(who, "penalty_kept"))),
            ("violations_total", sum(col(who, "violations"))),
            ("time_s_median", statistics.median(col(who, "time_s"))),
            ("time_s_max", max(col(who, "time_s"))))},
        "optimiser_better_sets": sum(map(better, rows)),
        "penalty_saved_max": max(map(saved, rows)),
        "optimiser_worse_sets": sum(r["optimiser"]["penalty_kept"] > r["checker"]["penalty_kept"] * (1 + 1e-9)
                                    for r in rows),
        "optimal_sets": sum(col("optimiser", "optimal")),
        "in_danger_max": max(col("optimiser", "in_danger")),
        "nodes_max": max(col("optimiser", "nodes")),
        "work_max": max(col("optimiser", "work")),
    }


def dumps(doc: dict) -> str:
    """``doc`` as JSON, one line per fault set (a results file stays small and diffable)."""
    rows = {id(r): json.dumps(r, separators=(",", ":")) for g in doc["groups"] for r in g["sets"]}
    marked = {**doc, "groups": [{**g, "sets": [f"@{id(r)}@" for r in g["sets"]]} for g in doc["groups"]]}
    text = json.dumps(marked, indent=1)
    for k, line in rows.items():
        text = text.replace(f'"@{k}@"', line)
    return text + "\n"


def _saved(s: dict) -> str:
    return f" ({s['penalty_saved_max']:.1%})" if s["optimiser_better_sets"] else ""


def _ms(s: float) -> str:
    return f"{s * 1000:.0f}" if s >= 0.01 else f"{s * 1000:.1f}"


def table(doc: dict) -> str:
    """The markdown table of a ``compare`` document (what docs/faults.md shows, verbatim)."""
    head = ("| topology | lossy share | sets | candidates (mean) | links kept (mean): checker / optimiser "
            "| penalty kept (sum): checker / optimiser | sets the optimiser does better (its best saving) "
            "| violations: checker / optimiser | CPU time to decide, median (max) ms: checker / optimiser "
            "| optimal |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for g in doc["groups"]:
        s = g["summary"]
        lines.append(
            f"| {g['topology']} ({g['kind']} {g['racks']}x{g['rotors']}) | {g['fraction']:g} | {s['sets']} "
            f"| {s['candidates_mean']:.1f} | {s['checker_kept_mean']:.2f} / {s['optimiser_kept_mean']:.2f} "
            f"| {s['checker_penalty_kept_total']:.3g} / {s['optimiser_penalty_kept_total']:.3g} "
            f"| {s['optimiser_better_sets']}{_saved(s)} | {s['checker_violations_total']} / {s['optimiser_violations_total']} "
            f"| {_ms(s['checker_time_s_median'])} ({_ms(s['checker_time_s_max'])}) / "
            f"{_ms(s['optimiser_time_s_median'])} ({_ms(s['optimiser_time_s_max'])}) "
            f"| {s['optimal_sets']}/{s['sets']} |")
    return "\n".join(lines) + "\n"
