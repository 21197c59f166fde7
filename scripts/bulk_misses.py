"""The bulk flows of an fct run that took longer than issue #14's bound, and what ran beside each
(docs/notes/bulk-bound.md).  A diagnostic, not a test.

The bound (``workload/bound.py: bulk_bound_s``) is one flow's: its bytes at its host's access rate
while circuits are up, plus the wait for capacity.  A flow beside another bulk flow shares
something with it; this says what, nearest first, and for what share of the flow's life:

* ``src host`` / ``dst host``: the other flow left the same host or went to the same host, so the
  two shared that host's access link (no fabric gives either the whole rate the bound assumes);
* ``host back``: the other flow went the other way through one of the flow's hosts (into its
  source, out of its destination): the same agent relays, sends and receives both;
* ``src rack`` / ``dst rack``: the same source or destination rack, other hosts (the rack's
  circuits are shared between its hosts); ``rack back``: one of its racks, the other way;
* ``elsewhere``: between other racks (RotorLB relays it through every rack, on circuits the
  flow's two-hop paths use too).

A share is the overlap of the two flows' lives over the flow's own (summed over the flows of
that kind, so two beside it all the time make 2.0).  At the end, every finished bulk flow is
counted once, under the nearest kind it met ("nothing": it had the fabric to itself), and how
many of each were within the bound.

    .venv/bin/python scripts/bulk_misses.py RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from p4rotor.workload import flowlist
from p4rotor.workload.bound import bulk_bound_s

KINDS = ("src host", "dst host", "host back", "src rack", "dst rack", "rack back", "elsewhere")


def _kind(f, g, rack: dict[str, int]) -> str:
    if g.src == f.src:
        return "src host"
    if g.dst == f.dst:
        return "dst host"
    if g.dst == f.src or g.src == f.dst:
        return "host back"
    if rack[g.src] == rack[f.src]:
        return "src rack"
    if rack[g.dst] == rack[f.dst]:
        return "dst rack"
    if rack[g.dst] == rack[f.src] or rack[g.src] == rack[f.dst]:
        return "rack back"
    return "elsewhere"


def judged(run: Path, mode: str = "opera") -> list[tuple]:
    """Every finished bulk flow: (flow, FCT s, FCT / bound, {kind: share of its life}), the
    slowest over its bound first."""
    r = json.loads((run / "fct.json").read_text())
    m = r["modes"][mode]
    bb = m["bulk_bound"]
    flows, meta = flowlist.read(str(run / "flows.json"))
    by_id = {f.id: f for f in flows}
    rack = {h: v["rack"] for h, v in meta["hosts"].items()}
    fct = {fid: t for fid, cls, _, t, *_ in m["per_flow"] if cls == "bulk"}
    end = {fid: by_id[fid].start + (t if t is not None else float("inf")) for fid, t in fct.items()}
    out = []
    for fid, t in fct.items():
        if t is None:
            continue
        f = by_id[fid]
        ratio = t / bulk_bound_s(f.size, bb["bulk_mbps"] * 1e6, bb["duty"], bb["wait_s"])
        beside: dict[str, float] = {}
        for oid in fct:
            if oid == fid:
                continue
            o = by_id[oid]
            x = min(end[fid], end[oid]) - max(f.start, o.start)
            if x > 0:
                k = _kind(f, o, rack)
                beside[k] = beside.get(k, 0.0) + x / t
        out.append((f, t, ratio, beside))
    return sorted(out, key=lambda x: -x[2])


def nearest(beside: dict[str, float]) -> str:
    return next((k for k in KINDS if k in beside), "nothing")


def went(a: dict) -> str:
    """What the agents said of a flow above the bound (fct.json ``bulk_bound.above``), or ""."""
    if "first_sent_s" not in a and "relayed" not in a:
        return ""
    parts = []
    if "first_sent_s" in a:
        parts.append(f"sent {a['first_sent_s']:.3f}-{a['last_sent_s']:.3f} s ({a['sent']} frames, "
                     f"{a['resent']} resent, {a['returned']} returned unsent)")
    if "relayed" in a:
        parts.append(f"{a['relayed']}/{a['frames']} relayed, the longest {a['worst_relay_slots']} slots at its relay")
    if "lost" in a:  # resent frames that arrived once
        parts.append(f"{a['lost']} lost in the fabric ({a['duplicates']} second copies dropped)")
    return "\n      agents: " + "; ".join(parts)


def _model_alone(bb: dict) -> dict[int, float]:
    """Flow -> its FCT alone in RotorLB's model as the run's fabric ran (``rotorlb_alone``), or {}."""
    ra = bb.get("rotorlb_alone") or {}
    col = 4 if ra.get("compared_with") == "rack_shared" else 3
    return {row[0]: row[col] for row in ra.get("per_flow", [])}


def _others(run: Path, f, t: float) -> int:
    """Flows of any class (the low-latency ones too) that ran while ``f`` did."""
    m = json.loads((run / "fct.json").read_text())["modes"]["opera"]
    flows, _ = flowlist.read(str(run / "flows.json"))
    by_id = {g.id: g for g in flows}
    return sum(1 for gid, _, _, gt, *_ in m["per_flow"] if gid != f.id and by_id[gid].start < f.start + t
               and f.start < by_id[gid].start + (gt if gt is not None else float("inf")))


def report(run: Path) -> None:
    every = judged(run)
    out = [x for x in every if x[2] > 1]
    bb = json.loads((run / "fct.json").read_text())["modes"]["opera"]["bulk_bound"]
    above = {a["id"]: a for a in bb.get("above", [])}
    model = _model_alone(bb)
    print(f"{run}: {len(out)} of {len(every)} finished bulk flows above the bound")
    for f, t, ratio, beside in out:
        print(f"  flow {f.id:5d} {f.src}->{f.dst} {f.size:9d} B  {t:7.2f} s  {ratio:.2f}x  beside: "
              + (", ".join(f"{k} {beside[k]:.2f}" for k in KINDS if k in beside)
                 or f"no other bulk flow ({_others(run, f, t)} flows of any class meanwhile)")
              + (f"; RotorLB alone (model) {model[f.id]:.3f} s, {1e3 * (t - model[f.id]):+.0f} ms" if f.id in model else "")
              + went(above.get(f.id, {})))
    alone = sorted(1e3 * (t - model[f.id]) for f, t, _, b in every if nearest(b) == "nothing" and f.id in model)
    if alone:
        print(f"  alone in the fabric ({len(alone)}): measured - RotorLB alone (model): least {alone[0]:+.0f} ms, "
              f"median {alone[len(alone) // 2]:+.0f} ms, most {alone[-1]:+.0f} ms"
              + (f" (next {alone[-2]:+.0f} ms)" if len(alone) > 1 else ""))
    print("  within the bound / flows, by the nearest thing each shared with another bulk flow: " + ", ".join(
        f"{k} {sum(r <= 1 for _, _, r, b in every if nearest(b) == k)}/{n}"
        for k in KINDS + ("nothing",) if (n := sum(nearest(b) == k for *_, b in every))))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Bulk flows above issue #14's bound, and what ran beside each.")
    ap.add_argument("runs", nargs="+", metavar="RUN", help="an fct run's directory (results/fct/NAME)")
    for run in ap.parse_args(argv).runs:
        p = Path(run)
        if not (p / "fct.json").is_file() or not (p / "flows.json").is_file():
            ap.error(f"{run}: no fct.json and flows.json (a directory p4rotor experiment fct wrote)")
        if "bulk_bound" not in json.loads((p / "fct.json").read_text()).get("modes", {}).get("opera", {}):
            ap.error(f"{run}: no Opera bulk bound in fct.json (a run without Opera, or judged before it)")
        report(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
