"""Several ``fct.json`` results together: two runs of one flow list compared (a replay), runs of
one flow list merged (each run with other modes), and a sweep as markdown tables with issue #14's checks.

Tables name each row's run (its directory, e.g. ``datamining-0.01``) and are deterministic: the
same results give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from . import hotspot
from .cdf import WorkloadError
from .checks import checks
from .ideal import run_calibration



def write_fct(run: Path, res: dict) -> None:
    """``RUN/fct.json``: one line of JSON, no indentation (a 2000-flow run's per-flow records
    are megabytes; indented, results/ would grow by half again)."""
    (Path(run) / "fct.json").write_text(json.dumps(res, separators=(",", ":"), default=str) + "\n")

def compare(a: dict, b: dict, tolerance: float = 0.25, min_flows: int = 10,
            mean_tolerance: float | None = None) -> dict:
    """Two ``fct.json`` results of one flow list (a replay): per mode, class and size bucket, the
    mean, median and p99 FCT of both, and the median of B/A taken flow by flow (a replay runs
    the same flows: pairing them removes the spread of sizes and paths).

    "Same within noise" when every bucket both ran with at least ``min_flows`` finished flows has
    that median ratio within ``tolerance`` of 1, and both runs finished the same flows.  Means
    and p99s are shown, not judged: on this emulation a lost SYN or segment costs a 1 s TCP
    timeout, and a handful of those moves a mean by half (docs/notes/tcp-flow-timing.md).  Smaller buckets
    are shown, not judged.  ``mean_tolerance`` judges the means too: each judged bucket's mean FCT
    of B over A's (``mean_ratio``) within it of 1 (a replay's bound of 5 % asks it)."""
    if not 0 < tolerance < 10:
        raise ValueError(f"the tolerance must be in (0, 10), got {tolerance!r}")
    if mean_tolerance is not None and not 0 < mean_tolerance < 10:
        raise ValueError(f"the mean tolerance must be in (0, 10), got {mean_tolerance!r}")
    rows, off = [], []
    for mode in sorted(set(a.get("modes", {})) & set(b.get("modes", {}))):
        ma, mb = a["modes"][mode], b["modes"][mode]
        if ma.get("unfinished") != mb.get("unfinished"):
            off.append(f"{mode}: {ma.get('unfinished')} vs {mb.get('unfinished')} unfinished")
        fa = {f[0]: f for f in ma.get("per_flow", [])}
        fb = {f[0]: f for f in mb.get("per_flow", [])}
        for cls in sorted(set(ma.get("classes", {})) & set(mb.get("classes", {}))):
            for bucket in ma["classes"][cls]:
                x, y = ma["classes"][cls][bucket], mb["classes"][cls].get(bucket)
                if y is None:
                    continue
                n = min(x["flows"] - x["unfinished"], y["flows"] - y["unfinished"])
                ids = [i for i in fa if fa[i][1] == cls and fa[i][2] == bucket and i in fb
                       and fa[i][3] and fb[i][3]]
                paired = sorted(fb[i][3] / fa[i][3] for i in ids)
                ratio = paired[len(paired) // 2] if paired else None
                judged = n >= min_flows and ratio is not None
                ok = not judged or abs(ratio - 1) <= tolerance
                mean_ratio = y["fct_mean_s"] / x["fct_mean_s"] if x["fct_mean_s"] and y["fct_mean_s"] else None
                mean_ok = (mean_tolerance is None or not judged
                           or (mean_ratio is not None and abs(mean_ratio - 1) <= mean_tolerance))
                rows.append({"mode": mode, "class": cls, "bucket": bucket, "flows": n, "paired": len(paired),
                             "fct_mean_s": [x["fct_mean_s"], y["fct_mean_s"]],
                             "fct_p50_s": [x.get("fct_p50_s"), y.get("fct_p50_s")],
                             "fct_p99_s": [x["fct_p99_s"], y["fct_p99_s"]], "ratio": ratio,
                             "mean_ratio": mean_ratio, "judged": judged, "ok": ok and mean_ok})
                if not ok:
                    off.append(f"{mode} {cls} {bucket}: median FCT ratio (flow by flow) {ratio:.2f}")
                if not mean_ok:
                    shown = "-" if mean_ratio is None else f"{mean_ratio:.3f}"
                    off.append(f"{mode} {cls} {bucket}: mean FCT ratio {shown} (within {mean_tolerance:.0%} asked)")
    same_list = a.get("flows") == b.get("flows")
    if not same_list:
        off.append(f"not one flow list: {a.get('flows')} vs {b.get('flows')} flows")
    if a.get("zipf") != b.get("zipf"):
        off.append(f"not one flow list: destinations Zipf {a.get('zipf')} vs {b.get('zipf')}")
    return {"rows": rows, "tolerance": tolerance, "mean_tolerance": mean_tolerance, "min_flows": min_flows,
            "same": not off and bool(rows),
            "differences": off}


def table(results: Sequence[tuple[str, dict]]) -> list[str]:
    """Markdown rows of several ``fct.json`` results (a sweep over workloads and loads), each
    (run, result): per run, mode, class and size bucket, the flows, unfinished, slowdown mean / p99
    and FCT mean; an unstable mode says so instead of its slowdowns (a climbing queue has no steady
    slowdown).  ``run`` names the row's run (two runs of one workload and load tell apart by it)."""
    rows = ["| run | workload | load | flows | mode | class, bucket | unfinished | slowdown mean | p99 | FCT mean s |",
            "|---|---|---|---|---|---|---|---|---|---|"]

    def f(x, nd=1):
        return "-" if x is None else f"{x:.{nd}f}"

    for run, r in results:
        head = f"| {run} | {r.get('workload', '?')} | {load_cell(r)} | {r.get('flows', '?')} "
        for mode, m in r.get("modes", {}).items():
            if not m.get("stable", True):
                st = m.get("stability", {})
                why = st.get("why") or f"pending bytes climb {f(st.get('rise_bytes'), 0)} B"
                rows.append(head + f"| {mode} | all | {m.get('unfinished', '?')} | **unstable**: {why} | | |")
                continue
            for cls, per in m.get("classes", {}).items():
                for b, v in per.items():
                    rows.append(head + f"| {mode} | {cls} {b} ({v['flows']}) | {v['unfinished']} | "
                                f"{f(v['slowdown_mean'])} | {f(v['slowdown_p99'])} | {f(v['fct_mean_s'], 3)} |")
    return rows


