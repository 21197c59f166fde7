"""The package's layering and module size, checked on the source (``ast``, nothing imported).

Every import inside ``p4rotor`` -- at module level or inside a function, absolute
(``p4rotor.x``) or relative (``..x``, ``from .. import x``) -- goes from a package to one of
lower rank, or within the package itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "p4rotor"

# The data flow, bottom up: a schedule is made (schedule), RotorLB decides amounts on it (rotorlb),
# workloads are drawn for it (workload), a run's energy is accounted on the schedule (energy),
# the controller writes it into switches (control), the emulated fabric runs those switches
# (fabric) and the hosts on it (host), faults are injected into that fabric (faults),
# experiments run all of it (experiments), benchmarks measure it (bench), and the command line
# drives everything (cli).  Rank 0 holds the leaves every layer may use: input parsing, CLI
# helpers, statistics, and the P4 program's constants.  A package imports only packages of
# lower rank, and itself.
RANKS = {
    "inputs": 0, "cliutil": 0, "stats": 0, "plotting": 0, "p4": 0,
    "schedule": 1,
    "rotorlb": 2,
    "workload": 3,
    "energy": 3.5,  # accounts runs: reads schedules and workloads; experiments print its line
    "control": 4,
    "fabric": 5,
    "host": 6,
    "faults": 7,
    "experiments": 8,
    "bench": 9,
    "cli": 10,
    "__main__": 11,  # `python -m p4rotor`: the CLI
}
MAX_LINES = 500


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _top(path: Path) -> str | None:
    """The top-level package (or module) a file of ``p4rotor`` belongs to; None: ``p4rotor/__init__``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return None if parts == ("__init__",) else parts[0]


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every ``p4rotor`` import in ``path``."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    here = ["p4rotor", *rel[:-1]]  # the package a relative import starts from (also for __init__)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[list[str]] = []
        if isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - (node.level - 1)] if node.level else []
            mod = base + (node.module.split(".") if node.module else [])
            # ``from .. import x`` (or ``from p4rotor import x``): x is the package imported.
            targets = [mod + [a.name] for a in node.names] if mod == ["p4rotor"] else [mod]
        for t in targets:
            if len(t) >= 2 and t[0] == "p4rotor":
                out.append((node.lineno, t[1]))
    return sorted(out)


def test_every_import_goes_down_the_layers():
    bad = []
    for path in _modules():
        me = _top(path)
        if me is None:
            continue
        assert me in RANKS, f"{path.relative_to(ROOT)}: package {me!r} has no rank in RANKS"
        for line, pkg in _imported(path):
            if pkg == me or pkg == "__version__":
                continue
            if pkg not in RANKS or RANKS[pkg] >= RANKS[me]:
                bad.append(f"{path.relative_to(ROOT)}:{line} -> {pkg}"
                           f" ({me} {RANKS[me]} imports {pkg} {RANKS.get(pkg, '?')})")
    assert not bad, "imports up (or across) the layers:\n" + "\n".join(bad)


def test_no_module_over_500_lines():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in _modules()
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, f"modules over {MAX_LINES} lines:\n" + "\n".join(big)
