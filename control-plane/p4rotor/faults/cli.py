"""``p4rotor faults generate`` (seed 003's corruption rates on the rotor links) and ``faults check``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cliutil import die


def add_parser(sub) -> None:
    pf = sub.add_parser("faults", help="fault plans: generate (optical loss per seed 003), check")
    sf = pf.add_subparsers(dest="sub", required=True)
    g = sf.add_parser("generate", help="loss faults on a fraction of the rotor links, rates from seed 003 Table 3.1")
    g.add_argument("--topology", required=True)
    g.add_argument("--fraction", type=float, default=0.1, help="share of rotor links with corruption (default 0.1)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--start-us", type=int, default=0, help="schedule time the loss starts (emulated us)")
    g.add_argument("--end-us", type=int, help="and ends (default: never)")
    g.add_argument("-o", "--output", help="write here instead of stdout")
    g.set_defaults(fn=cmd_generate)
    c = sf.add_parser("check", help="validate a fault plan against a topology: exit 0, or one line and exit 2")
    c.add_argument("file")
    c.add_argument("--topology", required=True)
    c.set_defaults(fn=cmd_check)


def _topology(path: str):
    from ..fabric import topology as TP
    from ..schedule import ScheduleError

    try:
        return TP.load(path)
    except (TP.TopologyError, ScheduleError) as ex:
        die(str(ex))


def cmd_generate(a: argparse.Namespace) -> int:
    from . import corropt
    from .plan import FaultPlanError, from_json

    topo = _topology(a.topology)
    try:
        plan = corropt.corrupt_links(topo, a.fraction, a.seed, a.start_us, a.end_us)
        from_json(plan.to_json(), topo)  # what we write validates
    except FaultPlanError as ex:
        die(str(ex))
    text = plan.dumps()
    if a.output:
        Path(a.output).write_text(text)
        print(f"wrote {a.output}: {len(plan.faults)} loss faults", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    from .plan import FaultPlanError, load

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
