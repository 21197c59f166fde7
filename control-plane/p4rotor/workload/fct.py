"""Flow completion times from a run's records: per class and size bucket, slowdown, stability.

Pure functions (the experiment collects the records; tests feed them directly).  The method is
[Gao20 §5.4] (pHost): slowdown = FCT / the FCT the same flow would have alone, reported as mean
and 99th percentile per size bucket.  Two denominators, neither taken from the run being judged
(workload/ideal.py): the *calibrated ideal* (``alone_s`` + ``extra_s``: the flow's path class's
one-packet FCT on the idle fabric plus what its size adds, :class:`AloneCurve`) and, for a sample
of flows, the flow's own FCT *replayed alone* (``replay_s``).  No clamp: flows faster than their
denominator are counted (``slowdown_below_1``).  Buckets are in *real-system* bytes (size /
scaling factor): < 100 KB, 100 KB - 10 MB, > 10 MB, as Opera's evaluation ([McGuinness21 §2.6])
groups them.
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
    # This flow's FCT when replayed alone on the idle fabric (workload/ideal.py); None: not sampled.
    replay_s: float | None = None
    # The path class its ideal was taken for (workload/paths.py), so that the run can be divided
    # again by another calibration; None: not judged against a calibration.
    path: str | None = None

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
        """FCT over the calibrated ideal (``alone_s`` + ``extra_s``, workload/ideal.py), or, without
        a size curve, over ``alone_s`` plus the wire bytes at the access rate.  Never clamped."""
        f = self.fct_s
        if f is None:
            return None
        if self.extra_s is not None:
            return f / (self.alone_s + self.extra_s)
        return f / ideal_fct_s(self.flow.size, access_bps, self.alone_s)

    @property
    def slowdown_alone(self) -> float | None:
        """FCT over this flow's own FCT replayed alone (None: not replayed, or unfinished)."""
        f = self.fct_s
        return None if f is None or not self.replay_s else f / self.replay_s


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
                         "slowdown_below_1": sum(x < 1 for x in slow),
                         "slowdown_below_1_share": sum(x < 1 for x in slow) / len(slow) if slow else None}
            rep = [d.slowdown_alone for d in fin if d.slowdown_alone is not None]
            if rep:
                m, hw = mean_ci(rep)
                per[name].update({"replayed": len(rep), "slowdown_alone_mean": m, "slowdown_alone_ci95": hw,
                                  "slowdown_alone_p99": percentile(rep, 99),
                                  "slowdown_alone_below_1": sum(x < 1 for x in rep)})
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
    """[id, class, size bucket, FCT s or None, size in emulated bytes, path class or None] per
    flow: what a replay is compared on, flow by flow (and what tells one-packet flows apart,
    checks.py); the path class and the size are what another calibration divides it by."""
    return [[d.flow.id, d.cls, bucket_of(d.flow.size, factor), d.fct_s, d.flow.size, d.path] for d in done]


def mean_ci(xs: Sequence[float], z: float = 1.96) -> tuple[float, float] | None:
    """The mean and the half-width of its normal-approximation 95 % confidence interval."""
    if not xs:
        return None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, math.inf
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, z * math.sqrt(var / len(xs))
