"""``p4rotor workload compare|table|merge|redivide|stability|paths``: the results of fct runs (``fct.json``,
with the run's flow list and logs beside it) from the command line.

Errors follow ``p4rotor/cli.py``'s contract: one line on stderr, exit 2, and nothing written.
"""

from __future__ import annotations

import argparse

from ..cliutil import die
from ..inputs import MALFORMED, MAX_FLOWS, MAX_HOSTS_PER_RACK, int_flag, parse_json
from . import cdf as C
from . import flowlist as FL
from .results import write_fct


def add_parsers(sw: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register the fct-results commands on ``p4rotor workload``'s subparsers."""
    c = sw.add_parser("compare", help="two fct.json results of one flow list (a replay): FCT per mode, class "
                                      "and size bucket side by side, and whether they agree within noise")
    c.add_argument("a", metavar="A/fct.json")
    c.add_argument("b", metavar="B/fct.json")
    c.add_argument("--tolerance", type=float, default=0.25,
                   help="each bucket's flow-by-flow median of B/A within this fraction of 1 (default 0.25)")
    c.add_argument("--mean-tolerance", type=float, default=None, metavar="F",
                   help="judge the means too: each bucket's mean FCT of B over A's within F of 1 (e.g. 0.05; "
                        "default: shown, not judged)")
    c.add_argument("--min-flows", type=int_flag(1, MAX_FLOWS), default=10,
                   help="buckets with fewer finished flows are shown, not judged (default 10)")
    c.set_defaults(fn=cmd_compare)

    t = sw.add_parser("table", help="fct.json results (a sweep) as one markdown table: slowdown mean and p99 "
                                    "per run (its directory), mode, class and size bucket; unstable runs say so")
    t.add_argument("results", nargs="+", metavar="RUN/fct.json")
    t.add_argument("--paper", metavar="FILE",
                   help="Opera's paper per bucket (results/fct/opera-nsdi20/buckets.json, scripts/opera_sim_buckets.py): "
                        "a third table with each run's FCTs beside the paper's at its workload and load")
    t.set_defaults(fn=cmd_table)

    mg = sw.add_parser("merge", help="fct results of one flow list, each with other modes (a mode per session), "
                                     "as one RUN directory: fct.json with every mode, and the flow list")
    mg.add_argument("runs", nargs="+", metavar="RUN[:MODES]",
                    help="directories p4rotor experiment fct (or workload merge) wrote; RUN:rotornet,packet-switch "
                         "takes only those modes of RUN (one mode of a point run again replaces it)")
    mg.add_argument("-o", "--output", required=True, metavar="DIR", help="where the merged fct.json and flows.json go")
    mg.set_defaults(fn=cmd_merge)

    rd = sw.add_parser("redivide", help="an fct run's flows divided again by another calibration (another boot, "
                                        "a quieter machine): flows below 1 and mean slowdowns under both")
    rd.add_argument("result", metavar="RUN/fct.json")
    rd.add_argument("--calibration", required=True, metavar="CALIBRATION.json",
                    help="a calibration.json of the same fabric (experiment fct --calibrate-only, or a run's own)")
    rd.set_defaults(fn=cmd_redivide)

    st = sw.add_parser("stability", help="judge an fct run's stability again from its fct.json and flows.json: "
                                         "within RotorLB's capacity (the model on the flows repeated), and "
                                         "the fabric's pending bytes against the model's; and its bulk flows "
                                         "against the low-load bound and RotorLB alone (the model)")
    st.add_argument("run", metavar="RUN",
                    help="a directory with fct.json and flows.json (p4rotor experiment fct); or a flow list "
                         "alone, before a run: is it within RotorLB's capacity on the default fabric")
    st.add_argument("--write", action="store_true",
                    help="replace the modes' stability and bulk_bound in RUN/fct.json, and draw "
                         "RUN/bulk.png (bulk FCT over the bound, beside RotorLB alone)")
    st.add_argument("--hosts-per-rack", type=int_flag(1, MAX_HOSTS_PER_RACK), default=2,
                    help="a flow list alone: its fabric's (default 2)")
    st.add_argument("--rack-shared", action="store_true",
                    help="a flow list alone: the same question for racks whose hosts share their circuits "
                         "(one RotorLB per rack) instead of a plane per host")
    st.set_defaults(fn=cmd_stability)


def run_name(path: str) -> str:
    """A result's run, as a table names it: the directory its fct.json is in
    (``results/fct/datamining-0.01/fct.json`` -> ``datamining-0.01``), never a whole path, so a
    table is the same wherever the results are."""
    import os
    from pathlib import Path

    return Path(os.path.abspath(path)).parent.name


def _fct_json(path: str) -> dict:
    try:
        d = parse_json(C.read_text(path), path, C.WorkloadError, nonfinite=True)  # results hold Infinity
    except C.WorkloadError as ex:
        die(str(ex))
    if (not isinstance(d, dict) or not isinstance(d.get("modes"), dict)
            or not all(isinstance(m, dict) for m in d["modes"].values())):
        die(f"{path}: not an fct.json (p4rotor experiment fct writes it: modes, each an object)")
    return d


def _with_sizes(r: dict, path: str) -> dict:
    """Runs made before fct.json kept each flow's size and judged stability over the arrivals:
    take the sizes and the last arrival from the run's flows.json beside it (the one-packet flows
    checks.py compares; the pending bytes while flows arrived), when it is there."""
    from pathlib import Path

    from . import stability as ST

    per = [f for m in r["modes"].values() for f in m.get("per_flow", [])]
    old_sizes = per and all(len(f) == 4 for f in per)
    old_stability = any(m.get("pending_bytes") and m.get("arrivals_s") is None for m in r["modes"].values())
    beside = Path(path).with_name("flows.json")
    if not (old_sizes or old_stability) or not beside.is_file():
        return r
    try:
        flows = FL.read(beside)[0]
    except C.WorkloadError as ex:
        die(str(ex))
    if old_sizes:
        size = {f.id: f.size for f in flows}
        for f in per:
            if f[0] in size:
                f.append(size[f[0]])
    if old_stability and flows:
        last = max(f.start for f in flows)
        for m in r["modes"].values():
            if m.get("pending_bytes") and m.get("arrivals_s") is None:
                m["arrivals_s"] = last
                m["stability"] = ST.trend([(t, b) for t, b in m["pending_bytes"] if t <= last])
                m["stable"] = not m["stability"]["rising"]
    return r


def cmd_compare(a: argparse.Namespace) -> int:
    from . import results

    if not 0 < a.tolerance < 10:
        die(f"--tolerance must be in (0, 10), got {a.tolerance:g}")
    if a.mean_tolerance is not None and not 0 < a.mean_tolerance < 10:
        die(f"--mean-tolerance must be in (0, 10), got {a.mean_tolerance:g}")
    if a.min_flows < 1:
        die(f"--min-flows must be >= 1, got {a.min_flows}")
    ra, rb = _fct_json(a.a), _fct_json(a.b)
    try:  # every line before any is printed: a malformed field is one line, not half a table
        res = results.compare(ra, rb, a.tolerance, a.min_flows, a.mean_tolerance)
        lines = _compare_lines(res, a.tolerance)
    except MALFORMED as ex:
        die(f"{a.a} / {a.b}: not fct.json results ({type(ex).__name__}: {str(ex)[:80]})")
    print("\n".join(lines))
    return 0 if res["same"] else 1


def _compare_lines(res: dict, tolerance: float) -> list[str]:
    out = [f"{'mode':<14}{'class':<12} {'bucket':<11}{'flows':>6} {'paired':>6}  {'B/A':>5}   "
           f"{'median A':>9} {'B':>9}   {'mean A':>9} {'B':>9} {'B/A':>6}   {'p99 A':>9} {'B':>9}"]

    def ms(x):
        return "-" if x is None else f"{x * 1e3:.1f}"

    for r in res["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        mean_ratio = "-" if r.get("mean_ratio") is None else f"{r['mean_ratio']:.3f}"
        mark = "" if r["judged"] else "  (not judged: few flows)"
        out.append(f"{r['mode']:<14}{r['class']:<12} {r['bucket']:<11}{r['flows']:>6} {r['paired']:>6}  {ratio:>5}   "
                   f"{ms(r['fct_p50_s'][0]):>9} {ms(r['fct_p50_s'][1]):>9}   {ms(r['fct_mean_s'][0]):>9} "
                   f"{ms(r['fct_mean_s'][1]):>9} {mean_ratio:>6}   {ms(r['fct_p99_s'][0]):>9} {ms(r['fct_p99_s'][1]):>9}{mark}")
    out.append("(FCTs in ms; B/A: the median over the flows of B's FCT / A's, flow by flow; beside the means, "
               "B's mean / A's)")
    mt = res.get("mean_tolerance")
    if res["same"]:
        out.append(f"same within noise: every judged bucket's flow-by-flow median ratio within {tolerance:.0%} of 1"
                   + (f" and its mean ratio within {mt:.0%}" if mt is not None else "") + ", the same flows finished")
    else:
        out.append("different: " + "; ".join(res["differences"] or ["nothing to compare"]))
    return out


def cmd_merge(a: argparse.Namespace) -> int:
    from pathlib import Path

    from . import results

    runs, lists = [], []
    for arg in a.runs:
        d, take = _run_and_modes(arg)
        for name in ("fct.json", "flows.json"):
            if not (d / name).is_file():
                die(f"{d}: no {name} (a directory p4rotor experiment fct wrote)")
        try:
            lists.append(FL.read(str(d / "flows.json"))[0])
        except C.WorkloadError as ex:
            die(str(ex))
        if lists[-1] != lists[0]:
            die(f"{d}: its flows.json is not {runs[0][0] if runs else d}'s: not runs of one flow list")
        r = _fct_json(str(d / "fct.json"))
        if take is not None:
            have = r.get("modes") if isinstance(r.get("modes"), dict) else {}
            if set(take) - set(have):
                die(f"{arg}: {d} has no mode {', '.join(sorted(set(take) - set(have)))} "
                    f"(it has {', '.join(sorted(have)) or 'none'})")
            r = dict(r, modes={m: v for m, v in have.items() if m in take})
        runs.append((str(d), r))
    out = Path(a.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        die(f"{out}: exists and is not an empty directory")
    try:
        res = results.merge(runs)
    except C.WorkloadError as ex:
        die(str(ex))
    out.mkdir(parents=True, exist_ok=True)
    (out / "flows.json").write_text((Path(runs[0][0]) / "flows.json").read_text())
    write_fct(out, res)
    copied = _merge_files(out, [(name, sorted(r["modes"])) for name, r in runs])
    print(f"wrote {out / 'fct.json'}: " + ", ".join(f"{m} from {n}" for n, s in res["merged_from"].items()
                                                     for m in s["modes"])
          + (f"; {', '.join(copied)}" if copied else "") + "; run.json")
    return 0


def _run_and_modes(arg: str):
    """``RUN`` or ``RUN:MODE[,MODE...]`` (a directory whose name has a colon is taken whole)."""
    from pathlib import Path

    if Path(arg).is_dir() or ":" not in arg:
        return Path(arg), None
    d, modes = arg.rsplit(":", 1)
    take = [m for m in modes.split(",") if m]
    if not take:
        die(f"{arg}: no mode after the colon (RUN:MODE[,MODE...])")
    return Path(d), take


def _merge_files(out, sources: list[tuple[str, list[str]]]) -> list[str]:
    """Beside a merged ``fct.json``: each source's plots, named by its modes (``fct-opera.png``),
    each mode's measured activity (``activity-MODE.json``), and ``run.json`` saying how the
    folder was made -- the merge's command and each source's own run.json (its command, commit
    and wall time), with the wall times summed.  ``sources``: (directory, the modes taken from
    it); a merged source gives its plots of those modes and its own sources' run.json.  Returns
    the files copied."""
    import json
    import shutil
    import sys
    from pathlib import Path

    copied, made = [], []
    for name, modes in sources:
        d, tag = Path(name), "-".join(modes)
        for plot in ("fct", "bulk", "paths"):
            src = next((f for f in (d / f"{plot}.png", d / f"{plot}-{tag}.png") if f.is_file()), None)
            if src is not None:
                shutil.copyfile(src, out / f"{plot}-{tag}.png")
                copied.append(f"{plot}-{tag}.png")
        for mode in modes:
            if (d / f"activity-{mode}.json").is_file():
                shutil.copyfile(d / f"activity-{mode}.json", out / f"activity-{mode}.json")
                copied.append(f"activity-{mode}.json")
        try:
            run = json.loads((d / "run.json").read_text())
        except (OSError, ValueError):
            run = None
        if isinstance(run, dict) and isinstance(run.get("merged_from"), list):
            # a merged source: the runs that made the modes taken from it
            for m in run["merged_from"]:
                taken = sorted(set(m.get("modes", [])) & set(modes)) if isinstance(m, dict) else []
                if taken:
                    made.append(dict(m, modes=taken))
            continue
        made.append({"run": name, "modes": modes, "run_json": run if isinstance(run, dict) else None})
    walls = [m["run_json"].get("wall_s") for m in made if m["run_json"]]
    wall = sum(walls) if walls and len(walls) == len(made) and all(isinstance(w, (int, float)) for w in walls) else None

    def common(key):
        vals = {json.dumps(m["run_json"].get(key)) if m["run_json"] else None for m in made}
        return json.loads(vals.pop()) if len(vals) == 1 and None not in vals else None

    (out / "run.json").write_text(json.dumps({
        "command": "p4rotor " + " ".join(sys.argv[1:]) if sys.argv[1:3] == ["workload", "merge"]
        else f"p4rotor workload merge {' '.join(n for n, _ in sources)} -o {out}",
        "code_commit": common("code_commit"), "results_commit": None, "target": common("target"),
        "wall_time": f"{int(wall // 60)} min {round(wall % 60)} s (the sources' sum)" if wall is not None
        else "not known (a source without run.json)",
        "wall_s": None if wall is None else round(wall, 1), "calibration": common("calibration"),
        "merged_from": made}, indent=1) + "\n")
    return copied


def cmd_stability(a: argparse.Namespace) -> int:
    from pathlib import Path

    from .judge import capacity_of, rejudge

    run = Path(a.run)
    if not run.exists():
        die(f"{run}: no such file or directory")
    if run.is_file():
        if a.write:
            die("--write: only for a run's directory (a flow list alone has no fct.json)")
        try:
            caps = capacity_of(str(run), hosts_per_rack=a.hosts_per_rack, rack_shared=a.rack_shared)
        except C.WorkloadError as ex:
            die(str(ex))
        shared = ", the rack's hosts sharing its circuits" if a.rack_shared else ""
        for mode, c in caps.items():
            print(f"{mode} (cutoff {c['cutoff_bytes']:.0f} B, {c['bulk_flows']} bulk flows{shared}): "
                  f"{'within' if c['stable'] else 'PAST'} RotorLB's capacity: {c['why']}")
        return 0
    if a.rack_shared:
        die("--rack-shared: only for a flow list alone (a run's fabric had a plane per host)")
    for name in ("fct.json", "flows.json"):
        if not (run / name).is_file():
            die(f"{run}: no {name} (a directory p4rotor experiment fct wrote)")
    r = _judged_again(run, rejudge, MALFORMED,
                      lambda ex: f"{run}: not an fct.json / flows.json pair of one run: host {ex} not in the fabric"
                      if isinstance(ex, KeyError) else
                      f"{run}: not an fct.json / flows.json pair of one run ({type(ex).__name__}: {str(ex)[:80]})")
    from .checks import checks

    bound = {name: numbers for name, _, numbers in checks(r) if name.endswith("bulk within the low-load bound")}
    for mode, m in r["modes"].items():
        print(f"{mode}: {'stable' if m.get('stable', True) else 'UNSTABLE'}: "
              f"{m.get('stability', {}).get('why', 'not judged')}")
        if f"{mode}: bulk within the low-load bound" in bound:
            print(f"{mode}: bulk within the low-load bound: {bound[f'{mode}: bulk within the low-load bound']}")
    if a.write:
        from .plots import bulk_plot

        write_fct(run, r)
        print(f"wrote {run / 'fct.json'}" + (f", {run / 'bulk.png'}" if bulk_plot(r, run / "bulk.png") else ""))
    return 0


def _judged_again(run, judge, misfits: tuple, misfit) -> dict:
    """``judge(run)`` on an fct run's directory, its fct.json checked first; a WorkloadError, or
    one of ``misfits`` (files of different runs), is one line (``misfit(ex)``) and exit 2."""
    _fct_json(str(run / "fct.json"))
    try:
        return judge(run)
    except C.WorkloadError as ex:
        die(str(ex))
    except misfits as ex:
        die(misfit(ex))


def cmd_table(a: argparse.Namespace) -> int:
    from . import results

    runs = [(run_name(p), _fct_json(p)) for p in a.results]
    try:
        doc = None if a.paper is None else parse_json(C.read_text(a.paper), a.paper, C.WorkloadError)
        runs = [(name, _with_sizes(r, p)) for (name, r), p in zip(runs, a.results)]
        lines = results.table(runs) + ["", "Issue #14's criteria, judged on these runs:", ""] + results.checks_table(runs)
        if doc is not None:
            from . import paper

            lines += [""] + paper.table(runs, doc, a.paper)
    except C.WorkloadError as ex:
        die(str(ex))
    except MALFORMED as ex:
        die(f"not fct.json results ({type(ex).__name__}: {str(ex)[:80]})")
    print("\n".join(lines))
    return 0


def cmd_redivide(a: argparse.Namespace) -> int:
    from . import redivide as RD

    run = _fct_json(a.result)
    try:
        cal = parse_json(C.read_text(a.calibration), a.calibration, C.WorkloadError)
        rows = RD.redivide(run, RD.other_calibrations(cal, a.calibration), a.result, a.calibration)
        out = RD.lines(rows)
    except C.WorkloadError as ex:
        die(str(ex))
    except MALFORMED as ex:
        die(f"{a.result}: per_flow rows are not [id, class, bucket, FCT, size, path class] "
            f"({type(ex).__name__}: {str(ex)[:80]})")
    print("\n".join(out))
    return 0
