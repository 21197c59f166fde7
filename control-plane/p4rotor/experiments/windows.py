"""The agents' circuit windows from measurement: the guard kept free at both ends of each day and
the share of the window's time frames are planned for (``fill``), derived from what the compiled
data path (rlbd) measures on the fabric, instead of fixed numbers (a 20 ms wall guard and 80 %).

1. **Guard.** A frame planned last leaves up to the sender's pacing lateness after the window's
   end, then crosses the fabric; it must be through the rotor before the day ends.  Uniform
   one-hop at the sweep's rate, with the guard the user gave, measures both (rlbd's
   ``pacing_error_us`` and ``transit_us``, p99.9, the worst agent); the guard is twice their sum,
   rounded up to 100 µs and at least 200 µs.
2. **Fill.** With that guard and every window planned full (fill 1), one heavy pair under RotorLB
   (rack 0 to rack 1: its frames go direct and through every other rack, so windows carry
   relays and frames granted after an OFFER/ACCEPT exchange) says what share of the planned
   frames went back unsent (a window that started late, frames granted too late to fit, a stall
   the 1.2x catch-up did not make up); the fill is one less twice that share, rounded down to a
   percent.  (Measured on uniform one-hop instead, which has no exchange, the fill came out at
   0.92 and the sweep's heavy pair fell to 6.2x one-hop, model 7.)
3. A third run at that guard and fill is the measurement the sweep relies on: the fabric's bulk
   capacity (uniform one-hop, frames delivered per second) against its physical bound -- every
   rack's circuit carrying the rate for the day's share of each slot (duty cycle x rate x racks;
   one uplink per rack in RotorNet).  If it lost or dropped a frame, the derived windows are
   reported and not used.
"""

from __future__ import annotations

import math
from pathlib import Path

from .. import schedule as S
from ..fabric.switch import HarnessError
from .runner import say

GUARD_FLOOR_US = 200.0
GUARD_FACTOR = 2.0
FILL_FACTOR = 2.0
CAPACITY_GOAL = 0.85  # of the physical bound


def _uniform(topo) -> list[tuple[int, int]]:
    racks = range(len(topo.racks))
    return [(o, d) for o in racks for d in racks if o != d]


def measure_windows(emu, topo, ds: S.Schedule, out: Path, rate: float, guard_us: float) -> dict:
    """Guard and fill for rlbd agents at ``rate`` on this fabric (steps 1-3 above)."""
    from .rotorlb import agent_drops, run_pairs

    uniform = _uniform(topo)
    first = run_pairs(emu, topo, ds, out / "windows-1-measure", uniform, True, rate, guard_us, 1, datapath="c")
    lateness, transit = first["pacing_error_us_p999"], first["transit_us_p999"]
    if lateness is None or transit is None:
        raise HarnessError("windows: the agents measured no pacing or transit (no frame sent?)")
    guard = max(GUARD_FLOOR_US, math.ceil(GUARD_FACTOR * (lateness + transit) / 100) * 100)
    if 2 * guard >= ds.day_us:
        raise HarnessError(f"windows: the measured guard {guard:g} us leaves nothing of the {ds.day_us} us day")
    full = run_pairs(emu, topo, ds, out / "windows-2-fill", [(0, 1)], False, rate, guard, 1, datapath="c", fill=1.0)
    unsent = full["unsent_returned"] / full["planned"] if full["planned"] else 1.0
    fill = math.floor(100 * (1 - FILL_FACTOR * unsent)) / 100
    if fill <= 0:
        raise HarnessError(f"windows: {unsent:.1%} of planned frames went back unsent with full windows")
    check = run_pairs(emu, topo, ds, out / "windows-3-check", uniform, True, rate, guard, 1, datapath="c", fill=fill)
    duty = ds.day_us / ds.slot_us
    bound = duty * rate * len(topo.racks)
    drops = agent_drops(check)
    res = {"rate_fps": rate, "guard_us_given": guard_us, "pacing_lateness_us_p999": lateness,
           "transit_us_p999": transit, "guard_us": guard, "full_windows_unsent_share": round(unsent, 4),
           "fill": fill, "capacity_fps": round(check["throughput_fps"], 1), "physical_bound_fps": round(bound, 1),
           "capacity_of_bound": round(check["throughput_fps"] / bound, 3), "capacity_goal": CAPACITY_GOAL,
           "lost": check["lost"], "drops": drops, "unsent_returned": check["unsent_returned"],
           "window_share_of_slot": round((ds.day_us - 2 * guard) / ds.slot_us * fill, 3)}
    res["meets_goal"] = res["capacity_of_bound"] >= CAPACITY_GOAL and not check["lost"] and not drops
    # Lost or dropped frames at the derived windows: they are reported, and not used.
    res["used"] = not check["lost"] and not drops
    say(f"[experiment] rotorlb: windows from measurement: pacing p99.9 {lateness} us + transit p99.9 {transit} us "
        f"-> guard {guard:g} us (given {guard_us:g}); full windows left {unsent:.2%} unsent -> fill {fill:.2f}; "
        f"capacity {res['capacity_fps']:.0f} of the bound {bound:.0f} frames/s ({res['capacity_of_bound']:.2f}, "
        f"goal {CAPACITY_GOAL}), lost {check['lost']}, drops {drops}")
    if not res["used"]:
        say(f"[experiment] rotorlb: the derived windows lost {check['lost']} frames and dropped {drops}: "
            f"the sweep keeps the given guard ({guard_us:g} us) and the default fill")
    return res
