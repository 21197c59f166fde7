"""``p4rotor faults generate`` ([Zhuo19]'s corruption rates on the rotor links), ``faults check``,
``faults monitor`` and ``faults optimise`` (which lossy links to disable: [Zhuo19 §3.4.1]'s fast
checker, its optimizer) and ``faults compare-corropt`` (the two on generated fault sets)."""

from __future__ import annotations

import argparse
import sys

from ..cliutil import code_commit, die, loss_rate
from ..inputs import MAX_TIME_US, check_output, float_flag, int_flag, write_output

MAX_SETS = 1000  # fault sets per topology and share in compare-corropt


def add_parser(sub) -> None:
    pf = sub.add_parser("faults", help="fault plans: generate (optical loss per [Zhuo19]), check")
    sf = pf.add_subparsers(dest="sub", required=True)
    g = sf.add_parser("generate", help="loss faults on a fraction of the rotor links, rates from [Zhuo19 Table 3.1]")
    g.add_argument("--topology", required=True)
    g.add_argument("--fraction", type=float_flag(0, 1, above=True), default=0.1,
                   help="share of rotor links with corruption (default 0.1)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--start-us", type=int_flag(0, MAX_TIME_US), default=0,
                   help="schedule time the loss starts (emulated us)")
    g.add_argument("--end-us", type=int_flag(0, MAX_TIME_US), help="and ends (default: never)")
    g.add_argument("-o", "--output", help="write here instead of stdout")
    g.set_defaults(fn=cmd_generate)
    c = sf.add_parser("check", help="validate a fault plan against a topology: exit 0, or one line and exit 2")
    c.add_argument("file")
    c.add_argument("--topology", required=True)
    c.set_defaults(fn=cmd_check)
    m = sf.add_parser("monitor", help="disable the rotor links lossier than a threshold while every slice keeps "
                                      "its connectivity (CorrOpt's fast checker); one line per decision")
    _lossy_link_args(m)
    m.set_defaults(fn=cmd_monitor)
    o = sf.add_parser("optimise", help="choose the rotor links lossier than a threshold to disable so that the "
                                       "kept ones lose least while every slice keeps its connectivity "
                                       "(CorrOpt's optimizer); one line per link")
    _lossy_link_args(o)
    _limits(o)
    o.set_defaults(fn=cmd_optimise)
    c = sf.add_parser("compare-corropt", help="CorrOpt's optimizer vs its fast checker alone on fault sets "
                                              "drawn from [Zhuo19 Table 3.1]: JSON, a markdown table, run.json")
    c.add_argument("--topology", required=True, action="append", help="a topology (repeat for more)")
    c.add_argument("--fraction", action="append", type=float_flag(0, 1, above=True),
                   help="share of rotor links with corruption (repeat for more; default 0.1)")
    c.add_argument("--sets", type=int_flag(1, MAX_SETS), default=20, help="fault sets per topology and share")
    c.add_argument("--seed", type=int_flag(-2 ** 63, 2 ** 63 - 1), default=1,
                   help="set i uses seed SEED + i (default 1)")
    c.add_argument("--threshold", type=loss_rate, default=1e-8,
                   help="candidates: links above this rate (default 1e-8: every rate Table 3.1 draws)")
    _limits(c)
    c.add_argument("--output", required=True, help="an existing directory: optimiser.json, table.md, run.json")
    c.set_defaults(fn=cmd_compare)


def _limits(p) -> None:
    from ..control.corropt_optimizer import MAX_LINKS, MAX_WORK

    p.add_argument("--max-links", type=int_flag(0, 10 ** 4), default=MAX_LINKS,
                   help="links in danger searched at most; more: the fast checker's choice (default %(default)s)")
    p.add_argument("--max-work", type=int_flag(0, 10 ** 8), default=MAX_WORK,
                   help="search steps at most (0.2-1 us each); then the best found (default %(default)s)")


def _topology(path: str):
    from ..schedule import topology as TP
    from ..schedule import ScheduleError

    try:
        return TP.load(path)
    except (TP.TopologyError, ScheduleError) as ex:
        die(str(ex))


