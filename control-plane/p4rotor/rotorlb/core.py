"""RotorLB ([McGuinness21 §2.5.1], Algorithm 1 and Figure 2.9) as pure functions on queue values.

Units: one unit = what one uplink carries during one matching slot, so a
circuit's capacity per direction is ``capacity`` (1 by default).  Every rack
keeps ``L[dst]`` (local bulk its own hosts made) and ``N[dst]`` (non-local:
accepted from another rack on its first hop, to be delivered on the second).
N is kept as FIFO :class:`Chunk` s tagged with the origin rack and the slot
in which they were accepted, so a model can report relay delay in slots and
attribute every delivery to its (origin, dst) pair.  Nothing here does I/O or
reads a clock: the slot number lives in :class:`FabricState`.

One exchange over one live circuit between racks a and b, per direction
(each side is the offerer to the other), in three phases:

1. *direct*: send stored N[peer] (oldest first), then L[peer], up to capacity;
2. *offer/accept*: the offerer offers its spare capacity and its remaining
   local demand per destination; the acceptor water-fills that offer against
   its per-destination headroom ``capacity - (L[dst] + N[dst])``;
3. *indirect*: the offerer moves what was accepted from its L into the
   acceptor's N.

Reading of Algorithm 1 where the pseudocode is ambiguous (the choices made):

* ``indir <- tmpfs`` would overwrite the grant on every water-filling pass;
  the text's worked example (0.25 for R3 *and then* the rest of the capacity,
  0.75, for R4) only comes out if the passes ACCUMULATE, so they do.
* The loop ``while offerscl has nonzero columns`` never ends if a column keeps
  offered data but has no headroom left; a destination whose headroom (or
  offer) is used up leaves the water-filling, as ``offer_i <- offer_i if
  avail_i != 0`` does for the first pass.
* ``avail <- LB length minus remain``: headroom is taken per destination after
  phase 1 of every circuit of this slot, from L[dst] + N[dst] (the text:
  "the difference between the amount of traffic that can be sent during one
  matching slot and the total queued local and non-local traffic"), floored
  at 0.  The acceptor's own phase-3 sends of this slot are not subtracted
  (they have not happened when it answers).
* Several live circuits (one per uplink): "fair-sharing capacity across
  them".  The acceptor fills all offers at once by progressive filling: every
  (offerer, dst) entry grows at the same rate until its offer, the offerer's
  spare capacity or the destination's headroom is exhausted.  This is the
  max-min fair allocation the pseudocode's alternating row/column fair
  shares approximate; with one offer it is exactly the 1-D water-filling of
  the worked example.
* The same local data is offered on every circuit of the slot; phase 3
  clips each grant to what is left (``indir_i <- min(indir_i, local_i)``),
  circuits in the order given, so the result is deterministic.
* The offer never carries data for the acceptor itself (that is direct
  traffic, phase 1) nor for the offerer.
* Headroom is one circuit's capacity per destination, even for racks with
  several uplinks: it is what makes "delivered before the pair meets again"
  true when a rack meets each destination once per cycle.

Arithmetic is only ``+ - / min max`` and comparisons, so passing
:class:`fractions.Fraction` amounts (and ``capacity=Fraction(1)``) gives
exact results; the tests use that to check conservation exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

Amount = float  # slot units; Fraction works too (see module docstring)
Pair = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Non-local data waiting at a relay: whose it is and when the relay accepted it."""

    origin: int
    slot: int
    amount: Amount


@dataclasses.dataclass(frozen=True)
class RackQueues:
    """One rack's queues.  Treat as a value: functions here return new ones."""

    local: Mapping[int, Amount] = dataclasses.field(default_factory=dict)
    relay: Mapping[int, tuple[Chunk, ...]] = dataclasses.field(default_factory=dict)

    def nonlocal_amount(self, dst: int) -> Amount:
        return sum((c.amount for c in self.relay.get(dst, ())), 0)

    def queued(self, dst: int) -> Amount:
        """L[dst] + N[dst]: what the rack already must deliver to ``dst``."""
        return self.local.get(dst, 0) + self.nonlocal_amount(dst)

    def total(self) -> Amount:
        dsts = set(self.local) | set(self.relay)
        return sum((self.queued(d) for d in sorted(dsts)), 0)


@dataclasses.dataclass(frozen=True)
class FabricState:
    """All racks' queues at the start of slot ``slot``."""

    slot: int
    racks: tuple[RackQueues, ...]

    @classmethod
    def empty(cls, racks: int, slot: int = 0) -> "FabricState":
        return cls(slot=slot, racks=tuple(RackQueues() for _ in range(racks)))

    def total(self) -> Amount:
        return sum((r.total() for r in self.racks), 0)


@dataclasses.dataclass(frozen=True)
class Offer:
    """Phase-2 offer: spare capacity of the circuit and remaining local demand per dst."""

    capacity: Amount
    demand: Mapping[int, Amount]


