"""Slot-level fluid model of RotorLB on a Schedule ([McGuinness21 §2.5.4], Figure 2.10).

The fabric is run slot by slot with :func:`p4rotor.rotorlb.core.run_slot`,
the same code a host agent would run.  Time is counted in whole slots: in
slot k rotor r's matching ``k mod len(r.matchings)`` is live for the whole
slot, so rotor offsets and nights are not modelled (they scale every
throughput by the same duty cycle and do not change the ratio of interest).

Traffic is the heavy-connection workload of Figure 2.10: a set of saturated
(src, dst) rack pairs, each "sending at line rate", i.e. its local queue is
topped up before every slot to more than the rack could ever drain in one
slot.  The model runs warm-up cycles, then measures whole cycles, both with
RotorLB and with one-hop forwarding (phase 1 only), and reports data
delivered to its final destination per slot, the ratio of the two, and how
many slots relayed data waited at its intermediate rack.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, Sequence

from ..schedule import Schedule
from .core import Amount, FabricState, Pair, add_local, run_slot


class ModelError(ValueError):
    """Bad input to the model; the message is one line."""


def check_schedule(s: Schedule) -> None:
    """RotorLB needs every uplink live and every circuit two-way.

    Each rack must have a circuit in every matching (a perfect permutation,
    no ``None``, no rack reaching itself) and the circuit must be
    bidirectional: offers go one way and accepts come back over the same
    circuit ([McGuinness21 §2.5.2]: "RotorLB requires that it can communicate in a
    bidirectional fashion").
    """
    for r in s.rotors:
        for mi, m in enumerate(r.matchings):
            where = f"rotor {r.name!r} matching {mi}"
            if sorted(x for x in m if x is not None) != list(range(s.racks)) or None in m:
                raise ModelError(f"{where}: RotorLB needs a perfect permutation of all {s.racks} racks (no null)")
            for i, j in enumerate(m):
                if j == i:
                    raise ModelError(f"{where}: rack {i} reaches itself; RotorLB needs a circuit for every rack")
                if m[j] != i:
                    raise ModelError(f"{where}: circuit {i}->{j} is one-way ({j}->{m[j]}); "
                                     "RotorLB exchanges offers and accepts over two-way circuits")
    met = {(i, j) for r in s.rotors for m in r.matchings for i, j in enumerate(m)}
    for i in range(s.racks):
        for j in range(s.racks):
            if i != j and (i, j) not in met:
                raise ModelError(f"racks {i} and {j} never meet in a cycle: one-hop forwarding (the model's "
                                 "baseline) needs every rack pair to have a circuit once per cycle")


def cycle_slots(s: Schedule) -> int:
    """Slots after which every rotor repeats (the hyperperiod in slots)."""
    n = 1
    for r in s.rotors:
        n = math.lcm(n, len(r.matchings))
    return n


def circuits_at(s: Schedule, k: int) -> list[Pair]:
    """Two-way circuits live in slot k, one per rotor per rack pair, rotor order."""
    out = []
    for r in s.rotors:
        m = r.matchings[k % len(r.matchings)]
        out += [(i, j) for i, j in enumerate(m) if j is not None and i < j]
    return out


def check_matrix(racks: int, pairs: Any, where: str = "matrix") -> tuple[Pair, ...]:
    """Validate a list of [src, dst] heavy pairs; returns them as sorted tuples."""
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ModelError(f"{where}: must be a non-empty list of [src_rack, dst_rack] pairs")
    out = set()
    for pi, p in enumerate(pairs):
        if (not isinstance(p, (list, tuple)) or len(p) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) for x in p)):
            raise ModelError(f"{where} pair {pi}: must be [src_rack, dst_rack] (two integers), got {p!r}")
        src, dst = p
        for x in (src, dst):
            if not 0 <= x < racks:
                raise ModelError(f"{where} pair {pi}: rack {x} outside the schedule's racks 0..{racks - 1}")
        if src == dst:
            raise ModelError(f"{where} pair {pi}: src and dst are both rack {src}")
        if (src, dst) in out:
            raise ModelError(f"{where} pair {pi}: duplicate pair [{src}, {dst}]")
        out.add((src, dst))
    return tuple(sorted(out))


def random_matrices(racks: int, density: int, count: int, seed: int) -> list[tuple[Pair, ...]]:
    """``count`` matrices of ``density`` distinct random heavy pairs (Figure 2.10's workload)."""
    total = racks * (racks - 1)
    if not 1 <= density <= total:
        raise ModelError(f"density must be in 1..{total} (racks*(racks-1) for {racks} racks), got {density}")
    if count < 1:
        raise ModelError(f"count must be >= 1, got {count}")
    every = [(i, j) for i in range(racks) for j in range(racks) if i != j]
    rng = random.Random(seed)
    return [tuple(sorted(rng.sample(every, density))) for _ in range(count)]


@dataclasses.dataclass(frozen=True)
class Run:
    """One forwarding scheme on one matrix, measured over whole cycles."""

    delivered_per_slot: Amount          # uplink-slot units reaching their destination per slot
    fraction: float                     # of the fabric's uplink capacity (racks x rotors)
    relayed_per_slot: Amount            # second hops delivered per slot
    relay_delay: dict[int, Amount]      # slots spent at the relay -> share of relayed data

    @property
    def mean_relay_delay(self) -> float | None:
        return sum(k * v for k, v in self.relay_delay.items()) if self.relay_delay else None

    def to_json(self) -> dict[str, Any]:
        return {"throughput": self.delivered_per_slot, "fraction": self.fraction,
                "relayed": self.relayed_per_slot,
                "relay_delay_slots": {str(k): v for k, v in sorted(self.relay_delay.items())},
                "mean_relay_delay_slots": self.mean_relay_delay}


@dataclasses.dataclass(frozen=True)
class ModelResult:
    pairs: tuple[Pair, ...]
    rotorlb: Run
    onehop: Run

    @property
    def ratio(self) -> float:
        """RotorLB throughput relative to one-hop forwarding (Figure 2.10's y axis)."""
        return self.rotorlb.delivered_per_slot / self.onehop.delivered_per_slot

    def to_json(self) -> dict[str, Any]:
        return {"pairs": [list(p) for p in self.pairs], "rotorlb": self.rotorlb.to_json(),
                "onehop": self.onehop.to_json(), "ratio": self.ratio}


def simulate(s: Schedule, pairs: Sequence[Pair], *, indirect: bool = True,
             warmup_cycles: int = 8, measure_cycles: int = 16) -> Run:
    """Run saturated heavy pairs through the schedule; measure after the warm-up."""
    check_schedule(s)
    pairs = check_matrix(s.racks, [list(p) for p in pairs])
    if warmup_cycles < 0 or measure_cycles < 1:
        raise ModelError("need warmup_cycles >= 0 and measure_cycles >= 1")
    cycle = cycle_slots(s)
    # A rack sends at most one unit per uplink per slot: this much never runs dry.
    level = float(len(s.rotors) + 1)
    state = FabricState.empty(s.racks)
    delivered = relayed = 0.0
    delay: dict[int, Amount] = {}
    for k in range((warmup_cycles + measure_cycles) * cycle):
        top_up = {(a, b): level - state.racks[a].local.get(b, 0) for a, b in pairs}
        state, rep = run_slot(add_local(state, top_up), circuits_at(s, k), indirect=indirect)
        if k >= warmup_cycles * cycle:
            delivered += rep.delivered()
            relayed += sum(rep.second_hop.values())
            for d, v in rep.relay_delay.items():
                delay[d] = delay.get(d, 0.0) + v
    slots = measure_cycles * cycle
    shares = {d: v / relayed for d, v in sorted(delay.items())} if relayed > 0 else {}
    return Run(delivered_per_slot=delivered / slots,
               fraction=delivered / slots / (s.racks * len(s.rotors)),
               relayed_per_slot=relayed / slots, relay_delay=shares)


def evaluate(s: Schedule, pairs: Sequence[Pair], *, warmup_cycles: int = 8,
             measure_cycles: int = 16) -> ModelResult:
    """RotorLB and one-hop forwarding on the same matrix."""
    kw = dict(warmup_cycles=warmup_cycles, measure_cycles=measure_cycles)
    lb = simulate(s, pairs, indirect=True, **kw)
    one = simulate(s, pairs, indirect=False, **kw)
    return ModelResult(pairs=check_matrix(s.racks, [list(p) for p in pairs]), rotorlb=lb, onehop=one)


@dataclasses.dataclass(frozen=True)
class Backlog:
    """What RotorLB does with a list of arrivals: the data queued (local + relayed, slot units)
    at the end of every slot it ran; the slots in between were idle (nothing queued)."""

    pending: tuple[tuple[int, Amount], ...]  # (slot, queued at its end), slots in order
    arrived: Amount
    delivered: Amount
    last_arrival: int                        # slot of the last arrival
    empty_at: int | None                     # first slot after the last arrival with nothing queued

    def level(self, slot: int) -> Amount:
        """Queued at the end of ``slot`` (0 in an idle stretch)."""
        import bisect

        i = bisect.bisect_right(self.pending, (slot, math.inf)) - 1
        return self.pending[i][1] if i >= 0 and self.pending[i][0] == slot else 0.0


def replay(s: Schedule, arrivals: Sequence[tuple[int, int, int, Amount]], *, max_slots: int | None = None,
           capacity: Amount = 1.0) -> Backlog:
    """Run RotorLB on ``arrivals`` (slot, src rack, dst rack, amount in slot units), added to the
    source's local queue at the start of their slot, until every byte is delivered (or
    ``max_slots`` slots after the last arrival).  Idle stretches are skipped: an empty fabric
    stays empty, so their slots are not run.  The agents of a plane run this same algorithm
    (host/agent.py), so this is the queue the fabric would hold with no protocol delay."""
    check_schedule(s)
    evs = sorted((int(k), int(a), int(b), v) for k, a, b, v in arrivals if v > 0)
    for k, a, b, _ in evs:
        if k < 0 or not (0 <= a < s.racks and 0 <= b < s.racks) or a == b:
            raise ModelError(f"bad arrival at slot {k}: {a} -> {b} for {s.racks} racks")
    if not evs:
        return Backlog(pending=(), arrived=0.0, delivered=0.0, last_arrival=0, empty_at=0)
    last = evs[-1][0]
    stop = last + (max_slots if max_slots is not None else 1 << 62)
    state = FabricState.empty(s.racks, slot=evs[0][0])
    pending: list[tuple[int, Amount]] = []
    arrived = delivered = 0.0
    i = 0
    empty_at = None
    # Amounts below this are float dust left by the water-filling, not data.
    dust = 1e-9 * capacity
    while state.slot <= stop:
        k = state.slot
        new: dict[Pair, Amount] = {}
        while i < len(evs) and evs[i][0] == k:
            _, a, b, v = evs[i]
            new[(a, b)] = new.get((a, b), 0.0) + v
            arrived += v
            i += 1
        if new:
            state = add_local(state, new)
        state, rep = run_slot(state, circuits_at(s, k), capacity=capacity)
        delivered += rep.delivered()
        left = state.total()
        if left <= dust * s.racks * s.racks:
            pending.append((k, 0.0))
            if i == len(evs):
                empty_at = k
                break
            # Nothing queued: jump to the next arrival (circuits are a function of the slot).
            state = FabricState.empty(s.racks, slot=evs[i][0])
        else:
            pending.append((k, left))
    return Backlog(pending=tuple(pending), arrived=arrived, delivered=delivered, last_arrival=last,
                   empty_at=empty_at)


def alone_slots(s: Schedule, src: int, dst: int, units: Amount, *, capacity: Amount = 1.0,
                feed: Amount | None = None) -> float:
    """How many slots RotorLB takes to deliver one flow of ``units`` from rack ``src`` to rack
    ``dst`` in an otherwise empty fabric, counted from the start of the slot it arrives in to the
    end of the slot its last unit reaches ``dst``: the mean over the slots of a cycle it can
    arrive in (which circuits come first depends on it).

    ``capacity`` is what one circuit carries in a slot; ``feed``, if given, is how much of the
    flow reaches the rack's queue per slot -- a host's link in front of a queue the rack keeps
    (the flow arrives ``feed`` units a slot), instead of all of it at once.  With ``capacity=2``
    and ``feed=4`` (in units of one host's circuit-slot) this is a rack whose two hosts share its
    circuits and each sends at four circuits' worth; ``capacity=1`` and no feed is the fabric as
    the agents run it, one plane per host (fabric/agents.py)."""
    if units <= 0 or capacity <= 0 or (feed is not None and feed <= 0):
        raise ModelError(f"need units, capacity and feed > 0, got {units}, {capacity}, {feed}")
    step = units if feed is None else feed
    total = 0
    cycle = cycle_slots(s)
    for phase in range(cycle):
        arrivals, left, k = [], units, phase
        while left > 1e-12:
            arrivals.append((k, src, dst, min(step, left)))
            left -= step
            k += 1
        done = replay(s, arrivals, capacity=capacity)
        total += done.empty_at - phase + 1
    return total / cycle
