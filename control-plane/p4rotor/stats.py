"""Percentiles and summaries: the one place every report (controller, bench, experiments) gets them."""

from __future__ import annotations

import statistics
from typing import Iterable, Sequence


def _pick(s: Sequence[float], p: float) -> float:
    return s[min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))]


def percentile(xs: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank on the sorted values) of a non-empty ``xs``."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of no values")
    return _pick(s, p)


def summarize(xs: Iterable[float]) -> dict[str, float]:
    """n, min, p50, p90, p99, max and mean of ``xs``; just ``{"n": 0}`` when empty."""
    s = sorted(xs)
    if not s:
        return {"n": 0}
    return {"n": len(s), "min": s[0], "p50": _pick(s, 50), "p90": _pick(s, 90), "p99": _pick(s, 99),
            "max": s[-1], "mean": statistics.fmean(s)}
