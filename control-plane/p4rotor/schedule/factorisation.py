"""Random 1-factorisations of the complete graph K_n (n even), by hill-climbing.

Why not the circle method (``generators.round_robin_matchings``): it is algebraic, so the union
of any few of its matchings is a circulant, ring-like graph whatever the order or the rack
labels, and an Opera slice built from them has a diameter far above a random regular graph's.
A 1-factorisation drawn at random has no such structure: unions of a few of its matchings look
like random regular graphs, i.e. expanders.

The hill-climb is Dinitz, Garnick and McKay's (J. Combin. Designs 2, 1994) for 1-factorisations:
colour the edges of K_n with n-1 colours, never giving a rack two edges of one colour.  Each
step takes a colour c and a rack x that has no c edge, and an uncoloured edge xy; it colours xy
with c, first uncolouring y's c edge yz if y has one.  The number of coloured edges never
drops, and in practice all n(n-1)/2 are coloured after a few times that many steps.

The climb alone can stall for ever near the end (e.g. two colours each missing at two racks,
with the two uncoloured edges joining a rack of one pair to a rack of the other: every step
recreates that pattern).  When no edge has been gained for a while, one Kempe swap breaks it:
exchange colours c and c2 along the alternating path that starts at a rack missing c, which
keeps the colouring proper and moves the deficiency elsewhere.
"""

from __future__ import annotations

import random

from .model import ScheduleError


class _Bag:
    """A set with O(1) add, remove and uniform random choice (the hill-climb's only needs)."""

    __slots__ = ("items", "pos")

    def __init__(self, items=()):
        self.items: list[int] = []
        self.pos: dict[int, int] = {}
        for x in items:
            self.add(x)

    def add(self, x: int) -> None:
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def remove(self, x: int) -> None:
        i = self.pos.pop(x)
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def choice(self, rng: random.Random) -> int:
        return self.items[int(rng.random() * len(self.items))]

    def __len__(self) -> int:
        return len(self.items)


def random_one_factorisation(n: int, rng: random.Random, max_steps: int | None = None) -> list[list[int]]:
    """n-1 perfect matchings of K_n (n even) covering every pair exactly once, drawn with ``rng``.

    ``matchings[c][i]`` is rack i's partner in matching c.  Deterministic for a given rng state.
    """
    if n < 2 or n % 2:
        raise ScheduleError(f"a 1-factorisation needs an even number of racks >= 2, got {n}")
    colours = n - 1
    partner = [[-1] * colours for _ in range(n)]          # partner[x][c]: x's c-neighbour or -1
    uncoloured = [_Bag(y for y in range(n) if y != x) for x in range(n)]
    missing = [_Bag(range(n)) for _ in range(colours)]   # racks with no edge of colour c
    open_colours = _Bag(range(colours))                   # colours that are not yet perfect matchings
    left = n * (n - 1) // 2
    steps = since_gain = 0
    limit = max_steps if max_steps is not None else 200 * n * n
    while left:
        steps += 1
        if steps > limit:
            raise ScheduleError(f"random 1-factorisation of K_{n}: no convergence in {limit} steps")
        since_gain += 1
        if since_gain > 4 * n:
            since_gain = 0
            _kempe_swap(partner, missing, open_colours, rng)
            continue
        c = open_colours.choice(rng)
        x = missing[c].choice(rng)
        y = uncoloured[x].choice(rng)
        z = partner[y][c]
        if z < 0:
            missing[c].remove(y)
            left -= 1
            since_gain = 0
        else:                      # steal y from z: z loses its c edge, yz becomes uncoloured
            partner[z][c] = -1
            missing[c].add(z)
            uncoloured[y].add(z)
            uncoloured[z].add(y)
        partner[x][c], partner[y][c] = y, x
        missing[c].remove(x)
        uncoloured[x].remove(y)
        uncoloured[y].remove(x)
        if not missing[c]:
            open_colours.remove(c)
    return [[partner[x][c] for x in range(n)] for c in range(colours)]


def _kempe_swap(partner: list[list[int]], missing: list[_Bag], open_colours: _Bag, rng: random.Random) -> None:
    """Swap colours c and c2 on the c2/c alternating path from a rack x that misses c."""
    c = open_colours.choice(rng)
    x = missing[c].choice(rng)
    colours = len(missing)
    c2 = int(rng.random() * (colours - 1))
    c2 += c2 >= c
    path = [x]
    nxt, other = c2, c
    while partner[path[-1]][nxt] >= 0:     # x misses c, so the path cannot close on itself
        path.append(partner[path[-1]][nxt])
        nxt, other = other, nxt
    if len(path) == 1:
        return                              # x misses c2 too: nothing to swap
    for v in path:
        partner[v][c], partner[v][c2] = partner[v][c2], partner[v][c]
    for v in (path[0], path[-1]):
        for col in (c, c2):
            if partner[v][col] < 0:
                missing[col].add(v)
            elif v in missing[col].pos:
                missing[col].remove(v)
    for col in (c, c2):
        if missing[col]:
            open_colours.add(col)
        elif col in open_colours.pos:
            open_colours.remove(col)
