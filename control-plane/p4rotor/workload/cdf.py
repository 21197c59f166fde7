"""Flow-size distributions as data: read and check a CDF file, sample it, its mean.

A CDF file (docs/workloads.md) has one ``size_bytes cumulative_probability`` point per line
(space, tab or comma between them); ``#`` starts a comment, blank lines are skipped.  Sizes and
probabilities never decrease, sizes are >= 0, probabilities lie in [0, 1] and the last one is 1.

Between two points the distribution is uniform in size (linear interpolation of the CDF, as ns-2's
``EmpiricalRandomVariable`` that the pFabric and pHost simulators use).  The first point's
probability, and any rise between two points of the same size, is mass on that size exactly:
``8760 0`` then ``8760 0.15`` means 15% of the flows are 8760 bytes.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..inputs import MAX_FLOW_BYTES

PROB_TOLERANCE = 1e-9  # the last probability may be 1 within this (printed decimals)

# Workloads shipped in the checkout's topologies/workloads/ (each file names its source).
SHIPPED = {
    "websearch": "websearch.cdf",                # DCTCP web search, pFabric/pHost simulator form
    "datamining": "datamining.cdf",              # VL2 data mining, pFabric/pHost simulator form
    "websearch-opera": "websearch-opera.cdf",    # the same two as the Opera simulator has them
    "datamining-opera": "datamining-opera.cdf",
}


class WorkloadError(ValueError):
    """Bad workload input (a CDF, a flow list, an option); the message is one line."""


def read_text(path: str | Path) -> str:
    """A file's text, or a one-line :class:`WorkloadError` (unreadable, not UTF-8)."""
    from ..inputs import read_text as _read

    return _read(path, WorkloadError)


@dataclasses.dataclass(frozen=True)
class Cdf:
    """A piecewise-linear flow-size CDF: ``probs[i]`` = P(size <= ``sizes[i]``)."""

    sizes: tuple[float, ...]
    probs: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        check_points(list(zip(self.sizes, self.probs)), self.source or "CDF")

    # ---- the distribution ------------------------------------------------
    def quantile(self, u: float) -> float:
        """The smallest size s with F(s) >= u, interpolating linearly between points."""
        i = bisect.bisect_left(self.probs, u)
        if i == 0:
            return self.sizes[0]
        if i >= len(self.probs):
            return self.sizes[-1]
        p0, p1 = self.probs[i - 1], self.probs[i]  # p0 < u <= p1
        s0, s1 = self.sizes[i - 1], self.sizes[i]
        return s0 + (u - p0) / (p1 - p0) * (s1 - s0)

    def sample(self, rng: random.Random) -> float:
        """One size by inverse-transform sampling (``rng.random()`` is u)."""
        return self.quantile(rng.random())

    def cdf(self, x: float) -> float:
        """P(size <= x)."""
        if x < self.sizes[0]:
            return 0.0
        i = bisect.bisect_right(self.sizes, x)  # sizes[i-1] <= x < sizes[i]
        if i >= len(self.sizes):
            return 1.0
        s0, s1 = self.sizes[i - 1], self.sizes[i]
        p0, p1 = self.probs[i - 1], self.probs[i]
        return p0 + (x - s0) / (s1 - s0) * (p1 - p0)

    def pieces(self) -> Iterable[tuple[float, float, float]]:
        """(probability, lo, hi): mass on sizes uniform in [lo, hi] (lo == hi: on one size)."""
        yield self.probs[0], self.sizes[0], self.sizes[0]
        for i in range(1, len(self.sizes)):
            w = self.probs[i] - self.probs[i - 1]
            if w > 0:
                yield w, self.sizes[i - 1], self.sizes[i]

    def mean(self) -> float:
        """The exact mean size (bytes)."""
        return sum(w * (lo + hi) / 2 for w, lo, hi in self.pieces())

    def mean_packets(self, mss: int) -> float:
        """The exact mean of ``max(1, ceil(size / mss))``: packets per flow."""
        total = 0.0
        for w, lo, hi in self.pieces():
            if hi == lo:
                total += w * max(1, math.ceil(lo / mss))
            else:  # mean of ceil(y) for y uniform in [lo/mss, hi/mss] (ceil(y) >= 1 for y > 0)
                a, b = lo / mss, hi / mss
                total += w * (_int_ceil(b) - _int_ceil(a)) / (b - a)
        return total

    # ---- transforms ------------------------------------------------------
    def mapped(self, fn: Callable[[float], float], breaks: Sequence[float] = (), source: str = "") -> "Cdf":
        """The distribution of fn(size) for a non-decreasing fn that is linear between the
        points and ``breaks`` (sizes where fn changes slope; a point is inserted at each)."""
        pts = list(zip(self.sizes, self.probs))
        out = [pts[0]]
        for (s0, p0), (s1, p1) in zip(pts, pts[1:]):
            for b in sorted(breaks):
                if s0 < b < s1:
                    out.append((b, p0 + (b - s0) / (s1 - s0) * (p1 - p0)))
            out.append((s1, p1))
        return Cdf(tuple(fn(s) for s, _ in out), tuple(p for _, p in out), source or self.source)


