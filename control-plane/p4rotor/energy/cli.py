"""``p4rotor energy RUN [RUN ...]``: energy per port class and policy for experiment runs, as
JSON, a plot and a markdown table (docs/energy.md).

Errors follow ``p4rotor/cli.py``'s contract: bad input is one line on stderr, exit 2, and
nothing written (every run and the model are read and checked before any output).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..cliutil import die
from ..inputs import check_output, read_json, write_output
from . import activity as A
from . import measured as MS
from . import model as M
from . import rotorlb_run as RL
from .account import account
from .fast import engine
from .report import markdown, plot, summary_line, update_doc


def add_parser(sub) -> None:
    p = sub.add_parser("energy", help="energy per port state of experiment runs: always on, TOS, TRS, predictive",
                       description=__doc__)
    p.add_argument("runs", nargs="+", metavar="RUN", help="an experiment's output directory (results/fct/POINT)")
    p.add_argument("--model", help="power model file (default: topologies/energy/lpi.json)")
    p.add_argument("--modes", help="fabric modes to account (default: every one the run holds: opera, rotornet)")
    p.add_argument("--output", help="write energy.json, energy.png and table.md into this directory (it must exist)")
    p.add_argument("--doc", help="also replace the energy block of this markdown file with the table")
    p.add_argument("--reconstructed", action="store_true",
                   help="reconstruct the activity even where the run holds the measured one "
                        "(activity.json; an fct run's activity-MODE.json)")
    p.set_defaults(fn=cmd_energy)


def _modes(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    ms = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in ms if m not in A.FABRIC_MODES]
    if not ms or bad:
        raise M.EnergyError(f"--modes {text[:40]!r}: choose from {', '.join(A.FABRIC_MODES)}")
    return ms


def evaluate(runs: list[Path], model: M.PowerModel, modes: tuple[str, ...] | None = None,
             reconstructed: bool = False) -> list[dict[str, Any]]:
    """One entry per (run, mode): what :func:`account.account` gives, with the run's name and load.
    A run with its measured activity (activity.json, unless ``reconstructed``): that, once; an fct
    run: each fabric mode it holds (or ``modes``), measured where the run recorded that mode
    (activity-MODE.json, unless ``reconstructed``); a rotorlb run: RotorLB's rows.  Each entry says
    which activity it read (``activity``: "measured" or "reconstructed")."""
    out = []
    for run in runs:
        if not reconstructed and MS.has_activity(run):
            res = account(MS.from_run(run), model)
            res.update(run=str(run), mode="measured", activity="measured",
                       **(_point(run) if (run / "fct.json").is_file() else {"workload": None, "load": None}))
            out.append(res)
            continue
        if (run / "rotorlb.json").is_file() and not (run / "fct.json").is_file():
            res = account(RL.from_run(run), model)
            res.update(run=str(run), mode="rotorlb", workload="rotorlb matrices", load=None, activity="reconstructed")
            out.append(res)
            continue
        if not (run / "fct.json").is_file():
            kind = next((p.stem for p in sorted(run.glob("*.json")) if p.stem != "run"), None) if run.is_dir() else None
            raise M.EnergyError(f"{run}: no fct.json or rotorlb.json" + (
                f" ({kind}.json holds no per-flow or per-port activity to account)" if kind
                else " (not an experiment's results)"))
        have = A.modes(run)
        for mode in (modes or have):
            if mode not in have:
                raise M.EnergyError(f"{run}: no {mode!r} mode in fct.json (it has: {', '.join(have) or 'none'})")
            measured = not reconstructed and MS.has_activity(run, mode)
            res = account(MS.from_run(run, mode) if measured else A.from_fct_run(run, mode), model)
            res.update(run=str(run), mode=mode, activity="measured" if measured else "reconstructed", **_point(run))
            out.append(res)
    return out


def _point(run: Path) -> dict[str, Any]:
    doc = read_json(run / "fct.json", M.EnergyError, nonfinite=True)
    return {"workload": doc.get("workload"), "load": doc.get("load"), "zipf": doc.get("zipf")}


def _command(a: argparse.Namespace) -> str:
    flags = [f"--{k} {v}" for k, v in (("model", a.model), ("modes", a.modes), ("output", a.output), ("doc", a.doc))
             if v is not None] + (["--reconstructed"] if a.reconstructed else [])
    return " ".join(["p4rotor energy", *a.runs, *flags])


def cmd_energy(a: argparse.Namespace) -> int:
    t0 = time.monotonic()
    try:
        modes = _modes(a.modes)
        out = Path(a.output) if a.output else None
        if out is not None and not out.is_dir():
            raise M.EnergyError(f"--output {out}: not a directory (create it first)")
        if a.doc:
            check_output(a.doc, M.EnergyError, "--doc")
        model = M.load(a.model)
        rows = evaluate([Path(r) for r in a.runs], model, modes, a.reconstructed)
    except M.EnergyError as ex:
        die(str(ex))
    for r in rows:
        print(summary_line(r))
    doc = {"command": _command(a), "model": model.source, "points": rows}
    table = markdown(rows, model.source)
    try:
        if out is not None:
            write_output(out / "energy.json", json.dumps(doc, indent=1, sort_keys=True) + "\n", M.EnergyError, "--output")
            write_output(out / "table.md", table, M.EnergyError, "--output")
            plot(rows, out / "energy.png")
        if a.doc:
            update_doc(Path(a.doc), table)
    except M.EnergyError as ex:
        die(str(ex))
    if out is None:
        print(table, end="")
    loop = "compiled loop" if engine() == "compiled" else \
        "the Python loop: build/liblinkstate.so, 12-16x faster per frame, is not built: make native"
    print(f"[energy] {len(rows)} run mode(s) in {time.monotonic() - t0:.0f} s ({loop})", file=sys.stderr)
    return 0
