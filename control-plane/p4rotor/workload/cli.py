"""``p4rotor workload generate`` and ``p4rotor workload show``: flow lists from the command line.

Errors follow ``p4rotor/cli.py``'s contract: one line on stderr, exit 2, and nothing written.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Sequence

from ..cliutil import die
from . import cdf as C
from . import flowlist as FL
from . import generate as G
from . import scale as SC

DEFAULT_DILATION = 100.0  # as `p4rotor run`


def _default_cycle_us() -> int:
    """The cycle of the schedule ``p4rotor run`` uses by default (opera, 8 racks, 4 rotors, 1 ms)."""
    from .. import schedule as S

    return S.generate_opera(8, 4, 1000, 100).hyperperiod_us


def _hosts_and_cycle(a: argparse.Namespace) -> tuple[list[G.Host], float | None]:
    """The hosts, and the schedule cycle (us) if a topology gives one."""
    if a.topology:
        if a.hosts_per_rack is not None:
            raise C.WorkloadError("--hosts-per-rack comes from --topology; give one or the other")
        from .. import schedule as S
        from ..schedule import topology as TP

        try:
            topo = TP.load(a.topology)
        except (TP.TopologyError, S.ScheduleError) as ex:
            raise C.WorkloadError(str(ex)) from None
        return G.topology_hosts(topo), topo.schedule.hyperperiod_us
    return G.grid_hosts(a.racks, 2 if a.hosts_per_rack is None else a.hosts_per_rack), None


def _positive(v: float | None, flag: str) -> None:
    if v is not None and not (math.isfinite(v) and v > 0):
        raise C.WorkloadError(f"{flag} must be > 0, got {v:g}")


def cmd_generate(a: argparse.Namespace) -> int:
    try:
        if not (0 < a.load < 1):
            raise C.WorkloadError(f"--load must be > 0 and < 1 (a fraction of each host's access rate), "
                                  f"got {a.load:g}")
        for v, flag in ((a.access_mbps, "--access-mbps"), (a.dilation, "--dilation"),
                        (a.real_access_gbps, "--real-access-gbps"), (a.cycle_us, "--cycle-us"),
                        (a.real_cycle_us, "--real-cycle-us"), (a.duration, "--duration")):
            _positive(v, flag)
        if a.flows is not None and a.flows < 1:
            raise C.WorkloadError(f"--flows must be >= 1, got {a.flows}")
        if a.mss < 1 or a.header_bytes < 0:
            raise C.WorkloadError("need --mss >= 1 and --header-bytes >= 0")
        FL.kind_of(a.output)  # a bad suffix before any work
        sizes = C.shipped(a.workload) if a.workload else C.load(a.cdf)
        hosts, topo_cycle = _hosts_and_cycle(a)
        access_bps = a.access_mbps * 1e6
        if a.no_scale:
            scaling = SC.Scaling(1.0, a.mss)
            cycle = real_cycle = None
        else:
            cycle = a.cycle_us or topo_cycle or _default_cycle_us()
            real_cycle = a.real_cycle_us or cycle
            scaling = SC.for_emulation(access_bps, a.dilation, cycle, a.real_access_gbps * 1e9,
                                       real_cycle, a.mss)
        w = G.generate(hosts, sizes, access_bps=access_bps, load=a.load, seed=a.seed, flows=a.flows,
                       duration_s=a.duration, scaling=scaling, mss=a.mss, header=a.header_bytes,
                       name=a.workload or a.cdf)
        w.meta["scaling"].update({"dilation": None if a.no_scale else a.dilation,
                                  "cycle_us": cycle, "real_cycle_us": real_cycle,
                                  "real_access_bps": None if a.no_scale else a.real_access_gbps * 1e9})
        w.meta["time_base"] = "seconds on the emulation's wall clock, at access_bps"
        FL.write(a.output, w.flows, w.meta)
    except C.WorkloadError as ex:
        die(str(ex))
    print("\n".join(summary(w.flows, w.meta)))
    print(f"wrote {a.output}: {len(w.flows)} flows", file=sys.stderr)
    return 0


def _pct(sorted_sizes: Sequence[int], q: float) -> int:
    """Nearest-rank percentile."""
    return sorted_sizes[max(0, math.ceil(q * len(sorted_sizes)) - 1)]


def _bytes(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} B"


def summary(flows: Sequence[G.Flow], meta: dict[str, Any], *, access_bps: float | None = None,
            hosts: int | None = None, duration_s: float | None = None) -> list[str]:
    """Lines describing a flow list; options override what ``meta`` records."""
    access_bps = access_bps or meta.get("access_bps")
    hosts = hosts or len(meta.get("hosts") or {}) or len({f.src for f in flows} | {f.dst for f in flows})
    duration_s = duration_s or meta.get("duration_s")
    estimated = ""
    if not duration_s:  # a bare CSV: the window that, on average, holds these arrivals
        last = max(f.start for f in flows)
        duration_s = last * len(flows) / (len(flows) - 1) if len(flows) > 1 and last > 0 else None
        estimated = " (estimated from the last start)"
    mss = int(meta.get("mss", SC.MSS))
    header = int(meta.get("header_bytes", G.HEADER_BYTES))
    sizes = sorted(f.size for f in flows)
    total = sum(sizes)
    wire = sum(G.wire_bytes(s, mss, header) for s in sizes)
    out = []
    if meta.get("workload"):
        out.append(f"workload {meta['workload']} ({meta.get('cdf')}), target load {meta.get('load')}, "
                   f"seed {meta.get('seed')}")
    out.append(f"flows {len(flows)}, hosts {hosts}, window {duration_s:.6g} s{estimated}" if duration_s
               else f"flows {len(flows)}, hosts {hosts}, window unknown (give --duration)")
    out.append(f"size (payload bytes): mean {total / len(flows):.0f}, p50 {_pct(sizes, .5)}, "
               f"p90 {_pct(sizes, .9)}, p99 {_pct(sizes, .99)}, max {sizes[-1]}; total {_bytes(total)}")
    if meta.get("mean_size_bytes"):
        pct = meta.get("size_percentiles_bytes") or {}
        out.append(f"  expected from the CDF: mean {meta['mean_size_bytes']:.0f}"
                   + "".join(f", p{q} {v:.0f}" for q, v in pct.items())
                   + f"; wire {meta['mean_wire_bytes']:.0f} bytes per flow "
                   f"(headers {header} B per {mss}-byte packet)")
    if duration_s:
        rate = len(flows) / duration_s / hosts
        target = meta.get("flows_per_s_per_host")
        out.append(f"arrivals {rate:.4g} flows/s per host" + (f" (target {target:.4g})" if target else ""))
    if access_bps and duration_s:
        load = wire * 8 / (hosts * access_bps * duration_s)
        out.append(f"offered load {load:.3f} of {access_bps / 1e6:g} Mb/s per host (headers counted)")
    else:
        out.append("offered load unknown (give --access-mbps)")
    sc = meta.get("scaling")
    if sc:
        out.append(f"size scaling x{sc['factor']:.4g}"
                   + (f" (emulated cycle {_bytes(sc['emulated_cycle_bytes'])} / real {_bytes(sc['real_cycle_bytes'])})"
                      if sc.get("real_cycle_bytes") else "")
                   + f"; clamped to one packet: {sc['clamped_share']:.2%} of flows "
                   f"(expected {sc['expected_clamped_share']:.2%})")
    else:
        out.append("size scaling not recorded (a CSV list carries no metadata)")
    return out


def cmd_show(a: argparse.Namespace) -> int:
    try:
        for v, flag in ((a.access_mbps, "--access-mbps"), (a.duration, "--duration")):
            _positive(v, flag)
        if a.hosts is not None and a.hosts < 1:
            raise C.WorkloadError(f"--hosts must be >= 1, got {a.hosts}")
        flows, meta = FL.read(a.file)
        if not flows:
            raise C.WorkloadError(f"{a.file}: no flows")
    except C.WorkloadError as ex:
        die(str(ex))
    print("\n".join(summary(flows, meta, access_bps=a.access_mbps and a.access_mbps * 1e6,
                            hosts=a.hosts, duration_s=a.duration)))
    return 0


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``workload`` (``generate``, ``show``) on the top-level subparsers."""
    pw = sub.add_parser("workload", help="flow lists: published flow-size CDFs, Poisson arrivals at a load")
    sw = pw.add_subparsers(dest="sub", required=True)
    g = sw.add_parser("generate", help="a seeded flow list (JSON or CSV) at a target load, inter-rack pairs")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload", metavar="NAME", help=f"a shipped CDF: {', '.join(C.SHIPPED)}")
    src.add_argument("--cdf", metavar="FILE", help="your own CDF file ('size_bytes cumulative_probability' lines)")
    g.add_argument("--load", type=float, required=True,
                   help="fraction of each host's access rate, headers counted (0 < L < 1)")
    where = g.add_mutually_exclusive_group(required=True)
    where.add_argument("--racks", type=int, help="racks of hosts named as `p4rotor run` names them")
    where.add_argument("--topology", metavar="FILE", help="the hosts of this topology (and its schedule's cycle)")
    g.add_argument("--hosts-per-rack", type=int, help="with --racks (default 2)")
    g.add_argument("--access-mbps", type=float, required=True,
                   help="each host's access rate on the emulation's wall clock "
                        "(`p4rotor run --link-mbps` / --dilation)")
    n = g.add_mutually_exclusive_group(required=True)
    n.add_argument("--flows", type=int, metavar="N", help="this many flows")
    n.add_argument("--duration", type=float, metavar="S", help="every arrival in [0, S) seconds")
    g.add_argument("--seed", type=int, default=1, help="default 1")
    g.add_argument("--dilation", type=float, default=DEFAULT_DILATION,
                   help=f"the emulation's time dilation (default {DEFAULT_DILATION:g}, as `p4rotor run`)")
    g.add_argument("--real-access-gbps", type=float, default=10.0,
                   help="the real system's access rate (default 10)")
    g.add_argument("--cycle-us", type=float,
                   help="the emulated schedule's cycle before dilation (default: the --topology's schedule, "
                        "else the default `p4rotor run` schedule's, 2000)")
    g.add_argument("--real-cycle-us", type=float,
                   help="the real system's cycle (default: --cycle-us; e.g. 10800 for Opera's 108 racks)")
    g.add_argument("--no-scale", action="store_true", help="write the sampled sizes unscaled")
    g.add_argument("--mss", type=int, default=SC.MSS, help=f"payload bytes per full packet (default {SC.MSS})")
    g.add_argument("--header-bytes", type=int, default=G.HEADER_BYTES,
                   help=f"wire bytes per packet beyond the payload (default {G.HEADER_BYTES}: "
                        "Ethernet 14 + IPv4 20 + TCP 20)")
    g.add_argument("-o", "--output", required=True, metavar="OUT", help="flows.json or flows.csv")
    g.set_defaults(fn=cmd_generate)

    s = sw.add_parser("show", help="summarise a flow list: sizes, arrivals, offered load, share clamped")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--access-mbps", type=float, help="for the offered load (default: from the JSON's meta)")
    s.add_argument("--hosts", type=int, help="hosts sharing the load (default: meta, else hosts seen)")
    s.add_argument("--duration", type=float, help="the list's window in seconds (default: meta, else estimated)")
    s.set_defaults(fn=cmd_show)

    c = sw.add_parser("compare", help="two fct.json results of one flow list (a replay): FCT per mode, class "
                                      "and size bucket side by side, and whether they agree within noise")
    c.add_argument("a", metavar="A/fct.json")
    c.add_argument("b", metavar="B/fct.json")
    c.add_argument("--tolerance", type=float, default=0.25,
                   help="mean FCTs agree within this fraction (default 0.25)")
    c.add_argument("--min-flows", type=int, default=10,
                   help="buckets with fewer finished flows are shown, not judged (default 10)")
    c.set_defaults(fn=cmd_compare)

    t = sw.add_parser("table", help="fct.json results (a sweep) as one markdown table: slowdown mean and p99 "
                                    "per mode, class and size bucket; unstable runs say so")
    t.add_argument("results", nargs="+", metavar="RUN/fct.json")
    t.set_defaults(fn=cmd_table)

    mg = sw.add_parser("merge", help="fct results of one flow list, each with other modes (a mode per session), "
                                     "as one RUN directory: fct.json with every mode, and the flow list")
    mg.add_argument("runs", nargs="+", metavar="RUN", help="directories p4rotor experiment fct wrote")
    mg.add_argument("-o", "--output", required=True, metavar="DIR", help="where the merged fct.json and flows.json go")
    mg.set_defaults(fn=cmd_merge)

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
    st.add_argument("--hosts-per-rack", type=int, default=2, help="a flow list alone: its fabric's (default 2)")
    st.add_argument("--rack-shared", action="store_true",
                    help="a flow list alone: the same question for racks whose hosts share their circuits "
                         "(one RotorLB per rack) instead of a plane per host")
    st.set_defaults(fn=cmd_stability)

    pa = sw.add_parser("paths", help="an fct run's low-latency class judged again, each one-packet flow against the "
                                     "5th percentile of the one-packet FCTs on the path it met (rack hops there and back in "
                                     "the slice it began in), from the run's logs")
    pa.add_argument("run", metavar="RUN", help="a directory p4rotor experiment fct wrote, with its logs")
    pa.add_argument("--write", action="store_true",
                    help="replace Opera's low-latency summary in RUN/fct.json, and add alone_by_path, "
                         "low_latency_within_spread, low_latency_vs_fastest and low_latency_vs_floor")
    pa.set_defaults(fn=cmd_paths)


def _fct_json(path: str) -> dict:
    import json

    try:
        d = json.loads(C.read_text(path))
    except json.JSONDecodeError as ex:
        die(f"{path}: not JSON ({ex.msg}, line {ex.lineno})")
    except C.WorkloadError as ex:
        die(str(ex))
    if not isinstance(d, dict) or not isinstance(d.get("modes"), dict):
        die(f"{path}: not an fct.json (p4rotor experiment fct writes it)")
    return d


def _with_sizes(r: dict, path: str) -> dict:
    """Runs made before fct.json kept each flow's size and judged stability over the arrivals:
    take the sizes and the last arrival from the run's flows.json beside it (the one-packet flows
    :func:`.fct.checks` compares; the pending bytes while flows arrived), when it is there."""
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
    from . import fct as F

    if not 0 < a.tolerance < 10:
        die(f"--tolerance must be in (0, 10), got {a.tolerance:g}")
    if a.min_flows < 1:
        die(f"--min-flows must be >= 1, got {a.min_flows}")
    ra, rb = _fct_json(a.a), _fct_json(a.b)
    try:
        res = F.compare(ra, rb, a.tolerance, a.min_flows)
    except (KeyError, TypeError) as ex:
        die(f"{a.a} / {a.b}: not fct.json results ({type(ex).__name__}: {ex})")
    print(f"{'mode':<14}{'class':<12} {'bucket':<11}{'flows':>6} {'paired':>6}  {'B/A':>5}   "
          f"{'median A':>9} {'B':>9}   {'mean A':>9} {'B':>9}   {'p99 A':>9} {'B':>9}")

    def ms(x):
        return "-" if x is None else f"{x * 1e3:.1f}"

    for r in res["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        mark = "" if r["judged"] else "  (not judged: few flows)"
        print(f"{r['mode']:<14}{r['class']:<12} {r['bucket']:<11}{r['flows']:>6} {r['paired']:>6}  {ratio:>5}   "
              f"{ms(r['fct_p50_s'][0]):>9} {ms(r['fct_p50_s'][1]):>9}   {ms(r['fct_mean_s'][0]):>9} "
              f"{ms(r['fct_mean_s'][1]):>9}   {ms(r['fct_p99_s'][0]):>9} {ms(r['fct_p99_s'][1]):>9}{mark}")
    print("(FCTs in ms; B/A: the median over the flows of B's FCT / A's, flow by flow)")
    if res["same"]:
        print(f"same within noise: every judged bucket's flow-by-flow median ratio within {a.tolerance:.0%} of 1, "
              "the same flows finished")
        return 0
    print("different: " + "; ".join(res["differences"] or ["nothing to compare"]))
    return 1


def cmd_merge(a: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from . import fct as F

    runs, lists = [], []
    for d in map(Path, a.runs):
        for name in ("fct.json", "flows.json"):
            if not (d / name).is_file():
                die(f"{d}: no {name} (a directory p4rotor experiment fct wrote)")
        try:
            lists.append(FL.read(str(d / "flows.json"))[0])
        except C.WorkloadError as ex:
            die(str(ex))
        if lists[-1] != lists[0]:
            die(f"{d}: its flows.json is not {a.runs[0]}'s: not runs of one flow list")
        runs.append((str(d), _fct_json(str(d / "fct.json"))))
    out = Path(a.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        die(f"{out}: exists and is not an empty directory")
    try:
        res = F.merge(runs)
    except C.WorkloadError as ex:
        die(str(ex))
    out.mkdir(parents=True, exist_ok=True)
    (out / "flows.json").write_text((Path(a.runs[0]) / "flows.json").read_text())
    (out / "fct.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {out / 'fct.json'}: " + ", ".join(f"{m} from {n}" for n, s in res["merged_from"].items()
                                                     for m in s["modes"]) + "; plots stay in each run's fct.png")
    return 0


def cmd_stability(a: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..experiments.fct import capacity_of, rejudge

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
    r = _judged_again(run, rejudge, (KeyError,),
                      lambda ex: f"{run}: not an fct.json / flows.json pair of one run: host {ex} not in the fabric")
    from .fct import checks

    bound = {name: numbers for name, _, numbers in checks(r) if name.endswith("bulk within the low-load bound")}
    for mode, m in r["modes"].items():
        print(f"{mode}: {'stable' if m.get('stable', True) else 'UNSTABLE'}: "
              f"{m.get('stability', {}).get('why', 'not judged')}")
        if f"{mode}: bulk within the low-load bound" in bound:
            print(f"{mode}: bulk within the low-load bound: {bound[f'{mode}: bulk within the low-load bound']}")
    if a.write:
        from ..experiments.fct import bulk_plot

        (run / "fct.json").write_text(json.dumps(r, indent=1, default=str))
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


def cmd_paths(a: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..experiments.fct import repath
    from . import fct as F
    from .fct import checks

    run = Path(a.run)
    if not (run / "fct.json").is_file():
        die(f"{run}: no fct.json (a directory p4rotor experiment fct wrote)")
    r = _judged_again(run, repath, (KeyError, ValueError),
                      lambda ex: f"{run}: its files do not fit together ({type(ex).__name__}: {ex})")
    for mode, m in r["modes"].items():
        for k, v in sorted((m.get("alone_by_path") or {}).items()):
            print(f"{mode}: path {k}{' (rack hops there-back)' if mode == 'opera' else ''}: floor "
                  f"+{v['offset_s'] * 1e3:.2f} ms (p{v['percentile']:g}; the fastest +{v['fastest_offset_s'] * 1e3:.2f} ms; "
                  f"{v['alone_samples']} flows alone, {v['run_flows']} of the run's)")
        if mode != "opera" and m.get("alone_by_path"):
            print(f"{mode}: low-latency mean slowdown {F.class_mean(m['classes']['low-latency']):.2f} "
                  f"({m['low_latency_within_spread']} flows faster than the p5 counted at 1; against the fastest: "
                  f"{m['low_latency_vs_floor']:.2f})")
    for name, ok, numbers in checks(r):
        if name.startswith("opera: low-latency"):
            print(f"{name}: {'pass' if ok else 'FAIL' if ok is False else 'not judged'}: {numbers}")
    if a.write:
        from ..experiments.fct import paths_plot

        (run / "fct.json").write_text(json.dumps(r, indent=1, default=str))
        print(f"wrote {run / 'fct.json'}" + (f", {run / 'paths.png'}" if paths_plot(r, run / "paths.png") else ""))
    return 0


def cmd_table(a: argparse.Namespace) -> int:
    from . import fct as F

    runs = [_with_sizes(_fct_json(p), p) for p in a.results]
    try:
        print("\n".join(F.table(runs)))
        print("\nIssue #14's criteria, judged on these runs:\n")
        print("\n".join(F.checks_table(runs)))
    except (KeyError, TypeError) as ex:
        die(f"not fct.json results ({type(ex).__name__}: {ex})")
    return 0
