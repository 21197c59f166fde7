"""``p4rotor schedule {generate,check,show,quality}`` and ``p4rotor routes``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import schedule as S
from ..cliutil import die
from ..inputs import check_output, write_output
from .quality import DEFAULT_SIZES


def add_parsers(sub) -> None:
    ps = sub.add_parser("schedule", help="generate, check and show schedules")
    ss = ps.add_subparsers(dest="sub", required=True)
    g = ss.add_parser("generate", help="generate a schedule")
    g.add_argument("kind", choices=sorted(S.GENERATORS))
    g.add_argument("--racks", type=int, required=True)
    g.add_argument("--rotors", type=int, default=1)
    g.add_argument("--slot-us", type=int, required=True)
    g.add_argument("--reconfig-us", type=int, default=0)
    g.add_argument("--seed", type=int, help="opera only: the random seed (default 1); same seed, same schedule")
    g.add_argument("-o", "--output", help="write here instead of stdout")
    g.set_defaults(fn=cmd_schedule_generate)
    c = ss.add_parser("check", help="validate a schedule: exit 0, or one error line and exit 2")
    c.add_argument("file")
    c.set_defaults(fn=cmd_schedule_check)
    sh = ss.add_parser("show", help="summarise a schedule")
    sh.add_argument("file")
    sh.add_argument("--plot", metavar="FILE.png", help="draw rotors x time")
    sh.add_argument("--slices", action="store_true", help="list every slice")
    sh.set_defaults(fn=cmd_schedule_show)
    q = ss.add_parser("quality", help="how close generated Opera slices come to random regular graphs, per size")
    q.add_argument("--sizes", default=",".join(f"{n}x{k}" for n, k in DEFAULT_SIZES),
                   help="comma-separated RACKSxROTORS (default: %(default)s)")
    q.add_argument("--slot-us", type=int, default=1200)
    q.add_argument("--reconfig-us", type=int, default=100)
    q.add_argument("--seed", type=int, default=1)
    q.set_defaults(fn=cmd_schedule_quality)

    pr = sub.add_parser("routes", help="the routes the controller installs, per slice")
    g2 = pr.add_mutually_exclusive_group(required=True)
    g2.add_argument("--schedule")
    g2.add_argument("--topology")
    pr.add_argument("--slice", type=int, help="show this slice's routes (default: list slices)")
    pr.add_argument("--rack", type=int, help="only routes from this rack")
    pr.add_argument("--epsilon-us", type=float, default=0.0)
    pr.set_defaults(fn=cmd_routes)


def cmd_schedule_generate(a: argparse.Namespace) -> int:
    try:
        check_output(a.output, S.ScheduleError)
        s = S.generate(a.kind, a.racks, a.rotors, a.slot_us, a.reconfig_us, seed=a.seed)
        text = s.dumps()
        if a.output:
            write_output(a.output, text, S.ScheduleError)
    except S.ScheduleError as ex:
        die(str(ex))
    if a.output:
        print(f"wrote {a.output}", file=sys.stderr)
        print(S.summary(s), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_schedule_check(a: argparse.Namespace) -> int:
    try:
        s = S.load(a.file)
    except S.ScheduleError as ex:
        die(str(ex))
    an = S.analyse(s)
    print(f"{a.file}: ok ({s.kind}, {s.racks} racks, {len(s.rotors)} rotors, "
          f"at most {an.max_dark} dark at once)")
    return 0


def cmd_schedule_show(a: argparse.Namespace) -> int:
    try:
        check_output(a.plot, S.ScheduleError, "--plot")
        s = S.load(a.file)
    except S.ScheduleError as ex:
        die(str(ex))
    print(S.summary(s))
    if a.slices:
        an = S.analyse(s)
        print("slices:")
        for sl, con, d in zip(an.slices, an.connected, an.diameters):
            live = ", ".join(f"{r.name}:{'dark' if m is None else 'm' + str(m)}" for r, m in zip(s.rotors, sl.live))
            print(f"  [{sl.start_us:>8}, {sl.end_us:>8}) us  {live}  "
                  + (f"diameter {d}" if con else "DISCONNECTED"))
    if a.plot:
        from .plot import plot_schedule

        try:
            out = plot_schedule(s, Path(a.plot))
        except (ValueError, OSError) as ex:  # an image format matplotlib does not know; a full disk
            die(f"--plot {a.plot}: cannot draw: {str(ex).splitlines()[0][:120]}")
        print(f"plot written to {out}")
    return 0


def cmd_schedule_quality(a: argparse.Namespace) -> int:
    from . import quality as Q

    try:
        sizes = Q.parse_sizes(a.sizes)
        rows = []
        for racks, rotors in sizes:
            rows.append(Q.measure(racks, rotors, a.slot_us, a.reconfig_us, seed=a.seed))
            print(f"measured {racks}x{rotors}", file=sys.stderr, flush=True)
    except S.ScheduleError as ex:
        die(str(ex))
    print(Q.report(rows, a.seed, a.slot_us, a.reconfig_us))
    return 0


def load_sched_or_topo(a):
    from . import topology as TP

    try:
        if getattr(a, "topology", None):
            t = TP.load(a.topology)
            return t.schedule, t
        return S.load(a.schedule), None
    except (S.ScheduleError, TP.TopologyError) as ex:
        die(str(ex))


def cmd_routes(a: argparse.Namespace) -> int:
    from . import routes as R

    s, _ = load_sched_or_topo(a)
    rs = R.compute(s, epsilon_us=a.epsilon_us)
    if a.slice is None:
        print(f"{len(rs)} slices in the {s.hyperperiod_us} us hyperperiod (epsilon {a.epsilon_us} us):")
        for sr in rs:
            n = len(sr.hops)
            print(f"  slice {sr.index:>3} [{sr.slice.start_us:>8}, {sr.slice.end_us:>8}) us: live mask "
                  f"{sr.live_mask:#x}, low-latency diameter {sr.ll_diameter}, {n} routes")
        return 0
    if not 0 <= a.slice < len(rs):
        die(f"--slice must be in 0..{len(rs) - 1}")
    print(R.describe(s, rs, a.slice, src=a.rack))
    return 0
