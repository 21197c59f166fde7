"""The two denominators of a flow's slowdown, neither taken from the run being judged.

[Gao20 §5.4] divides a flow's FCT by the FCT it would have alone in the network.  p4rotor
measures that two ways, both on an idle fabric and both before or apart from the run:

* **the calibrated ideal** (:class:`Calibration`): one-packet flows alone between every rack pair
  in every phase of the hyperperiod give each *path class* (the low-latency path's rack hops
  there and back at the flow's start, ``workload/paths.py``: :class:`PathKeys`) its base FCT,
  a low order statistic of its samples (:func:`base_of`); flows of a few sizes alone, with one-segment flows sent
  between the same racks in the same phases, give what a flow's size adds: the median of a
  size less the median of the one-segment flows (:func:`size_extras`, :class:`AloneCurve`, the
  shaper's real burst and rate).  A flow's ideal is its path class's base plus its size's
  extra: the same low order statistic for a flow of any size, as long as the emulator's noise adds
  to a flow's FCT whatever its size.  The calibration checks that on itself: fitted on half of
  its rounds, the share of the other half's flows faster than their ideal (``held_out``).  Measured once per fabric and
  target (``p4rotor experiment fct --calibrate-only``) and stored with the results, or by the
  run itself on its idle fabric before any of its flows start.
* **the flow alone** (:func:`replay_plan`): a stated random sample of the run's own flows,
  replayed one at a time on the idle fabric after the run; each sampled flow's slowdown is its
  FCT in the run over its FCT alone.  Reported per bucket with a confidence interval.

No clamp: a flow faster than its denominator has a slowdown below 1, and the share of such flows
is reported (a fidelity figure of the emulator, not hidden).
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Iterable, Sequence

from ..stats import percentile
from .cdf import WorkloadError
from .fct import AloneCurve, Done
from .scale import MSS

# The one-packet base of a path class is its k-th fastest of n unloaded samples.  Another
# unloaded flow is faster than that with probability k/(n+1) (any continuous distribution), so k
# is the largest rank that keeps this at or below BASE_EXCEEDANCE: half the 1 % of flows below
# the ideal the FCT criterion allows, so that what the criterion counts is the loaded run, not
# the estimator.  (The 1st percentile used before is the 5th of 382 samples: 1.3 % of unloaded
# flows below it by construction, more than the criterion allows; docs/notes/fct-base-rank.md.)
# Fewer than 1/BASE_EXCEEDANCE - 1 samples leave only the fastest, whose share, 1/(n+1), is
# larger: the calibration records each class's share (``expected_below``).
BASE_EXCEEDANCE = 0.005
BASE_PERCENTILE = 1.0  # the estimator of calibrations made before BASE_EXCEEDANCE (their files say so)

# A calibration is refused for a run whose fabric differs in any of these (``primer_us``: the
# warm-up flow before each flow, experiments/fct/hosts.py; absent from older files, which had none).
FINGERPRINT_KEYS = ("emulation", "target", "racks", "hosts_per_rack", "rotors", "slot_us", "night_us",
                    "dilation", "epsilon_us", "access_bps", "primer_us")

NO_PATH = "none"  # the key of a flow that met no low-latency path at its start
FABRIC, PACKET_SWITCH = "fabric", "packet-switch"  # the emulations a calibration is made for

# How the size curve was made.  "median-difference": a size's median FCT alone less the median of
# the one-segment flows measured with it.  "min-over-floor" (calibrations made before it): a
# size's fastest FCT alone less the fastest one-packet flow of all -- the fastest of 16 is about
# the 6th percentile, so about 6 % of flows of that size beat the ideal on an idle fabric
# (docs/notes/fct-size-curve.md).
CURVE_METHOD = "median-difference"


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The unloaded fabric: per path class the one-packet base FCT (s), the size curve (what a
    size adds to it), the fastest one-packet flow (``floor_s``, for the record), what it was
    measured on (``fingerprint``) and how it scores on its own held-out half (``held_out``)."""
    base_s: dict[str, float]
    floor_s: float
    curve: AloneCurve
    fingerprint: dict
    samples: dict[str, int] = dataclasses.field(default_factory=dict)
    percentile: float | None = None  # a calibration made before BASE_EXCEEDANCE: its percentile
    spread: dict[str, dict] = dataclasses.field(default_factory=dict)
    curve_method: str = CURVE_METHOD
    held_out: dict = dataclasses.field(default_factory=dict)
    exceedance: float | None = BASE_EXCEEDANCE

    def base(self, key: str | None) -> float:
        """A path class's one-packet base; a class the calibration never met gets the slowest
        base it has (an ideal too low would make the flow look slow, never fast)."""
        k = NO_PATH if key is None else key
        return self.base_s.get(k, max(self.base_s.values()))

    def expected_below(self, key: str) -> float | None:
        """The share of unloaded flows expected below ``key``'s base (None: a calibration made
        before BASE_EXCEEDANCE, or a class it never met)."""
        n = self.samples.get(key)
        return None if self.exceedance is None or not n else round(expected_below(n, self.exceedance), 5)

    def ideal_s(self, size: int, key: str | None) -> float:
        return self.base(key) + self.curve.extra_s(size)

    def check(self, fingerprint: dict, where: str) -> None:
        """A WorkloadError (one line) if this calibration was measured on another fabric."""
        for k in FINGERPRINT_KEYS:
            mine, theirs = self.fingerprint.get(k), fingerprint.get(k)
            same = (math.isclose(mine, theirs, rel_tol=1e-6) if isinstance(mine, (int, float))
                    and isinstance(theirs, (int, float)) else mine == theirs)
            if not same:
                raise WorkloadError(f"{where}: calibrated with {k} = {mine!r}, this run has {theirs!r} "
                                    "(calibrate this fabric: p4rotor experiment fct --calibrate-only)")

    def to_json(self) -> dict:
        return {"base_s": {k: round(v, 7) for k, v in sorted(self.base_s.items())}, "floor_s": round(self.floor_s, 7),
                "curve": self.curve.to_json(), "fingerprint": self.fingerprint, "samples": self.samples,
                **({"percentile": self.percentile} if self.percentile is not None else {}),
                **({"base_rank": {"exceedance": self.exceedance,
                                  "expected_below": {k: self.expected_below(k) for k in sorted(self.samples)}}}
                   if self.exceedance is not None else {}),
                "spread": self.spread, "curve_method": self.curve_method, "held_out": self.held_out}

    @classmethod
    def from_json(cls, d: dict, where: str) -> "Calibration":
        try:
            base = {str(k): float(v) for k, v in d["base_s"].items()}
            pts = tuple((int(s), float(e)) for s, e in d["curve"]["points"])
            curve = AloneCurve(pts, float(d["curve"]["tail_mbps"]) * 1e6)
            rank = d.get("base_rank")
            cal = cls(base, float(d["floor_s"]), curve, dict(d["fingerprint"]), dict(d.get("samples", {})),
                      None if rank else float(d.get("percentile", BASE_PERCENTILE)), dict(d.get("spread", {})),
                      str(d.get("curve_method", "min-over-floor")), dict(d.get("held_out", {})),
                      float(rank["exceedance"]) if rank else None)
        except (KeyError, TypeError, ValueError, AttributeError) as ex:
            raise WorkloadError(f"{where}: not a calibration (calibration.json of `experiment fct "
                                f"--calibrate-only`): {type(ex).__name__} {ex}") from None
        ok = (base and pts and all(math.isfinite(v) and v > 0 for v in base.values())
              and math.isfinite(cal.floor_s) and cal.floor_s > 0 and cal.curve.tail_bps > 0
              and all(s > 0 and math.isfinite(e) and e >= 0 for s, e in pts))
        if not ok:
            raise WorkloadError(f"{where}: a calibration needs positive finite bases, floor, curve and tail rate")
        return cal


