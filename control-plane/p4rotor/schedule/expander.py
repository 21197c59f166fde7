"""Arrange matchings into an Opera schedule whose every slice is an expander ([McGuinness21 §2.6.1]).

With K rotors staggered by slot/K, read the rotors' slots in time order as one cyclic sequence
``seq``: position ``q = p*K + j`` is rotor j's slot p.  Then every slice is a window of that
sequence: the slice in which rotor j is dark holds the K-1 positions just before j's new slot,
and the all-live slice after it holds those K-1 plus the new one.  So the whole schedule is
good when every window of K-1 (and of K) consecutive matchings has a small diameter.

This module takes a pool of matchings (a 1-factorisation: every pair exactly once) and finds a
sequence of length L = K*ceil(len(pool)/K) that uses every pool matching at least once.  The
L - len(pool) spare places (where the old generator left a rotor idle while another was dark)
hold repeats of pool matchings, so every slice has K-1 live matchings; a repeat is placed away
from its twin so the matchings of one slice stay edge-disjoint.  The search is a seeded local
search by swaps: deterministic, and cheap because a swap only changes the windows around the
two positions (``analysis.matchings_diameter`` measures each).
"""

from __future__ import annotations

import dataclasses
import random

from .analysis import matchings_diameter

Matching = list  # list[int | None]: matching[i] = rack i's partner, None if idle

# Work units of Python overhead per window measured (calibrated: a unit is ~0.2 us here).
MEASURE_OVERHEAD = 60
# Give up after this long without progress: a quarter of the budget, or 20 times the work of
# measuring every window once if that is less (small fabrics whose target cannot be met, e.g.
# 4 racks and 4 rotors, where some slice must repeat a matching, stop within milliseconds).
PATIENCE_FRACTION = 4
PATIENCE_SWEEPS = 20


@dataclasses.dataclass
class Arrangement:
    seq: list[int]                  # pool index at every position of the cyclic sequence
    hard: int                       # windows over their limit, disconnected, or with a matching twice
    soft: int                       # windows over their target (but within the limit)
    worst: dict[int, int | None]    # window length -> worst diameter (None: some window disconnected)
    work: int                       # work units spent


