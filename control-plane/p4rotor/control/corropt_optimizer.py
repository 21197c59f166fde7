"""Which corrupting rotor links to disable: CorrOpt's optimizer ([Zhuo19 §3.4.1], "Optimizer") on a
rotor schedule.  Pure: a schedule and rates in, a chosen set of links out, no I/O, no clock.

The problem is CorrOpt's: choose the links to disable, ``d_l`` in {0, 1}, minimising the total
penalty of the corrupting links left enabled, ``sum over l of (1 - d_l) * I(f_l)``, subject to the
capacity constraint.  The penalty is the one the thesis evaluates with, ``I(f) = f`` ("for
simplicity, results in this chapter use I(f_l) = f_l", [Zhuo19 §3.6.1]): the sum of the kept links'
loss rates, proportional to corruption losses at equal utilisation.  The constraint, the links and
the candidates (the links above the threshold) are the fast checker's (``fast_checker``, whose
``Connectivity`` is the one check both use): in every slice, racks connected in the original
schedule stay connected.

The search is the published one, in three steps:

1. **Pruning** ([Zhuo19 §3.4.1], Figure 3.11): disable every candidate at once and list the slice
   components that split.  Only those constraints can ever fail: a component that survives every
   candidate off survives any subset off.  A candidate with no circuit inside a split component
   is disabled outright -- it cannot matter to any constraint that can fail.  (CorrOpt's ToRs
   whose path counts fail with every corrupting link off are our (slice, component) pairs.)
2. **Subsets with a reject cache**: the remaining candidates ("in danger") are searched over all
   subsets for the one of least kept penalty that meets the constraint.  Every infeasible set
   found goes into the reject cache, shrunk to the links that removed circuits inside the split
   component (``Break.links``: any superset breaks that component too), and any set containing a
   cached one is skipped without a check.  The enumeration is a depth-first include/exclude walk
   over the in-danger links in the fast checker's order, include first, so an infeasible include
   drops its whole subtree of supersets.
3. **A bound the thesis does not describe**: the fast checker's own choice (found first, with the
   same checks) is the set to beat, and a branch is left when even disabling every undecided link
   could not beat the best set found.  It skips only sets that cannot be better, so the answer
   stays exact (as pruning and the cache do, [Zhuo19 §3.4.1]: "the output of CorrOpt's optimizer
   is an exact solution").

Bounded work: more than ``max_links`` in-danger links is refused before the search, and a search
that reaches ``max_work`` steps (sets visited, circuits and cached sets looked at) stops.  Either
way the result says so (``optimal`` False, ``reason`` one line) and holds the best set known: the
fast checker's on a refusal, the best found so far on a stop -- never worse than the fast
checker's, the set to beat.

When it runs is the caller's: the thesis runs it when a repaired link comes back, over the links
still active, the disabled ones staying off (its footnote 6); ``disabled`` names those.  Not
built: the thesis's proposed segmentation into independent link groups ([Zhuo19 §3.7]).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping

from ..schedule.model import Schedule
from .fast_checker import Break, Connectivity, Link, MonitorError, candidates

MAX_LINKS = 40            # in-danger links searched at most (2**40 subsets before the cache and bound)
MAX_WORK = 20_000_000     # search steps at most: a set visited, a circuit or cached set looked at
                          # in a check; 0.2-1 us each (measured on Opera 16x4): 5-20 s


class OptimizerError(MonitorError):
    """Bad input to the optimizer (the search limits); the message is one line."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """One candidate's outcome.  ``why``: "safe" (pruned: no constraint that can fail involves
    it), "chosen" (disabled by the search), "kept" (with ``split``: the slice component disabling
    it as well would split)."""
    rotor: str
    rack: int
    rate: float
    action: str                          # "disable" or "keep"
    why: str
    split: Break | None = None
    slice_start_us: int | None = None    # of ``split``'s slice

    @property
    def link(self) -> Link:
        return (self.rotor, self.rack)

    def reason(self) -> str:
        if self.why == "safe":
            return "no slice can lose connectivity through it, even with every candidate off (pruned)"
        if self.why == "chosen":
            return "in the set of least kept penalty: every slice keeps its connectivity without it"
        b = self.split
        pieces = " + ".join(_racks(p) for p in b.pieces)
        return (f"slice {b.slice_index} (t={self.slice_start_us} us) would split {_racks(sorted(b.component))} "
                f"into {pieces} with it off too")


@dataclasses.dataclass(frozen=True)
class Result:
    choices: tuple[Choice, ...]          # every candidate, in the fast checker's order
    optimal: bool                        # the search finished: no feasible set keeps less penalty
    reason: str                          # one line: how the answer was reached
    penalty_kept: float                  # sum of the kept candidates' rates, I(f) = f
    safe: int                            # candidates disabled by pruning
    in_danger: int                       # candidates searched
    nodes: int                           # sets visited by the search
    work: int                            # steps taken (the limit's unit)
    checks: int                          # constraint checks made (each: the slices a link touches)
    cache_hits: int                      # sets skipped because they contain a cached infeasible set
    cache_size: int

    @property
    def disabled(self) -> list[Link]:
        return [c.link for c in self.choices if c.action == "disable"]

    @property
    def kept(self) -> list[Link]:
        return [c.link for c in self.choices if c.action == "keep"]


def _racks(rs: Iterable[int]) -> str:
    return "{" + ",".join(map(str, rs)) + "}"


def penalty(rates: Mapping[Link, float], links: Iterable[Link]) -> float:
    """CorrOpt's total penalty of ``links`` left enabled, with I(f) = f ([Zhuo19 §3.6.1])."""
    return math.fsum(rates[x] for x in links)


