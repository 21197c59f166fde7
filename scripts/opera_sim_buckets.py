"""Opera's own FCT results ([Opera20] NSDI'20, Figures 7 and 9) in p4rotor's FCT buckets.

Reads, from a bare git mirror of the authors' simulator repo (TritonNetworking/opera-sim), every raw
htsim output of Figures 7 (Datamining) and 9 (Websearch) in the snapshot (``<figure>/<network>/sim/
FCT_*.txt``: ``FCT src dst bytes fct_ms start_ms`` per finished flow), the flow file and -simtime of
each run (its ``sim/run.sh``: they count flows that never finished) and the flow-size CDFs
(``Figure1_traffic/*.csv``).  Where a .txt is absent (Datamining 25 %, Websearch hybrid 5/10 %) and
scipy is importable, it reads instead the plotters' copy, ``plot/FCT_<load>perc*.mat`` (``data_fct``:
the same per-flow rows, src dst bytes fct_ms start_ms, saved by process_FCT_and_UTIL.m), and the
``*_prio_avg.mat`` aggregates (``FCTs99_avg``: per-size p99 in ms averaged over the prio runs, what the
plotters draw).  Writes per figure, load and network: p4rotor's buckets (workload/fct.py,
real-system bytes, as the simulated ones are) per class -- flows, unfinished, FCT mean and p99 (nearest
rank as p4rotor's stats.percentile) in µs of the simulated 10 Gb/s network -- and ``paper_statistic``,
what the authors' Matlab plotters draw at each CDF size from the runs they use.  Why: to print p4rotor's
FCTs beside the paper's, from the authors' data rather than read off log-log plots.  Standard library,
plus scipy imported only if present: without it the ``.mat`` files are listed as missing "(needs scipy)",
as are the files absent from the snapshot.
"""

import argparse
import importlib.metadata
import importlib.util
import io
import json
import math
import posixpath
import re
import shlex
import subprocess
import sys
from collections import Counter
from statistics import fmean as mean
from pathlib import Path

BUCKETS = (("<100KB", 0, 100_000), ("100KB-10MB", 100_000, 10_000_000), (">10MB", 10_000_000, math.inf))
CUTOFF = 15_000_000   # Datamining: Opera's -cutoff (NDP below, RotorLB at or above) and the prio runs' limit
FIGS = {"Figure7_datamining": ("7", "datamining"), "Figure9_websearch": ("9", "websearch")}
NETS = {"opera": "opera", "3to1_clos": "clos-3to1", "u7_expander": "expander-u7"}
SIM = re.compile(r"(Figure7_datamining|Figure9_websearch)/(\w+)/sim/FCT_\w*?_(\d+)perc(\w*)\.txt$")
MAT = re.compile(r"(Figure7_datamining|Figure9_websearch)/(\w+)/plot/FCT_(\d+)perc\w*\.mat$")
# Prio runs a plotter uses where not all (else FCT_<load>perc_prio_avg.mat: the runs' per-size p99s
# averaged, process_FCT_prio_avg.m; the Clos 10 % one equals the mean over runs 1-4 to 1 ns).
PRIO_PLOTTED = {("clos-3to1", 1): [1], ("expander-u7", 1): [1], ("expander-u7", 10): [1]}
STATS = {"mean": "mean", "p99": "p99 = sort()(round(.99 n)), 1-based", "p95": "p95 = sort()(round(.95 n)), 1-based"}
NOTES = [
    "'flows' = FCT lines + 'unfinished' (flows of those sizes in the run's flow file, run.sh's -flowfile, that printed "
    "no FCT line), as p4rotor counts. sim_ms: the last Util line's time, run.sh's -simtime.",
    "run.sh appends (>>) but each .txt holds one run (Util times never go back). No FCT line is dropped or de-duplicated, "
    "as process_FCT_and_UTIL.m keeps all; flows are matched to the CDF sizes exactly.",
    "Classes: Datamining < 15e6 B low-latency (Opera: NDP, indirect), >= 15e6 B bulk (RotorLB, direct). Websearch: all "
    "low-latency (Opera ran -cutoff 30000000, 5-path topology; the largest flow is 28,589,215 B). Clos, expander and the "
    "hybrid's 6:1 Clos carry every flow with NDP, classed by the same size rule. Non-hybrid RotorNet (-cutoff 0): bulk.",
    "Datamining clos-3to1/expander-u7 'ideal-prio' (the paper's solid lines): flows < 15 MB from the prio runs (the network "
    "rerun with only those flows; prio_runs: those the plotter uses), >= 15 MB from the ordinary run. Several prio runs: "
    "each statistic is the mean of the runs' ('runs'), flows their sum. 'no-prio': the ordinary run (dashed lines).",
    "Datamining rotornet-hybrid: low-latency = the 6:1 packet Clos run; bulk = Opera's run x 6/5 (the plotter loads Opera's "
    "FCT_<load>perc.mat, the same blob, scaled for 5 of 6 rotor uplinks). It multiplies the whole vector by 6/5 inside its "
    "size loop, so the size-k point drawn carries (6/5)^(non-empty sizes >= k): paper_statistic reproduces that; the "
    "buckets scale by 6/5 once.",
    "from 'mat': the run's .txt (key 'txt') is absent; its rows are the plotters' .mat data_fct (process_FCT_and_UTIL.m "
    "saves every FCT line; where both are present they are identical). It has no Util lines: sim_ms[0] is null and that "
    "it holds one run is not checked. Their flow files are absent too, so 'unfinished' is null.",
    "prio_avg_us: the *_prio_avg.mat's FCTs99_avg (per-size p99 of the prio runs, averaged; sizes < 15 MB), which the "
    "plotters draw at loads >= 10 % (at 1 % they draw the prio run's means). A point with no buckets holds only that.",
]