def emulation_of(mode: str) -> str:
    """The emulation whose calibration a mode's flows are divided by: the packet switch has its own."""
    return PACKET_SWITCH if mode == PACKET_SWITCH else FABRIC


def run_calibration(run: dict, mode: str) -> dict | None:
    """The calibration (as fct.json keeps it) ``mode``'s flows were divided by: the mode's own in a
    merged result (``workload merge`` keeps each source's with its modes), else the run's for the
    mode's emulation; None: a run made before the calibrated ideal."""
    m = (run.get("modes") or {}).get(mode)
    if isinstance(m, dict) and isinstance(m.get("calibration"), dict):
        return m["calibration"]
    cals = run.get("calibration")
    c = cals.get(emulation_of(mode)) if isinstance(cals, dict) else None
    return c if isinstance(c, dict) else None


def size_extras(sized: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """``sized``: (size, FCT s) of flows alone, the smallest size one segment (the reference, sent
    between the same racks in the same phases as the others): (size, what it adds) for every
    other size: its median less the reference's median, less twice the standard error of that
    difference.  Medians, so that a size's extra is what its bytes add, not which of its few
    samples met the quietest moment; less the error, so that the ideal errs low (a flow then
    looks slower than it is, never faster): a few dozen samples place a median only to within
    a tenth of a millisecond here, as much as the base's margin over the fastest flow."""
    by: dict[int, list[float]] = {}
    for size, fct in sized:
        by.setdefault(int(size), []).append(fct)
    if not by:
        raise WorkloadError("no sized flow completed alone: nothing to calibrate the size curve on")
    ref_size = min(by)
    if ref_size > MSS:
        raise WorkloadError(f"sized flows alone: the smallest is {ref_size} bytes; one-segment flows "
                            "(<= MSS) are the reference the others are measured against")
    ref, ref_se = _median_se(by[ref_size])
    out = []
    for size, xs in sorted(by.items()):
        if size != ref_size:
            m, se = _median_se(xs)
            out.append((size, m - ref - 2 * math.hypot(se, ref_se)))
    return out


def _median_se(xs: list[float]) -> tuple[float, float]:
    """A sample's median and its standard error, distribution-free: half the spread between the
    order statistics sqrt(n)/2 ranks either side of the middle (about one error each way)."""
    xs = sorted(xs)
    n = len(xs)
    half = math.sqrt(n) / 2
    lo, hi = percentile(xs, max(0.0, 50 - 100 * half / n)), percentile(xs, min(100.0, 50 + 100 * half / n))
    return percentile(xs, 50), (hi - lo) / 2


def base_rank(n: int, exceedance: float = BASE_EXCEEDANCE) -> int:
    """The rank (1 = the fastest) of the base among ``n`` unloaded samples: the largest k with
    k/(n+1) <= ``exceedance``, and at least 1."""
    return max(1, math.floor(exceedance * (n + 1) + 1e-9))


def expected_below(n: int, exceedance: float = BASE_EXCEEDANCE) -> float:
    """The share of further unloaded flows expected below a base taken from ``n`` samples."""
    return base_rank(n, exceedance) / (n + 1)


def base_of(xs: Sequence[float], exceedance: float = BASE_EXCEEDANCE) -> float:
    """A path class's one-packet base: the :func:`base_rank`-th fastest of its samples."""
    return sorted(xs)[base_rank(len(xs), exceedance) - 1]


def _fit(one_packet, sized, access_bps: float, q: float) -> tuple[dict[str, float], AloneCurve]:
    by: dict[str, list[float]] = {}
    for key, fct, *_ in one_packet:
        by.setdefault(NO_PATH if key is None else key, []).append(fct)
    if not by:
        raise WorkloadError("no one-packet flow completed alone: nothing to calibrate the ideal on")
    base = {k: base_of(xs, q) for k, xs in by.items()}
    curve = AloneCurve.from_samples(size_extras((size, fct) for _, size, fct, *_ in sized), access_bps)
    return base, curve


def held_out(one_packet, sized, access_bps: float, q: float = BASE_EXCEEDANCE) -> dict:
    """Fitted on one half of the rounds, the share of the other half's flows alone (both ways)
    faster than their ideal: what an idle run would score below 1, measured, not assumed."""
    n = {"one_packet": [0, 0], "sized": [0, 0]}
    for h in (0, 1):
        fit_one = [o for o in one_packet if o[2] != h]
        fit_sized = [x for x in sized if x[3] != h]
        if not fit_one or not any(size <= MSS for _, size, _, _ in fit_sized):
            return {}
        base, curve = _fit(fit_one, fit_sized, access_bps, q)

        def ideal(key, size, base=base, curve=curve):
            return base.get(NO_PATH if key is None else key, max(base.values())) + (curve.extra_s(size) if size else 0.0)
        for key, fct, half in one_packet:
            if half == h:
                n["one_packet"][0] += 1
                n["one_packet"][1] += fct < ideal(key, 0)
        for key, size, fct, half in sized:
            if half == h and size > MSS:
                n["sized"][0] += 1
                n["sized"][1] += fct < ideal(key, size)
    out = {k: {"flows": a, "below_1": b, "below_1_share": round(b / a, 4) if a else None} for k, (a, b) in n.items()}
    tot, low = sum(a for a, _ in n.values()), sum(b for _, b in n.values())
    out["all"] = {"flows": tot, "below_1": low, "below_1_share": round(low / tot, 4) if tot else None}
    return out


HELD_OUT_BOUND = 0.01  # the share of flows below 1 the FCT criterion allows (docs/fct.md)


def held_out_warning(cal: "Calibration", where: str) -> str | None:
    """A line when the calibration's own held-out idle flows score over the criterion's bound: an
    idle run divided by it would already fail, so the fabric was not quiet or steady while it was
    measured (other work on the machine, most often).  None when it scored within the bound."""
    ho = cal.held_out.get("all") or {}
    share = ho.get("below_1_share")
    if share is None or share <= HELD_OUT_BOUND:
        return None
    return (f"WARNING: {where}: {ho['below_1']} of {ho['flows']} of its own held-out idle flows ({100 * share:.1f} %) "
            f"are faster than the ideal it fits on the other half (the criterion allows {100 * HELD_OUT_BOUND:g} %): "
            "the fabric was not steady while it was measured (other work on the machine?), and a run divided by it "
            "counts flows below 1 that are the calibration's; measure it again on a quiet machine")


def calibration_from(one_packet: Iterable[tuple[str | None, float, int]],
                     sized: Iterable[tuple[str | None, int, float, int]],
                     access_bps: float, fingerprint: dict, q: float = BASE_EXCEEDANCE) -> Calibration:
    """``one_packet``: (path class, FCT s, half) of one-packet flows alone; ``sized``: (path
    class, size, FCT s, half) of flows of a few sizes alone, one-segment flows among them (the
    reference of :func:`size_extras`).  ``half`` (0 or 1): which half of the rounds a flow was in,
    for :func:`held_out`.  Nothing of a loaded run goes in."""
    one_packet, sized = list(one_packet), list(sized)
    base, curve = _fit(one_packet, sized, access_bps, q)
    by: dict[str, list[float]] = {}
    for key, fct, _ in one_packet:
        by.setdefault(NO_PATH if key is None else key, []).append(fct)
    floor = min(fct for _, fct, _ in one_packet)
    spread = {k: {"min_s": round(min(xs), 7), "p50_s": round(percentile(sorted(xs), 50), 7),
                  "p99_s": round(percentile(sorted(xs), 99), 7)} for k, xs in by.items()}
    return Calibration(base, floor, curve, dict(fingerprint), {k: len(v) for k, v in by.items()}, None, spread,
                       CURVE_METHOD, held_out(one_packet, sized, access_bps, q), q)


def with_ideal(done: Sequence[Done], cal: Calibration, key_of) -> list[Done]:
    """Every flow's denominator: its path class's base (``key_of(d)``) plus its size's extra."""
    out = []
    for d in done:
        key = key_of(d)
        out.append(dataclasses.replace(d, alone_s=cal.base(key), extra_s=cal.curve.extra_s(d.flow.size),
                                       path=NO_PATH if key is None else key))
    return out


# ---------------------------------------------------------------------------- the flow alone

REPLAY_SAMPLE = 200  # flows replayed alone per mode, by default: a bucket mean's 95 % CI of a few %


def replay_sample(flows: Sequence, n: int, seed: int) -> list:
    """``n`` of ``flows`` drawn at random (``seed``), in id order; every flow if ``n`` >= their number."""
    if n >= len(flows):
        return sorted(flows, key=lambda f: f.id)
    return sorted(random.Random(seed).sample(list(flows), n), key=lambda f: f.id)


def replay_plan(flows: Sequence, alone_s, gap_s: float) -> list:
    """The sampled flows re-timed one after another: flow i starts when flow i-1 would have ended
    alone (``alone_s(f)``: an upper estimate of its FCT alone) plus ``gap_s``.  A flow that was
    still running when the next started was not alone: :func:`overlapped` finds it afterwards."""
    t, out = 0.0, []
    for f in flows:
        out.append(dataclasses.replace(f, start=t))
        t += alone_s(f) + gap_s
    return out


def overlapped(done: Sequence[Done]) -> set[int]:
    """Ids of replayed flows that were not alone: one still ran when the next started (both count)."""
    fin = sorted((d for d in done if d.done_ns is not None), key=lambda d: d.start_ns)
    bad: set[int] = set()
    last_end, last_id = None, None
    for d in fin:
        if last_end is not None and d.start_ns < last_end:
            bad |= {d.flow.id, last_id}
        if last_end is None or d.done_ns > last_end:
            last_end, last_id = d.done_ns, d.flow.id
    return bad


def with_replay(done: Sequence[Done], alone: dict[int, float]) -> list[Done]:
    """Each flow with its FCT alone (s, from the replay) where it was sampled and alone."""
    return [dataclasses.replace(d, replay_s=alone.get(d.flow.id)) for d in done]
