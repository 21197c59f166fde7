"""The two denominators of a flow's slowdown, neither taken from the run being judged.

[Gao20 §5.4] divides a flow's FCT by the FCT it would have alone in the network.  p4rotor
measures that two ways, both on an idle fabric and both before or apart from the run:

* **the calibrated ideal** (:class:`Calibration`): one-packet flows alone between every rack pair
  in every phase of the hyperperiod give each *path class* (the low-latency path's rack hops
  there and back at the flow's start, ``workload/paths.py``: :class:`PathKeys`) its base FCT,
  at a low percentile of its samples; flows of a few sizes alone give what a flow's size adds
  over the fastest one-packet flow (:class:`AloneCurve`, the shaper's real burst and rate).  A
  flow's ideal is its path class's base plus its size's extra.  Measured once per fabric and
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

# The one-packet base of a path class: this percentile of its unloaded samples.  The fastest
# sample is one draw from the kernel's scheduling noise; the 1st percentile keeps the ideal a
# lower bound in all but ~1 % of unloaded flows, which is the fidelity the FCT guide asks of it.
BASE_PERCENTILE = 1.0

# A calibration is refused for a run whose fabric differs in any of these.
FINGERPRINT_KEYS = ("emulation", "target", "racks", "hosts_per_rack", "rotors", "slot_us", "night_us",
                    "dilation", "epsilon_us", "access_bps")

NO_PATH = "none"  # the key of a flow that met no low-latency path at its start


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The unloaded fabric: per path class the one-packet base FCT (s), the size curve over the
    fastest one-packet flow (``floor_s``), and what it was measured on (``fingerprint``)."""
    base_s: dict[str, float]
    floor_s: float
    curve: AloneCurve
    fingerprint: dict
    samples: dict[str, int] = dataclasses.field(default_factory=dict)
    percentile: float = BASE_PERCENTILE
    spread: dict[str, dict] = dataclasses.field(default_factory=dict)

    def base(self, key: str | None) -> float:
        """A path class's one-packet base; a class the calibration never met gets the slowest
        base it has (an ideal too low would make the flow look slow, never fast)."""
        k = NO_PATH if key is None else key
        return self.base_s.get(k, max(self.base_s.values()))

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
                "percentile": self.percentile, "spread": self.spread}

    @classmethod
    def from_json(cls, d: dict, where: str) -> "Calibration":
        try:
            base = {str(k): float(v) for k, v in d["base_s"].items()}
            pts = tuple((int(s), float(e)) for s, e in d["curve"]["points"])
            curve = AloneCurve(pts, float(d["curve"]["tail_mbps"]) * 1e6)
            cal = cls(base, float(d["floor_s"]), curve, dict(d["fingerprint"]), dict(d.get("samples", {})),
                      float(d.get("percentile", BASE_PERCENTILE)), dict(d.get("spread", {})))
        except (KeyError, TypeError, ValueError, AttributeError) as ex:
            raise WorkloadError(f"{where}: not a calibration (calibration.json of `experiment fct "
                                f"--calibrate-only`): {type(ex).__name__} {ex}") from None
        ok = (base and pts and all(math.isfinite(v) and v > 0 for v in base.values())
              and math.isfinite(cal.floor_s) and cal.floor_s > 0 and cal.curve.tail_bps > 0
              and all(s > 0 and math.isfinite(e) and e >= 0 for s, e in pts))
        if not ok:
            raise WorkloadError(f"{where}: a calibration needs positive finite bases, floor, curve and tail rate")
        return cal


def calibration_from(one_packet: Iterable[tuple[str | None, float]], sized: Iterable[tuple[int, float]],
                     access_bps: float, fingerprint: dict, q: float = BASE_PERCENTILE) -> Calibration:
    """``one_packet``: (path class, FCT s) of one-packet flows alone; ``sized``: (size, FCT s) of
    larger flows alone.  Nothing of a loaded run goes in."""
    by: dict[str, list[float]] = {}
    for key, fct in one_packet:
        by.setdefault(NO_PATH if key is None else key, []).append(fct)
    if not by:
        raise WorkloadError("no one-packet flow completed alone: nothing to calibrate the ideal on")
    every = sorted(x for xs in by.values() for x in xs)
    floor = every[0]
    base = {k: percentile(sorted(xs), q) for k, xs in by.items()}
    curve = AloneCurve.from_samples([(s, f - floor) for s, f in sized], access_bps)
    spread = {k: {"min_s": round(min(xs), 7), "p50_s": round(percentile(sorted(xs), 50), 7),
                  "p99_s": round(percentile(sorted(xs), 99), 7)} for k, xs in by.items()}
    return Calibration(base, floor, curve, dict(fingerprint), {k: len(v) for k, v in by.items()}, q, spread)


def with_ideal(done: Sequence[Done], cal: Calibration, key_of) -> list[Done]:
    """Every flow's denominator: its path class's base (``key_of(d)``) plus its size's extra."""
    return [dataclasses.replace(d, alone_s=cal.base(key_of(d)), extra_s=cal.curve.extra_s(d.flow.size))
            for d in done]


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
