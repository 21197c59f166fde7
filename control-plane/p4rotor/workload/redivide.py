"""A finished FCT run divided again by another calibration (``p4rotor workload redivide``).

A run's slowdowns are its FCTs over the calibrated ideal (``ideal.py``) of the calibration it was
given or made.  Whether a share of flows below 1 is the run's or the calibration's is a question
of the denominator: the same FCTs over a calibration measured on another boot, on a quieter
machine, or with another estimator answer it.  Every ``per_flow`` row since the path class was
kept (``fct.per_flow``: id, class, bucket, FCT, size, path class) holds all a denominator needs;
older rows do not, and are refused.

Pure: reads two parsed JSON documents, returns rows; the CLI (``cli_fct.py``) prints them.
"""

from __future__ import annotations

from .cdf import WorkloadError
from .fct import BUCKETS
from .ideal import Calibration, emulation_of, run_calibration


def other_calibrations(cal_file: dict, where: str) -> dict[str, Calibration]:
    """A calibration.json (``experiment fct --calibrate-only``, or a run's own): per emulation."""
    if not isinstance(cal_file, dict) or not cal_file:
        raise WorkloadError(f"{where}: not a calibration.json (an object per emulation)")
    return {emu: Calibration.from_json(c, f"{where}: {emu}") for emu, c in cal_file.items()}


def redivide(run: dict, other: dict[str, Calibration], where: str, other_where: str) -> list[dict]:
    """Per mode, class and size bucket: flows, finished, flows below 1 and mean slowdown under the
    run's own calibration (``own``) and under ``other``.  A WorkloadError (one line) when a mode's
    rows have no path class, or ``other`` lacks the mode's emulation or was measured on another
    fabric (its fingerprint)."""
    rows = []
    for mode, m in sorted(run["modes"].items()):
        emu = emulation_of(mode)
        mine = run_calibration(run, mode)
        if mine is None:
            raise WorkloadError(f"{where}: mode {mode} has no calibration (a run made before the calibrated ideal)")
        own = Calibration.from_json(mine, f"{where}: mode {mode}'s calibration")
        if emu not in other:  # said in the output (lines), not divided
            rows.append({"mode": mode, "skipped": f"{other_where} has no {emu} calibration"})
            continue
        other[emu].check(own.fingerprint, other_where)
        per = m.get("per_flow") or []
        if any(len(f) < 6 for f in per):
            raise WorkloadError(f"{where}: mode {mode}: its per_flow rows have no path class (a run made before "
                                "they kept it), so it cannot be divided by another calibration")
        for cls in sorted({f[1] for f in per}):
            for name, _, _ in BUCKETS:
                fs = [f for f in per if f[1] == cls and f[2] == name]
                if not fs:
                    continue
                fin = [f for f in fs if f[3] is not None]
                row = {"mode": mode, "class": cls, "bucket": name, "flows": len(fs), "finished": len(fin)}
                for tag, cal in (("own", own), ("other", other[emu])):
                    slow = [f[3] / cal.ideal_s(int(f[4]), f[5]) for f in fin]
                    row[tag] = {"below_1": sum(x < 1 for x in slow),
                                "slowdown_mean": sum(slow) / len(slow) if slow else None}
                rows.append(row)
    if rows and all("skipped" in r for r in rows):
        raise WorkloadError(f"{other_where}: has no calibration for any mode of {where} "
                            f"({', '.join(sorted({emulation_of(r['mode']) for r in rows}))})")
    return rows


def lines(rows: list[dict]) -> list[str]:
    """``rows`` as a text table, then the whole run's share below 1 under each calibration."""
    out = [f"{'mode':<14}{'class':<12} {'bucket':<11}{'flows':>6}   {'below 1: own':>12} {'other':>6}   "
           f"{'mean slowdown: own':>18} {'other':>6}"]

    def num(x):
        return "-" if x is None else f"{x:.2f}"

    for r in rows:
        if "skipped" in r:
            continue
        out.append(f"{r['mode']:<14}{r['class']:<12} {r['bucket']:<11}{r['flows']:>6}   {r['own']['below_1']:>12} "
                   f"{r['other']['below_1']:>6}   {num(r['own']['slowdown_mean']):>18} {num(r['other']['slowdown_mean']):>6}")
    for mode in sorted({r["mode"] for r in rows}):
        skipped = [r["skipped"] for r in rows if r["mode"] == mode and "skipped" in r]
        if skipped:
            out.append(f"{mode}: not divided again: {skipped[0]}")
            continue
        fin = sum(r["finished"] for r in rows if r["mode"] == mode)
        a = sum(r["own"]["below_1"] for r in rows if r["mode"] == mode)
        b = sum(r["other"]["below_1"] for r in rows if r["mode"] == mode)
        if fin:
            out.append(f"{mode}: below 1 with its own calibration {a} of {fin} ({100 * a / fin:.2f} %), "
                       f"with the other {b} of {fin} ({100 * b / fin:.2f} %)")
    return out
