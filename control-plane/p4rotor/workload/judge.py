"""A finished fct run judged again from its files, and a flow list judged before any run.

``rejudge``: the stability of every fabric mode and its bulk flows against the low-load bound,
from ``fct.json`` and ``flows.json`` (``p4rotor workload stability RUN``); ``capacity_of``: is a
flow list within RotorLB's capacity on the default fabric (``p4rotor workload stability FILE``).
No fabric: the RotorLB model on the run's numbers (``plane.py``).
"""

from __future__ import annotations

from pathlib import Path

from .. import schedule as S
from ..inputs import read_json
from . import bound as B
from . import cdf as C
from . import fct as F
from . import flowlist
from . import stability as ST
from .plane import access_bps as access_of, pair_shares, rotorlb_alone, stability_judge, stability_plane


def rejudge(run: Path, rate: float = 100.0, guard_us: float = 10000.0) -> dict:
    """The stability of an earlier run, judged again from its ``fct.json`` and ``flows.json``
    (``p4rotor workload stability``): the fct.json with every fabric mode's ``stable`` and
    ``stability`` replaced (not written)."""
    r = read_json(run / "fct.json", C.WorkloadError, nonfinite=True)
    flows = flowlist.read(str(run / "flows.json"))[0]
    sched = S.generate_opera(8, 4, 1000, 100)
    args = (r.get("dilation", 100.0), r.get("hosts_per_rack", 1), r.get("agent_rate", rate),
            r.get("guard_us", guard_us))
    judge = stability_judge(sched, *args, r.get("shared_circuits", False))
    for mode, m in r["modes"].items():
        if m.get("pending_bytes") is None or m.get("arrivals_s") is None:
            continue
        st = judge(flows, m["cutoff_bytes"], [tuple(x) for x in m["pending_bytes"]], m["arrivals_s"])
        m["stable"], m["stability"] = st["stable"], st
    _rejudge_bulk(r, flows, *stability_plane(*args), args[1], r.get("shared_circuits", False))
    return r


def _rejudge_bulk(r: dict, flows, sched: S.Schedule, plane: ST.Plane, hosts_per_rack: int,
                  shared: bool = False) -> None:
    """Every mode's ``bulk_bound`` again from its ``per_flow`` FCTs, with the pair's capacity and
    RotorLB alone (:func:`rotorlb_alone`) beside the issue's bound, at the bound's own rate,
    duty and wait as the run recorded them."""
    by_id = {f.id: f for f in flows}
    alone = rotorlb_alone(sched, plane, hosts_per_rack)
    share = pair_shares(sched, flows, {h: rk for h, (rk, _) in plane.where.items()})
    for m in r["modes"].values():
        bb = m.get("bulk_bound")
        if not bb or not m.get("per_flow"):
            continue
        done = [F.Done(by_id[fid], cls, 0, None if fct is None else round(fct * 1e9))
                for fid, cls, _, fct, *_ in m["per_flow"]]
        m["bulk_bound"] = B.bulk_bound_check(done, bb["bulk_mbps"] * 1e6, bb["duty"], bb["wait_s"], share=share,
                                             model=alone, slot_s=plane.slot_s, shared=shared,
                                             rack_of={h: rk for h, (rk, _) in plane.where.items()})


def capacity_of(flow_list: str, hosts_per_rack: int = 2, dilation: float = 100.0, rate: float = 100.0,
                guard_us: float = 10000.0, rack_shared: bool = False) -> dict[str, dict]:
    """Before a run: is this flow list within RotorLB's capacity on the default fabric, for
    Opera (the default cutoff) and RotorNet (cutoff 0)?  The model alone (workload/stability.py,
    question 1), in seconds rather than the run's hours.  ``rack_shared``: the same question for
    racks whose hosts share their circuits (:meth:`ST.Plane.rack_shared`) instead of a plane per
    host."""
    flows = flowlist.read(flow_list)[0]
    s, plane = stability_plane(dilation, hosts_per_rack, rate, guard_us)
    for f in flows:
        for end in (f.src, f.dst):
            if end not in plane.where:
                raise C.WorkloadError(f"{flow_list}: flow {f.id}: host {end!r} is not in the default fabric with "
                                      f"{hosts_per_rack} hosts per rack (--hosts-per-rack?)")
    access_bps = access_of(len(s.rotors), rate)
    cutoff = access_bps / 8 * S.dilate(s, dilation).hyperperiod_us / 1e6
    plane = plane.rack_shared() if rack_shared else plane
    return {mode: dict(ST.capacity(s, flows, cut, plane), cutoff_bytes=cut)
            for mode, cut in (("opera", cutoff), ("rotornet", 0.0))}