def cmd_generate(a: argparse.Namespace) -> int:
    from . import corropt
    from ..control.fault_plan import FaultPlanError, from_json

    try:
        check_output(a.output, FaultPlanError)
    except FaultPlanError as ex:
        die(str(ex))
    topo = _topology(a.topology)
    try:
        plan = corropt.corrupt_links(topo, a.fraction, a.seed, a.start_us, a.end_us)
        from_json(plan.to_json(), topo)  # what we write validates
        text = plan.dumps()
        if a.output:
            write_output(a.output, text, FaultPlanError)
    except FaultPlanError as ex:
        die(str(ex))
    if a.output:
        print(f"wrote {a.output}: {len(plan.faults)} loss faults", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    from ..control.fault_plan import FaultPlanError, load

    topo = _topology(a.topology)
    try:
        plan = load(a.file, topo)
    except FaultPlanError as ex:
        die(str(ex))
    kinds: dict[str, int] = {}
    for f in plan.faults:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    print(f"{a.file}: ok ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items())) or 'no faults'})")
    return 0


def _lossy_link_args(p: argparse.ArgumentParser) -> None:
    """What the monitor and the optimiser read (:func:`_lossy_links`) and write (:func:`_write_masked`)."""
    p.add_argument("--topology", required=True)
    p.add_argument("--plan", required=True, help="fault plan: its loss faults are the measured rates "
                                                 "(a link's rate: the max over its loss faults)")
    p.add_argument("--threshold", required=True, type=loss_rate,
                   help="loss rate in (0, 1) above which a link is a candidate to disable")
    p.add_argument("-o", "--output", help="write the schedule without the disabled links' circuits here")


def _lossy_links(a: argparse.Namespace):
    """``--output`` checked, the topology and the plan read (one line, exit 2 on bad input): the
    topology and each lossy link's rate -- what the monitor and the optimiser decide on."""
    from .corropt import plan_rates
    from ..control.fault_plan import FaultPlanError, load

    try:
        check_output(a.output, FaultPlanError)
    except FaultPlanError as ex:
        die(str(ex))
    topo = _topology(a.topology)
    try:
        plan = load(a.plan, topo)
    except FaultPlanError as ex:
        die(str(ex))
    return topo, plan_rates(plan, topo)


def _write_masked(output: str | None, topo, off) -> None:
    """``-o``: the schedule with the disabled links' circuits removed."""
    from ..control.fast_checker import masked_schedule
    from ..control.fault_plan import FaultPlanError

    if not output:
        return
    try:
        write_output(output, masked_schedule(topo.schedule, off).dumps(), FaultPlanError)
    except FaultPlanError as ex:
        die(str(ex))
    print(f"wrote {output}: the schedule without {len(off)} disabled link(s)", file=sys.stderr)


def cmd_monitor(a: argparse.Namespace) -> int:
    from ..control import fast_checker as monitor

    threshold = a.threshold
    topo, rates = _lossy_links(a)
    ports = {r.name: r.ports for r in topo.rotors}
    decisions = monitor.decide(topo.schedule, rates, threshold)
    for d in decisions:
        print(f"{d.action:<7} {d.rotor} rack {d.rack} (port {ports[d.rotor][d.rack]}) rate {d.rate:.3g}: {d.reason()}")
    off = monitor.disabled_links(decisions)
    below = sum(1 for x in rates.values() if x <= threshold)
    print(f"{len(rates)} lossy links, {len(decisions)} above {threshold:g}: {len(off)} disabled, "
          f"{len(decisions) - len(off)} kept; {below} at or below the threshold untouched")
    _write_masked(a.output, topo, off)
    return 0


def cmd_optimise(a: argparse.Namespace) -> int:
    from ..control import corropt_optimizer as O
    from ..control import fast_checker as M

    threshold = a.threshold
    topo, rates = _lossy_links(a)
    ports = {r.name: r.ports for r in topo.rotors}
    res = O.optimise(topo.schedule, rates, threshold, max_links=a.max_links, max_work=a.max_work)
    for c in res.choices:
        print(f"{c.action:<7} {c.rotor} rack {c.rack} (port {ports[c.rotor][c.rack]}) rate {c.rate:.3g}: {c.reason()}")
    greedy = M.decide(topo.schedule, rates, threshold)
    off = res.disabled
    below = sum(1 for x in rates.values() if x <= threshold)
    print(f"{len(rates)} lossy links, {len(res.choices)} above {threshold:g}: {len(off)} disabled, "
          f"{len(res.kept)} kept, penalty kept {res.penalty_kept:.3g} (the fast checker alone: "
          f"{len(M.disabled_links(greedy))} disabled, "
          f"{O.penalty(rates, [d.link for d in greedy if d.action == 'keep']):.3g}); {res.reason} "
          f"({res.nodes} sets, {res.checks} checks, {res.cache_hits} cache hits); "
          f"{below} at or below the threshold untouched")
    _write_masked(a.output, topo, off)
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    import json
    import time
    from pathlib import Path

    from . import corropt_compare as C
    from ..control.fault_plan import FaultPlanError

    t0 = time.monotonic()
    out = Path(a.output)
    files = {name: out / name for name in ("optimiser.json", "table.md", "run.json")}
    try:
        if not out.is_dir():
            raise FaultPlanError(f"--output {out}: not an existing directory (create it first)")
        for f in files.values():
            check_output(f, FaultPlanError, "--output")
    except FaultPlanError as ex:
        die(str(ex))
    fractions = a.fraction or [0.1]
    if len(fractions) > C.MAX_FRACTIONS or len(a.topology) > C.MAX_FRACTIONS:
        die(f"at most {C.MAX_FRACTIONS} --topology and {C.MAX_FRACTIONS} --fraction")
    topos = [(Path(t).name.removesuffix(".json"), _topology(t)) for t in a.topology]
    try:
        doc = C.compare(topos, fractions, a.sets, a.seed, a.threshold, max_links=a.max_links, max_work=a.max_work)
    except FaultPlanError as ex:
        die(str(ex))
    command = " ".join(["p4rotor faults compare-corropt", *(f"--topology {t}" for t in a.topology),
                        *(f"--fraction {f:g}" for f in fractions), f"--sets {a.sets} --seed {a.seed}",
                        f"--threshold {a.threshold:g} --max-links {a.max_links} --max-work {a.max_work}",
                        f"--output {a.output}"])
    wall = time.monotonic() - t0
    m, sec = divmod(round(wall), 60)
    run = {"command": command, "code_commit": code_commit(mark_dirty=True), "results_commit": None,
           "wall_time": f"{m} min {sec} s", "wall_s": round(wall, 1),
           "notes": "time_s: this process's CPU time per decision (other work on the machine does not "
                    "count; compare the two deciders with each other, not across machines); wall_time: the "
                    "whole command"}
    try:
        write_output(files["optimiser.json"], C.dumps(doc), FaultPlanError, "--output")
        write_output(files["table.md"], C.table(doc), FaultPlanError, "--output")
        write_output(files["run.json"], json.dumps(run, indent=1) + "\n", FaultPlanError, "--output")
    except FaultPlanError as ex:
        die(str(ex))
    sys.stdout.write(C.table(doc))
    print(f"wrote {out}/: optimiser.json, table.md, run.json", file=sys.stderr)
    return 0
