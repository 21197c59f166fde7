"""Issue #14's bound on bulk FCT at low load, and how a run's bulk flows met it.

The bound is one flow's: its bytes at the agents' rate while circuits are up, plus the wait for a
circuit (matchings + 1 slots).  Pure functions on a run's records (:class:`.fct.Done`): how many
flows met it, split by what ran beside them, against RotorLB's capacity and RotorLB alone in its
model; and the verdict at low load.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..rotorlb.wire import UDP_OVERHEAD
from ..stats import percentile
from .fct import Done


def bulk_bound_s(size: int, bulk_bps: float, duty: float, wait_s: float, frame: int = 1400) -> float:
    """Issue #14's low-load bound on a bulk flow's FCT: its bytes at the bulk rate while circuits
    are up (``bulk_bps`` x ``duty``) plus the wait for capacity (``wait_s``: matchings + 1 slots).
    Bytes are the agents' frames: ``size`` in ``frame``-byte payloads, ``UDP_OVERHEAD`` bytes of headers each."""
    frames = max(1, math.ceil(size / frame))
    return 8 * (size + UDP_OVERHEAD * frames) / (bulk_bps * duty) + wait_s


def bulk_bound_check(done: Sequence[Done], bulk_bps: float, duty: float, wait_s: float,
                     share: dict[int, float] | None = None, model=None, slot_s: float | None = None,
                     shared: bool = False, rack_of: dict[str, int] | None = None) -> dict:
    """How many finished bulk flows met :func:`bulk_bound_s`, and the worst FCT / bound.

    ``share`` (flow id -> fraction of the K uplinks RotorLB can give its rack pair, from the model:
    :func:`p4rotor.rotorlb.model.evaluate` of that pair alone) also judges each flow against the
    bound at its pair's capacity: the issue's bound lets one flow use all K uplinks, but a pair's
    relayed traffic drains through its intermediates' own circuits to the destination -- at 8
    racks x 4 rotors, 6 relays of one slot per 2-slot cycle plus the direct circuit: 3.5 of 4
    (48 of 56 pairs; 4.0 for the 8 the extra matching serves twice).

    ``model`` (flow -> (s, s, s): its FCT alone in RotorLB's model, as the fabric runs it and with
    the rack's hosts sharing its circuits, and the bound on the agents' own frames;
    plane.py: ``rotorlb_alone``) adds ``rotorlb_alone``: how many flows the model alone
    meets the bound with, either way (and sharing, the bound on the agents' frames: their header
    counted), and how far each measured FCT is from the model's for the same flow (ratio; excess
    in ``slot_s``) -- from the model as the run was made: a plane per host, or (``shared``, the
    run's ``--share-circuits``) the rack's hosts sharing its circuits (``compared_with``).

    ``rack_of`` (host -> rack) splits the flows into ``alone_at_racks`` and ``contended``: a bulk
    flow is contended when another bulk flow from its source rack or to its destination rack
    runs at the same time (an unfinished one: until the end).  The bound is one flow's, alone; at
    Web Search 1 % 53 of 392 shared their racks with another.  It also splits them into
    ``alone_in_fabric`` and ``beside_another``: RotorLB relays a flow through every other rack, so
    a bulk flow anywhere in the fabric at the same time takes some of the circuits its two-hop
    paths need -- a flow with no other bulk flow running is the bound's "one flow alone" exactly
    (Web Search 1 %, shared: 236 of 392).  Each: flows, within, median and worst ratio."""
    fin = [d for d in done if d.cls == "bulk" and d.fct_s is not None]
    ratios = [d.fct_s / bulk_bound_s(d.flow.size, bulk_bps, duty, wait_s) for d in fin]
    out = {"flows": len(fin), "within": sum(r <= 1 for r in ratios),
           "worst_ratio": max(ratios) if ratios else None,
           "median_ratio": percentile(ratios, 50) if ratios else None,
           "bulk_mbps": bulk_bps / 1e6, "duty": duty, "wait_s": wait_s}
    if share:
        cap = [d.fct_s / bulk_bound_s(d.flow.size, bulk_bps * share.get(d.flow.id, 1.0), duty, wait_s) for d in fin]
        out["pair_capacity"] = {"within": sum(r <= 1 for r in cap), "worst_ratio": max(cap) if cap else None,
                                "median_ratio": percentile(cap, 50) if cap else None,
                                "shares": sorted(set(round(share.get(d.flow.id, 1.0), 4) for d in fin))}
    if rack_of is not None and fin:
        ratio_of = {d.flow.id: r for d, r in zip(fin, ratios)}
        alone, contended = [], []
        solo, beside = [], []
        for d in fin:
            (contended if _contended(d, done, rack_of) else alone).append(ratio_of[d.flow.id])
            (beside if _contended(d, done, None) else solo).append(ratio_of[d.flow.id])
        for name, rs in (("alone_at_racks", alone), ("contended", contended),
                         ("alone_in_fabric", solo), ("beside_another", beside)):
            out[name] = {"flows": len(rs), "within": sum(r <= 1 for r in rs),
                         "median_ratio": percentile(rs, 50) if rs else None, "worst_ratio": max(rs) if rs else None}
    if model and fin:
        m = [(d, *model(d.flow), bulk_bound_s(d.flow.size, bulk_bps, duty, wait_s)) for d in fin]
        ref = [rack if shared else planes for _, planes, rack, _, _ in m]
        ratio = [d.fct_s / x for (d, *_), x in zip(m, ref)]
        excess = [(d.fct_s - x) / slot_s for (d, *_), x in zip(m, ref)] if slot_s else []
        out["rotorlb_alone"] = {
            "model_within": sum(planes <= b for _, planes, _, _, b in m),
            "rack_shared_within": sum(rack <= b for _, _, rack, _, b in m),
            "rack_shared_within_frames": sum(rack <= fb for _, _, rack, fb, _ in m),
            "compared_with": "rack_shared" if shared else "plane_per_host",
            "median_ratio": percentile(ratio, 50), "p90_ratio": percentile(ratio, 90),
            "excess_slots_median": percentile(excess, 50) if excess else None,
            "excess_slots_p90": percentile(excess, 90) if excess else None,
            "within_one_slot": sum(x <= 1 for x in excess) if excess else None,
            # per flow: [id, size, measured s, model s (a plane per host), model s (shared), bound s]
            "per_flow": [[d.flow.id, d.flow.size, d.fct_s, round(planes, 6), round(rack, 6), round(b, 6)]
                         for d, planes, rack, _, b in m]}
    return out


