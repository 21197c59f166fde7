"""``p4rotor experiment NAME``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import schedule as S
from ..cliutil import EXIT_RUNTIME, default_build_dir, die


def add_parser(sub) -> None:
    pe = sub.add_parser("experiment", help="run an experiment on an emulated fabric (root)")
    pe.add_argument("name", choices=["connectivity", "duty-cycle", "low-latency", "shuffle"])
    pe.add_argument("--schedule", help="schedule to use (connectivity, low-latency)")
    pe.add_argument("--dilation", type=float)
    pe.add_argument("--output", help="results directory (default results/NAME)")
    pe.add_argument("--build-dir")
    pe.set_defaults(fn=cmd_experiment)


def cmd_experiment(a: argparse.Namespace) -> int:
    from . import runner as E
    from ..fabric.switch import HarnessError

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    kw = {}
    if a.schedule:
        try:
            kw["sched"] = S.load(a.schedule)
        except S.ScheduleError as ex:
            die(str(ex))
    if a.dilation:
        kw["dilation"] = a.dilation
    out = Path(a.output or f"results/{a.name}")
    try:
        res = E.EXPERIMENTS[a.name](build, out, **kw)
    except HarnessError as ex:
        die(str(ex), EXIT_RUNTIME)
    except TypeError as ex:
        die(f"{a.name}: {ex}")
    print(res["verdict"])
    print(f"results in {out}/", file=sys.stderr)
    return 0
