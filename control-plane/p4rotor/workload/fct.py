"""Flow completion times from a run's records: per class and size bucket, slowdown, stability.

Pure functions (the experiment collects the records; tests feed them directly).  The method is
seed 001 §5.4 (pHost): slowdown = FCT / the FCT the same flow would have alone, reported as mean
and 99th percentile per size bucket.  "Alone" here is the floor of a one-packet flow's FCT
measured alone on the same fabric (handshake and path latency: the fastest of every rack pair's
samples, since every pair has a direct circuit in some slice) plus what the flow's size adds,
measured alone too (:class:`AloneCurve`; without one, the flow's wire bytes -- payload + a header
per packet, :func:`.generate.wire_bytes` -- at the shaped access rate).  Buckets are in *real-system* bytes (size / scaling
factor): < 100 KB, 100 KB - 10 MB, > 10 MB, as Opera's evaluation (seed 000 §2.6) groups them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Iterable, Sequence

from ..stats import percentile
from .generate import HEADER_BYTES, Flow, wire_bytes
from .scale import MSS

BUCKETS = (("<100KB", 0, 100_000), ("100KB-10MB", 100_000, 10_000_000), (">10MB", 10_000_000, math.inf))


# A resend that cost a flow this much beyond its alone FCT was a retransmission timeout (Linux's
# floor is 200 ms from the lost segment's first transmission), not a tail-loss probe (~2 round trips).
TIMEOUT_S = 0.1


@dataclasses.dataclass(frozen=True)
class Done:
    """One flow as the run saw it: its class, and when it finished (None: unfinished)."""
    flow: Flow
    cls: str                 # "low-latency" or "bulk"
    start_ns: int
    done_ns: int | None
    alone_s: float = 0.0     # a one-packet flow's FCT alone on the fabric (measured)
    # What this flow's size adds to ``alone_s`` when alone, measured (:class:`AloneCurve`);
    # None: its wire bytes at the access rate.
    extra_s: float | None = None
    # TCP segments sent again for this flow, both ends (host/flows.py: SYN, SYN-ACK, data), and
    # how many of them the receiver reported as duplicates (DSACK: a tail-loss probe's copy of a
    # segment that was not lost).  None: not a TCP flow, or not known (an older run).
    retrans: int | None = None
    dsack: int | None = None

    @property
    def lost(self) -> int | None:
        """Segments the fabric lost (or held past a timeout): resent, less those reported as
        duplicates.  A DSACK that never came counts as a loss."""
        return None if self.retrans is None else max(0, self.retrans - (self.dsack or 0))

    @property
    def timed_out(self) -> bool:
        """It resent, and the resend cost it a retransmission timeout (>= TIMEOUT_S beyond its
        alone FCT): something of it was lost -- the data, or the receiver's ACK or answer, whose
        loss leaves the resent data a duplicate -- or held past TCP's timeout (a queue).  A
        tail-loss probe that was not needed resends after ~2 round trips (9-14 ms here)."""
        if not self.retrans or self.fct_s is None:
            return False
        alone = self.alone_s + (self.extra_s or 0.0)
        return self.fct_s - alone >= TIMEOUT_S

    @property
    def fct_s(self) -> float | None:
        return None if self.done_ns is None else (self.done_ns - self.start_ns) / 1e9

    def slowdown(self, access_bps: float) -> float | None:
        f = self.fct_s
        if f is None:
            return None
        if self.extra_s is not None:
            alone = self.alone_s + self.extra_s
            # A flow on the envelope is its own alone, but floor + (FCT - floor) may come back one
            # ulp above its FCT (a slowdown of 0.9999999999999998 was judged "below 1").
            return 1.0 if math.isclose(f, alone, rel_tol=1e-9) else f / alone
        return f / ideal_fct_s(self.flow.size, access_bps, self.alone_s)


@dataclasses.dataclass(frozen=True)
class AloneCurve:
    """What a flow's size adds to a one-packet flow's FCT alone, measured at a few sizes.  Between
    two sizes, the value at the smaller (the step below: a flow is never faster than a smaller
    one, and htb's staircase -- 5 segments as one burst, then one burst per ~8.5 ms -- lies under
    any straight line between two calibrated sizes: an 8-segment flow took 12.9 ms where the line
    said 16); past the largest, that plus the wire bytes beyond it at ``tail_bps`` (the faster of
    the last stretch's rate and the access rate).  A shaper is not a wire: htb let the first
    frames of a flow through as a burst (3 frames took no longer than one), so the wire bytes at
    the access rate over-stated small flows' alone FCTs and they "beat" it (slowdowns of 0.47)."""
    points: tuple[tuple[int, float], ...]   # (size in bytes, extra s), sizes increasing, from one MSS
    tail_bps: float

    def extra_s(self, size: int) -> float:
        pts = self.points
        i = bisect.bisect_right(pts, (size, math.inf)) - 1
        if i < 0:
            return pts[0][1]
        s_at, e_at = pts[i]
        if i < len(pts) - 1 or size <= s_at:
            return e_at
        return e_at + 8 * (wire_bytes(size) - wire_bytes(s_at)) / self.tail_bps

    @classmethod
    def from_samples(cls, samples: Iterable[tuple[int, float]], access_bps: float) -> "AloneCurve":
        """``samples``: (size, FCT - the one-packet floor).  The lower envelope: at each size the
        fastest sample of that size *or any larger one* (a smaller flow alone never takes longer
        than a bigger one, so a bigger flow seen faster bounds it), never below 0, and 0 at one
        MSS.  With :meth:`extra_s`'s step below, the curve is never above a sample of any size."""
        best: dict[int, float] = {MSS: 0.0}
        for size, extra in samples:
            best[size] = min(best.get(size, math.inf), max(0.0, extra))
        pts: list[tuple[int, float]] = []
        low = math.inf
        for size in sorted(best, reverse=True):
            low = min(low, best[size])
            pts.append((size, low))
        pts.reverse()
        tail = access_bps
        if len(pts) >= 2 and pts[-1][1] > 0:
            # The last stretch: from the last point to the largest at or below half its size (two
            # points a few bytes apart would give any rate).
            last_s, last_e = pts[-1]
            s0, e0 = next(((s, e) for s, e in reversed(pts) if s <= last_s // 2), pts[0])
            if last_e > e0:
                tail = max(access_bps, 8 * (wire_bytes(last_s) - wire_bytes(s0)) / (last_e - e0))
        return cls(tuple(pts), tail)

    def to_json(self) -> dict:
        return {"points": [[s, round(e, 6)] for s, e in self.points], "tail_mbps": self.tail_bps / 1e6}


def alone_envelope(alone_floor_s: float, calibration: Sequence[tuple[int, float]],
                   run: Sequence[tuple[int, float]], access_bps: float) -> tuple[float, AloneCurve, dict]:
    """The "alone" FCT of seed 001 §5.4 (the flow alone in the network: the best this fabric does
    for its size) as the lower envelope of every FCT measured on the fabric: ``alone_floor_s`` (the
    fastest one-packet flow alone), the ``calibration`` flows alone and the ``run``'s own flows of
    the same transport ((size, FCT s) each).  Any measured FCT is an upper bound on the best the
    fabric can do for that size, so a run flow faster than every alone sample lowers the
    estimate: the alone samples are a few hundred, the run's flows thousands, and at 1 % load
    they come from the same spread (the 790 two-segment flows' fastest took 2.9 ms where the
    fastest of 896 one-packet samples alone took 3.05).  Lowering "alone" only raises slowdowns.

    Returns (floor s, the size curve over it, what the run changed: how many of its flows' alone
    it lowered and by how much at most)."""
    run_floor = min((f for _, f in run), default=math.inf)
    floor = min(alone_floor_s, run_floor)
    cal = [(s, f - floor) for s, f in calibration]
    curve = AloneCurve.from_samples(cal + [(s, f - floor) for s, f in run], access_bps)
    cal_only = AloneCurve.from_samples([(s, f - alone_floor_s) for s, f in calibration], access_bps)
    before = [alone_floor_s + cal_only.extra_s(s) for s, _ in run]
    after = [floor + curve.extra_s(s) for s, _ in run]
    lowered = [b / a for b, a in zip(before, after) if a < b - 1e-12]
    info = {"floor_alone_s": alone_floor_s, "floor_run_s": None if run_floor == math.inf else run_floor,
            "floor_s": floor, "floor_set_by": "run" if run_floor < alone_floor_s else "alone",
            "calibration_samples": len(calibration), "run_samples": len(run),
            "run_flows_lowered": len(lowered), "most_lowered_by": max(lowered, default=1.0),
            "alone_only_curve": cal_only.to_json()}
    return floor, curve, info


def path_offsets(residuals: Iterable[tuple[str | None, float]]) -> dict[str, float]:
    """The alone FCT by path: seed 001 §5.4's OPT(i) is flow i alone in the network, and alone in
    Opera's a flow rides the low-latency path of the slice it starts in -- one rack hop or three
    (docs/experiments.md, "Alone on its own path").  ``residuals``: (path key, FCT less the floor
    and what the size adds) for every TCP flow measured on the fabric, alone or in the run; per
    key, the least of them (never below 0) is what that path adds to the floor.  A flow's alone
    is then the floor + its path's offset + its size's extra: every flow's residual is at least
    its path's offset, so no slowdown falls below 1 (a ns less: floor + offset, summed in floating
    point, must not land a hair above the flow that set it).  A key of None (no path) is skipped."""
    out: dict[str, float] = {}
    for key, r in residuals:
        if key is not None:
            out[key] = min(out.get(key, math.inf), r)
    return {k: max(0.0, v - 1e-9) for k, v in out.items()}


# The share of a path's one-packet FCTs below its alone: the fastest of ~900 samples is one draw
# from the tail of the kernel's and BMv2's scheduling noise, and moved the low-latency verdict
# across 2 between runs whose one-packet FCTs were the same (docs/experiments.md, "The alone
# baseline: the 5th percentile by path").
ALONE_PERCENTILE = 5.0


def path_alone(residuals: Iterable[tuple[str | None, float]], q: float = ALONE_PERCENTILE) -> dict[str, float]:
    """The alone FCT by path, as :func:`path_offsets` but robust to one lucky sample: per key,
    the ``q``-th percentile (nearest rank) of the residuals (never below 0).  A flow faster than
    its path's alone is within the spread of the flow alone; :func:`with_path_alone` makes it
    its own alone (slowdown 1) and counts it.  A key of None is skipped."""
    by: dict[str, list[float]] = {}
    for key, r in residuals:
        if key is not None:
            by.setdefault(key, []).append(r)
    return {k: max(0.0, percentile(v, q)) for k, v in by.items()}


def with_path_alone(done: Sequence[Done], floor_s: float, offsets: dict[str, float], key_of,
                    judged=lambda d: True) -> tuple[list[Done], int]:
    """``done`` with each ``judged`` flow's alone the floor plus its path's offset (``key_of(d)``:
    its path key; a key without an offset adds nothing); a finished flow faster than that is its
    own alone (slowdown 1).  Returns the flows and how many were so lowered."""
    out, lowered = [], 0
    for d in done:
        if judged(d):
            alone = floor_s + offsets.get(key_of(d), 0.0)
            extra = d.extra_s or 0.0
            if d.fct_s is not None and d.fct_s < alone + extra:
                alone, lowered = d.fct_s - extra, lowered + 1
            d = dataclasses.replace(d, alone_s=alone)
        out.append(d)
    return out, lowered


def ideal_fct_s(size: int, access_bps: float, base_s: float = 0.0, mss: int = MSS,
                header: int = HEADER_BYTES) -> float:
    """The flow alone: ``base_s`` (a one-packet flow's FCT alone on the fabric, measured: the
    handshake and the path's latency) plus its wire bytes at the access rate."""
    return base_s + 8 * wire_bytes(size, mss, header) / access_bps


def bucket_of(size: int, factor: float) -> str:
    real = size / factor if factor > 0 else size
    return next(name for name, lo, hi in BUCKETS if lo <= real < hi)


def summarize(done: Sequence[Done], access_bps: float, factor: float) -> dict:
    """Per class and bucket: flows, unfinished, FCT mean/p99 (s), slowdown mean/p99."""
    out: dict = {}
    for cls in sorted({d.cls for d in done}):
        per: dict = {}
        for name, _, _ in BUCKETS:
            ds = [d for d in done if d.cls == cls and bucket_of(d.flow.size, factor) == name]
            if not ds:
                continue
            fin = [d for d in ds if d.fct_s is not None]
            fcts = [d.fct_s for d in fin]
            slow = [d.slowdown(access_bps) for d in fin]
            per[name] = {"flows": len(ds), "unfinished": len(ds) - len(fin),
                         "fct_mean_s": _mean(fcts), "fct_p50_s": percentile(fcts, 50) if fcts else None,
                         "fct_p99_s": percentile(fcts, 99) if fcts else None,
                         "slowdown_mean": _mean(slow), "slowdown_p50": percentile(slow, 50) if slow else None,
                         "slowdown_p99": percentile(slow, 99) if slow else None,
                         "slowdown_min": min(slow) if slow else None,
                         "slowdown_below_1": sum(x < 1 for x in slow)}
            known = [d for d in ds if d.retrans is not None]
            if known:
                per[name]["retransmitted"] = sum(d.retrans for d in known)
                per[name]["duplicates_reported"] = sum(d.dsack or 0 for d in known)
                per[name]["segments_lost"] = sum(d.lost for d in known)
                per[name]["flows_losing"] = sum(1 for d in known if d.lost)
                per[name]["flows_timing_out"] = sum(1 for d in known if d.timed_out)
        out[cls] = per
    return out


def class_mean(per: dict) -> float | None:
    """A class's mean slowdown over its finished flows, from :func:`summarize`'s buckets."""
    fin = [(v["slowdown_mean"], v["flows"] - v["unfinished"]) for v in per.values() if v["slowdown_mean"] is not None]
    return sum(x * k for x, k in fin) / sum(k for _, k in fin) if fin else None


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def per_flow(done: Sequence[Done], factor: float) -> list[list]:
    """[id, class, size bucket, FCT s or None, size in emulated bytes] per flow: what a replay is
    compared on, flow by flow (and what tells one-packet flows apart, :func:`checks`)."""
    return [[d.flow.id, d.cls, bucket_of(d.flow.size, factor), d.fct_s, d.flow.size] for d in done]


def compare(a: dict, b: dict, tolerance: float = 0.25, min_flows: int = 10) -> dict:
    """Two ``fct.json`` results of one flow list (a replay): per mode, class and size bucket, the
    mean, median and p99 FCT of both, and the median of B/A taken flow by flow (a replay runs
    the same flows: pairing them removes the spread of sizes and paths).

    "Same within noise" when every bucket both ran with at least ``min_flows`` finished flows has
    that median ratio within ``tolerance`` of 1, and both runs finished the same flows.  Means
    and p99s are shown, not judged: on this emulation a lost SYN or segment costs a 1 s TCP
    timeout, and a handful of those moves a mean by half (docs/experiments.md).  Smaller buckets
    are shown, not judged."""
    if not 0 < tolerance < 10:
        raise ValueError(f"the tolerance must be in (0, 10), got {tolerance!r}")
    rows, off = [], []
    for mode in sorted(set(a.get("modes", {})) & set(b.get("modes", {}))):
        ma, mb = a["modes"][mode], b["modes"][mode]
        if ma.get("unfinished") != mb.get("unfinished"):
            off.append(f"{mode}: {ma.get('unfinished')} vs {mb.get('unfinished')} unfinished")
        fa = {f[0]: f for f in ma.get("per_flow", [])}
        fb = {f[0]: f for f in mb.get("per_flow", [])}
        for cls in sorted(set(ma.get("classes", {})) & set(mb.get("classes", {}))):
            for bucket in ma["classes"][cls]:
                x, y = ma["classes"][cls][bucket], mb["classes"][cls].get(bucket)
                if y is None:
                    continue
                n = min(x["flows"] - x["unfinished"], y["flows"] - y["unfinished"])
                ids = [i for i in fa if fa[i][1] == cls and fa[i][2] == bucket and i in fb
                       and fa[i][3] and fb[i][3]]
                paired = sorted(fb[i][3] / fa[i][3] for i in ids)
                ratio = paired[len(paired) // 2] if paired else None
                judged = n >= min_flows and ratio is not None
                ok = not judged or abs(ratio - 1) <= tolerance
                rows.append({"mode": mode, "class": cls, "bucket": bucket, "flows": n, "paired": len(paired),
                             "fct_mean_s": [x["fct_mean_s"], y["fct_mean_s"]],
                             "fct_p50_s": [x.get("fct_p50_s"), y.get("fct_p50_s")],
                             "fct_p99_s": [x["fct_p99_s"], y["fct_p99_s"]], "ratio": ratio,
                             "judged": judged, "ok": ok})
                if not ok:
                    off.append(f"{mode} {cls} {bucket}: median FCT ratio (flow by flow) {ratio:.2f}")
    same_list = a.get("flows") == b.get("flows")
    if not same_list:
        off.append(f"not one flow list: {a.get('flows')} vs {b.get('flows')} flows")
    return {"rows": rows, "tolerance": tolerance, "min_flows": min_flows, "same": not off and bool(rows),
            "differences": off}


def table(results: Sequence[dict]) -> list[str]:
    """Markdown rows of several ``fct.json`` results (a sweep over workloads and loads): per run,
    mode, class and size bucket, the flows, unfinished, slowdown mean / p99 and FCT mean; an
    unstable mode says so instead of its slowdowns (a climbing queue has no steady slowdown)."""
    rows = ["| workload | load | flows | mode | class, bucket | unfinished | slowdown mean | p99 | FCT mean s |",
            "|---|---|---|---|---|---|---|---|---|"]

    def f(x, nd=1):
        return "-" if x is None else f"{x:.{nd}f}"

    for r in results:
        head = f"| {r.get('workload', '?')} | {r.get('load', '?')} | {r.get('flows', '?')} "
        for mode, m in r.get("modes", {}).items():
            if not m.get("stable", True):
                st = m.get("stability", {})
                why = st.get("why") or f"pending bytes climb {f(st.get('rise_bytes'), 0)} B"
                rows.append(head + f"| {mode} | all | {m.get('unfinished', '?')} | **unstable**: {why} | | |")
                continue
            for cls, per in m.get("classes", {}).items():
                for b, v in per.items():
                    rows.append(head + f"| {mode} | {cls} {b} ({v['flows']}) | {v['unfinished']} | "
                                f"{f(v['slowdown_mean'])} | {f(v['slowdown_p99'])} | {f(v['fct_mean_s'], 3)} |")
    return rows


def bulk_bound_s(size: int, bulk_bps: float, duty: float, wait_s: float, frame: int = 1400) -> float:
    """Issue #14's low-load bound on a bulk flow's FCT: its bytes at the bulk rate while circuits
    are up (``bulk_bps`` x ``duty``) plus the wait for capacity (``wait_s``: matchings + 1 slots).
    Bytes are the agents' frames: ``size`` in ``frame``-byte payloads, 42 bytes of headers each."""
    frames = max(1, math.ceil(size / frame))
    return 8 * (size + 42 * frames) / (bulk_bps * duty) + wait_s


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
    experiments/fct.py: ``rotorlb_alone``) adds ``rotorlb_alone``: how many flows the model alone
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
    how it went at the agents (``paths``: experiments/fct.py ``bulk_paths``; {} for runs from
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


LOW_LOAD = 0.01        # issue #14: "at 1 % load"
LL_MEAN_MAX = 2.0      # ... the low-latency class has mean slowdown <= 2 and zero loss
SHORT_RATIO_MIN = 10.0  # RotorNet's one-packet flows >= 10x Opera's short-flow FCT


def checks(r: dict, mss: int = MSS) -> list[tuple[str, bool | None, str]]:
    """Issue #14's done-when criteria, judged on one ``fct.json``: (criterion, passed, the numbers).
    ``passed`` is None where the run cannot judge it (a mode it did not run, a load it is not)."""
    out: list[tuple[str, bool | None, str]] = []
    modes = r.get("modes", {})
    low = r.get("load") is not None and r["load"] <= LOW_LOAD + 1e-9
    for mode, m in modes.items():
        vs = [v for per in m.get("classes", {}).values() for v in per.values() if v.get("slowdown_min") is not None]
        if vs:
            least = min(v["slowdown_min"] for v in vs)
            below = (f", {sum(v['slowdown_below_1'] for v in vs)} of "
                     f"{sum(v['flows'] - v['unfinished'] for v in vs)} below 1") if all("slowdown_below_1" in v for v in vs) else ""
            out.append((f"{mode}: every slowdown >= 1", least >= 1, f"least {least:.2f}{below}"))
        # Flat at stable loads; past RotorLB's capacity the queue climbs, which is a finding
        # about the load (the run says "unstable"), not a failure: not judged then.  A fabric
        # whose queue falls behind the model's at a load within capacity fails
        # (workload/stability.py).
        st = m.get("stability", {})
        stable = bool(m.get("stable", True))
        if "capacity" in st:
            past = not st["capacity"].get("stable", True)
            out.append((f"{mode}: pending bytes flat", None if past else stable, st.get("why", "")))
        elif st.get("why"):  # judged, with nothing for the model (no bulk flows: the packet switch)
            out.append((f"{mode}: pending bytes flat", True if stable else None, st["why"]))
        else:  # results from before the capacity check: the trend alone
            out.append((f"{mode}: pending bytes flat", True if stable else None,
                        ("" if stable else "unstable: ")
                        + f"trend {st.get('rise_bytes', 0) or 0:.0f} B while flows arrive"))
        unf = m.get("unfinished", 0)
        out.append((f"{mode}: every flow finished or counted", True, f"{unf} unfinished of {r.get('flows')}"))
        bb = m.get("bulk_bound")
        if bb and bb.get("flows"):
            pc = bb.get("pair_capacity")
            ok, head = bulk_bound_verdict(bb, low)
            out.append((f"{mode}: bulk within the low-load bound", ok,
                        head + f"every flow {bb['within']}/{bb['flows']}, worst {bb['worst_ratio']:.2f}x, median "
                        f"{bb['median_ratio']:.2f}x" + ("" if low else " (judged at 1 % load only)")
                        + (f"; at the pair's RotorLB capacity (model): {pc['within']}/{bb['flows']}, worst "
                           f"{pc['worst_ratio']:.2f}x, median {pc['median_ratio']:.2f}x" if pc else "")
                        + rack_alone_numbers(bb, fabric=not (low and bb.get("alone_in_fabric")))
                        + _alone_numbers(bb)))
    ll = modes.get("opera", {}).get("classes", {}).get("low-latency")
    if ll:
        n = sum(v["flows"] for v in ll.values())
        lost = sum(v["unfinished"] for v in ll.values())
        mean = class_mean(ll)
        # Loss is frames, not only flows: TCP hides a lost segment behind a 0.2-1 s timeout and
        # the flow finishes.  A run that logged retransmissions is judged on them too.
        counted = all("retransmitted" in v for v in ll.values())
        resent = sum(v.get("retransmitted", 0) for v in ll.values())
        # Runs before DSACKs were logged: every resent segment counts as lost.
        gone = sum(v.get("segments_lost", v.get("retransmitted", 0)) for v in ll.values())
        dups = sum(v.get("duplicates_reported", 0) for v in ll.values())
        hit = sum(v.get("flows_losing", v.get("flows_retransmitting", 0)) for v in ll.values())
        # Shown, not judged: a flow that waited for a timeout although every resent segment proved
        # a duplicate lost an ACK -- or its data sat past TCP's timeout (behind its host's own
        # bulk frames on the shaped link), which is delay, not loss; the fabric's drop counters
        # beside it tell which it can have been.
        tout = sum(v.get("flows_timing_out", 0) for v in ll.values())
        ok = (mean is not None and mean <= LL_MEAN_MAX and lost == 0 and (not counted or gone == 0)) if low else None
        # What the fabric dropped while Opera's flows ran (every class: the counters do not know
        # one frame's class from another's); none at all proves no low-latency frame was lost.
        sd = modes["opera"].get("switch_drops")
        fabric = ""
        if sd is not None:
            moved = {c: n for c, n in sd.get("total", {}).items() if n}
            fabric = "; the fabric dropped " + (", ".join(f"{c} {n}" for c, n in sorted(moved.items())) or "nothing") \
                + (f", the kernel {sum(sd['kernel'].values())} on the links" if sd.get("kernel") else "")
        out.append(("opera: low-latency mean slowdown <= 2, no loss (at 1 % load)", ok,
                    f"mean {'-' if mean is None else f'{mean:.2f}'} over {n} flows, {lost} unfinished"
                    + _by_path_numbers(modes["opera"])
                    + (f", {gone} segments lost in {hit} flows ({resent} resent, {dups} of them reported "
                       f"as duplicates), {tout} flows waited for a retransmission timeout"
                       if counted else " (segments resent: not logged by this run)") + fabric))
    if "opera" in modes and "rotornet" in modes:
        def fcts(mode, cls):
            return sorted(f[3] for f in modes[mode].get("per_flow", [])
                          if f[1] == cls and f[3] is not None and len(f) > 4 and f[4] <= mss)
        rn, op = fcts("rotornet", "bulk"), fcts("opera", "low-latency")
        if rn and op:
            mean = (sum(rn) / len(rn)) / (sum(op) / len(op))
            med = percentile(rn, 50) / percentile(op, 50)
            out.append(("rotornet one-packet flows >= 10x opera's", min(mean, med) >= SHORT_RATIO_MIN,
                        f"mean {sum(rn) / len(rn) * 1e3:.0f} vs {sum(op) / len(op) * 1e3:.0f} ms ({mean:.1f}x), "
                        f"median {percentile(rn, 50) * 1e3:.0f} vs {percentile(op, 50) * 1e3:.0f} ms ({med:.1f}x); "
                        f"{len(rn)} flows"))
    return out


# A run's own measurements of the fabric it ran on: kept per source when runs are merged, since
# each mode's slowdowns were divided by its own run's alone FCTs.
RUN_SCOPED = ("alone_curve", "alone_one_packet_s", "alone_envelope", "switches_realtime", "replayed_from")


def merge(runs: Sequence[tuple[str, dict]]) -> dict:
    """Several ``fct.json`` results of ONE flow list, each with other modes (e.g. a Data Mining
    1 % point run a mode per session: 2 h of arrivals each), as one result: the first run's
    description, every run's modes, and per source what it measured of its own fabric
    (``RUN_SCOPED``).  Raises :class:`~p4rotor.workload.cdf.WorkloadError` (one line) when the
    runs disagree on what they ran or two have the same mode."""
    from .cdf import WorkloadError

    if len(runs) < 2:
        raise WorkloadError("merge needs at least two runs")
    (first_name, first), out_modes, sources = runs[0], {}, {}
    same = ("workload", "load", "flows", "hosts_per_rack", "access_mbps", "dilation", "scaling_factor",
            "default_cutoff_bytes")
    for name, r in runs:
        for k in same:
            if r.get(k) != first.get(k):
                raise WorkloadError(f"{name}: {k} is {r.get(k)!r}, {first_name} has {first.get(k)!r}: "
                                    "not runs of one flow list")
        for mode, m in r.get("modes", {}).items():
            if mode in out_modes:
                raise WorkloadError(f"{name}: mode {mode!r} is also in {out_modes[mode][0]}")
            out_modes[mode] = (name, m)
        sources[name] = {"modes": sorted(r.get("modes", {})), **{k: r.get(k) for k in RUN_SCOPED}}
    res = {k: v for k, v in first.items() if k not in RUN_SCOPED + ("modes", "verdict")}
    res["merged_from"] = sources
    res["modes"] = {mode: m for mode, (_, m) in out_modes.items()}
    return res


def _by_path_numbers(m: dict) -> str:
    """How the one-packet flows' alone was taken, and the class's mean the stricter ways."""
    by_path, vs_floor = m.get("alone_by_path"), m.get("low_latency_vs_floor")
    if not by_path or vs_floor is None:
        return ""
    pct = {v.get("percentile") for v in by_path.values()}
    if pct == {None}:  # judged before the percentile: each path's fastest
        return (f" (each against the fastest flow alone on its own path, {len(by_path)} path classes; "
                f"against the fastest on any path: {vs_floor:.2f})")
    fastest = m.get("low_latency_vs_fastest")
    return (f" (one-packet flows each against the p{min(pct):g} of the one-packet FCTs on its own path, "
            f"{len(by_path)} path classes, {m.get('low_latency_within_spread', 0)} flows faster counted at 1; "
            f"against the fastest on its own path: {'-' if fastest is None else f'{fastest:.2f}'}, "
            f"on any path: {vs_floor:.2f})")


def _alone_numbers(bb: dict) -> str:
    """The bulk bound's ``rotorlb_alone`` in words: what RotorLB itself could do, and how far
    the agents were from it."""
    ra = bb.get("rotorlb_alone")
    if not ra:
        return ""
    n = bb["flows"]
    slots = ra.get("excess_slots_median") is not None
    frames = (f" ({ra['rack_shared_within_frames']}/{n} counting the agents' frame header)"
              if "rack_shared_within_frames" in ra else "")
    return (f"; RotorLB alone (model) meets it for {ra['model_within']}/{n}, with the rack's hosts sharing "
            f"its circuits {ra['rack_shared_within']}/{n}{frames}; measured vs the model alone"
            + (" (the rack's hosts sharing)" if ra.get("compared_with") == "rack_shared" else "") + ": median "
            f"{ra['median_ratio']:.2f}x" + (f" ({ra['excess_slots_median']:+.1f} slots)" if slots else "")
            + f", p90 {ra['p90_ratio']:.2f}x" + (f" ({ra['excess_slots_p90']:+.1f}), {ra['within_one_slot']}/{n} "
                                                 "within a slot of it" if slots else ""))


def checks_table(results: Sequence[dict]) -> list[str]:
    """:func:`checks` of several runs as markdown rows."""
    rows = ["| workload | load | check | verdict | numbers |", "|---|---|---|---|---|"]
    for r in results:
        for name, ok, numbers in checks(r):
            verdict = "n/a" if ok is None else ("**pass**" if ok else "**FAIL**")
            rows.append(f"| {r.get('workload', '?')} | {r.get('load', '?')} | {name} | {verdict} | {numbers} |")
    return rows