def above_bound(done: Sequence[Done], paths: dict[int, dict], bulk_bps: float, duty: float, wait_s: float,
                **_) -> list[dict]:
    """The finished bulk flows above :func:`bulk_bound_s`, worst first: id, hosts, size, FCT, bound,
    their ratio, whether another bulk flow ran in the fabric meanwhile (``beside_another``), and
    how it went at the agents (``paths``: agents.py ``bulk_paths``; {} for runs from
    before it).  What ``bulk_bound.above`` keeps, so a flow above the bound is explained from
    ``fct.json``; the other keyword arguments (the model, the racks) are the bound's, not needed."""
    out = []
    for d in done:
        if d.cls != "bulk" or d.fct_s is None:
            continue
        b = bulk_bound_s(d.flow.size, bulk_bps, duty, wait_s)
        if d.fct_s > b:
            out.append({"id": d.flow.id, "src": d.flow.src, "dst": d.flow.dst, "size": d.flow.size,
                        "fct_s": round(d.fct_s, 6), "bound_s": round(b, 6), "ratio": round(d.fct_s / b, 4),
                        "beside_another": _contended(d, done, None), **paths.get(d.flow.id, {})})
    return sorted(out, key=lambda x: -x["ratio"])


def rack_alone_numbers(bb: dict, fabric: bool = True) -> str:
    """``bulk_bound_check``'s split by contention at the racks, as a clause ("" without it);
    ``fabric``: and the flows alone in the fabric."""
    a, c = bb.get("alone_at_racks"), bb.get("contended")
    if not a:
        return ""
    out = (f"; alone at their racks {a['within']}/{a['flows']}"
           + (f" (worst {a['worst_ratio']:.2f}x)" if a["flows"] else "")
           + f", sharing a rack with another bulk flow {c['within']}/{c['flows']}")
    f = bb.get("alone_in_fabric")
    if f and fabric:  # runs judged before the split have none
        out += (f"; alone in the fabric {f['within']}/{f['flows']}"
                + (f" (worst {f['worst_ratio']:.2f}x)" if f["flows"] else ""))
    return out


def _contended(d: Done, done: Sequence[Done], rack_of: dict[str, int] | None) -> bool:
    """Another bulk flow from ``d``'s source rack or to its destination rack runs while it does
    (``rack_of`` None: another bulk flow anywhere)."""
    s, e = d.flow.start, d.flow.start + d.fct_s
    for o in done:
        if o is d or o.cls != "bulk":
            continue
        if rack_of is not None and (rack_of[o.flow.src] != rack_of[d.flow.src]
                                    and rack_of[o.flow.dst] != rack_of[d.flow.dst]):
            continue
        oe = math.inf if o.fct_s is None else o.flow.start + o.fct_s
        if o.flow.start < e and s < oe:
            return True
    return False


def bulk_bound_verdict(bb: dict, low: bool) -> tuple[bool | None, str]:
    """Issue #14's "at low load, bulk FCT <= size / (access rate x duty) + (matchings + 1) slots",
    judged on one mode's ``bulk_bound``: (passed, the clause naming what was judged).

    The bound is one flow's: its size at its host's whole access rate.  Two bulk flows that run at
    once from one host share that access rate, and RotorLB relays every flow through every other
    rack's circuits, so a flow beside another anywhere in the fabric is not at low load whatever the
    run's average.  So a low-load run is judged on its flows that had the fabric to themselves
    (``alone_in_fabric``: no other bulk flow running at any time between its start and its end);
    every flow is shown beside it, not judged.  A run from before the split, with none of them, is
    judged on every flow; a run whose every bulk flow ran beside another cannot judge it (None)."""
    if not low:
        return None, ""
    solo = bb.get("alone_in_fabric")
    if solo is None:
        return bb["within"] == bb["flows"], ""
    if not solo["flows"]:
        return None, "no bulk flow had the fabric to itself (judged on those); "
    return (solo["within"] == solo["flows"],
            f"alone in the fabric (judged: the bound is one flow's) {solo['within']}/{solo['flows']}, "
            f"worst {solo['worst_ratio']:.2f}x, median {solo['median_ratio']:.2f}x; shown, not judged: ")