@dataclasses.dataclass(frozen=True)
class Direct:
    """What phase 1 sends over one direction of a circuit."""

    relayed: tuple[Chunk, ...]  # second hops, delivered to the peer (their final destination)
    local: Amount               # one-hop local data delivered to the peer

    @property
    def total(self) -> Amount:
        return sum((c.amount for c in self.relayed), self.local)


@dataclasses.dataclass(frozen=True)
class SlotReport:
    """What one slot moved.  Keys are (origin rack, final destination rack)."""

    slot: int
    direct: dict[Pair, Amount]             # local data delivered in one hop
    first_hop: dict[Pair, Amount]          # local data moved into some relay's N
    second_hop: dict[Pair, Amount]         # relayed data delivered to its destination
    relay_delay: dict[int, Amount]         # slots spent at the relay -> amount delivered
    circuit_use: tuple[tuple[Amount, Amount], ...]  # per circuit: (a->b, b->a) sent

    def delivered(self) -> Amount:
        """Data that reached its final destination this slot."""
        return sum(self.direct.values(), 0) + sum(self.second_hop.values(), 0)


def _without_zeros(d: Mapping[int, Amount]) -> dict[int, Amount]:
    return {k: v for k, v in d.items() if v > 0}


def phase1(rack: RackQueues, peer: int, capacity: Amount = 1.0) -> tuple[RackQueues, Direct]:
    """Send N[peer] (FIFO: it was promised delivery first), then L[peer], up to capacity."""
    left = capacity
    keep: list[Chunk] = []
    sent: list[Chunk] = []
    for c in rack.relay.get(peer, ()):
        take = min(c.amount, left)
        if take > 0:
            sent.append(dataclasses.replace(c, amount=take))
            left = left - take
        if c.amount - take > 0:
            keep.append(dataclasses.replace(c, amount=c.amount - take))
    local_take = min(rack.local.get(peer, 0), left)
    relay = dict(rack.relay)
    if keep:
        relay[peer] = tuple(keep)
    else:
        relay.pop(peer, None)
    local = dict(rack.local)
    if local_take > 0:
        local[peer] = local[peer] - local_take
    new = RackQueues(local=_without_zeros(local), relay=relay)
    return new, Direct(relayed=tuple(sent), local=max(local_take, 0))


def make_offer(rack: RackQueues, me: int, peer: int, spare: Amount) -> Offer:
    """The offer ``me`` sends ``peer``: spare capacity and local data for third racks."""
    demand = {d: v for d, v in sorted(rack.local.items()) if v > 0 and d not in (me, peer)}
    return Offer(capacity=max(spare, 0), demand=demand)


def headroom(rack: RackQueues, dst: int, capacity: Amount = 1.0) -> Amount:
    """How much more the rack can take for ``dst`` and still deliver it in one slot."""
    return max(capacity - rack.queued(dst), 0)


def accept(rack: RackQueues, me: int, offers: Sequence[Offer],
           capacity: Amount = 1.0) -> list[dict[int, Amount]]:
    """Phase 2 at the acceptor ``me``: grants per offer, max-min fair (progressive filling).

    Every (offer, dst) entry with data offered, spare capacity in its offer
    and headroom at ``dst`` grows by the same step until one of those three
    runs out; grants accumulate over the steps.  Each step exhausts at least
    one limit exactly (it is set to zero, not left as float dust), so the loop
    ends after at most rows + columns + entries steps.
    """
    rem_cap = [o.capacity for o in offers]
    rem_offer = [{d: v for d, v in o.demand.items() if d != me} for o in offers]
    dsts = sorted({d for o in rem_offer for d in o})
    avail = {d: headroom(rack, d, capacity) for d in dsts}
    grants: list[dict[int, Amount]] = [{} for _ in offers]
    while True:
        active = [(r, d) for r, o in enumerate(rem_offer) for d, v in o.items()
                  if v > 0 and rem_cap[r] > 0 and avail[d] > 0]
        if not active:
            return [_without_zeros(g) for g in grants]
        n_row: dict[int, int] = {}
        n_col: dict[int, int] = {}
        for r, d in active:
            n_row[r] = n_row.get(r, 0) + 1
            n_col[d] = n_col.get(d, 0) + 1
        row_step = {r: rem_cap[r] / n for r, n in n_row.items()}
        col_step = {d: avail[d] / n for d, n in n_col.items()}
        step = min(min(row_step.values()), min(col_step.values()),
                   min(rem_offer[r][d] for r, d in active))
        for r, d in active:
            grants[r][d] = grants[r].get(d, 0) + step
            rem_offer[r][d] = 0 if rem_offer[r][d] == step else rem_offer[r][d] - step
        for r, s in row_step.items():
            rem_cap[r] = 0 if s == step else max(rem_cap[r] - step * n_row[r], 0)
        for d, s in col_step.items():
            avail[d] = 0 if s == step else max(avail[d] - step * n_col[d], 0)


