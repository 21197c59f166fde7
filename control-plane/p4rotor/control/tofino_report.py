"""The Tofino build's resource report (``make build-tofino``; docs/tofino.md).

Two questions a user of the TNA programs asks: what does the compiled pipeline use (p4/tofino.py,
from bf-p4c's logs), and do my fabric's tables fit the compiled sizes (the entries this controller
would write for an Opera fabric of N racks against the table sizes of p4src/shared/defines.p4).

    python -m p4rotor.control.tofino_report build/tofino   # writes build/tofino/resources.{json,md}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..p4 import constants as K
from ..p4.tofino import PHASE_KEY_BITS, PROGRAMS, TIME_UNIT_NS, ReportError, summarize
from ..schedule import generators as G
from ..schedule import routes as R


def fit(racks: int, rotors: int = 6, slot_us: int = 120, reconfig_us: int = 10) -> dict:
    """Entries the controller writes for an Opera fabric of ``racks`` racks and ``rotors``
    rotors, the largest per switch, against the compiled table sizes."""
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
        print("usage: python -m p4rotor.control.tofino_report BUILD_DIR   (bf-p4c output: BUILD_DIR/{rotor,tor}/)", file=sys.stderr)
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
