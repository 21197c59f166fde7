"""FCT results beside Opera's paper ([Opera20] Figures 7 and 9), bucket by bucket.

The paper plots FCT against flow size from its packet simulator (htsim): the mean at 1 % load,
the 99th percentile above.  Its text states no FCT values; its authors published the simulator's
outputs (TritonNetworking/opera-sim), which ``scripts/opera_sim_buckets.py`` puts into p4rotor's
classes and size buckets (``results/fct/opera-nsdi20/buckets.json``: per workload, load and network,
flows, FCT mean and p99 in microseconds of the simulated 10 Gb/s network).

p4rotor's FCTs are wall time at a dilation ``d``, with flow sizes scaled so that a flow's bytes
take as long at the emulated access rate as they would at 10 Gb/s times ``d``: a run's FCT over
``d`` is its FCT in the real system's time, comparable with the simulator's.  What cannot be the
same is said beside the table: p4rotor's per-hop latency is a kernel's, not 500 ns of fibre; its
flow sizes are drawn between the CDF's points, the simulator's are the points themselves.

Pure: parsed fct.json results and the parsed paper file in, markdown lines out.
"""

from __future__ import annotations

from .cdf import WorkloadError
from .fct import BUCKETS

# p4rotor's mode -> the paper's network beside it.  The packet switch is one non-blocking switch;
# the paper's nearest packet-switched network is the cost-equivalent 3:1 folded Clos.
NETWORK = {"opera": "opera", "rotornet": "rotornet", "packet-switch": "clos-3to1"}
# A static network on Data Mining has two curves; the paper's solid line (priority queueing) is this.
VARIANT = "ideal-prio"


def paper_points(doc: dict, where: str) -> dict[tuple[str, float, str], dict]:
    """(workload, load, network) -> the point's buckets, from opera-nsdi20/buckets.json."""
    try:
        out = {}
        for p in doc["points"]:
            if p.get("variant") not in (None, VARIANT):
                continue
            key = (str(p["workload"]), round(float(p["load"]), 6), str(p["network"]))
            out[key] = {(str(b["class"]), str(b["bucket"])): b for b in p["buckets"]}
        return out
    except (KeyError, TypeError, ValueError, AttributeError) as ex:
        raise WorkloadError(f"{where}: not the paper's points (scripts/opera_sim_buckets.py writes them): "
                            f"{type(ex).__name__} {ex}") from None


def source_line(doc: dict) -> str:
    src = doc.get("source") or {}
    return (f"Beside Opera's paper ({src.get('paper', '[Opera20]')}; the authors' simulator outputs, "
            f"{src.get('repo', 'opera-sim')} at {str(src.get('commit', '?'))[:7]}, put into these buckets by "
            "scripts/opera_sim_buckets.py): FCT in µs of a 10 Gb/s network, p4rotor's as its wall time over "
            "the dilation.")


def table(runs: list[tuple[str, dict]], doc: dict, where: str) -> list[str]:
    """One row per run, mode, class and bucket with a paper point at the run's workload and load:
    p4rotor's FCT mean and p99 (µs), the paper's network's, and the ratio of the means.  A point
    the authors' published outputs do not hold says so instead of numbers."""
    pts = paper_points(doc, where)
    out = [source_line(doc), "",
           "| run | mode | class, bucket | p4rotor flows | p4rotor mean µs | p99 µs | paper network | paper flows "
           "| paper mean µs | p99 µs | mean p4rotor / paper |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    order = {name: i for i, (name, _, _) in enumerate(BUCKETS)}
    for name, r in runs:
        dil = float(r.get("dilation") or 0)
        if dil <= 0:
            continue
        wl, load = str(r.get("workload")), round(float(r.get("load") or 0), 6)
        if r.get("zipf") is not None:  # a hot spot: the paper's points are all-to-all
            out.append(f"| {name} | all | all | | | | | not the paper's: destinations Zipf {r['zipf']:g} | | | |")
            continue
        for mode, m in r.get("modes", {}).items():
            net = NETWORK.get(mode)
            if net is None:
                continue
            paper = pts.get((wl, load, net))
            if paper is None:
                out.append(f"| {name} | {mode} | all | | | | {net} | not in the authors' published outputs | | | |")
                continue
            rows = sorted(((cls, b, v) for cls, per in m.get("classes", {}).items() for b, v in per.items()),
                          key=lambda x: (x[0], order.get(x[1], 9)))
            for cls, b, v in rows:
                ours = (v.get("fct_mean_s"), v.get("fct_p99_s"))
                us = [None if x is None else x / dil * 1e6 for x in ours]
                p = paper.get((cls, b))
                pm = None if p is None else (p.get("fct_mean_us"), p.get("fct_p99_us"))
                ratio = (f"{us[0] / pm[0]:.2f}" if pm and us[0] is not None and pm[0] else "-")
                out.append(f"| {name} | {mode} | {cls} {b} | {v.get('flows', '-')} | {_n(us[0])} | {_n(us[1])} | {net} | "
                           f"{'-' if p is None else p.get('flows', '-')} | {_n(pm and pm[0])} | {_n(pm and pm[1])} | {ratio} |")
    out += ["", "The paper's Data Mining static networks are its solid lines (priority queueing); Web Search "
            "carries every flow on the low-latency path there (its Opera runs' cutoff was 30 MB), where p4rotor's "
            "flows over 15 MB are bulk. p4rotor's packet switch is one non-blocking switch; the paper's "
            "nearest packet-switched network is the 3:1 folded Clos. Hops: 500 ns of fibre in the paper, "
            "a kernel's per-hop time over the dilation here."]
    return out


def _n(x) -> str:
    if x is None or x is False:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"
