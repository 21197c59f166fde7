"""Do short flows pay for the bulk beside them?  An fct run's one-packet low-latency flows (Opera),
by the path they met and by what bulk was running when each began (docs/notes/alone-baseline.md).  A diagnostic, not a test.

A one-packet TCP flow's FCT (its sender's issue to the kernel's receive stamp, as the run judged
it) is put in one of four groups by the bulk flows in progress at its issue (a bulk flow runs
from its start to its FCT as the run recorded it):

* ``host``: its own sending host had a bulk flow of its own going (that host's agent frames go
  first on its shaped link; with the rack's hosts sharing its circuits, up to twice a plane's);
* ``racks``: a bulk flow began or ended at its source or destination rack;
* ``elsewhere``: bulk ran only between other racks (RotorLB relays through every rack);
* ``none``: no bulk flow ran anywhere.

Within one run the groups met the same machine, so they compare; between runs (sessions) the
machine itself moves a one-packet flow's median by up to ~0.5 ms.  Path classes as the run's
judge makes them (``workload/paths.py: PathKeys``): rack hops there-back in the slice where the
flow began.

    .venv/bin/python scripts/beside_bulk.py RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import json
import statistics as st
import sys
from pathlib import Path

from p4rotor import schedule as S
from p4rotor.schedule import routes as R
from p4rotor.workload import flowlist
from p4rotor.workload.paths import PathKeys, arrival_ns

MSS = 1460
GROUPS = ("none", "elsewhere", "racks", "host")


def _logs(d: Path) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """(start ns, issued ns) per flow its sender logged, and its arrival ns per flow received."""
    sent, got = {}, {}
    for f in d.glob("[rt]x-*.jsonl"):
        for line in f.read_text().splitlines():
            x = json.loads(line)
            if f.name.startswith("tx-"):
                sent[x["id"]] = (x["start_ns"], x["issued_ns"])
            else:
                got[x["id"]] = arrival_ns(x)
    return sent, got


def groups(run: Path) -> tuple[bool, dict[tuple[str, str], list[float]]]:
    """Whether the run's racks shared their circuits, and the one-packet flows' FCTs in ms per
    (path class, group)."""
    r = json.loads((run / "fct.json").read_text())
    m = r["modes"]["opera"]
    flows, meta = flowlist.read(str(run / "flows.json"))
    by_id = {f.id: f for f in flows}
    rack = {h: v["rack"] for h, v in meta["hosts"].items()}
    ds = S.load(run / "run" / "schedule.json")
    clock = R.PathClock(ds, R.compute(ds, epsilon_us=(r.get("epsilon_us") or 0.0) * r.get("dilation", 100.0)))
    key = PathKeys(clock, json.loads((run / "run" / "status.json").read_text())["t0_ns"], rack)
    sent, got = _logs(run / "opera")
    # The list's times are seconds from the run's epoch; every sender logged its flows' planned
    # start in ns, so the epoch is their difference (the same for all, up to rounding).
    epoch = st.median(s - by_id[i].start * 1e9 for i, (s, _) in sent.items())
    bulk = [(by_id[fid], epoch + by_id[fid].start * 1e9, epoch + (by_id[fid].start + fct) * 1e9)
            for fid, cls, _, fct, *_ in m["per_flow"] if cls == "bulk" and fct is not None]
    out: dict[tuple[str, str], list[float]] = {}
    for fid, (_, issued) in sent.items():
        f = by_id[fid]
        if f.size > MSS or fid not in got:
            continue
        on = [b for b, t0, t1 in bulk if t0 <= issued < t1]
        ends = {rack[f.src], rack[f.dst]}
        g = ("host" if any(b.src == f.src for b in on) else
             "racks" if any(rack[b.src] in ends or rack[b.dst] in ends for b in on) else
             "elsewhere" if on else "none")
        out.setdefault((str(key(rack[f.src], rack[f.dst], issued)), g), []).append((got[fid] - issued) / 1e6)
    return bool(r.get("shared_circuits")), out


def report(run: Path) -> None:
    shared, out = groups(run)
    print(f"{run}: {'the rack shares its circuits' if shared else 'a plane per host'}; one-packet flows, "
          "FCT median / mean ms (flows), by what bulk ran when each began")
    for path in sorted({p for p, _ in out}):
        print(f"  path {path}: " + "; ".join(
            f"{g} {st.median(v):.2f} / {st.mean(v):.2f} ({len(v)})" for g in GROUPS if (v := out.get((path, g)))))
    every = {g: [x for (_, gg), v in out.items() if gg == g for x in v] for g in GROUPS}
    print("  every path: " + "; ".join(f"{g} {st.median(v):.2f} / {st.mean(v):.2f} ({len(v)})"
                                       for g, v in every.items() if v))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="One-packet flows of fct runs, by the bulk running when each began.")
    ap.add_argument("runs", nargs="+", metavar="RUN", help="an fct run's directory (results/fct/NAME)")
    for run in ap.parse_args(argv).runs:
        if not (Path(run) / "fct.json").is_file():
            ap.error(f"{run}: no fct.json (a directory p4rotor experiment fct wrote)")
        report(Path(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
