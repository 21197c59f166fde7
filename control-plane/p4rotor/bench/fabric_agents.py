"""What one host's agent sustains on the emulated fabric: rack 0's agent sends one-hop to rack 1
inside its direct circuit's windows (RotorNet, 8 racks, dilation 200, a 20 ms wall guard at both
ends of each day), the Python agent at its calibrated rate and rlbd at rising rates, on the same
fabric in one run (experiments/rotorlb.py: ``run_pairs``).  A window carries 80 % of what its
time holds at the rate (wire.WINDOW_SLACK); the row says what share of that arrived, and the
rate inside the window that makes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .. import schedule as S
from ..experiments.rotorlb import run_pairs
from ..experiments.runner import launch
from ..rotorlb.wire import WINDOW_SLACK

DILATION, GUARD_US, CYCLES = 200.0, 20_000.0, 2
RUNS = (("python", 1200), ("c", 25_000), ("c", 50_000), ("c", 75_000), ("c", 100_000))


def run_fabric_agents(build: Path, target: str = "ebpf", runs=RUNS, say=print) -> dict:
    sched = S.generate_rotornet(8, 1, 1000, 100)
    ds = S.dilate(sched, DILATION)
    window_s = (ds.day_us - 2 * GUARD_US) / 1e6
    rows = []
    with tempfile.TemporaryDirectory(prefix="p4rotor-fabric-agents-") as tmp:  # logs, not results
        emu, topo = launch(sched, DILATION, 1, build, Path(tmp) / "run", target=target)
        try:
            for datapath, rate in runs:
                r = run_pairs(emu, topo, ds, Path(tmp) / f"{datapath}-{rate}", [(0, 1)], True, rate, GUARD_US,
                              CYCLES, datapath=datapath)
                windows = CYCLES  # rack 0 meets rack 1 once a cycle
                per_window = r["throughput_fps"] * (ds.hyperperiod_us / 1e6) if r["throughput_fps"] else 0
                planned = r["capacity_frames"]
                row = {"datapath": datapath, "rate_fps": rate, "windows": windows, "window_s": window_s,
                       "planned_per_window": planned, "delivered_per_window": round(per_window, 1),
                       "share_of_plan": round(per_window / planned, 3) if planned else None,
                       "in_window_fps": round(per_window / (window_s * (1 - WINDOW_SLACK))),
                       "lost": r["lost"], "duplicates": r["duplicates"], "switch_drops": r["switch_drops"],
                       "kernel_drops": r["kernel_drops"], "pacing_error_us_p99": r["pacing_error_us_p99"]}
                rows.append(row)
                say(f"[bench]   {datapath} at {rate} frames/s: {row['delivered_per_window']:.0f} of "
                    f"{planned} planned per window ({row['share_of_plan']}), {row['in_window_fps']} frames/s "
                    f"in the window, lost {row['lost']}, drops {row['switch_drops'] or 0}")
        finally:
            emu.stop()
    return {"target": target, "dilation": DILATION, "guard_us_wall": GUARD_US, "cycles": CYCLES, "rows": rows}
