"""``p4rotor faults generate`` ([Zhuo19]'s corruption rates on the rotor links), ``faults check`` and
``faults monitor`` (which lossy links to disable, [Zhuo19 §3.4.1]'s fast checker)."""

from __future__ import annotations

import argparse
import sys

from ..cliutil import die, loss_rate
from ..inputs import MAX_TIME_US, check_output, float_flag, int_flag, write_output


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
    m.add_argument("--topology", required=True)
    m.add_argument("--plan", required=True, help="fault plan: its loss faults are the measured rates "
                                                 "(a link's rate: the max over its loss faults)")
    m.add_argument("--threshold", required=True, type=loss_rate,
                   help="loss rate in (0, 1) above which a link is a candidate to disable")
    m.add_argument("-o", "--output", help="write the schedule without the disabled links' circuits here")
    m.set_defaults(fn=cmd_monitor)


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


def plan_rates(plan, topo) -> dict[tuple[str, int], float]:
    """{(rotor, rack): rate} from a plan's loss faults: the max over each link's faults, whatever
    their direction, matching or time window (the plan read as one measurement)."""
    racks = {r.name: {port: rack for rack, port in r.ports.items()} for r in topo.rotors}
    rates: dict[tuple[str, int], float] = {}
    for f in plan.faults:
        if f.kind == "loss":
            link = (f.rotor, racks[f.rotor][f.port])
            rates[link] = max(rates.get(link, 0.0), f.rate)
    return rates


def cmd_monitor(a: argparse.Namespace) -> int:
    from ..control import fast_checker as monitor
    from ..control.fault_plan import FaultPlanError, load

    threshold = a.threshold
    try:
        check_output(a.output, FaultPlanError)
    except FaultPlanError as ex:
        die(str(ex))
    topo = _topology(a.topology)
    try:
        plan = load(a.plan, topo)
    except FaultPlanError as ex:
        die(str(ex))
    rates = plan_rates(plan, topo)
    ports = {r.name: r.ports for r in topo.rotors}
    decisions = monitor.decide(topo.schedule, rates, threshold)
    for d in decisions:
        print(f"{d.action:<7} {d.rotor} rack {d.rack} (port {ports[d.rotor][d.rack]}) rate {d.rate:.3g}: {d.reason()}")
    off = monitor.disabled_links(decisions)
    below = sum(1 for x in rates.values() if x <= threshold)
    print(f"{len(rates)} lossy links, {len(decisions)} above {threshold:g}: {len(off)} disabled, "
          f"{len(decisions) - len(off)} kept; {below} at or below the threshold untouched")
    if a.output:
        try:
            write_output(a.output, monitor.masked_schedule(topo.schedule, off).dumps(), FaultPlanError)
        except FaultPlanError as ex:
            die(str(ex))
        print(f"wrote {a.output}: the schedule without {len(off)} disabled link(s)", file=sys.stderr)
    return 0
