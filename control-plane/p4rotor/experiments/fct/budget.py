"""A point's wall-time budget (``experiment fct --wall-budget MIN``; ``make fct-sweep``'s
FCT_BUDGET): how long a run of a flow list will take, from what its parts took on the default
fabric, and the most flows of the list's workload and load that fit.  A point's arrivals last
flows / (flows per second), whatever the scaling (docs/fct.md, "What a point costs"), and each
mode runs them again, so fewer flows is the only knob a budget has.  Whether the run then kept
to it is measured, not assumed: run.json records the wall time beside the budget."""

from __future__ import annotations

import math

from ...workload.cdf import WorkloadError

# What the parts took on the default eBPF fabric (8 racks x 2 hosts, dilation 100): a
# calibration of the idle fabric 293 s (Web Search 1 %); a mode's start, drain tail and stop
# about a minute; 100 flows replayed alone 155 s.
CALIBRATION_S = 300.0
MODE_OVERHEAD_S = 60.0
REPLAY_S_PER_FLOW = 1.6
MIN_FLOWS = 100  # below this a point's buckets hold too few flows to judge (10 a bucket)
# The share of the budget a reduced list aims at: drains and replays vary from run to run.
AIM = 0.9


def estimate_s(arrivals_s: float, modes: int, replay: int, calibrated: bool) -> float:
    """Wall seconds for ``modes`` runs of a list whose arrivals last ``arrivals_s``, each with
    ``replay`` flows replayed alone after it, and the calibration unless ``calibrated``."""
    return (0.0 if calibrated else CALIBRATION_S) + modes * (arrivals_s + MODE_OVERHEAD_S + replay * REPLAY_S_PER_FLOW)


def fit(flows: int, arrivals_s: float, modes: int, replay: int, calibrated: bool, budget_s: float) -> int:
    """All ``flows`` (whose arrivals last ``arrivals_s``) if their run fits ``budget_s``, else
    the most whose run fits :data:`AIM` of it; a one-line error when not even :data:`MIN_FLOWS` do."""
    if estimate_s(arrivals_s, modes, replay, calibrated) <= budget_s:
        return flows
    per_flow_s = arrivals_s / max(flows, 1)
    room_s = AIM * budget_s - estimate_s(0.0, modes, replay, calibrated)
    n = math.floor(room_s / (modes * per_flow_s)) if room_s > 0 and per_flow_s > 0 else 0
    if n < MIN_FLOWS:
        need = estimate_s(MIN_FLOWS * per_flow_s, modes, replay, calibrated)
        raise WorkloadError(f"--wall-budget {budget_s / 60:g} min: not even {MIN_FLOWS} flows fit at this load "
                            f"({modes} mode(s), {replay} replayed each{', the calibration' if not calibrated else ''}: "
                            f"~{need / 60:.0f} min); raise the budget, or run fewer modes or replays")
    return min(n, flows)
