"""The ``p4rotor`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

from . import schedule as S

EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 1


def _die(msg: str, code: int = EXIT_BAD_INPUT) -> "None":
    print(f"p4rotor: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def default_build_dir() -> Path:
    env = os.environ.get("P4ROTOR_BUILD")
    if env:
        return Path(env)
    # Search upward from the working directory for a checkout's build/.
    for d in [Path.cwd(), *Path.cwd().parents]:
        if (d / "p4src").is_dir():
            return d / "build"
    return Path.cwd() / "build"


# ---------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------


def cmd_schedule_generate(a: argparse.Namespace) -> int:
    try:
        s = S.generate(a.kind, a.racks, a.rotors, a.slot_us, a.reconfig_us)
    except S.ScheduleError as ex:
        _die(str(ex))
    text = s.dumps()
    if a.output:
        Path(a.output).write_text(text)
        print(f"wrote {a.output}", file=sys.stderr)
        print(S.summary(s), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_schedule_check(a: argparse.Namespace) -> int:
    try:
        s = S.load(a.file)
    except S.ScheduleError as ex:
        _die(str(ex))
    an = S.analyse(s)
    print(f"{a.file}: ok ({s.kind}, {s.racks} racks, {len(s.rotors)} rotors, "
          f"at most {an.max_dark} dark at once)")
    return 0


def cmd_schedule_show(a: argparse.Namespace) -> int:
    try:
        s = S.load(a.file)
    except S.ScheduleError as ex:
        _die(str(ex))
    print(S.summary(s))
    if a.slices:
        an = S.analyse(s)
        print("slices:")
        for sl, con, d in zip(an.slices, an.connected, an.diameters):
            live = ", ".join(f"{r.name}:{'dark' if m is None else 'm' + str(m)}" for r, m in zip(s.rotors, sl.live))
            print(f"  [{sl.start_us:>8}, {sl.end_us:>8}) us  {live}  "
                  + (f"diameter {d}" if con else "DISCONNECTED"))
    if a.plot:
        from .schedule.plot import plot_schedule

        out = plot_schedule(s, Path(a.plot))
        print(f"plot written to {out}")
    return 0


# ---------------------------------------------------------------------------
# control
# ---------------------------------------------------------------------------


def cmd_topology_generate(a: argparse.Namespace) -> int:
    from .fabric import topology as TP

    try:
        s = S.load(a.schedule)
        out = Path(a.output)
        rel = os.path.relpath(Path(a.schedule).resolve(), out.resolve().parent)
        t = TP.generate(s, rel, hosts_per_rack=a.hosts_per_rack, grpc_base=a.grpc_base)
    except (S.ScheduleError, TP.TopologyError) as ex:
        _die(str(ex))
    out.write_text(t.dumps())
    print(f"wrote {out}: {len(t.racks)} racks x {a.hosts_per_rack} hosts, {len(t.rotors)} rotors", file=sys.stderr)
    return 0


def _load_sched_or_topo(a):
    from .fabric import topology as TP

    try:
        if getattr(a, "topology", None):
            t = TP.load(a.topology)
            return t.schedule, t
        return S.load(a.schedule), None
    except (S.ScheduleError, TP.TopologyError) as ex:
        _die(str(ex))


def cmd_routes(a: argparse.Namespace) -> int:
    from .schedule import routes as R

    s, _ = _load_sched_or_topo(a)
    rs = R.compute(s, epsilon_us=a.epsilon_us)
    if a.slice is None:
        print(f"{len(rs)} slices in the {s.hyperperiod_us} us hyperperiod (epsilon {a.epsilon_us} us):")
        for sr in rs:
            n = len(sr.hops)
            print(f"  slice {sr.index:>3} [{sr.slice.start_us:>8}, {sr.slice.end_us:>8}) us: live mask "
                  f"{sr.live_mask:#x}, low-latency diameter {sr.ll_diameter}, {n} routes")
        return 0
    if not 0 <= a.slice < len(rs):
        _die(f"--slice must be in 0..{len(rs) - 1}")
    print(R.describe(s, rs, a.slice, src=a.rack))
    return 0


def _lead_arg(text: str) -> float | str:
    if text == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        _die(f"bad --signal-lead-us {text!r}: microseconds or 'auto'")


def _with_clock_ifaces(specs, items: list[str]):
    """Apply ``--clock-iface NAME=IFACE`` to the matching --switch specs."""
    import dataclasses

    from .control import ControllerError

    by_name = {sp.name: sp for sp in specs}
    for it in items:
        name, sep, iface = it.partition("=")
        if not sep or not iface:
            raise ControllerError(f"bad --clock-iface {it!r}: expected NAME=IFACE")
        if name not in by_name:
            raise ControllerError(f"--clock-iface {it!r}: no --switch named {name!r}")
        by_name[name] = dataclasses.replace(by_name[name], clock_iface=iface)
    return [by_name[sp.name] for sp in specs]


def cmd_control(a: argparse.Namespace) -> int:
    from .control import Controller, ControllerError, RotorController, SwitchSpec
    from .stats import summarize

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    common = dict(mode=a.mode, trace=Path(a.trace) if a.trace else None, election_id=a.election_id,
                  lead_s=a.lead, ack_every=a.ack_every, signal_lead_us=_lead_arg(a.signal_lead_us),
                  signal_timed=a.signal_timed, install_concurrency=a.install_concurrency, on_event=lambda m: print(m, file=sys.stderr, flush=True))
    if bool(a.topology) == bool(a.schedule):
        _die("give --schedule with --switch, or --topology")
    try:
        if a.topology:
            from .fabric.roles import fabric_roles

            _, topo = _load_sched_or_topo(a)
            ctl = Controller(fabric_roles(topo, build, epsilon_us=a.epsilon_us,
                                          only=set(a.only.split(",")) if a.only else None), **common)
        else:
            s = S.load(a.schedule)
            specs = [SwitchSpec.parse(x) for x in a.switch]
            specs = _with_clock_ifaces(specs, a.clock_iface)
            ctl = RotorController(s, specs, egress_guard_us=a.egress_guard_us,
                                  p4info=build / f"{a.program}.p4info.txtpb",
                                  p4blob=build / f"{a.program}.json", **common)
    except S.ScheduleError as ex:
        _die(str(ex))
    except ControllerError as ex:
        _die(str(ex))

    async def report(c) -> None:
        if a.epoch_file:
            Path(a.epoch_file).write_text(json.dumps({"t0_ns": c.tb.wall_ns(c.t0_common_us)}))
        print(f"running {a.mode} mode; slot 0 starts in {a.lead:.1f} s"
              + (f"; stopping after {a.duration} s" if a.duration else "; Ctrl-C stops"), file=sys.stderr)
        if a.mode == "clock":
            skew = await c.measure_skew()
            if skew:
                vals = ", ".join(f"{k} {v:+d} us" for k, v in skew.items())
                spread = max(skew.values()) - min(skew.values())
                print(f"residual clock error per switch: {vals}; skew between switches {spread} us",
                      file=sys.stderr)

    try:
        asyncio.run(ctl.run(duration=a.duration, connect_timeout=a.connect_timeout, after_ready=report))
    except ControllerError as ex:
        _die(str(ex), EXIT_RUNTIME)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    if a.ack_every:
        print("slot change applied after its boundary (us): " + json.dumps(summarize(ctl.ack_delays_us()))
              + "; after it was sent: " + json.dumps(summarize(ctl.ack_delays_us("sent"))), file=sys.stderr)
        if a.signal_timed:
            refused = sum(rt.refused for rt in ctl.runtimes.values())
            print("timed changes reached the switch this long before their start (us): "
                  + json.dumps(summarize(ctl.timed_margins_us())) + f"; refused {refused}", file=sys.stderr)
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from .fabric import topology as TP
    from .fabric.mininet import Emulation, dilate, leftovers
    from .fabric.switch import HarnessError

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    try:
        if a.topology:
            topo = TP.load(a.topology)
        else:
            if a.schedule:
                sched = S.load(a.schedule)
            else:
                sched = S.generate_opera(8, 4, 1000, 100)
            topo = TP.generate(sched, "schedule.json", hosts_per_rack=a.hosts_per_rack)
        topo.schedule = dilate(topo.schedule, a.dilation)
    except (S.ScheduleError, TP.TopologyError) as ex:
        _die(str(ex))
    run_dir = Path(a.run_dir or f"results/run-{time.strftime('%Y%m%d-%H%M%S')}")
    link = a.link_mbps / a.dilation if a.link_mbps else None
    s = topo.schedule
    print(f"[run] {s.kind} schedule x{a.dilation:g}: slot {s.slot_us} us, night {s.reconfig_us} us "
          f"(emulated {s.slot_us / a.dilation:g} / {s.reconfig_us / a.dilation:g} us); logs in {run_dir}",
          file=sys.stderr)
    emu = Emulation(topo, build, run_dir, mode=a.mode, link_mbps=link, epsilon_us=a.epsilon_us * a.dilation)
    code = 0
    try:
        emu.start()
        print("[run] fabric ready: hosts " + ", ".join(h.name for k in topo.racks for h in k.hosts), file=sys.stderr)
        if a.script:
            from mininet.cli import CLI

            CLI(emu.net, script=a.script)
        elif a.duration is not None:
            time.sleep(a.duration)
        else:
            from mininet.cli import CLI

            CLI(emu.net)
    except HarnessError as ex:
        print(f"p4rotor: error: {ex}", file=sys.stderr)
        code = EXIT_RUNTIME
    except KeyboardInterrupt:
        print("[run] interrupted", file=sys.stderr)
    finally:
        print("[run] stopping", file=sys.stderr)
        emu.stop()
        left = leftovers(topo)
        if left:
            print("[run] warning: left behind: " + ", ".join(left), file=sys.stderr)
            code = code or EXIT_RUNTIME
        else:
            print("[run] stopped cleanly (no switch processes, no interfaces left)", file=sys.stderr)
    return code


def cmd_experiment(a: argparse.Namespace) -> int:
    from .experiments import runner as E
    from .fabric.switch import HarnessError

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    kw = {}
    if a.schedule:
        try:
            kw["sched"] = S.load(a.schedule)
        except S.ScheduleError as ex:
            _die(str(ex))
    if a.dilation:
        kw["dilation"] = a.dilation
    out = Path(a.output or f"results/{a.name}")
    try:
        res = E.EXPERIMENTS[a.name](build, out, **kw)
    except HarnessError as ex:
        _die(str(ex), EXIT_RUNTIME)
    except TypeError as ex:
        _die(f"{a.name}: {ex}")
    print(res["verdict"])
    print(f"results in {out}/", file=sys.stderr)
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from .bench import run as bench
    from .fabric.switch import missing_tools

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    miss = missing_tools()
    for prog in ("rotor", "passthrough"):
        if not (build / f"{prog}.json").exists():
            miss.append(f"{build / prog}.json (make build)")
    if miss:
        _die("benchmarks need: " + ", ".join(miss) + " (docs/toolchain.md)", EXIT_RUNTIME)
    only = set(a.only.split(",")) if a.only else {"slot", "throughput", "control", "scale"}
    unknown = only - {"slot", "throughput", "control", "scale"}
    if unknown:
        _die(f"--only: unknown benchmark {', '.join(sorted(unknown))} (slot, throughput, control, scale)")
    sizes = bench.SCALE_SIZES
    if a.scale_sizes:
        try:
            sizes = tuple(int(x) for x in a.scale_sizes.split(","))
        except ValueError:
            _die(f"--scale-sizes: comma list of rack counts, got {a.scale_sizes!r}")
        if any(n < 2 for n in sizes):
            _die(f"--scale-sizes: rack counts must be >= 2, got {a.scale_sizes!r}")
    command = " ".join(["p4rotor bench", *sys.argv[2:]])
    res = bench.run_all(build, Path(a.output), only, quick=a.quick, rate=a.rate, scale_sizes=sizes,
                        merge=bool(a.only), command=command)
    if a.doc:
        bench.update_doc(Path(a.doc), res, command)
        print(f"updated {a.doc}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4rotor", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = p.add_subparsers(dest="cmd", required=True)

    ps = sub.add_parser("schedule", help="generate, check and show schedules")
    ss = ps.add_subparsers(dest="sub", required=True)
    g = ss.add_parser("generate", help="generate a schedule")
    g.add_argument("kind", choices=sorted(S.GENERATORS))
    g.add_argument("--racks", type=int, required=True)
    g.add_argument("--rotors", type=int, default=1)
    g.add_argument("--slot-us", type=int, required=True)
    g.add_argument("--reconfig-us", type=int, default=0)
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

    pt = sub.add_parser("topology", help="topologies: racks, hosts, ports, addresses")
    st = pt.add_subparsers(dest="sub", required=True)
    tg = st.add_parser("generate", help="a topology for a schedule (explicit ports and addresses)")
    tg.add_argument("--schedule", required=True)
    tg.add_argument("--hosts-per-rack", type=int, default=2)
    tg.add_argument("--grpc-base", type=int, default=50100)
    tg.add_argument("-o", "--output", required=True)
    tg.set_defaults(fn=cmd_topology_generate)

    pr = sub.add_parser("routes", help="the routes the controller installs, per slice")
    g2 = pr.add_mutually_exclusive_group(required=True)
    g2.add_argument("--schedule")
    g2.add_argument("--topology")
    pr.add_argument("--slice", type=int, help="show this slice's routes (default: list slices)")
    pr.add_argument("--rack", type=int, help="only routes from this rack")
    pr.add_argument("--epsilon-us", type=float, default=0.0)
    pr.set_defaults(fn=cmd_routes)

    pc = sub.add_parser("control", help="drive rotor switches over P4Runtime")
    pc.add_argument("--schedule", help="a schedule, with --switch for each rotor")
    pc.add_argument("--topology", help="a topology: drives its rotors and ToRs")
    pc.add_argument("--only", help="with --topology: comma list of switch names to drive")
    pc.add_argument("--epsilon-us", type=float, default=0.0,
                    help="low-latency routes avoid circuits going dark within this after the slice")
    pc.add_argument("--switch", action="append", default=[], metavar="NAME=HOST:PORT[@DEVICE_ID]",
                    help="a rotor of the schedule and its P4Runtime address (repeat)")
    pc.add_argument("--clock-iface", action="append", default=[], metavar="NAME=IFACE",
                    help="time probes for switch NAME through host interface IFACE, wired to the "
                         "switch's clock port 254 (precise offsets; docs/dataplane.md)")
    pc.add_argument("--mode", choices=["signal", "clock"], default="signal")
    pc.add_argument("--egress-guard-us", type=int, default=0,
                    help="clock mode: the egress re-check closes each day this early (frames a "
                         "software switch would still transmit after the day ended)")
    pc.add_argument("--signal-lead-us", default="0", metavar="US|auto",
                    help="signal mode: send each slot change this early; 'auto' (needs --ack-every): "
                         "the median measured send-to-applied delay")
    pc.add_argument("--install-concurrency", type=int, default=8, metavar="N",
                    help="at most N switches clear and install at once (default 8): a hundred BMv2 "
                         "installing together on a small machine outlive P4Runtime deadlines")
    pc.add_argument("--signal-timed", action="store_true",
                    help="signal mode: send each slot change one slot ahead with its start time; the "
                         "switch applies it by its own clock (gRPC jitter no longer moves boundaries)")
    pc.add_argument("--duration", type=float, help="seconds to run (default: until Ctrl-C)")
    pc.add_argument("--trace", metavar="FILE", help="write one JSON line per slot change")
    pc.add_argument("--build-dir", help="where build/<program>.json and .p4info.txtpb are")
    pc.add_argument("--program", default="rotor")
    pc.add_argument("--election-id", type=int, default=10)
    pc.add_argument("--lead", type=float, default=1.0, help="seconds from start to slot 0")
    pc.add_argument("--connect-timeout", type=float, default=10.0)
    pc.add_argument("--epoch-file", help="write {\"t0_ns\": wall time of schedule slot 0} here")
    pc.add_argument("--ack-every", type=int, default=0,
                    help="signal mode: ask every Nth slot change for an ack and report the delay")
    pc.set_defaults(fn=cmd_control)

    pn = sub.add_parser("run", help="launch an emulated fabric in Mininet (root)")
    pn.add_argument("--schedule", help="schedule file (default: opera, 8 racks, 4 rotors, 1 ms slots)")
    pn.add_argument("--topology", help="topology file (instead of --schedule)")
    pn.add_argument("--hosts-per-rack", type=int, default=2)
    pn.add_argument("--dilation", type=float, default=100.0,
                    help="multiply every schedule time (and divide link rates) by this")
    pn.add_argument("--mode", choices=["clock", "signal"], default="clock")
    pn.add_argument("--link-mbps", type=float, default=0, help="emulated link rate (0: unshaped)")
    pn.add_argument("--epsilon-us", type=float, default=0.0, help="low-latency guard (emulated us)")
    pn.add_argument("--script", help="run these Mininet CLI commands, then stop")
    pn.add_argument("--duration", type=float, help="run this many seconds without a CLI, then stop")
    pn.add_argument("--run-dir", help="where logs and the trace go (default results/run-<time>)")
    pn.add_argument("--build-dir")
    pn.set_defaults(fn=cmd_run)

    pe = sub.add_parser("experiment", help="run an experiment on an emulated fabric (root)")
    pe.add_argument("name", choices=["connectivity", "duty-cycle", "low-latency", "shuffle"])
    pe.add_argument("--schedule", help="schedule to use (connectivity, low-latency)")
    pe.add_argument("--dilation", type=float)
    pe.add_argument("--output", help="results directory (default results/NAME)")
    pe.add_argument("--build-dir")
    pe.set_defaults(fn=cmd_experiment)

    pb = sub.add_parser("bench", help="benchmarks into results/bench.json (needs root, p4c build, BMv2)")
    pb.add_argument("--only", help="comma list of: slot, throughput, control, scale")
    pb.add_argument("--scale-sizes", help="scale: comma list of rack counts, 4 rotors each (default 16,32,64)")
    pb.add_argument("--quick", action="store_true", help="fewer slot lengths, shorter runs")
    pb.add_argument("--rate", type=float, default=1000, help="offered probe load, frames/s")
    pb.add_argument("--output", default="results/bench.json",
                    help="with --only, the sections run are merged into the results already there")
    pb.add_argument("--doc", default="docs/performance.md", help="update the table in this file ('' to skip)")
    pb.add_argument("--build-dir")
    pb.set_defaults(fn=cmd_bench)
    from .rotorlb.cli import add_model_parser
    add_model_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `p4rotor routes ... | head` ends quietly

    def _terminate(signum, frame):  # SIGTERM cleans up like Ctrl-C: no switch or link left behind
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
