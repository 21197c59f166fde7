"""``p4rotor workload generate`` and ``p4rotor workload show``: flow lists from the command line
(the commands on fct runs' results: cli_fct.py).

Errors follow ``p4rotor/cli.py``'s contract: one line on stderr, exit 2, and nothing written.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Sequence

from ..cliutil import die
from ..inputs import (MALFORMED, MAX_FACTOR, MAX_FLOWS, MAX_HOSTS, MAX_MBPS, MAX_PACKET_BYTES, MAX_START_S, MAX_TIME_US,
                      MAX_ZIPF, check_output, float_flag, show_value)
from . import cdf as C
from . import flowlist as FL
from . import generate as G
from . import scale as SC
from .cli_fct import add_parsers as add_fct_parsers

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


def _positive(v: float | None, flag: str, most: float) -> None:
    if v is not None and not (math.isfinite(v) and v > 0):
        raise C.WorkloadError(f"{flag} must be > 0, got {v:g}")
    if v is not None and v > most:
        raise C.WorkloadError(f"{flag} must be <= {most:g}, got {v:g}")


def _count(v: int | None, flag: str, least: int, most: int) -> None:
    if v is not None and not least <= v <= most:
        raise C.WorkloadError(f"{flag} must be in {least}..{most}, got {show_value(v)}")


def cmd_generate(a: argparse.Namespace) -> int:
    try:
        if not (0 < a.load < 1):
            raise C.WorkloadError(f"--load must be > 0 and < 1 (a fraction of each host's access rate), "
                                  f"got {a.load:g}")
        for v, flag, most in ((a.access_mbps, "--access-mbps", MAX_MBPS), (a.dilation, "--dilation", MAX_FACTOR),
                              (a.real_access_gbps, "--real-access-gbps", MAX_MBPS / 1000),
                              (a.cycle_us, "--cycle-us", MAX_TIME_US), (a.real_cycle_us, "--real-cycle-us", MAX_TIME_US),
                              (a.duration, "--duration", MAX_START_S)):
            _positive(v, flag, most)
        if a.flows is not None and a.flows < 1:
            raise C.WorkloadError(f"--flows must be >= 1, got {a.flows}")
        _count(a.flows, "--flows", 1, MAX_FLOWS)
        if a.mss < 1 or a.header_bytes < 0:
            raise C.WorkloadError("need --mss >= 1 and --header-bytes >= 0")
        _count(a.mss, "--mss", 1, MAX_PACKET_BYTES)
        _count(a.header_bytes, "--header-bytes", 0, MAX_PACKET_BYTES)
        FL.kind_of(a.output)  # a bad suffix before any work
        check_output(a.output, C.WorkloadError)
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
                       name=a.workload or a.cdf, zipf=a.zipf)
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
                   f"seed {meta.get('seed')}" + _hot_spot(meta))
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


def _hot_spot(meta: dict[str, Any]) -> str:
    """", destinations Zipf 0.8 over racks (hottest rack 0: 30.1 % of flows)" when the list has one."""
    if meta.get("zipf") is None:
        return ""
    hot = meta.get("zipf_hotspot") or {}
    first = (hot.get("racks_hottest_first") or [None])[0]
    share = (hot.get("expected_rack_shares") or {}).get(str(first))
    return (f", destinations Zipf {meta['zipf']:g} over racks"
            + (f" (hottest rack {first}: {share:.1%} of flows expected)" if isinstance(share, (int, float)) else ""))


def cmd_show(a: argparse.Namespace) -> int:
    try:
        for v, flag, most in ((a.access_mbps, "--access-mbps", MAX_MBPS), (a.duration, "--duration", MAX_START_S)):
            _positive(v, flag, most)
        if a.hosts is not None and a.hosts < 1:
            raise C.WorkloadError(f"--hosts must be >= 1, got {a.hosts}")
        _count(a.hosts, "--hosts", 1, MAX_HOSTS)
        flows, meta = FL.read(a.file)
        if not flows:
            raise C.WorkloadError(f"{a.file}: no flows")
        lines = summary(flows, meta, access_bps=a.access_mbps and a.access_mbps * 1e6, hosts=a.hosts,
                        duration_s=a.duration)
    except C.WorkloadError as ex:
        die(str(ex))
    except MALFORMED as ex:  # meta is free-form: a field of the wrong type
        die(f"{a.file}: meta: malformed ({type(ex).__name__}: {str(ex)[:80]})")
    print("\n".join(lines))
    return 0


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``workload`` (``generate``, ``show``; cli_fct.py's commands) on the top-level subparsers."""
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
    g.add_argument("--zipf", type=float_flag(0, MAX_ZIPF, above=True), metavar="A",
                   help=f"a hot spot: destination racks by Zipf weights 1/rank^A (ranks a seeded permutation "
                        f"of the racks; 0 < A <= {MAX_ZIPF:g}; e.g. 0.8); default: uniform (docs/workloads.md)")
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
    add_fct_parsers(sw)
