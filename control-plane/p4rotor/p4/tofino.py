"""What a compiled Tofino pipeline uses (stages, SRAM, TCAM, PHV), read from bf-p4c's
``pipe/logs/resources.json`` and ``metrics.json``, and the Tofino 1 limits it is held to.
control/tofino_report.py writes the build's resource report from it (``make build-tofino``;
docs/tofino.md).
"""

from __future__ import annotations

import json
from pathlib import Path

PROGRAMS = ("rotor", "tor")
# Tofino 1, per pipe: 12 MAU stages of 80 SRAM and 24 TCAM blocks; normal PHV containers
# 64 x 8-bit, 96 x 16-bit, 64 x 32-bit.
STAGES, SRAMS, TCAMS = 12, 12 * 80, 12 * 24
PHV_CONTAINERS = {8: 64, 16: 96, 32: 64}
PHASE_KEY_BITS, TIME_UNIT_NS = 16, 1024   # p4src/tna/include/control/slot_state.p4


class ReportError(Exception):
    pass


def summarize(out: Path) -> dict:
    """What one compiled program uses, from bf-p4c's logs in ``out``/pipe/logs (--verbose 2)."""
    logs = out / "pipe" / "logs"
    try:
        res = json.loads((logs / "resources.json").read_text())["resources"]
        metrics = json.loads((logs / "metrics.json").read_text())
    except (OSError, ValueError, KeyError) as ex:
        raise ReportError(f"{logs}: no bf-p4c resource logs ({ex}); compile with --verbose 2") from None
    stages = res["mau"]["mau_stages"]
    used = [s for s in stages if s.get("logical_tables", {}).get("ids")]
    srams = sum(len(s.get("rams", {}).get("srams", [])) for s in stages)
    tcams = sum(len(s.get("tcams", {}).get("tcams", [])) for s in stages)
    phv = {int(c["bit_width"]): int(c["containers_occupied"]) for c in metrics["phv"]["normal"]}
    return {
        "compiler": metrics.get("compiler_version"),
        "stages": 1 + max((int(s["stage_number"]) for s in used), default=-1),
        "logical_tables": sum(len(s["logical_tables"]["ids"]) for s in used),
        "sram_blocks": srams,
        "tcam_blocks": tcams,
        "phv_containers": phv,
        "compile_s": round(float(metrics.get("compilation_time", 0.0)), 1),
    }
