"""A Zipf hot spot over destination racks (``p4rotor workload generate --zipf A``).

Each rack gets a rank, 1 to R, from a random permutation of the racks seeded by the workload's
seed (its own generator, so the arrivals' draws are not touched), and the Zipf weight
``1 / rank^A``.  A flow from a host of rack s goes to rack r != s with probability
``w_r / (W - w_s)`` (W the sum of every rack's weight: the weights renormalised without the
source's rack), then to a host uniform within rack r.  Sources stay uniform among all hosts.

What the load then means: the network-wide arrival rate is the uniform workload's, so every
host still *sends* ``load`` of its access rate on average, and the mean host load is the offered
load; what a rack's hosts *receive* is ``R x share_r`` times it (``share_r``: the rack's share of
the flows, :func:`rack_shares`).  At 8 racks of equal size and A = 0.8 the hottest rack's
weight is 0.309 of the total, and 0.301 of the flows go to it (its own hosts cannot send
there): its downlinks carry 2.41x the offered load and the coldest rack's 0.48x, so past a
load of 0.415 (1 / 2.41) the hottest rack's downlinks are overloaded.  docs/fct.md.
"""

from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

from ..inputs import MAX_ZIPF
from .cdf import WorkloadError


def check(a: float | None) -> float | None:
    """``a`` if it is None or a finite exponent in (0, MAX_ZIPF], else a one-line WorkloadError."""
    if a is None:
        return None
    if isinstance(a, bool) or not isinstance(a, (int, float)) or not (math.isfinite(a) and 0 < a <= MAX_ZIPF):
        raise WorkloadError(f"--zipf must be a number in (0, {MAX_ZIPF:g}], got {a!r}")
    return float(a)


def label(a) -> str:
    """What a point's label adds for its hot spot: ", Zipf 0.8", or "" for a uniform run (a result
    without the key was made before it was recorded, and was uniform)."""
    return f", Zipf {a:g}" if isinstance(a, (int, float)) and not isinstance(a, bool) else ""


def ranks(racks: Sequence[int], seed: int) -> dict[int, int]:
    """Rack -> rank (1 = hottest): a permutation of ``racks`` (sorted first) drawn from ``seed``."""
    order = sorted(set(racks))
    random.Random(f"p4rotor zipf ranks {seed}").shuffle(order)
    return {r: k + 1 for k, r in enumerate(order)}


def weights(racks: Sequence[int], a: float, seed: int) -> dict[int, float]:
    """Rack -> its Zipf weight ``1 / rank^a``, normalised to sum 1."""
    w = {r: 1 / k ** a for r, k in ranks(racks, seed).items()}
    total = sum(w.values())
    return {r: v / total for r, v in sorted(w.items())}


def destination_weights(w: Mapping[int, float], src_rack: int) -> dict[int, float]:
    """P(destination rack | a source in ``src_rack``): ``w`` without the source's rack, renormalised."""
    rest = sum(v for r, v in w.items() if r != src_rack)
    return {r: v / rest for r, v in w.items() if r != src_rack}


def rack_shares(w: Mapping[int, float], source_share: Mapping[int, float]) -> dict[int, float]:
    """Each rack's expected share of the flows, sources in each rack with ``source_share``
    (hosts per rack over all hosts, sources being uniform among hosts)."""
    out = dict.fromkeys(w, 0.0)
    for s, p in source_share.items():
        for r, q in destination_weights(w, s).items():
            out[r] += p * q
    return out


class Destinations:
    """Draws a flow's destination host for a source rack, by the racks' Zipf weights."""

    def __init__(self, hosts_by_rack: Mapping[int, Sequence[str]], a: float, seed: int):
        self.hosts = {r: list(h) for r, h in hosts_by_rack.items()}
        self.weights = weights(list(self.hosts), a, seed)
        self._cum: dict[int, tuple[list[int], list[float]]] = {}
        for s in self.hosts:
            d = destination_weights(self.weights, s)
            racks, cum, acc = list(d), [], 0.0
            for r in racks:
                acc += d[r]
                cum.append(acc)
            self._cum[s] = (racks, cum)

    def draw(self, rng: random.Random, src_rack: int) -> str:
        racks, cum = self._cum[src_rack]
        rack = rng.choices(racks, cum_weights=cum)[0]
        return rng.choice(self.hosts[rack])

    def meta(self, a: float, source_share: Mapping[int, float]) -> dict:
        """What a flow list records of its hot spot: the racks hottest first, each rack's weight
        and expected share of the flows."""
        shares = rack_shares(self.weights, source_share)
        return {"exponent": a, "racks_hottest_first": sorted(self.weights, key=lambda r: -self.weights[r]),
                "weights": {str(r): v for r, v in self.weights.items()},
                "expected_rack_shares": {str(r): v for r, v in shares.items()}}