def load_cell(r: dict) -> str:
    """A table's load column: the load, and the hot spot's exponent when the run had one
    (``0.1, Zipf 0.8``); a result without ``zipf`` (before it was recorded) was uniform."""
    return f"{r.get('load', '?')}{hotspot.label(r.get('zipf'))}"


def checks_table(results: Sequence[tuple[str, dict]]) -> list[str]:
    """:func:`checks` of several (run, result) as markdown rows, each naming its run."""
    rows = ["| run | workload | load | check | verdict | numbers |", "|---|---|---|---|---|---|"]
    for run, r in results:
        for name, ok, numbers in checks(r):
            verdict = "n/a" if ok is None else ("**pass**" if ok else "**FAIL**")
            rows.append(f"| {run} | {r.get('workload', '?')} | {load_cell(r)} | {name} | {verdict} | {numbers} |")
    return rows


# A run's own measurements of the fabric it ran on: kept per source when runs are merged, since
# each mode's slowdowns were divided by its own run's calibration.
RUN_SCOPED = ("calibration", "calibration_file", "calibration_machine", "alone_curve", "alone_one_packet_s", "alone_envelope",
              "switches_realtime", "replayed_from")


def merge(runs: Sequence[tuple[str, dict]]) -> dict:
    """Several ``fct.json`` results of ONE flow list, each with other modes (e.g. a Data Mining
    1 % point run one mode at a time: 2 h of arrivals each), as one result: the first run's
    description, every run's modes, and per source what it measured of its own fabric
    (``RUN_SCOPED``; a merged source's own sources, for the modes taken from it).  Raises :class:`~p4rotor.workload.cdf.WorkloadError` (one line) when the
    runs disagree on what they ran or two have the same mode."""
    if len(runs) < 2:
        raise WorkloadError("merge needs at least two runs")
    (first_name, first), out_modes, sources = runs[0], {}, {}
    same = ("workload", "load", "zipf", "flows", "hosts_per_rack", "access_mbps", "dilation", "scaling_factor",
            "default_cutoff_bytes")
    for name, r in runs:
        for k in same:
            if r.get(k) != first.get(k):
                raise WorkloadError(f"{name}: {k} is {r.get(k)!r}, {first_name} has {first.get(k)!r}: "
                                    "not runs of one flow list")
        for mode, m in r.get("modes", {}).items():
            if mode in out_modes:
                raise WorkloadError(f"{name}: mode {mode!r} is also in {out_modes[mode][0]}")
            # Each source divided its modes by its own calibration: it goes with them.
            cal = run_calibration(r, mode)
            if cal is not None:
                m = dict(m, calibration=cal, **{k: r[k] for k in ("calibration_file", "calibration_machine")
                                                if r.get(k) is not None and k not in m})
            out_modes[mode] = (name, m)
        if isinstance(r.get("merged_from"), dict):  # a merged point: its own sources, for the modes taken
            for sub, info in r["merged_from"].items():
                taken = sorted(set(info.get("modes", [])) & set(r.get("modes", {})))
                if taken:
                    sources[sub] = dict(info, modes=taken)
        else:
            sources[name] = {"modes": sorted(r.get("modes", {})), **{k: r.get(k) for k in RUN_SCOPED}}
    res = {k: v for k, v in first.items() if k not in RUN_SCOPED + ("modes", "verdict")}
    res["merged_from"] = sources
    res["modes"] = {mode: m for mode, (_, m) in out_modes.items()}
    return res
