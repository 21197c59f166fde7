"""``p4rotor experiment NAME``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import schedule as S
from ..cliutil import EXIT_RUNTIME, code_commit, default_build_dir, die, loss_rate
from ..inputs import MAX_ZIPF, float_flag


def add_parser(sub) -> None:
    pe = sub.add_parser("experiment", help="run an experiment on an emulated fabric (root)")
    pe.add_argument("name", choices=["connectivity", "duty-cycle", "low-latency", "shuffle", "rotorlb", "fct", "faults", "apps"])
    pe.add_argument("--schedule", help="schedule to use (connectivity, low-latency)")
    pe.add_argument("--dilation", type=float)
    pe.add_argument("--quick", action="store_true", help="a short variant (rotorlb: densities 1 and 56)")
    pe.add_argument("--output", help="results directory (default results/NAME)")
    pe.add_argument("--record-activity", action="store_true", default=None,
                    help="rotorlb, fct: the controller records every switch's per-slot counters into "
                         "OUTPUT/activity.json (fct: each fabric mode's run into OUTPUT/activity-MODE.json); "
                         "p4rotor energy then reads the measured activity (docs/energy.md)")
    pe.add_argument("--port-sleep", metavar="PLAN.json|schedule",
                    help="rotorlb: the controller's sleep plan (p4rotor control --port-sleep; docs/energy.md)")
    fct = pe.add_argument_group("fct")
    fct.add_argument("--workload", help="a shipped CDF (websearch, datamining, ...) or a CDF file (default websearch)")
    fct.add_argument("--load", type=float, help="fraction of each host's access rate (default 0.1)")
    fct.add_argument("--flows", type=int, help="flows per point (default 2000; --quick: 150)")
    fct.add_argument("--wall-budget", type=float_flag(1, 10080), dest="wall_budget_min", metavar="MIN",
                     help="the run's wall time, minutes: as many of --flows as fit it, from what a "
                          "calibration, a mode and a replay take (run.json records the wall time beside it)")
    fct.add_argument("--cutoff", type=float, metavar="BYTES",
                     help="Opera's class cutoff in emulated bytes (default: one cycle at the access rate)")
    fct.add_argument("--cutoff-real", type=float, metavar="BYTES",
                     help="the class cutoff in real-system bytes (Opera's: 15e6), scaled as the flow sizes are")
    fct.add_argument("--seed", type=int, help="workload seed (default 1)")
    fct.add_argument("--zipf", type=float_flag(0, MAX_ZIPF, above=True), metavar="A",
                     help="a hot spot: destination racks by Zipf weights 1/rank^A (ranks a seeded permutation of "
                          "the racks; e.g. 0.8); default: uniform. With --flow-list, the list's own (docs/fct.md)")
    fct.add_argument("--hosts-per-rack", type=int, help="hosts in each of the 8 racks, each with an agent (default 2)")
    fct.add_argument("--share-circuits", nargs="?", const="on", metavar="on|off|auto",
                     help="a rack's agents share its circuits (each window's frames claimed between them) "
                          "instead of a plane per host: 'on' (the flag alone), 'off', or 'auto' (default: on "
                          "at a load of 1%% or less, where a lone bulk flow then meets issue #14's bound; at "
                          "5%% it gains nothing, at 10%% the shared agents fall behind RotorLB: docs/rotorlb.md)")
    fct.add_argument("--idle-poll", action=argparse.BooleanOptionalAction, default=None,
                     help="idle CPUs poll instead of halting while the fabric is up (PM QoS; default on: "
                          "a packet after a quiet spell otherwise pays ~0.4 ms per switch to wake them, "
                          "docs/notes/cold-switches.md); --no-idle-poll lets them halt")
    fct.add_argument("--switch-cpus", metavar="CPUS",
                     help="the switches run on these CPUs only, the hosts' processes keep the others: "
                          "'auto' (the upper half; on 2 CPUs the last one), a list such as 1, or 'none' "
                          "(default: anywhere). Pinned, FCTs fall by a third but low-load slowdowns rise "
                          "(docs/notes/switch-cpus.md)")
    fct.add_argument("--warm-switches", metavar="MS",
                     help="every MS ms a probe through each switch's clock port keeps it warm: 'on' (every "
                          "2 ms), a period, 'off', or 'auto' (default: on at a load of 5%% or less). An idle "
                          "BMv2 forwards a frame 3-4x slower than a busy one (docs/notes/cold-switches.md)")
    fct.add_argument("--flow-list", metavar="FILE",
                     help="replay this flow list (e.g. an earlier run's flows.json) instead of generating one; "
                          "compare the two runs with 'p4rotor workload compare'")
    fct.add_argument("--calibration", metavar="FILE",
                     help="a calibration.json measured earlier on this fabric and target (--calibrate-only): "
                          "the ideal every slowdown divides by (default: the run calibrates its idle fabric first)")
    fct.add_argument("--calibrate-only", action="store_true", default=None,
                     help="measure the calibrated ideal on the idle fabric into OUTPUT/calibration.json and stop")
    fct.add_argument("--replay", type=int, metavar="N",
                     help="replay N of the run's flows (a random sample) one at a time on the idle fabric, "
                          "for the slowdown against each flow alone (default 200; 0: none)")
    fct.add_argument("--modes", metavar="M,M",
                     help="which runs (default opera,rotornet,packet-switch): 2000 flows at 1%% take "
                          "about 35 min of arrivals per mode for Web Search, 2 h for Data Mining (the "
                          "real system's arrival rate, dilated)")
    pe.add_argument("--epsilon-us", type=float, metavar="US",
                    help="low-latency, fct: low-latency routes keep off a rotor this long (schedule us) before "
                         "its night (low-latency: half the shortest slice; fct: 150)")
    pe.add_argument("--plan", help="faults: a fault plan file (default topologies/faults/default.json)")
    pe.add_argument("--resync-every", type=float, metavar="S",
                    help="faults: the controller re-measures clocks every S wall seconds (default 0: never)")
    pe.add_argument("--corropt-threshold", type=loss_rate, metavar="RATE",
                    help="faults: the controller runs the live CorrOpt monitor with this loss threshold "
                         "(topologies/faults/corropt.json is a plan for it)")
    pe.add_argument("--traffic", metavar="bulk[,tcp]",
                    help="faults: RotorLB agents (rlbd) move bulk between racks (bulk), and an iperf3 connection "
                         "crosses through them (tcp), while the plan is applied (default plan then "
                         "topologies/faults/load.json); default: probes only")
    rlb = pe.add_argument_group("rotorlb, fct, apps")
    rlb.add_argument("--rate", type=float, help="agent frames/s per circuit (rotorlb: calibrated on the "
                     "fabric, --quick 300; fct: 100)")
    rlb.add_argument("--guard-us", type=float, help="wall us the agents keep free at both ends of a day "
                     "(rotorlb: 20000; fct: 10000)")
    rlb.add_argument("--matrices", type=int, dest="matrices_per_density",
                     help="matrices per density (default 3)")
    rlb.add_argument("--datapath", choices=["python", "c"],
                     help="rotorlb, fct: who moves the agents' frames: the Python agent (default) or the compiled "
                          "rlbd (make native; docs/rotorlb.md)")
    rlb.add_argument("--agents", choices=["per-matrix", "once"],
                     help="rotorlb: start and drain the agents for every matrix and mode (default), or run them "
                          "once for --matrices-per-run matrices back to back (docs/rotorlb.md)")
    rlb.add_argument("--matrices-per-run", type=int, dest="per_run",
                     help="rotorlb --agents once: matrices to one run of the agents (default 20)")
    rlb.add_argument("--report-from", metavar="RUN",
                     help="rotorlb: run nothing; recompute the report (verdict, table, plot) of the finished run in "
                          "RUN from its rotorlb.json into --output")
    rlb.add_argument("--windows", choices=["fixed", "measured"],
                     help="rotorlb: the agents' guard and fill as given (default) or measured on the fabric "
                          "(needs --datapath c; docs/rotorlb.md)")
    pe.add_argument("--fabric", choices=["multi-switch", "one-switch"],
                    help="connectivity: a switch per ToR and rotor (default), or ONE switch emulating them all "
                         "(docs/one-switch.md)")
    pe.add_argument("--target", choices=["bmv2", "ebpf"],
                    help="the switches: BMv2 processes (default), or eBPF programs NIKSS runs in the kernel "
                         "(make build-ebpf; clock mode, multi-switch, unshaped fabric links: docs/targets.md)")
    pe.add_argument("--build-dir")
    pe.set_defaults(fn=cmd_experiment)


def cmd_experiment(a: argparse.Namespace) -> int:
    import inspect

    from ..fabric.switch import HarnessError
    from . import EXPERIMENTS

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    kw = {}
    if a.schedule:
        try:
            kw["sched"] = S.load(a.schedule)
        except S.ScheduleError as ex:
            die(str(ex))
    if a.dilation:
        kw["dilation"] = a.dilation
    if a.quick:
        kw["quick"] = True
    for key in ("workload", "load", "flows", "cutoff", "seed", "rate", "guard_us", "matrices_per_density", "plan", "resync_every",
                "corropt_threshold", "flow_list", "hosts_per_rack", "fabric", "modes", "epsilon_us",
                "share_circuits", "idle_poll", "switch_cpus", "warm_switches", "target", "datapath", "windows",
                "calibration", "calibrate_only", "replay", "cutoff_real", "traffic", "record_activity", "port_sleep",
                "zipf", "wall_budget_min", "agents", "per_run", "report_from"):
        if getattr(a, key) is not None:
            kw[key] = getattr(a, key)
    run = EXPERIMENTS[a.name]
    # An option the experiment does not take is bad input; checked before anything starts, so a
    # TypeError raised inside a running experiment stays what it is (a bug, with its traceback).
    takes = inspect.signature(run).parameters
    for key, flag in (("sched", "--schedule"), ("dilation", "--dilation"), ("quick", "--quick"),
                      ("workload", "--workload"), ("load", "--load"), ("flows", "--flows"),
                      ("cutoff", "--cutoff"), ("seed", "--seed"), ("rate", "--rate"), ("guard_us", "--guard-us"),
                      ("matrices_per_density", "--matrices"), ("plan", "--plan"), ("resync_every", "--resync-every"),
                      ("corropt_threshold", "--corropt-threshold"), ("flow_list", "--flow-list"),
                      ("hosts_per_rack", "--hosts-per-rack"), ("fabric", "--fabric"), ("modes", "--modes"),
                      ("epsilon_us", "--epsilon-us"), ("share_circuits", "--share-circuits"),
                      ("idle_poll", "--idle-poll"), ("switch_cpus", "--switch-cpus"),
                      ("warm_switches", "--warm-switches"), ("target", "--target"), ("datapath", "--datapath"), ("windows", "--windows"),
                      ("calibration", "--calibration"), ("calibrate_only", "--calibrate-only"), ("replay", "--replay"),
                      ("cutoff_real", "--cutoff-real"), ("traffic", "--traffic"),
                      ("record_activity", "--record-activity"), ("port_sleep", "--port-sleep"), ("zipf", "--zipf"),
                      ("wall_budget_min", "--wall-budget"), ("agents", "--agents"),
                      ("per_run", "--matrices-per-run"), ("report_from", "--report-from")):
        if key in kw and key not in takes:
            die(f"experiment {a.name} takes no {flag}")
    out = Path(a.output or f"results/{a.name}")
    from ..control.fault_plan import FaultPlanError
    from ..rotorlb.model import ModelError
    from ..workload.cdf import WorkloadError

    t0 = time.monotonic()
    # The code as it was loaded: a commit made while a run of an hour goes on is not what ran.
    commit = code_commit(mark_dirty=True)
    try:
        res = run(build, out, **kw)
    except HarnessError as ex:
        die(str(ex), EXIT_RUNTIME)
    except (WorkloadError, ModelError, FaultPlanError) as ex:
        die(str(ex))
    print(res["verdict"])
    if (a.name in ("fct", "rotorlb") and out.is_dir() and not getattr(a, "calibrate_only", False)
            and not getattr(a, "report_from", None)):
        # the run's energy per port state (docs/energy.md); a calibration has no run to account
        from ..energy.report import summary_for
        print("\n".join(summary_for(out)))
    if out.is_dir():
        wall_s = time.monotonic() - t0
        if getattr(a, "report_from", None):
            write_report_json(out, Path(a.report_from), commit)
        else:
            write_run_json(out, a, wall_s, commit)
        if getattr(a, "wall_budget_min", None) is not None:
            kept = budget_record(a.wall_budget_min, wall_s)["within_budget"]
            print(f"wall time {wall_s / 60:.1f} min: " + ("within" if kept else "OVER")
                  + f" the {a.wall_budget_min:g} min budget")
    print(f"results in {out}/", file=sys.stderr)
    return 0


def write_run_json(out: Path, a: argparse.Namespace, wall_s: float, commit: str | None) -> None:
    """``out``/run.json: how this folder was made (the command, the code's commit when the run
    started, "+dirty" if the package differed from it, the target, the wall time and, for fct,
    the calibration it divided by) -- what every results folder keeps (docs/experiments.md).
    ``results_commit`` stays None until the folder is committed."""
    import json

    m, sec = divmod(round(wall_s), 60)
    (out / "run.json").write_text(json.dumps({
        "command": "p4rotor " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["experiment"]
        else f"p4rotor experiment {a.name} --output {out}",
        "code_commit": commit, "results_commit": None, "target": a.target or "bmv2",
        "wall_time": f"{m} min {sec} s", "wall_s": round(wall_s, 1),
        "calibration": getattr(a, "calibration", None),
        **budget_record(getattr(a, "wall_budget_min", None), wall_s)}, indent=1) + "\n")


def write_report_json(out: Path, src: Path, commit: str | None) -> None:
    """--report-from: ``out``/run.json is the run's own (how it was made), with how its report was
    recomputed beside it (``report``)."""
    import json

    try:
        run = json.loads((src / "run.json").read_text())
    except (OSError, ValueError):
        run = {"command": None, "code_commit": None, "wall_time": None}
    run["results_commit"] = None
    run["report"] = {"command": "p4rotor " + " ".join(sys.argv[1:]), "code_commit": commit}
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")


def budget_record(budget_min: float | None, wall_s: float) -> dict:
    """run.json's budget fields: the budget asked and whether the wall time kept to it."""
    if budget_min is None:
        return {}
    return {"wall_budget_min": budget_min, "within_budget": wall_s <= budget_min * 60}