def _int_ceil(y: float) -> float:
    """The integral of ceil(t) for t from 0 to y >= 0."""
    n = math.floor(y)
    return n * (n + 1) / 2 + (n + 1) * (y - n)


def check_points(points: list[tuple[float, float]], where: str,
                 lines: Sequence[int] | None = None) -> None:
    """Raise a one-line :class:`WorkloadError` unless ``points`` form a valid CDF."""
    def at(i: int) -> str:
        return f"{where}:{lines[i]}" if lines else f"{where}: point {i + 1}"

    if not points:
        raise WorkloadError(f"{where}: no points (need lines of 'size_bytes cumulative_probability')")
    for i, (s, p) in enumerate(points):
        if not (math.isfinite(s) and 0 <= s <= MAX_FLOW_BYTES):
            raise WorkloadError(f"{at(i)}: size {s:g} must be a finite number >= 0 and <= {MAX_FLOW_BYTES:g} (bytes)")
        if not (math.isfinite(p) and 0 <= p <= 1 + PROB_TOLERANCE):
            raise WorkloadError(f"{at(i)}: cumulative probability {p:g} must lie in [0, 1]")
        if i:
            s0, p0 = points[i - 1]
            if s < s0:
                raise WorkloadError(f"{at(i)}: not monotone: size {s:g} after {s0:g}")
            if p < p0:
                raise WorkloadError(f"{at(i)}: not monotone: cumulative probability {p:g} after {p0:g}")
    if abs(points[-1][1] - 1) > PROB_TOLERANCE:
        raise WorkloadError(f"{at(len(points) - 1)}: the CDF must end at cumulative probability 1, "
                            f"ends at {points[-1][1]:g}")
    if points[-1][0] <= 0:
        raise WorkloadError(f"{where}: every size is 0 bytes")


_SEP = re.compile(r"[\s,]+")


def parse(text: str, source: str) -> Cdf:
    """A CDF from a file's text; errors name ``source`` and the line."""
    points: list[tuple[float, float]] = []
    lines: list[int] = []
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        fields = _SEP.split(body)
        if len(fields) != 2:
            raise WorkloadError(f"{source}:{n}: expected 'size_bytes cumulative_probability', "
                                f"got {len(fields)} field(s)")
        try:
            s, p = float(fields[0]), float(fields[1])
        except ValueError:
            raise WorkloadError(f"{source}:{n}: not a number: {body[:40]!r}") from None
        points.append((s, p))
        lines.append(n)
    check_points(points, source, lines)
    # the last probability may be 1 within the tolerance: make it 1 exactly
    points[-1] = (points[-1][0], 1.0)
    return Cdf(tuple(s for s, _ in points), tuple(min(p, 1.0) for _, p in points), source)


def workloads_dir() -> Path:
    """topologies/workloads/ of the checkout this package runs from."""
    return Path(__file__).resolve().parents[3] / "topologies" / "workloads"


def shipped(name: str) -> Cdf:
    """A shipped workload by name (one-line :class:`WorkloadError` if unknown or missing)."""
    if name not in SHIPPED:
        raise WorkloadError(f"unknown workload {name!r} (known: {', '.join(SHIPPED)}; or --cdf FILE)")
    path = workloads_dir() / SHIPPED[name]
    if not path.is_file():
        raise WorkloadError(f"workload {name!r}: {path} is missing (this package is not running from a "
                            "p4rotor checkout); give --cdf FILE")
    return parse(read_text(path), f"topologies/workloads/{SHIPPED[name]}")


def load(path: str | Path) -> Cdf:
    """Read and check a CDF file (one-line :class:`WorkloadError` naming file and line)."""
    return parse(read_text(path), str(path))
