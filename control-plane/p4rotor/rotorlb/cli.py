"""``p4rotor model rotorlb``: the RotorLB fluid model from the command line.

Kept out of ``p4rotor/cli.py`` (which only calls :func:`add_model_parser`)
so the model's options live next to the model and the shared CLI file stays
easy to merge.  Errors follow that file's contract: one line on stderr,
exit 2 (``EXIT_BAD_INPUT``), and nothing written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from .. import schedule as S
from ..cliutil import die as _die
from ..inputs import (MAX_CYCLES, MAX_MATRICES, MAX_MODEL_WORK, MAX_RACKS, MAX_ROTORS, SLOT_OVERHEAD, check_output,
                      check_work, int_flag, read_json, write_output)
from . import model as M


def _load_matrices(path: str, racks: int) -> list[tuple[M.Pair, ...]]:
    data = read_json(path, M.ModelError)
    if not isinstance(data, list) or not data:
        raise M.ModelError(f"{path}: must be a non-empty JSON list of matrices (lists of [src, dst] pairs)")
    if len(data) > MAX_MATRICES:
        raise M.ModelError(f"{path}: at most {MAX_MATRICES} matrices, got {len(data)}")
    return [M.check_matrix(racks, m, f"{path}: matrix {i}") for i, m in enumerate(data)]


def _schedule(a: argparse.Namespace) -> S.Schedule:
    if a.schedule and (a.racks is not None or a.rotors is not None):
        raise M.ModelError("give --schedule or --racks/--rotors, not both")
    cycles = a.warmup_cycles + a.measure_cycles
    matrices = 1 if a.matrices else a.count  # a --matrices file's count is checked once it is read
    if a.schedule:
        s = S.load(a.schedule)
    else:
        racks, rotors = 8 if a.racks is None else a.racks, 1 if a.rotors is None else a.rotors
        # rotornet: about racks / rotors matchings per rotor; refused before it is generated
        check_work(matrices * cycles * -(-racks // rotors) * (racks ** 2 + SLOT_OVERHEAD), MAX_MODEL_WORK,
                   "the model's matrices x cycles x slots x (racks^2 + overhead)", M.ModelError)
        s = S.generate_rotornet(racks, rotors, slot_us=1000, reconfig_us=0)
    check_work(matrices * cycles * M.cycle_slots(s) * (s.racks ** 2 + SLOT_OVERHEAD), MAX_MODEL_WORK,
               "the model's matrices x cycles x slots x (racks^2 + overhead)", M.ModelError)
    M.check_schedule(s)
    return s


def cmd_model_rotorlb(a: argparse.Namespace) -> int:
    try:
        check_output(a.output, M.ModelError)
        s = _schedule(a)
        if a.matrices:
            mats = _load_matrices(a.matrices, s.racks)
            check_work(len(mats) * (a.warmup_cycles + a.measure_cycles) * M.cycle_slots(s)
                       * (s.racks ** 2 + SLOT_OVERHEAD), MAX_MODEL_WORK, f"{a.matrices}: the model's matrices x cycles x slots x (racks^2 + overhead)", M.ModelError)
        else:
            mats = M.random_matrices(s.racks, a.density, a.count, a.seed)
    except (S.ScheduleError, M.ModelError) as ex:
        _die(str(ex))
    results = [M.evaluate(s, m, warmup_cycles=a.warmup_cycles, measure_cycles=a.measure_cycles)
               for m in mats]
    print(f"RotorLB vs one-hop: {s.racks} racks, {len(s.rotors)} rotor(s), cycle {M.cycle_slots(s)} slots; "
          "throughput in uplink-slots delivered per slot (fraction of fabric capacity)")
    print(f"{'#':>3} {'pairs':>5} {'rotorlb':>16} {'one-hop':>16} {'ratio':>7} {'relay delay':>11}")
    for i, r in enumerate(results):
        lb, one = r.rotorlb, r.onehop
        dly = "-" if lb.mean_relay_delay is None else f"{lb.mean_relay_delay:.2f}"
        print(f"{i:>3} {len(r.pairs):>5} {lb.delivered_per_slot:>7.3f} ({lb.fraction:>6.1%}) "
              f"{one.delivered_per_slot:>7.3f} ({one.fraction:>6.1%}) {r.ratio:>7.3f} {dly:>11}")
    ratios = [r.ratio for r in results]
    summary = {"mean": statistics.fmean(ratios), "min": min(ratios), "max": max(ratios)}
    print(f"ratio over {len(ratios)} matrices: mean {summary['mean']:.3f}, "
          f"min {summary['min']:.3f}, max {summary['max']:.3f}")
    if a.output:
        doc: dict[str, Any] = {
            "schedule": a.schedule or {"kind": "rotornet", "racks": s.racks, "rotors": len(s.rotors)},
            "density": None if a.matrices else a.density, "seed": None if a.matrices else a.seed,
            "warmup_cycles": a.warmup_cycles, "measure_cycles": a.measure_cycles,
            "units": "uplink-slots delivered to the final destination per slot",
            "ratio": summary, "matrices": [r.to_json() for r in results]}
        try:
            write_output(a.output, json.dumps(doc, indent=1) + "\n", M.ModelError)
        except M.ModelError as ex:
            _die(str(ex))
        print(f"wrote {a.output}", file=sys.stderr)
    return 0


def add_model_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``model`` (with its ``rotorlb`` subcommand) on the top-level subparsers."""
    pm = sub.add_parser("model", help="analytical and fluid models (no switch needed)")
    sm = pm.add_subparsers(dest="sub", required=True)
    p = sm.add_parser("rotorlb", help="RotorLB vs one-hop throughput for saturated heavy pairs "
                                      "([McGuinness21 Fig. 2.10])")
    p.add_argument("--schedule", help="schedule file (default: rotornet, --racks racks, --rotors rotors)")
    p.add_argument("--racks", type=int_flag(2, MAX_RACKS), help="default 8")
    p.add_argument("--rotors", type=int_flag(1, MAX_ROTORS), help="default 1")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--matrices", metavar="FILE", help="JSON list of matrices, each a list of [src, dst] pairs")
    g.add_argument("--density", type=int_flag(1, MAX_RACKS ** 2), metavar="K",
                   help="random matrices of K distinct heavy pairs")
    p.add_argument("--count", type=int_flag(1, MAX_MATRICES), default=8, metavar="M",
                   help="with --density: matrices (default 8)")
    p.add_argument("--seed", type=int, default=1, help="with --density (default 1)")
    p.add_argument("--warmup-cycles", type=int_flag(0, MAX_CYCLES), default=8)
    p.add_argument("--measure-cycles", type=int_flag(1, MAX_CYCLES), default=16)
    p.add_argument("-o", "--output", metavar="OUT.json", help="also write the results here")
    p.set_defaults(fn=cmd_model_rotorlb)
