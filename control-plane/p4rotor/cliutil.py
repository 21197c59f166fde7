"""What every command shares: exit statuses, the one-line error, where the build is."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 1
EXIT_NOT_PRIMARY = 3  # p4rotor control: another controller (higher election id) is primary


def die(msg: str, code: int = EXIT_BAD_INPUT) -> "None":
    """Bad input (or a failure) in one line on stderr, and the exit status for it.  Control
    characters (a file name with a newline in it) are escaped: the line stays one line."""
    msg = "".join(c if c.isprintable() else repr(c)[1:-1] for c in msg)
    print(f"p4rotor: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


class OneLineParser(argparse.ArgumentParser):
    """argparse with bad input in one line (its own prints the usage first: five lines for a
    ``--seed x``), the command to ask for help, and exit status 2.  Subcommands' parsers are of
    the same class (``add_subparsers`` makes them so)."""

    def error(self, message: str) -> "None":
        die(f"{message} (see '{self.prog} --help')")


def loss_rate(text: str) -> float:
    """argparse type for a loss-rate flag (a CorrOpt threshold): a number in (0, 1).  NaN and
    junk are refused like 0 or 1, so with ``OneLineParser`` a bad value is one line, exit 2."""
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not 0 < rate < 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a loss rate in (0, 1), got {text!r}")
    return rate


def built(name: str) -> list[Path]:
    """Where ``make`` puts a build product ``name``: the build directory (``default_build_dir``),
    then the checkout's build/ beside this package."""
    return [default_build_dir() / name, Path(__file__).resolve().parents[2] / "build" / name]


def default_build_dir() -> Path:
    env = os.environ.get("P4ROTOR_BUILD")
    if env:
        return Path(env)
    # Search upward from the working directory for a checkout's build/.
    for d in [Path.cwd(), *Path.cwd().parents]:
        if (d / "p4src").is_dir():
            return d / "build"
    return Path.cwd() / "build"


def code_commit(mark_dirty: bool = False) -> str | None:
    """The package's git commit (what a results folder's run.json records); with ``mark_dirty``,
    "+dirty" when the package's files differ from it.  None outside a git checkout."""
    import subprocess

    here = Path(__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=here).stdout.strip()
        dirty = mark_dirty and subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", str(here)],
            capture_output=True, text=True, timeout=5, cwd=here).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None
