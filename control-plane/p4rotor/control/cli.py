"""``p4rotor control``: drive a schedule's switches over P4Runtime."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from .. import schedule as S
from ..cliutil import EXIT_NOT_PRIMARY, EXIT_RUNTIME, default_build_dir, die, loss_rate


def add_parser(sub) -> None:
    pc = sub.add_parser("control", help="drive rotor switches over P4Runtime")
    pc.add_argument("--schedule", help="a schedule, with --switch for each rotor")
    pc.add_argument("--topology", help="a topology: drives its rotors and ToRs")
    pc.add_argument("--only", help="with --topology: comma list of switch names to drive")
    pc.add_argument("--epsilon-us", type=float, default=0.0,
                    help="low-latency routes avoid circuits going dark within this after the slice")
    pc.add_argument("--switch", action="append", default=[], metavar="NAME=HOST:PORT[@DEVICE_ID]",
                    help="a rotor of the schedule and its P4Runtime address (repeat)")
    pc.add_argument("--clock-iface", action="append", default=[], metavar="NAME=IFACE",
                    help="time probes for switch NAME (of --switch or the --topology) through host "
                         "interface IFACE, wired to the switch's clock port (254 on bmv2; precise "
                         "offsets; docs/dataplane.md; every Mininet fabric wires one per switch)")
    pc.add_argument("--mode", choices=["signal", "clock"],
                    help="how slots move (default: signal on bmv2; tofino has clock mode only)")
    pc.add_argument("--target", default="bmv2", metavar="bmv2|tofino|ebpf",
                    help="the switches' target: time units, ports, device config (docs/targets.md)")
    pc.add_argument("--pipeline", action="append", default=[], metavar="NAME=ID[@NETNS]",
                    help="ebpf: switch NAME is NIKSS pipeline ID, its ports attached in network namespace "
                         "NETNS as interfaces NAME-ethP for logical port P (repeat; replaces --switch)")
    pc.add_argument("--cpu-port", type=int, metavar="N",
                    help="tofino: the CPU (PCIe) port, written into the parser's value set "
                         "(default 320, Tofino 1 pipe 0; 192 on 2-pipe parts)")
    pc.add_argument("--clock-port", type=int, metavar="N",
                    help="tofino: the clock port, written into the parser's value set (default: none)")
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
    pc.add_argument("--build-dir", help="where build/<program>.json and .p4info.txtpb are "
                    "(tofino: build/tofino/<program>/ and build/tofino/<program>.p4info.txtpb)")
    pc.add_argument("--program", default="rotor")
    pc.add_argument("--election-id", type=int, default=10,
                    help="P4Runtime election id (default 10): a higher one takes the switches over from "
                         "a running controller; a lower one is refused (exit 3)")
    pc.add_argument("--no-adopt", action="store_true",
                    help="clock mode: always clear and rewrite each switch, even one that holds exactly "
                         "what this controller would install (default: adopt its running clock)")
    pc.add_argument("--lead", type=float, default=1.0, help="seconds from start to slot 0")
    pc.add_argument("--connect-timeout", type=float, default=10.0)
    pc.add_argument("--status-file", help="keep the controller's status here as JSON (phase, switches "
                    "installed, t0_ns = wall time of schedule slot 0, error): control/status.py")
    pc.add_argument("--ack-every", type=int, default=0,
                    help="signal mode: ask every Nth slot change for an ack and report the delay")
    pc.add_argument("--counters-every", type=float, default=0.0, metavar="S",
                    help="read every switch's drop counter every S seconds into the status file (0: never)")
    pc.add_argument("--faults", metavar="PLAN.json",
                    help="with --topology, clock mode: inject the fault plan's clock-skew faults (the slot "
                         "config's offset jumps by offset_us from start_us to end_us, schedule time); its other "
                         "faults are the harness's (docs/faults.md)")
    pc.add_argument("--resync-every", type=float, default=0.0, metavar="SECONDS",
                    help="clock mode: re-measure each switch's offset this often and rewrite its slot config "
                         "when it is off by more than --resync-bound-us (default 0: never)")
    pc.add_argument("--resync-bound-us", type=float, default=100.0, metavar="US",
                    help="the re-sync rewrites an offset off by more than this (and than the fresh "
                         "estimate's uncertainty); default 100")
    pc.add_argument("--corropt-threshold", type=loss_rate, metavar="RATE",
                    help="with --topology: the live CorrOpt monitor ([Zhuo19 §3.4]): read the rotors' per-link "
                         "loss counters and turn off (mask out of the schedule, routes rewritten) every link "
                         "lossier than RATE, in (0, 1), whose removal keeps every slice connected (docs/faults.md)")
    pc.add_argument("--corropt-every", type=float, default=1.0, metavar="S",
                    help="the monitor reads the counters every S seconds (default 1)")
    pc.add_argument("--corropt-min-frames", type=int, default=1000, metavar="N",
                    help="a link direction's loss is estimated once N frames crossed it (default 1000)")
    pc.add_argument("--activity", metavar="FILE",
                    help="with --topology: record every switch's per-slot frames and bytes per port into FILE "
                         "(JSON, rewritten every read; what `p4rotor energy` reads as measured activity)")
    pc.add_argument("--port-sleep", metavar="PLAN.json|schedule",
                    help="a sleep plan {SWITCH: {PORT: {\"in\": [SLOT, ...], \"out\": [...]}}}, or 'schedule' (the "
                         "ports the schedule and routes know idle): a frame through a port asleep in its slot is "
                         "dropped and counted as SLEEPING (default: no port sleeps)")
    pc.add_argument("-q", "--quiet", action="store_true",
                    help="print errors only (the status file still says everything)")
    pc.set_defaults(fn=cmd_control)


def _lead_arg(text: str) -> float | str:
    if text == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        die(f"bad --signal-lead-us {text!r}: microseconds or 'auto'")


def _clock_iface_map(items: list[str]) -> dict[str, str]:
    """``--clock-iface NAME=IFACE`` (repeated) as {NAME: IFACE}; a malformed or repeated NAME is
    an error."""
    from . import ControllerError

    out: dict[str, str] = {}
    for it in items:
        name, sep, iface = it.partition("=")
        if not sep or not name or not iface:
            raise ControllerError(f"bad --clock-iface {it!r}: expected NAME=IFACE")
        if name in out:
            raise ControllerError(f"--clock-iface {it!r}: {name} given twice")
        out[name] = iface
    return out


def _with_clock_ifaces(specs, items: list[str]):
    """Apply ``--clock-iface NAME=IFACE`` to the matching --switch specs."""
    import dataclasses

    from . import ControllerError

    by_name = {sp.name: sp for sp in specs}
    for name, iface in _clock_iface_map(items).items():
        if name not in by_name:
            raise ControllerError(f"--clock-iface {name}={iface}: no --switch named {name!r}")
        by_name[name] = dataclasses.replace(by_name[name], clock_iface=iface)
    return [by_name[sp.name] for sp in specs]


def _plan_faults(path: str, topo, driven: set[str], say) -> tuple[list, list, list]:
    """The fault plan's clock-skew, loss and clock-drift faults on the switches this controller
    drives, as ``ClockSkew``, ``LossFault`` and ``ClockDrift`` values.  The plan is validated whole (a bad one: one line,
    exit 2); its other kinds are applied by the harness, not here: one line says so."""
    from .fault_plan import FaultPlanError, load
    from .entities import LinkLoss
    from .skew import ClockDrift, ClockSkew, LossFault

    try:
        plan = load(path, topo)
    except FaultPlanError as ex:
        die(str(ex))
    skews = [ClockSkew(f.switch, f.offset_us, f.start_us, f.end_us) for f in plan.faults
             if f.kind == "clock-skew" and f.switch in driven]
    drifts = [ClockDrift(f.switch, f.ppm, f.start_us, f.end_us) for f in plan.faults
              if f.kind == "clock-drift" and f.switch in driven]
    losses = [LossFault(f.rotor, LinkLoss(f.port, f.direction, f.rate, f.matching), f.start_us, f.end_us)
              for f in plan.faults if f.kind == "loss" and f.rotor in driven]
    others = sorted({f.kind for f in plan.faults if f.kind not in ("clock-skew", "clock-drift", "loss")})
    if others:
        say(f"--faults: {', '.join(others)} faults are applied by the harness, not the controller: ignored here")
    elsewhere = sorted({f.switch for f in plan.faults
                        if f.kind in ("clock-skew", "clock-drift") and f.switch not in driven})
    if elsewhere:
        say(f"--faults: clock skew/drift on {', '.join(elsewhere)} ignored: not driven by this controller (--only)")
    return skews, losses, drifts


def cmd_control(a: argparse.Namespace) -> int:
    from . import (Controller, ControllerError, CorrOptOptions, InjectedFaults, NotPrimaryError, ResyncOptions,
                   RotorController, SignalOptions, SwitchSpec, get_target)
    from ..stats import summarize
    from .acks import ack_delays_us, timed_margins_us
    from .roles import pipeline_specs

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    try:
        target = get_target(a.target).with_ports(cpu_port=a.cpu_port, clock_port=a.clock_port)
    except ControllerError as ex:
        die(str(ex))
    mode = a.mode or target.modes[0]
    nikss = target.api == "nikss"
    if a.pipeline and not nikss:
        die(f"--pipeline is for target ebpf (NIKSS pipelines), not {target.name}: use --switch")
    if nikss and a.switch:
        die(f"target {target.name}: give each switch as --pipeline NAME=ID[@NETNS], not --switch")

    def say(msg: str) -> None:
        if not a.quiet:
            print(msg, file=sys.stderr, flush=True)

    common = dict(mode=mode, target=target, trace=Path(a.trace) if a.trace else None, election_id=a.election_id,
                  lead_s=a.lead, install_concurrency=a.install_concurrency, on_event=say,
                  status_file=Path(a.status_file) if a.status_file else None,
                  counters_every=a.counters_every, adopt=not a.no_adopt,
                  signal=SignalOptions(lead_us=_lead_arg(a.signal_lead_us), timed=a.signal_timed,
                                       ack_every=a.ack_every),
                  resync=ResyncOptions(every=a.resync_every, bound_us=a.resync_bound_us))
    if bool(a.topology) == bool(a.schedule):
        die("give --schedule with --switch, or --topology")
    if (a.activity or a.port_sleep) and not a.topology:
        die("--activity and --port-sleep need --topology: they name the topology's switches and links")
    if a.faults and not a.topology:
        die("--faults needs --topology: a fault plan is checked against the topology's switches")
    threshold = a.corropt_threshold
    if threshold is not None:
        if not a.topology:
            die("--corropt-threshold needs --topology: turning a link off rewrites the ToRs' routes")
        if not a.corropt_every > 0:
            die(f"--corropt-every must be > 0 seconds, got {a.corropt_every}")
        if a.corropt_min_frames < 1:
            die(f"--corropt-min-frames must be >= 1, got {a.corropt_min_frames}")
    try:
        if a.topology:
            from .fabric_roles import fabric_roles
            from ..schedule.cli import load_sched_or_topo

            _, topo = load_sched_or_topo(a)
            clock_ifaces = _clock_iface_map(a.clock_iface)
            pipelines = pipeline_specs(a.pipeline)
            roles = fabric_roles(topo, build, epsilon_us=a.epsilon_us,
                                 only=set(a.only.split(",")) if a.only else None, target=target,
                                 clock_ifaces=clock_ifaces, pipelines=pipelines)
            skews, losses, drifts = (_plan_faults(a.faults, topo, {r.spec.name for r in roles}, say) if a.faults
                                     else ([], [], []))
            corropt = None
            if threshold is not None:
                import dataclasses

                from .loss_monitor import LossMonitor

                only = set(a.only.split(",")) if a.only else None
                corropt = CorrOptOptions(
                    monitor=LossMonitor(topo.schedule, {r.name: r.ports for r in topo.rotors
                                                        if not only or r.name in only},
                                        threshold, a.corropt_min_frames),
                    every=a.corropt_every,
                    replan=lambda s: fabric_roles(dataclasses.replace(topo, schedule=s), build,
                                                  epsilon_us=a.epsilon_us, only=only, target=target,
                                                  clock_ifaces=clock_ifaces, pipelines=pipelines))
            ctl = Controller(roles, faults=InjectedFaults(skews, losses, drifts), corropt=corropt,
                             activity=Path(a.activity) if a.activity else None,
                             port_sleep=_sleep_plan(a.port_sleep, topo, a.epsilon_us, {r.spec.name for r in roles}),
                             **common)
        else:
            s = S.load(a.schedule)
            specs = (list(pipeline_specs(a.pipeline).values()) if nikss
                     else [SwitchSpec.parse(x) for x in a.switch])
            specs = _with_clock_ifaces(specs, a.clock_iface)
            p4info, p4blob = target.pipeline_files(build, a.program)
            ctl = RotorController(s, specs, egress_guard_us=a.egress_guard_us, p4info=p4info, p4blob=p4blob,
                                  **common)
    except S.ScheduleError as ex:
        die(str(ex))
    except ControllerError as ex:
        die(str(ex))

    async def report(c) -> None:
        on = "" if target.name == "bmv2" else f" on {target.name}"
        since = (time.time_ns() - c.tb.wall_ns(c.t0_common_us)) / 1e9
        adopted = c.status.data.get("adopted", 0)
        start = (f"adopted {adopted}/{len(c.runtimes)} switches, slot 0 started {since:.1f} s ago" if adopted
                 else f"slot 0 starts in {-since:.1f} s" if since < 0 else f"slot 0 started {since:.1f} s ago")
        say(f"running {mode} mode{on}; {start}"
            + (f"; stopping after {a.duration} s" if a.duration else "; Ctrl-C stops"))
        if mode == "clock":
            skew = await c.measure_skew()
            if skew:
                vals = ", ".join(f"{k} {v:+d} us" for k, v in skew.items())
                spread = max(skew.values()) - min(skew.values())
                say(f"residual clock error per switch: {vals}; skew between switches {spread} us")

    started = time.monotonic()
    how = "duration over" if a.duration else "stopped"
    try:
        asyncio.run(ctl.run(duration=a.duration, connect_timeout=a.connect_timeout, after_ready=report))
    except NotPrimaryError as ex:
        die(str(ex), EXIT_NOT_PRIMARY)
    except ControllerError as ex:
        die(str(ex), EXIT_RUNTIME)
    except KeyboardInterrupt:
        how = "interrupted"
    st = ctl.status.data
    say(f"{how} after {time.monotonic() - started:.1f} s: {st['installed']}/{st['total']} switches installed, "
        f"{ctl.trace.records} slot changes {'sent' if mode == 'signal' else 'traced'}")
    if a.resync_every:
        say(f"re-sync every {a.resync_every:g} s: {sum(rt.resyncs for rt in ctl.runtimes.values())} slot config "
            f"rewrites (bound {a.resync_bound_us:g} us)")
    if ctl.loss_monitor is not None:
        mon = ctl.loss_monitor
        kept = sum(1 for d in mon.decisions if d.action == "keep")
        say(f"CorrOpt monitor: {len(mon.disabled)} link(s) turned off"
            + (f" ({', '.join(f'{r} rack {k}' for r, k in mon.disabled)})" if mon.disabled else "")
            + f", {kept} lossy link(s) kept for connectivity; {len(mon.estimates)} link directions measured")
    if a.ack_every:
        say("slot change applied after its boundary (us): " + json.dumps(summarize(ack_delays_us(ctl)))
            + "; after it was sent: " + json.dumps(summarize(ack_delays_us(ctl, "sent"))))
        if a.signal_timed:
            refused = sum(rt.refused for rt in ctl.runtimes.values())
            say("timed changes reached the switch this long before their start (us): "
                + json.dumps(summarize(timed_margins_us(ctl))) + f"; refused {refused}")
    return 0



def _sleep_plan(arg: str | None, topo, epsilon_us: float, driven: set[str]):
    """``--port-sleep``: None, ``schedule`` (sleep_plan.schedule_plan, for the switches driven) or a file."""
    from ..schedule import routes as R
    from .sleep_plan import read_sleep_plan, schedule_plan

    if not arg:
        return None
    if arg == "schedule":
        return {k: v for k, v in schedule_plan(topo, R.compute(topo.schedule, epsilon_us=epsilon_us)).items()
                if k in driven}
    return read_sleep_plan(arg)
