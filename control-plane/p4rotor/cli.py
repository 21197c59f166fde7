"""The ``p4rotor`` command line: parses and dispatches; each package's ``cli`` does the work."""

from __future__ import annotations

import argparse
import logging
import sys

from .bench import cli as bench_cli
from .control import cli as control_cli
from .experiments import cli as experiments_cli
from .fabric import cli as fabric_cli
from .faults import cli as faults_cli
from .rotorlb import cli as rotorlb_cli
from .schedule import cli as schedule_cli
from .workload import cli as workload_cli


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4rotor", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = p.add_subparsers(dest="cmd", required=True)
    schedule_cli.add_parsers(sub)      # schedule generate/check/show, routes
    fabric_cli.add_parsers(sub)        # topology generate, run
    control_cli.add_parser(sub)        # control
    experiments_cli.add_parser(sub)    # experiment NAME
    bench_cli.add_parser(sub)          # bench
    faults_cli.add_parser(sub)         # faults generate/check
    rotorlb_cli.add_model_parser(sub)  # model rotorlb
    workload_cli.add_parser(sub)       # workload generate/show
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


if __name__ == "__main__":
    sys.exit(main())
