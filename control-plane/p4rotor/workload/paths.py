"""One-packet low-latency flows judged by the path they met, alone and in a run.

Alone in Opera a flow rides the low-latency path of the slice it starts in (1-3 rack hops at 8 x
4), so a one-packet flow is judged against the one-packet FCTs on its own path class
(:class:`PathKeys`; the packet switch's one path: :class:`OneSwitch`), alone and in the run,
pooled.  ``repath`` does it again from a finished run's files (``p4rotor workload paths``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import schedule as S
from ..schedule import routes as R
from ..stats import percentile
from . import cdf as C
from . import fct as F
from . import flowlist
from .scale import MSS


def arrival_ns(rec: dict) -> int:
    """When a received flow's last byte reached its host: ``rx_ns`` (the kernel's stamp), or, in
    logs written before it was recorded, ``done_ns`` (when the receiver read it).  The record is
    host/flows.py's receive log line."""
    return rec["rx_ns"] if rec.get("rx_ns") is not None else rec["done_ns"]


class PathKeys:
    """A TCP flow's path class: "F-B", the rack hops of the low-latency path there (SYN, data)
    and back (SYN-ACK) in the slice where it began (``t_ns``, wall; ``t0_ns``: the schedule's
    slot 0), None if either has no path then."""

    def __init__(self, clock: R.PathClock, t0_ns: int, racks: dict[str, int]):
        self.clock, self.t0_ns, self.racks = clock, t0_ns, racks

    def __call__(self, src: int, dst: int, t_ns: int) -> str | None:
        t_us = (t_ns - self.t0_ns) / 1000
        there, back = self.clock.hops(t_us, src, dst), self.clock.hops(t_us, dst, src)
        return None if there is None or back is None else f"{there}-{back}"

    def of(self, d: F.Done) -> str | None:
        return self(self.racks[d.flow.src], self.racks[d.flow.dst], d.start_ns)


class OneSwitch:
    """:class:`PathKeys` for the packet switch: every flow crosses its one switch, one path."""

    KEY = "switch"

    def __call__(self, src: int, dst: int, t_ns: int) -> str:
        return self.KEY

    def of(self, d: F.Done) -> str:
        return self.KEY