def git(mirror: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", mirror, *args], capture_output=True, check=True).stdout


class Repo:
    def __init__(self, mirror: str):
        self.mirror, self.present, self.blob = mirror, {}, {}
        for line in git(mirror, "ls-tree", "-r", "-l", "HEAD").decode().splitlines():
            meta, path = line.split("\t", 1)
            self.present[path], self.blob[path] = meta.split()[3].isdigit(), meta.split()[2]   # absent: size "BAD"
        self.commit = git(mirror, "rev-parse", "HEAD").decode().strip()

    def text(self, path: str) -> str:
        return git(self.mirror, "show", f"HEAD:{path}").decode()

    def mat(self, path: str) -> dict:
        import scipy.io   # optional: only the .mat files need it
        return scipy.io.loadmat(io.BytesIO(git(self.mirror, "show", f"HEAD:{path}")))

    def run(self, path: str, mat: str | None = None) -> dict:
        """One sim output (or its .mat copy): (size, FCT µs) rows, and the sizes its flow file offered."""
        rows, runs, last = [], 1, -1.0
        if mat:
            rows = [(int(s), f * 1e3) for s, f in self.mat(mat)["data_fct"][:, 2:4].tolist()]
        for f in map(str.split, self.text(path).splitlines() if not mat else []):
            if f[:1] == ["FCT"]:
                rows.append((int(f[3]), float(f[4]) * 1e3))
            elif f[:1] == ["Util"]:                  # Util <fraction> <time_ms>
                runs, last = runs + (float(f[2]) < last), float(f[2])
        simdir, flowfile, simtime = posixpath.dirname(path), None, None
        for line in self.text(simdir + "/run.sh").splitlines():
            m = re.search(r"-simtime (\S+) .*-flowfile (\S+) >>? (\S+)", line)
            if m and m[3] == posixpath.basename(path):
                simtime, cand = float(m[1]) * 1e3, posixpath.normpath(posixpath.join(simdir, m[2]))
                if cand not in self.present:   # named beside sim/, stored in traffic_gen/
                    net, base = posixpath.dirname(simdir) + "/", "/" + posixpath.basename(m[2])
                    cand = next((p for p in self.present if p.startswith(net) and p.endswith(base)), None)
                flowfile = cand if cand and self.present[cand] else f"{m[2]} (named in run.sh; not in the snapshot)"
        offered = Counter(int(x.split()[2]) for x in self.text(flowfile).splitlines() if x.strip()) if flowfile in self.present else None
        return {"file": mat or path, "rows": rows, "done": Counter(s for s, _ in rows), "offered": offered, "runs": runs,
                "src": {"from": "mat" if mat else "txt", **({"txt": path} if mat else {}), "flow_file": flowfile,
                        "sim_ms": [None if mat else last, simtime and round(simtime, 3)]}}


def mat_of(m: re.Match) -> str:
    """The plotters' .mat copy of the sim output SIM matched (process_FCT_and_UTIL.m's matname)."""
    rest = ("_prio" if m[1] == "Figure7_datamining" else "_cwnd10") if "6to1" in m[0] else m[4]
    return f"{m[1]}/{m[2]}/plot/FCT_{m[3]}perc{rest}.mat"


def buckets(parts: list[tuple]) -> list[dict]:
    """parts: (runs, keep(size), class(size), scale).  Several runs: the mean of their statistics."""
    out = []
    for runs, keep, cls_of, scale in parts:
        for cls in ("low-latency", "bulk"):
            for name, lo, hi in BUCKETS:
                ok = lambda s: keep(s) and cls_of(s) == cls and lo <= s < hi
                xs = [sorted(f * scale for s, f in r["rows"] if ok(s)) for r in runs]
                unf = [r["offered"] and sum(max(0, n - r["done"][s]) for s, n in r["offered"].items() if ok(s)) for r in runs]
                if not any(xs) and not any(unf):
                    continue
                got = [x for x in xs if x]
                out.append({"class": cls, "bucket": name, "flows": sum(map(len, xs)) + sum(u or 0 for u in unf),
                            "unfinished": None if None in unf else sum(unf),
                            "fct_mean_us": round(mean([mean(x) for x in got]), 3) if got else None,
                            "fct_p99_us": round(mean([x[round(.99 * (len(x) - 1))] for x in got]), 3) if got else None,  # p4rotor's
                            **({"runs": len(runs)} if len(runs) > 1 else {})})
    return out


def paper(sizes: list[int], segs: list[tuple], stat: str, note: str | None = None) -> dict:
    """segs: (runs, keep(size), factor(size)): each size's source, as the plotter takes it.  Several
    runs: their values averaged, a run without flows of that size counting 0 (FCTs99 stays 0)."""
    vals = {}
    for runs, keep, factor in segs:
        for size in filter(keep, sizes):
            xs = [sorted(f for s, f in r["rows"] if s == size) for r in runs]
            if any(xs):
                # Matlab: temp=sort(x); temp(round(p*n)), 1-based, round half away from 0
                v = [0.0 if not x else mean(x) if stat == "mean" else x[max(0, math.floor(int(stat[1:]) / 100 * len(x) + .5) - 1)] for x in xs]
                vals[str(size)] = round(mean(v) * factor(size), 3)
    return {"statistic": STATS[stat], "values_us": vals, **({"note": note} if note else {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", required=True, help="bare git dir of TritonNetworking/opera-sim (or its parent)")
    ap.add_argument("--output", required=True, type=Path)
    a = ap.parse_args()
    mirror = next((str(p) for p in (Path(a.mirror), Path(a.mirror) / "repo") if (p / "HEAD").is_file()), a.mirror)
    repo, files, missing, aggs = Repo(mirror), {}, [], {}
    scipy = importlib.util.find_spec("scipy") and importlib.metadata.version("scipy")   # optional, for the .mat files
    for path, here in sorted(repo.present.items()):
        if m := SIM.match(path):
            if not here and not (scipy and repo.present.get(mat_of(m))):
                missing.append({"file": path, "why": "absent from the snapshot (a blob of >= 4 MiB not mirrored)"})
                continue
            rest = m[4]
            role = "RLBonly" if "RLBonly" in rest else "6to1" if "6to1" in path else rest[-1] if "_prio_" in rest else "main"
            files[(m[1], m[2], int(m[3]), role)] = repo.run(path, None if here else mat_of(m))
    txt = {k[:3] for k, r in files.items() if r["src"]["from"] == "txt"}
    read = {repo.blob[r["file"]] for r in files.values() if r["src"]["from"] == "mat"}   # hybrid FCT_*perc.mat = Opera's
    for path, here in sorted(repo.present.items()):   # the .mat files of loads with no .txt in the snapshot
        if not (m := MAT.match(path)):
            continue
        if here and scipy and path.endswith("_prio_avg.mat"):
            aggs[(m[1], m[2], int(m[3]))] = path
        elif (m[1], m[2], int(m[3])) not in txt and repo.blob[path] not in read:
            missing.append({"file": path, "why": ("present, not read" + ("" if scipy else " (a .mat needs scipy)") +
                                                  "; this load's only data here") if here else "absent from the snapshot"})
    sizes = {fig: [int(x.split(",")[0]) for x in repo.text(f"Figure1_traffic/{wl}.csv").split()] for fig, (_, wl) in FIGS.items()}
    every, small, large, one = (lambda s: True), (lambda s: s < CUTOFF), (lambda s: s >= CUTOFF), (lambda s: 1.0)
    points = []
    for (fig, net, load, role), run in sorted(files.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1], kv[0][3])):
        num, wl = FIGS[fig]
        cls = (lambda s: "low-latency") if wl == "websearch" else (lambda s: "low-latency" if s < CUTOFF else "bulk")
        stat, base = ("mean" if load == 1 else "p99"), {"figure": num, "workload": wl, "load": load / 100}
        src = {"file": run["file"], **run["src"]}
        lone = role == "1" and (fig, net, load, "main") not in files   # prio runs whose ordinary run is absent
        if role == "main" or lone or (role == "6to1" and wl == "websearch"):   # the hybrid's Websearch runs: its 6:1 Clos
            name = NETS.get(net, "rotornet-hybrid")
            prio = [files[k] for k in sorted(files) if k[:3] == (fig, net, load) and k[3].isdigit()]
            if prio:
                want = PRIO_PLOTTED.get((name, load), range(1, len(prio) + 1))
                used = [files[k] for i in want if (k := (fig, net, load, str(i))) in files]
                bulk = [] if lone else [([run], large)]
                points.append({**base, "network": name, "variant": "ideal-prio", **({"file": None, "from": run["src"][
                                   "from"], "partial": "the ordinary run is absent: no flows >= 15 MB"} if lone else src),
                               "prio_runs": [r["file"] for r in used],
                               "prio_runs_not_plotted": [r["file"] for r in prio if r not in used],
                               "buckets": buckets([(used, small, cls, 1.0)] + [(*b, cls, 1.0) for b in bulk]),
                               "paper_statistic": paper(sizes[fig], [(used, small, one)] + [(*b, one) for b in bulk], stat)})
            if lone:
                continue
            note = ("at 1 % the dashed line re-draws the prio run's means: only this run's sizes >= 15 MB are "
                    "drawn (solid)") if prio and load == 1 else None
            cut = {"opera": 30_000_000 if wl == "websearch" else CUTOFF}.get(name)
            points.append({**base, "network": name, **({"variant": "no-prio"} if prio else {}), **src,
                           **({"cutoff_bytes": cut} if cut else {}), "buckets": buckets([([run], every, cls, 1.0)]),
                           "paper_statistic": paper(sizes[fig], [([run], every, one)], stat, note)})
        elif role == "RLBonly":
            points.append({**base, "network": "rotornet", **src, "cutoff_bytes": 0,
                           "buckets": buckets([([run], every, lambda s: "bulk", 1.0)]),
                           "paper_statistic": paper(sizes[fig], [([run], every, one)], "p95") if load == 1 else
                           {"note": "not plotted: the plotters draw non-hybrid RotorNet at 1 % load only"}})
        elif role == "6to1":
            if (op := files.get((fig, "opera", load, "main"))) is None:
                missing.append({"point": f"{wl} {load} % rotornet-hybrid", "why": "its bulk part, Opera's run, is absent"})
                continue
            nonempty = [s for s in sizes[fig] if op["done"][s]]
            comp = lambda s: 1.2 ** sum(1 for t in nonempty if t >= s)
            points.append({**base, "network": "rotornet-hybrid", **src, "bulk_file": op["file"],
                           "buckets": buckets([([run], small, cls, 1.0), ([op], large, cls, 1.2)]),
                           "paper_statistic": paper(sizes[fig], [([run], small, one), ([op], large, comp)], stat)})
    for p in points:
        p["flows"] = sum(b["flows"] for b in p["buckets"])
        p["unfinished"] = None if any(b["unfinished"] is None for b in p["buckets"]) else sum(b["unfinished"] for b in p["buckets"])
    for (fig, net, load), path in sorted(aggs.items()):   # FCTs99_avg: aggregates only
        (num, wl), name = FIGS[fig], NETS.get(net, "rotornet-hybrid")
        vals = {str(s): round(x * 1e3, 3) for s, x in zip(sizes[fig], repo.mat(path)["FCTs99_avg"].ravel().tolist()) if x}
        hit = [p for p in points if (p["figure"], p["network"], p["load"]) == (num, name, load / 100)
               and p.get("variant", "ideal-prio") == "ideal-prio"]
        for p in hit:
            p["paper_statistic"].update(prio_avg_file=path, prio_avg_us=vals)
        if not hit:
            points.append({"figure": num, "workload": wl, "load": load / 100, "network": name, "file": path, "from": "mat",
                           "buckets": [], "flows": None, "unfinished": None, "paper_statistic": {
                               "statistic": STATS["p99"], "values_us": vals, "from": "FCTs99_avg",
                               "note": "this .mat holds only aggregates (the plotted p99 per size < 15 MB of the 6:1 Clos "
                                       "prio run); its rows and Opera's run (the bulk part) are absent: no buckets"}})
    multi = sorted(r["file"] for r in files.values() if r["runs"] != 1)
    exe = sys.executable if scipy else "python3"
    out = {"source": {"repo": "https://github.com/TritonNetworking/opera-sim", "commit": repo.commit,
                      "paper": "[Opera20] NSDI'20 Figures 7 and 9", "command": shlex.join([exe, *sys.argv]),
                      "scipy": scipy or None, "command_note": "run with scipy (a venv outside the repo, e.g. "
                      "/tmp/scipy-venv) to read the .mat files; plain python3 (stdlib only) gives the rest, listing "
                      "them as missing (needs scipy)"},
           "units": "FCT in microseconds of the simulated 10 Gb/s network",
           "notes": NOTES + ([f"files holding more than one run: {multi}"] if multi else []),
           "points": points, "missing": missing}
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(points)} points, {len(missing)} missing -> {a.output}")


if __name__ == "__main__":
    main()