def optimise(schedule: Schedule, rates: Mapping[Link, float], threshold: float,
             disabled: Iterable[Link] = (), *, max_links: int = MAX_LINKS,
             max_work: int = MAX_WORK) -> Result:
    """CorrOpt's optimizer over the links above ``threshold`` (module docstring).  ``disabled``:
    links already off, which stay off and count toward the constraint (not decided, not listed).
    Bad input: ``MonitorError`` (``OptimizerError`` for the limits), one line."""
    for name, v in (("max_links", max_links), ("max_work", max_work)):
        if type(v) is not int or v < 0:
            raise OptimizerError(f"{name} must be a non-negative integer, got {v!r}")
    order, off = candidates(schedule, rates, threshold, disabled)
    conn = Connectivity(schedule)
    off_set = frozenset(off)

    # 1. Pruning: the constraints that fail with every candidate off; the links inside them.
    failing = list(conn.breaks(off_set | set(order)))
    danger_slices = sorted({b.slice_index for b in failing})
    touched: set[Link] = set()
    for b in failing:
        touched |= b.links
    danger = [x for x in order if x in touched]
    safe = [x for x in order if x not in touched]
    base = off_set | set(safe)

    danger_set = set(danger_slices)
    stats = {"nodes": 0, "checks": 0, "hits": 0, "work": 0}
    # The reject cache, by link: a cached set within ``chosen | {link}`` must contain ``link``,
    # since ``chosen`` is feasible; so only the sets holding ``link`` are looked at.
    cache: dict[Link, set[frozenset[Link]]] = {}

    def feasible_with(chosen: frozenset[Link], link: Link) -> bool:
        """``chosen`` (feasible) plus ``link``: rejected from the cache, or checked on the slices
        that the link touches among those that can fail."""
        trial = chosen | {link}
        cached = cache.get(link, ())
        where = [si for si in conn.touches(link) if si in danger_set]
        stats["work"] += len(cached) + sum(len(conn.circuits[si]) for si in where)
        if any(c <= trial for c in cached):
            stats["hits"] += 1
            return False
        stats["checks"] += 1
        b = conn.first_break(base | trial, where)
        if b is None:
            return True
        # Shrunk to the in-danger links that removed circuits in the split component (``base``
        # links are in every set, so they need not be named); it holds ``link``, whose circuits
        # split it.
        rejected = frozenset(b.links - base)
        for x in rejected:
            cache.setdefault(x, set()).add(rejected)
        return False

    # The fast checker's choice on the in-danger links (with the safe ones off it decides exactly
    # as on all candidates): the answer on a refusal, the set to beat otherwise.
    greedy = _greedy(danger, feasible_with)
    if len(danger) > max_links:
        chosen, optimal = greedy, False
        reason = (f"refused: {len(danger)} links in danger of splitting a slice, over the limit of "
                  f"{max_links}: the fast checker's choice")
    else:
        chosen, stopped = _search(danger, rates, feasible_with, stats, max_work, greedy)
        optimal = not stopped
        reason = (f"stopped after {stats['work']} steps (limit {max_work}): the best found, not proven optimal"
                  if stopped
                  else f"optimal: {len(safe)} safe, {len(danger)} in danger searched")

    choices = []
    kept = [x for x in danger if x not in chosen]
    off_final = base | chosen
    for x in order:
        rate = float(rates[x])
        if x in safe:
            choices.append(Choice(*x, rate, "disable", "safe"))
        elif x in chosen:
            choices.append(Choice(*x, rate, "disable", "chosen"))
        else:
            # Why it stays: the component that would split if it went too (optimal sets are
            # maximal, every rate being above a threshold > 0; so is the greedy one).
            b = conn.first_break(off_final | {x}, conn.touches(x))
            assert b is not None, f"{x} kept but removable: the search returned a set that is not maximal"
            choices.append(Choice(*x, rate, "keep", "kept", b, conn.slices[b.slice_index].start_us))
    return Result(tuple(choices), optimal=optimal, reason=reason,
                  penalty_kept=penalty(rates, kept), safe=len(safe), in_danger=len(danger),
                  nodes=stats["nodes"], work=stats["work"], checks=stats["checks"], cache_hits=stats["hits"],
                  cache_size=len({c for cs in cache.values() for c in cs}))


