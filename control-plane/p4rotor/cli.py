"""The ``p4rotor`` command line: parses and dispatches; each package's ``cli`` does the work."""

from __future__ import annotations

import argparse
import functools
import logging
import sys

from .bench import cli as bench_cli
from .cliutil import OneLineParser
from .control import cli as control_cli
from .energy import cli as energy_cli
from .experiments import cli as experiments_cli
from .fabric import cli as fabric_cli
from .faults import cli as faults_cli
from .rotorlb import cli as rotorlb_cli
from .schedule import cli as schedule_cli
from .workload import cli as workload_cli


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="p4rotor", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = p.add_subparsers(dest="cmd", required=True)
    schedule_cli.add_parsers(sub)      # schedule generate/check/show, routes
    fabric_cli.add_parsers(sub)        # topology generate, run
    control_cli.add_parser(sub)        # control
    experiments_cli.add_parser(sub)    # experiment NAME
    bench_cli.add_parser(sub)          # bench
    faults_cli.add_parser(sub)         # faults generate/check/monitor
    rotorlb_cli.add_model_parser(sub)  # model rotorlb
    workload_cli.add_parser(sub)       # workload generate/show
    energy_cli.add_parser(sub)         # energy RUN...
    return p


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """One parser per process: building it takes ~13 ms, and in-process callers (the tests) call
    main() thousands of times.  parse_args keeps no state between calls."""
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    """Exit statuses (docs/controller.md): 0 done (also: duration over, Ctrl-C or SIGTERM, the reader of
    our output went away), 1 a run failed (a switch unreachable or gone), 2 bad input, 3 (control)
    another controller with a higher election id is primary (refused, or taken over)."""
    import signal

    # SIGPIPE stays ignored (Python's default): gRPC's threads write to pipes of their own while
    # shutting down, and with SIG_DFL the controller died with status 141 before its summary.
    # A closed stdout (`p4rotor routes ... | head`) is handled below instead.

    def _terminate(signum, frame):  # SIGTERM cleans up like Ctrl-C: no switch or link left behind
        # Once: a second SIGTERM (a supervisor repeating itself) must not cut that cleanup short.
        # A no-op handler, not SIG_IGN, which the processes the cleanup starts would inherit.
        signal.signal(signal.SIGTERM, lambda *_: None)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    # A shell starts background jobs (`p4rotor control ... &`, nohup, CI runners) with SIGINT
    # ignored, and Python then leaves it ignored: the documented stop (and the launcher's, which
    # sends SIGINT) would do nothing.  SIGINT always stops us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return args.fn(args)
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # a socket or pipe of ours, not our reader: a real error
        return 0


def _stdout_gone() -> bool:
    """True if the reader of stdout has gone (a pipe whose far end closed polls as an error);
    stdout then points at /dev/null, so the interpreter's final flush does not complain."""
    import os
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError):
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone


if __name__ == "__main__":
    sys.exit(main())