def alone_samples(d: Path, rack_of_host: dict[str, int], rack_of_ip: dict[str, int]) -> list[tuple[int, int, int, float]]:
    """The one-packet flows alone (experiments/fct/calibrate.py: ``measure_alone``), from its files
    in ``d`` (what each host sent, when it began each, when each arrived): (source rack,
    destination rack, issued ns, FCT s) per flow."""
    sent: dict[int, tuple[str, str]] = {}
    for f in d.glob("flows-*.json"):
        for fl in json.loads(f.read_text()):
            sent[fl["id"]] = (f.name[len("flows-"):-len(".json")], fl["dst"])
    issued: dict[int, int] = {}
    for f in d.glob("tx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            issued[r["id"]] = r["issued_ns"]
    out = []
    for f in d.glob("rx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["id"] in sent and r["id"] in issued:
                src, dst = sent[r["id"]]
                out.append((rack_of_host[src], rack_of_ip[dst], issued[r["id"]], (arrival_ns(r) - issued[r["id"]]) / 1e9))
    return out


def one_packet(d: F.Done) -> bool:
    """A low-latency flow of one segment's payload: its alone FCT is the floor (by path), no size curve."""
    return d.cls == "low-latency" and d.flow.size <= MSS


def alone_by_path(done: list, floor_s: float, samples, key_of: PathKeys) -> tuple[dict[str, float], dict[str, dict]]:
    """Per path class (:class:`PathKeys`), what it adds to the one-packet floor: the 5th
    percentile (:func:`F.path_alone`) of the one-packet flows of that class, alone (``samples``:
    :func:`alone_samples`) or in the run (``done``'s finished one-packet flows) -- at low load
    most run flows meet an idle path, and the run's thousands steady the calibration's hundreds.
    Returns the offsets and, per class, the offset, the fastest flow's (``fastest_offset_s``,
    :func:`F.path_offsets`: the strict alone, shown beside) and how many flows of each kind it
    is taken over.  Only one-packet flows: a larger flow's alone comes from the size curve,
    itself the fastest of every path (flows met a shorter path mid-flow), which judges it as
    before."""
    res, fcts = [], {}
    for a, b, t, fct in samples:
        k = key_of(a, b, t)
        res.append((k, fct - floor_s))
        fcts.setdefault(k, ([], []))[0].append(fct)
    for d in done:
        if one_packet(d) and d.fct_s is not None:
            k = key_of.of(d)
            res.append((k, d.fct_s - floor_s))
            fcts.setdefault(k, ([], []))[1].append(d.fct_s)
    offsets, fastest = F.path_alone(res), F.path_offsets(res)
    return offsets, {k: {"offset_s": v, "percentile": F.ALONE_PERCENTILE, "fastest_offset_s": fastest[k],
                         "alone_s": round(floor_s + v, 7), "fastest_s": round(floor_s + fastest[k], 7),
                         "alone_samples": len(fcts[k][0]), "run_flows": len(fcts[k][1]),
                         # The two spreads, for paths_plot and a reader: FCT s at these percentiles.
                         "alone_fct_s": _quantiles(fcts[k][0]), "run_fct_s": _quantiles(fcts[k][1])}
                     for k, v in offsets.items()}


QUANTILES = (0, 5, 10, 25, 50, 75, 90, 95, 99, 100)


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    return {f"p{q}": round(percentile(xs, q), 7) for q in QUANTILES} if xs else None


def judge_by_path(done: list, floor_s: float, samples, key_of: PathKeys, pooled: list,
                  access_bps: float, factor: float) -> tuple[list, dict]:
    """The low-latency class's one-packet flows judged against their own path's alone
    (:func:`alone_by_path` over ``pooled``, every mode's flows): ``done`` with those flows'
    alone set, and what fct.json keeps of it -- ``alone_by_path``, ``low_latency_within_spread``
    (flows faster than their path's alone: their own alone, slowdown 1), and the class's mean
    slowdown the two stricter ways, shown beside: against the fastest flow on its own path
    (``low_latency_vs_fastest``) and on any path (``low_latency_vs_floor``)."""
    offsets, by_path = alone_by_path(pooled, floor_s, samples, key_of)

    def mean(ds: list) -> float | None:
        return F.class_mean(F.summarize(ds, access_bps, factor).get("low-latency", {}))

    fastest = {k: v["fastest_offset_s"] for k, v in by_path.items()}
    strict, _ = F.with_path_alone(done, floor_s, fastest, key_of.of, one_packet)
    judged, within = F.with_path_alone(done, floor_s, offsets, key_of.of, one_packet)
    return judged, {"alone_by_path": by_path, "low_latency_within_spread": within,
                    "low_latency_vs_fastest": mean(strict), "low_latency_vs_floor": mean(done)}


def repath(run: Path) -> dict:
    """An earlier run's low-latency class judged again, each one-packet flow against the 5th
    percentile of the one-packet FCTs on its own path (:func:`judge_by_path`), from the run's
    files: its fct.json (the floor and size curve it divided by), flows.json, and per mode the
    senders' and receivers' logs of the one-packet flows alone and of its run -- Opera's
    (``alone/``, ``opera/``, with the fabric's schedule and epoch in ``run/``) and the packet
    switch's (``alone-packet-switch/``, ``packet-switch/``; one path; when it ran without a
    fabric mode).  Returns the fct.json
    with those modes' low-latency summaries, ``alone_by_path``, ``low_latency_within_spread``,
    ``low_latency_vs_fastest`` and ``low_latency_vs_floor`` replaced (not written).  A
    WorkloadError (one line) names a file the run lacks."""
    r = json.loads((run / "fct.json").read_text())
    modes = r.get("modes", {})
    need = {"opera": [run / "alone", run / "opera", run / "run" / "schedule.json", run / "run" / "status.json"],
            "packet-switch": [run / "alone-packet-switch", run / "packet-switch"]}
    # The packet switch's own floor and size curve are the run's only when it ran alone: beside a
    # fabric, fct.json keeps the fabric's (the switch's were used in the run and not kept).
    have = [m for m in need if m in modes and (m == "opera" or not {"opera", "rotornet"} & set(modes))]
    missing = next((p for m in have for p in [run / "flows.json"] + need[m] if not p.exists()), None)
    if not have or missing is not None or not r.get("alone_curve"):
        raise C.WorkloadError(f"{run}: {'no ' + str(missing.relative_to(run)) if missing else 'no Opera or packet-switch run with a size curve'}"
                              " (an fct run's directory with its logs)")
    flows, meta = flowlist.read(str(run / "flows.json"))
    racks = {h: v["rack"] for h, v in meta["hosts"].items()}
    ip_rack = {v["ip"]: v["rack"] for v in meta["hosts"].values()}
    floor = r["alone_one_packet_s"]["floor"]
    # The size curve as fct.json keeps it, rounded to the us: half a us lower, so that the flow
    # that set a point (its slowdown 1 in the run) is not put a hair below it.
    curve = F.AloneCurve(tuple((int(a), max(0.0, b - 0.5e-6)) for a, b in r["alone_curve"]["points"]),
                         r["alone_curve"]["tail_mbps"] * 1e6)
    factor = r.get("scaling_factor", 1.0)
    access = r["access_mbps"] * 1e6
    for mode in have:
        m = modes[mode]
        if mode == "opera":
            ds = S.load(run / "run" / "schedule.json")
            clock = R.PathClock(ds, R.compute(ds, epsilon_us=(r.get("epsilon_us") or 0.0) * r.get("dilation", 100.0)))
            key_of = PathKeys(clock, json.loads((run / "run" / "status.json").read_text())["t0_ns"], racks)
            logs, alone = run / "opera", run / "alone"
        else:
            key_of, logs, alone = OneSwitch(), run / "packet-switch", run / "alone-packet-switch"
        ll = _logged_low_latency(flows, m, logs, floor, curve)
        ll, judged = judge_by_path(ll, floor, alone_samples(alone, racks, ip_rack), key_of, ll, access, factor)
        m["classes"]["low-latency"] = F.summarize(ll, access, factor).get("low-latency", {})
        m.update(judged)
    return r


def _logged_low_latency(flows, m: dict, logs: Path, floor: float, curve: F.AloneCurve) -> list:
    """A mode's low-latency flows from its senders' and receivers' logs, each with the floor and
    its size's extra as its alone (what the run divided by)."""
    cls = {x[0]: x[1] for x in m["per_flow"]}
    issued, arrived, retrans, dsack = {}, {}, {}, {}
    for f in logs.glob("[rt]x-*.jsonl"):
        for line in f.read_text().splitlines():
            x = json.loads(line)
            if f.name.startswith("tx-"):
                issued[x["id"]] = x["issued_ns"]
                if x.get("dsack") is not None:
                    dsack[x["id"]] = x["dsack"]
            else:
                arrived[x["id"]] = arrival_ns(x)
            if x.get("retrans") is not None:
                retrans[x["id"]] = retrans.get(x["id"], 0) + x["retrans"]
    return [F.Done(f, "low-latency", issued.get(f.id, 0), arrived.get(f.id) if f.id in issued else None, floor,
                   curve.extra_s(f.size), retrans.get(f.id), dsack.get(f.id))
            for f in flows if cls.get(f.id) == "low-latency"]
