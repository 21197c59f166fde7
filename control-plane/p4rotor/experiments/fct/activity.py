"""Each fabric mode's measured activity: the controller's recorder reads every switch's per-slot
counters for the whole emulation (calibration, every mode, the replays alone); each mode's flows
-- first arrival to last byte delivered, the span the reconstruction covers -- are cut out of
that file by the wall clock into ``activity-MODE.json``, what ``p4rotor energy`` reads as that
mode's activity (control/activity_recorder.window; docs/energy.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...control.activity_recorder import load, window
from ..runner import say


def cut_activity(recorded: Path, out: Path, windows: dict[str, tuple[float, float]]) -> dict[str, str]:
    """Write ``out``/activity-MODE.json for each mode's ``(start, end)`` wall-clock window of the
    recorder's file ``recorded``; returns {mode: file name} of those written.  A mode the reads
    do not cover is said, in one line, and left to the reconstruction (the run's results stand)."""
    try:
        doc = load(Path(recorded))
    except (OSError, ValueError) as ex:
        say(f"[experiment] fct: no measured activity: {recorded}: {str(ex)[:120]}")
        return {}
    written = {}
    for mode, (a, b) in windows.items():
        try:
            part = window(doc, a, b)
        except (ValueError, KeyError, TypeError) as ex:
            say(f"[experiment] fct: {mode}: no measured activity ({str(ex)[:160]}); energy reconstructs it")
            continue
        name = f"activity-{mode}.json"
        tmp = out / (name + ".tmp")
        tmp.write_text(json.dumps(part, separators=(",", ":")) + "\n")
        os.replace(tmp, out / name)
        w = part["window"]
        say(f"[experiment] fct: {mode}: measured activity in {name} ({len(part['intervals'])} reads over "
            f"{w['read_s'][1]:.1f} s, the flows' {w['asked_s'][1] - w['asked_s'][0]:.1f} s of them)")
        written[mode] = name
    return written
