"""The Tofino build's resource report (``make build-tofino``; docs/tofino.md).

Two questions a user of the TNA programs asks: what does the compiled pipeline use (stages,
SRAM, TCAM, PHV: read from bf-p4c's ``pipe/logs/resources.json`` and ``metrics.json``), and do
my fabric's tables fit the compiled sizes (entries the controller would write for an Opera
fabric of N racks against the table sizes of p4src/shared/defines.p4).

    python -m p4rotor.p4.tofino build/tofino            # writes build/tofino/resources.{json,md}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import constants as K

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


def fit(racks: int, rotors: int = 6, slot_us: int = 120, reconfig_us: int = 10) -> dict:
    """Entries the controller writes for an Opera fabric of ``racks`` racks and ``rotors``
    rotors, the largest per switch, against the compiled table sizes."""
    from ..schedule import generators as G
    from ..schedule import routes as R

    s = G.generate_opera(racks, rotors, slot_us, reconfig_us)
    m = max(len(r.matchings) for r in s.rotors)
    routes = R.compute(s)
    per_tor = [0] * racks
    for sr in routes:
        for (src, _dst, _tc) in sr.hops:
            per_tor[src] += 1
    cycle_units = max(s.cycle_us(r) for r in s.rotors) * 1000 / TIME_UNIT_NS
    hyper_units = s.hyperperiod_us * 1000 / TIME_UNIT_NS
    need = {
        "circuit": (racks * m, K.CIRCUIT_TABLE_SIZE),
        "clock_phase (rotor)": (m, K.CLOCK_PHASE_TABLE_SIZE),
        "clock_phase / slice_info (ToR)": (len(routes), min(K.CLOCK_PHASE_TABLE_SIZE, K.SLICE_TABLE_SIZE)),
        "route (ToR)": (max(per_tor), K.ROUTE_TABLE_SIZE),
    }
    return {
        "racks": racks, "rotors": rotors, "matchings": m, "slices": len(routes),
        "tables": {k: {"entries": n, "size": cap, "fits": n <= cap} for k, (n, cap) in need.items()},
        # The phase key holds 16 bits of 1024-ns units: a ToR's cycle is the hyperperiod.
        "max_slot_us": int(((1 << PHASE_KEY_BITS) - 1) * TIME_UNIT_NS / 1000 * slot_us / (hyper_units * TIME_UNIT_NS / 1000)),
        "cycle_fits": hyper_units < 1 << PHASE_KEY_BITS and cycle_units < 1 << PHASE_KEY_BITS,
    }


def markdown(summary: dict[str, dict], fits: list[dict]) -> str:
    lines = ["| program | stages (of 12) | logical tables | SRAM blocks (of 960) | TCAM blocks (of 288) | PHV 8/16/32-bit (of 64/96/64) |",
             "|---|---|---|---|---|---|"]
    for prog, s in summary.items():
        p = s["phv_containers"]
        lines.append(f"| {prog} | {s['stages']} | {s['logical_tables']} | {s['sram_blocks']} | {s['tcam_blocks']} | "
                     f"{p.get(8, 0)}/{p.get(16, 0)}/{p.get(32, 0)} |")
    lines += ["", "| racks | rotors | matchings | slices | circuit | route (ToR) | clock_phase (ToR) | longest slot for the 16-bit phase key |",
              "|---|---|---|---|---|---|---|---|"]
    for f in fits:
        t = f["tables"]
        cell = lambda k: f"{t[k]['entries']} / {t[k]['size']}" + ("" if t[k]["fits"] else " **no**")
        lines.append(f"| {f['racks']} | {f['rotors']} | {f['matchings']} | {f['slices']} | {cell('circuit')} | "
                     f"{cell('route (ToR)')} | {cell('clock_phase / slice_info (ToR)')} | {f['max_slot_us']} us |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m p4rotor.p4.tofino BUILD_DIR   (bf-p4c output: BUILD_DIR/{rotor,tor}/)", file=sys.stderr)
        return 2
    build = Path(argv[0])
    try:
        summary = {p: summarize(build / p) for p in PROGRAMS}
    except ReportError as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
    fits = [fit(n, rotors=k) for n, k in ((8, 4), (32, 4), (64, 4), (108, 6))]
    (build / "resources.json").write_text(json.dumps({"programs": summary, "fits": fits}, indent=2) + "\n")
    (build / "resources.md").write_text(markdown(summary, fits))
    sys.stdout.write(markdown(summary, fits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