class _Search:
    """The sequence, every window's cost, and moves that keep them current.

    A window costs 0 within its target diameter, 1 within its limit, and ``big`` (more than
    all the 1s together) when it is over the limit, disconnected or holds one matching twice:
    minimising the total first meets every limit, then as many targets as it can.
    """

    def __init__(self, pool: list[Matching], seq: list[int], targets: dict[int, tuple[int, int]]):
        self.pool = pool
        self.n = len(pool[0])
        # Matchings as permutations (an idle rack is its own partner) for ``matchings_diameter``.
        self.perms = [[i if j is None else j for i, j in enumerate(m)] for m in pool]
        self.seq = seq
        self.L = len(seq)
        self.targets = targets
        self.lengths = sorted(targets)
        self.windows = [(ln, s) for ln in self.lengths for s in range(self.L)]
        self.big = len(self.windows) + 1
        self.work = 0                  # work units spent so far (see _measure): the deterministic budget
        self.cost = {w: self._measure(w) for w in self.windows}
        self.total = sum(self.cost.values())

    def _window(self, w: tuple[int, int]) -> tuple[list[list[int]], bool]:
        """The window's distinct matchings, and whether it repeats one it could have avoided."""
        ln, s = w
        idx = {self.seq[(s + k) % self.L] for k in range(ln)}
        # Two copies of a matching stay out of every window of ln only if they can be ln apart
        # on the cycle (L >= 2 ln) and the pool has ln others; tiny fabrics cannot avoid it.
        return [self.perms[i] for i in idx], len(idx) < ln and self.L >= 2 * ln and len(self.pool) >= ln

    def _measure(self, w: tuple[int, int]) -> int:
        target, limit = self.targets[w[0]]
        perms, dup = self._window(w)
        d = matchings_diameter(perms, cap=limit)
        # Work: one unit per rack-matching per BFS round, plus building the graph and a fixed
        # overhead, so that a unit costs about the same time at 4 racks and at 128.
        rounds = (limit if d is None else d) + 1
        self.work += self.n * w[0] * (rounds + 2) + MEASURE_OVERHEAD
        c = self.big if d is None else (1 if d > target else 0)
        return c + (self.big if dup else 0)

    def windows_at(self, q: int) -> list[tuple[int, int]]:
        return [(ln, (q - k) % self.L) for ln in self.lengths for k in range(ln)]

    def try_move(self, changes: dict[int, int]) -> bool:
        """Set seq[q] = v for each change if that does not raise the total cost; else leave all as was."""
        old_vals = {q: self.seq[q] for q in changes}
        touched = list(dict.fromkeys(w for q in changes for w in self.windows_at(q)))
        old_cost = sum(self.cost[w] for w in touched)
        for q, v in changes.items():
            self.seq[q] = v
        new: dict[tuple[int, int], int] = {}
        acc = 0
        # Windows that were fine first: a move usually fails by breaking one of them.
        for w in sorted(touched, key=lambda w: self.cost[w]):
            new[w] = self._measure(w)
            acc += new[w]
            if acc > old_cost:
                for q, v in old_vals.items():
                    self.seq[q] = v
                return False
        self.cost.update(new)
        self.total += acc - old_cost
        return True

    def result(self) -> Arrangement:
        worst: dict[int, int | None] = {}
        for ln in self.lengths:
            ds = [matchings_diameter(self._window((ln, s))[0]) for s in range(self.L)]
            worst[ln] = None if any(d is None for d in ds) else max(ds)
        hard = sum(1 for c in self.cost.values() if c >= self.big)
        soft = sum(1 for c in self.cost.values() if 0 < c < self.big)
        return Arrangement(seq=list(self.seq), hard=hard, soft=soft, worst=worst, work=self.work)


def arrange(pool: list[Matching], rotors: int, targets: dict[int, tuple[int, int]], rng: random.Random,
            work: int) -> Arrangement:
    """Best sequence found within ``work`` units of search; ``targets``: window length -> (target, limit).

    A step picks a costly window (one over its limit if there is one), one of its positions
    and a random other position, and either swaps their matchings or (if the first holds a
    repeated matching) replaces it with another pool matching; it is kept unless the total
    cost grows.  ``work`` counts rack-matchings x BFS rounds measured, so the budget does not depend on
    the machine's speed and the result is the same everywhere.
    """
    P = len(pool)
    L = rotors * -(-P // rotors)
    extra = L - P
    seq = list(range(P)) + (rng.sample(range(P), extra) if extra <= P else
                            [rng.randrange(P) for _ in range(extra)])
    rng.shuffle(seq)
    st = _Search(pool, seq, targets)
    count = [0] * P
    for v in seq:
        count[v] += 1
    patience = min(work // PATIENCE_FRACTION, PATIENCE_SWEEPS * st.work)
    best_total, best_at = st.total, st.work
    while st.total and st.work < work and st.work - best_at < patience:
        st.work += 1
        if st.total < best_total:
            best_total, best_at = st.total, st.work
        bad = [w for w in st.windows if st.cost[w] >= st.big] or [w for w in st.windows if st.cost[w]]
        ln, s = bad[int(rng.random() * len(bad))]
        p = (s + int(rng.random() * ln)) % L
        if count[st.seq[p]] > 1 and rng.random() < 0.3:
            old, new = st.seq[p], int(rng.random() * P)
            if new != old and st.try_move({p: new}):
                count[old] -= 1
                count[new] += 1
        else:
            q = int(rng.random() * L)
            a, b = st.seq[p], st.seq[q]
            if a != b:
                st.try_move({p: b, q: a})
    return st.result()