def phase3(offerer: RackQueues, grant: Mapping[int, Amount]) -> tuple[RackQueues, dict[int, Amount]]:
    """Take the granted local data out of the offerer's L (never more than it has)."""
    local = dict(offerer.local)
    moved: dict[int, Amount] = {}
    for d, g in sorted(grant.items()):
        take = min(g, local.get(d, 0))
        if take > 0:
            local[d] = local[d] - take
            moved[d] = take
    return RackQueues(local=_without_zeros(local), relay=offerer.relay), moved


def store(acceptor: RackQueues, origin: int, moved: Mapping[int, Amount], slot: int) -> RackQueues:
    """Append relayed data to the acceptor's N, tagged with origin and acceptance slot."""
    relay = dict(acceptor.relay)
    for d, amount in sorted(moved.items()):
        if amount <= 0:
            continue
        chunks = list(relay.get(d, ()))
        if chunks and chunks[-1].origin == origin and chunks[-1].slot == slot:
            chunks[-1] = dataclasses.replace(chunks[-1], amount=chunks[-1].amount + amount)
        else:
            chunks.append(Chunk(origin=origin, slot=slot, amount=amount))
        relay[d] = tuple(chunks)
    return RackQueues(local=acceptor.local, relay=relay)


def add_local(state: FabricState, demand: Mapping[Pair, Amount]) -> FabricState:
    """New local data: ``demand[(src, dst)]`` more units in rack src's L[dst]."""
    racks = list(state.racks)
    for (src, dst), v in sorted(demand.items()):
        if v <= 0:
            continue
        if src == dst:
            raise ValueError(f"local demand from rack {src} to itself")
        local = dict(racks[src].local)
        local[dst] = local.get(dst, 0) + v
        racks[src] = RackQueues(local=local, relay=racks[src].relay)
    return FabricState(slot=state.slot, racks=tuple(racks))


def _add(d: dict, key, v: Amount) -> None:
    if v > 0:
        d[key] = d.get(key, 0) + v


def run_slot(state: FabricState, circuits: Sequence[Pair], *, indirect: bool = True,
             capacity: Amount = 1.0) -> tuple[FabricState, SlotReport]:
    """Apply one slot of RotorLB on every live circuit; returns the state of the next slot.

    ``circuits`` are the bidirectional circuits (a, b) live this slot, one per
    uplink in use (a rack may appear in several, a pair may repeat).  Order
    is the tie-break for phase 3 and nothing else, so equal inputs give equal
    outputs.  ``indirect=False`` runs phase 1 only: one-hop forwarding.
    """
    n = len(state.racks)
    for a, b in circuits:
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise ValueError(f"bad circuit ({a}, {b}) for {n} racks")
    racks = list(state.racks)
    slot = state.slot
    direct: dict[Pair, Amount] = {}
    first: dict[Pair, Amount] = {}
    second: dict[Pair, Amount] = {}
    delay: dict[int, Amount] = {}
    use = [[0, 0] for _ in circuits]
    ends = [(i, side, (a, b) if side == 0 else (b, a))
            for i, (a, b) in enumerate(circuits) for side in (0, 1)]
    spare: dict[tuple[int, int], Amount] = {}
    for i, side, (x, y) in ends:  # phase 1
        racks[x], sent = phase1(racks[x], y, capacity)
        _add(direct, (x, y), sent.local)
        for c in sent.relayed:
            _add(second, (c.origin, y), c.amount)
            _add(delay, slot - c.slot, c.amount)
        use[i][side] = sent.total
        spare[(i, side)] = capacity - sent.total
    if indirect:
        offers = {(i, side): make_offer(racks[x], x, y, spare[(i, side)]) for i, side, (x, y) in ends}
        grants: dict[tuple[int, int], dict[int, Amount]] = {}
        for acceptor in range(n):  # phase 2, on the post-phase-1 snapshot
            keys = [(i, side) for i, side, (x, y) in ends if y == acceptor]
            if keys:
                got = accept(racks[acceptor], acceptor, [offers[k] for k in keys], capacity)
                grants.update(zip(keys, got))
        for i, side, (x, y) in ends:  # phase 3
            racks[x], moved = phase3(racks[x], grants.get((i, side), {}))
            racks[y] = store(racks[y], x, moved, slot)
            for d, v in moved.items():
                _add(first, (x, d), v)
                use[i][side] += v
    report = SlotReport(slot=slot, direct=direct, first_hop=first, second_hop=second,
                        relay_delay=delay, circuit_use=tuple((u[0], u[1]) for u in use))
    return FabricState(slot=slot + 1, racks=tuple(racks)), report