def _greedy(links: list[Link], feasible_with) -> frozenset[Link]:
    chosen: frozenset[Link] = frozenset()
    for x in links:
        if feasible_with(chosen, x):
            chosen = chosen | {x}
    return chosen


def _search(links: list[Link], rates: Mapping[Link, float], feasible_with, stats: dict,
            max_work: int, start: frozenset[Link]) -> tuple[frozenset[Link], bool]:
    """Depth-first over include/exclude of ``links`` (fast checker's order), include first: the
    feasible set of greatest disabled rate sum (= least kept penalty), ``start`` (feasible) unless
    a set beats it.  (best, stopped at ``max_work`` steps)."""
    n = len(links)
    w = [float(rates[x]) for x in links]
    rest = [0.0] * (n + 1)  # rest[i]: rate sum of links[i:], the most the undecided could add
    for i in range(n - 1, -1, -1):
        rest[i] = rest[i + 1] + w[i]
    # A better set must win by more than rounding: the same set summed in another order is equal.
    eps = 1e-12 * (rest[0] or 1.0)
    best, best_sum = start, math.fsum(float(rates[x]) for x in start)
    # Iterative, so a long list cannot hit the recursion limit: (index, chosen, its rate sum).
    stack: list[tuple[int, frozenset[Link], float]] = [(0, frozenset(), 0.0)]
    while stack:
        if stats["work"] >= max_work:
            return best, True
        i, chosen, got = stack.pop()
        stats["nodes"] += 1
        stats["work"] += 1
        if got + rest[i] <= best_sum + eps:  # the bound: even all the rest could not win
            continue
        if i == n:
            best, best_sum = chosen, got
            continue
        stack.append((i + 1, chosen, got))  # exclude, explored after ...
        if feasible_with(chosen, links[i]):
            stack.append((i + 1, chosen | {links[i]}, got + w[i]))  # ... include
    return best, False
