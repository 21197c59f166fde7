"""``p4rotor topology generate`` and ``p4rotor run`` (the emulated fabric in Mininet)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .. import schedule as S
from ..cliutil import EXIT_RUNTIME, default_build_dir, die


def add_parsers(sub) -> None:
    pt = sub.add_parser("topology", help="topologies: racks, hosts, ports, addresses")
    st = pt.add_subparsers(dest="sub", required=True)
    tg = st.add_parser("generate", help="a topology for a schedule (explicit ports and addresses)")
    tg.add_argument("--schedule", required=True)
    tg.add_argument("--hosts-per-rack", type=int, default=2)
    tg.add_argument("--grpc-base", type=int, default=50100)
    tg.add_argument("--fabric", choices=["multi-switch", "one-switch"], default="multi-switch",
                    help="one-switch: ONE switch emulates every ToR and rotor (docs/one-switch.md)")
    tg.add_argument("-o", "--output", required=True)
    tg.set_defaults(fn=cmd_topology_generate)

    pn = sub.add_parser("run", help="launch an emulated fabric in Mininet (root)")
    pn.add_argument("--schedule", help="schedule file (default: opera, 8 racks, 4 rotors, 1 ms slots)")
    pn.add_argument("--topology", help="topology file (instead of --schedule)")
    pn.add_argument("--hosts-per-rack", type=int, default=2)
    pn.add_argument("--fabric", choices=["multi-switch", "one-switch"], default="multi-switch",
                    help="with --schedule or the default: one-switch runs ONE BMv2 emulating every ToR and "
                         "rotor (docs/one-switch.md); a --topology says it itself")
    pn.add_argument("--dilation", type=float, default=100.0,
                    help="multiply every schedule time (and divide link rates) by this")
    pn.add_argument("--mode", choices=["clock", "signal"], default="clock")
    pn.add_argument("--target", choices=["bmv2", "ebpf"], default="bmv2",
                    help="the switches: BMv2 processes, or eBPF programs NIKSS runs in the kernel (make "
                         "build-ebpf; clock mode, multi-switch, unshaped links: docs/targets.md)")
    pn.add_argument("--link-mbps", type=float, default=0, help="emulated link rate (0: unshaped)")
    pn.add_argument("--epsilon-us", type=float, default=50.0,
                    help="low-latency guard (emulated us, default 50): low-latency routes avoid a circuit "
                         "that goes dark within this after the slice ends, so a frame in flight at a "
                         "reconfiguration still crosses (Opera's epsilon, [McGuinness21 §2.6.1])")
    pn.add_argument("--rotorlb", action="store_true",
                    help="start RotorLB host agents with TUN interfaces (bulk through them: docs/rotorlb.md)")
    pn.add_argument("--rotorlb-rate", type=float, default=300.0, metavar="FPS",
                    help="agents' data frames per second per rack uplink (default 300)")
    pn.add_argument("--rotorlb-datapath", choices=["python", "c"], default="python",
                    help="agents' data path: python (TUN interfaces), or c: rlbd with TCP to 10.200.R.N as split "
                         "connections (make native; docs/rotorlb.md)")
    pn.add_argument("--script", help="run these Mininet CLI commands, then stop")
    pn.add_argument("--duration", type=float, help="run this many seconds without a CLI, then stop")
    pn.add_argument("--run-dir", help="where logs and the trace go (default results/run-<time>)")
    pn.add_argument("--activity", action="store_true",
                    help="the controller records every switch's per-slot counters into RUN_DIR/activity.json "
                         "(p4rotor energy RUN_DIR reads it; docs/energy.md)")
    pn.add_argument("--port-sleep", metavar="PLAN.json|schedule", help="the controller's sleep plan (p4rotor control --port-sleep)")
    pn.add_argument("--build-dir")
    pn.set_defaults(fn=cmd_run)


def cmd_topology_generate(a: argparse.Namespace) -> int:
    from ..schedule import topology as TP

    try:
        s = S.load(a.schedule)
        out = Path(a.output)
        rel = os.path.relpath(Path(a.schedule).resolve(), out.resolve().parent)
        t = TP.generate(s, rel, hosts_per_rack=a.hosts_per_rack, grpc_base=a.grpc_base,
                        one_switch=a.fabric == "one-switch")
    except (S.ScheduleError, TP.TopologyError) as ex:
        die(str(ex))
    out.write_text(t.dumps())
    print(f"wrote {out}: {len(t.racks)} racks x {a.hosts_per_rack} hosts, {len(t.rotors)} rotors", file=sys.stderr)
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from ..schedule import topology as TP
    from .mininet import Emulation, leftovers
    from .switch import HarnessError

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    try:
        if a.topology:
            topo = TP.load(a.topology)
        else:
            if a.schedule:
                sched = S.load(a.schedule)
            else:
                sched = S.generate_opera(8, 4, 1000, 100)
            topo = TP.generate(sched, "schedule.json", hosts_per_rack=a.hosts_per_rack,
                               one_switch=a.fabric == "one-switch")
        topo.schedule = S.dilate(topo.schedule, a.dilation)
    except (S.ScheduleError, TP.TopologyError) as ex:
        die(str(ex))
    if topo.one_switch is not None and a.mode != "clock":
        die("the one-switch fabric runs in clock mode only (one clock drives every rotor)")
    if a.target == "ebpf":
        from . import nikss
        from .switch import HarnessError as HE

        try:
            nikss.check_emulation(topo, a.mode, a.link_mbps, None, build)
        except HE as ex:
            die(f"--target ebpf: {ex}")
    run_dir = Path(a.run_dir or f"results/run-{time.strftime('%Y%m%d-%H%M%S')}")
    link = a.link_mbps / a.dilation if a.link_mbps else None
    s = topo.schedule
    print(f"[run] {s.kind} schedule x{a.dilation:g}: slot {s.slot_us} us, night {s.reconfig_us} us "
          f"(emulated {s.slot_us / a.dilation:g} / {s.reconfig_us / a.dilation:g} us); logs in {run_dir}",
          file=sys.stderr)
    ctl_args: tuple[str, ...] = ()
    if a.activity:
        run_dir.mkdir(parents=True, exist_ok=True)
        ctl_args += ("--activity", str((run_dir / "activity.json").resolve()))
        # What p4rotor energy needs besides the counters: schedule time and the links' rate.
        (run_dir / "run.json").write_text(json.dumps({"command": " ".join(["p4rotor", *sys.argv[1:]]),
                                                      "dilation": a.dilation, "link_mbps": a.link_mbps or None}) + "\n")
    if a.port_sleep:
        ctl_args += ("--port-sleep", a.port_sleep if a.port_sleep == "schedule" else str(Path(a.port_sleep).resolve()))
    emu = Emulation(topo, build, run_dir, mode=a.mode, link_mbps=link, epsilon_us=a.epsilon_us * a.dilation,
                    target=a.target, controller_args=ctl_args)
    code = 0
    agents = None
    try:
        emu.start()
        print("[run] fabric ready: hosts " + ", ".join(h.name for k in topo.racks for h in k.hosts), file=sys.stderr)
        if a.rotorlb:
            from .agents import start_agents

            guard = 0.05 * s.day_us
            if a.rotorlb_datapath == "c":
                agents = start_agents(emu, topo, s, run_dir / "agents", rate=a.rotorlb_rate, guard_us=guard,
                                      datapath="c", tcp_split=True, retransmit_us=3 * s.hyperperiod_us)
            else:
                agents = start_agents(emu, topo, s, run_dir / "agents", rate=a.rotorlb_rate, guard_us=guard, tun=True)
            print(f"[run] RotorLB agents in every host ({a.rotorlb_rate:g} frames/s per rack, guard {guard / 1000:g} "
                  f"ms wall, {a.rotorlb_datapath} data path); host N of rack R is 10.200.R.(N+1) through them, e.g. "
                  f"h5x0 iperf3 -s -D, then h0x0 iperf3 -c 10.200.5.1", file=sys.stderr)
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
        if agents is not None:
            try:
                from .agents import account
                a = account(agents.stop(), agents.dead)
                dead = f"; agents that died: {', '.join(a['dead_agents'])}" if a["dead_agents"] else ""
                print(f"[run] RotorLB agents: {a['accepted']} frames accepted, {a['delivered']} delivered, "
                      f"{a['held']} still held, {a['lost']} lost{dead} (summaries in {run_dir / 'agents'})",
                      file=sys.stderr)
            except HarnessError as ex:  # still stop the fabric
                print(f"p4rotor: error: {ex}", file=sys.stderr)
                code = EXIT_RUNTIME
        emu.stop()
        left = leftovers(topo, a.target)
        if left:
            print("[run] warning: left behind: " + ", ".join(left), file=sys.stderr)
            code = code or EXIT_RUNTIME
        else:
            print("[run] stopped cleanly (no switch processes, pipelines or interfaces left)", file=sys.stderr)
    return code
