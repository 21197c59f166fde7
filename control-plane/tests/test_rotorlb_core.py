"""RotorLB core: the worked example of [McGuinness21 Fig. 2.9], and invariants on random slots."""

import random
from fractions import Fraction as F

import pytest

from p4rotor.rotorlb import core as C

ONE = F(1)


def fig29_state() -> C.FabricState:
    """Figure 2.9 with the figure's rack names: R1..R4 are racks 1..4 (rack 0 idle).

    R1 holds 0.25 stored non-local and 0.75 local for R2, 0.25 local and 0.5
    non-local for R3; R2 holds 1 unit of local data for each of R3 and R4.
    """
    r1 = C.RackQueues(local={2: F(3, 4), 3: F(1, 4)},
                      relay={2: (C.Chunk(origin=4, slot=-3, amount=F(1, 4)),),
                             3: (C.Chunk(origin=0, slot=-2, amount=F(1, 2)),)})
    r2 = C.RackQueues(local={3: ONE, 4: ONE})
    return C.FabricState(slot=0, racks=(C.RackQueues(), r1, r2, C.RackQueues(), C.RackQueues()))


def test_fig29_phases():
    st = fig29_state()
    r1, d1 = C.phase1(st.racks[1], 2, ONE)
    assert d1.total == 1 and d1.local == F(3, 4) and d1.relayed[0].amount == F(1, 4)
    r2, d2 = C.phase1(st.racks[2], 1, ONE)
    assert d2.total == 0
    # R1 has no spare capacity: R2 accepts nothing from R1.
    assert C.accept(r2, 2, [C.make_offer(r1, 1, 2, ONE - d1.total)], ONE) == [{}]
    offer = C.make_offer(r2, 2, 1, ONE - d2.total)
    assert offer == C.Offer(capacity=ONE, demand={3: ONE, 4: ONE})
    assert C.accept(r1, 1, [offer], ONE) == [{3: F(1, 4), 4: F(3, 4)}]


@pytest.mark.parametrize("num", [F, float])
def test_fig29_slot(num):
    st = fig29_state()
    if num is float:  # the example's numbers are dyadic: floats give the same exact answers
        st = C.FabricState(0, tuple(C.RackQueues(
            {d: float(v) for d, v in r.local.items()},
            {d: tuple(C.Chunk(c.origin, c.slot, float(c.amount)) for c in cs) for d, cs in r.relay.items()})
            for r in st.racks))
    new, rep = C.run_slot(st, [(1, 2)], capacity=num(1))
    assert rep.direct == {(1, 2): 0.75}
    assert rep.second_hop == {(4, 2): 0.25} and rep.relay_delay == {3: 0.25}
    assert rep.first_hop == {(2, 3): 0.25, (2, 4): 0.75}
    assert rep.circuit_use == ((1, 1),)
    r1, r2 = new.racks[1], new.racks[2]
    assert r1.local == {3: 0.25}
    assert r1.nonlocal_amount(2) == 0 and r1.nonlocal_amount(3) == 0.75 and r1.nonlocal_amount(4) == 0.75
    assert [(c.origin, c.slot, c.amount) for c in r1.relay[3]] == [(0, -2, 0.5), (2, 0, 0.25)]
    assert r2.local == {3: 0.75, 4: 0.25} and r2.relay == {}
    assert new.slot == 1
    assert new.total() + rep.delivered() == st.total()


def test_two_offers_share_one_destination_fairly():
    rack = C.RackQueues(local={5: F(1, 2)})
    offers = [C.Offer(ONE, {3: ONE, 4: F(1, 8)}), C.Offer(F(1, 4), {3: ONE})]
    g = C.accept(rack, 0, offers, ONE)
    # dst 3 has headroom 1, shared max-min: offer 1 is capped by its capacity at 1/4.
    assert g == [{3: F(3, 4), 4: F(1, 8)}, {3: F(1, 4)}]


def test_relay_is_fifo_and_keeps_age():
    rack = C.RackQueues(relay={1: (C.Chunk(7, 2, F(1, 2)), C.Chunk(6, 5, F(3, 4)))})
    new, d = C.phase1(rack, 1, ONE)
    assert [(c.origin, c.slot, c.amount) for c in d.relayed] == [(7, 2, F(1, 2)), (6, 5, F(1, 2))]
    assert new.relay[1] == (C.Chunk(6, 5, F(1, 4)),)


def random_case(rng: random.Random) -> tuple[C.FabricState, list[tuple[int, int]]]:
    n = rng.randint(3, 8)
    racks = []
    for i in range(n):
        others = [d for d in range(n) if d != i]
        local = {d: F(rng.choice([0, 1, 2, 3, 5, 8, 40]), 8) for d in rng.sample(others, rng.randint(0, len(others)))}
        relay = {}
        for d in rng.sample(others, rng.randint(0, len(others))):
            budget, chunks = F(rng.randint(0, 8), 8), []
            while budget > 0:
                a = min(budget, F(rng.randint(1, 4), 8))
                chunks.append(C.Chunk(rng.choice([o for o in range(n) if o != d]), rng.randint(-9, -1), a))
                budget -= a
            if chunks:
                relay[d] = tuple(chunks)
        racks.append(C.RackQueues(local={d: v for d, v in local.items() if v}, relay=relay))
    circuits = []
    for _ in range(rng.randint(1, 3)):  # a few uplinks: random (partial) matchings
        perm = list(range(n))
        rng.shuffle(perm)
        circuits += [(perm[k], perm[k + 1]) for k in range(0, n - 1, 2) if rng.random() < 0.9]
    return C.FabricState(slot=rng.randint(0, 50), racks=tuple(racks)), circuits


@pytest.mark.parametrize("seed", range(60))
def test_random_slot_invariants(seed):
    rng = random.Random(seed)
    st, circuits = random_case(rng)
    new, rep = C.run_slot(st, circuits, capacity=ONE)
    assert (new, rep) == C.run_slot(st, circuits, capacity=ONE), "deterministic"
    assert new.total() + rep.delivered() == st.total(), "nothing created or lost (exact)"
    n = len(st.racks)
    for src in range(n):  # per origin: local decrease == one-hop + first-hop
        for dst in range(n):
            before = st.racks[src].local.get(dst, 0)
            after = new.racks[src].local.get(dst, 0)
            assert before - after == rep.direct.get((src, dst), 0) + rep.first_hop.get((src, dst), 0)
    for r in new.racks:
        for d in r.relay:
            assert r.nonlocal_amount(d) <= 1, "relayed queue above one slot"
        assert all(c.amount > 0 for cs in r.relay.values() for c in cs)
    for use in rep.circuit_use:
        assert 0 <= use[0] <= 1 and 0 <= use[1] <= 1, "circuit capacity exceeded"
    assert all(k >= 1 for k in rep.relay_delay)
    # Floats follow the exact run closely.
    fst = C.FabricState(st.slot, tuple(C.RackQueues(
        {d: float(v) for d, v in r.local.items()},
        {d: tuple(C.Chunk(c.origin, c.slot, float(c.amount)) for c in cs) for d, cs in r.relay.items()})
        for r in st.racks))
    fnew, frep = C.run_slot(fst, circuits)
    assert abs(frep.delivered() - rep.delivered()) < 1e-9
    assert abs(fnew.total() - new.total()) < 1e-9


@pytest.mark.parametrize("seed", range(60))
def test_random_accept_is_feasible_and_max_min(seed):
    rng = random.Random(1000 + seed)
    n = rng.randint(3, 9)
    me = 0
    rack = C.RackQueues(local={d: F(rng.randint(0, 10), 8) for d in range(1, n)})
    offers = [C.Offer(F(rng.randint(0, 8), 8), {d: F(rng.randint(0, 12), 8) for d in range(n) if rng.random() < 0.7})
              for _ in range(rng.randint(1, 4))]
    grants = C.accept(rack, me, offers, ONE)
    for o, g in zip(offers, grants):
        assert sum(g.values()) <= o.capacity, "accepts exceed the offerer's spare capacity"
        assert all(0 < v <= o.demand[d] and d != me for d, v in g.items())
    for d in range(1, n):
        assert sum(g.get(d, 0) for g in grants) <= C.headroom(rack, d, ONE)
    # Max-min: an entry left short is blocked by a saturated offer or a saturated destination,
    # and on that bottleneck nobody else got more than it (the water level).
    for r, (o, g) in enumerate(zip(offers, grants)):
        for d, want in o.demand.items():
            if d == me or g.get(d, 0) == want:
                continue
            x = g.get(d, 0)
            row_full = sum(g.values()) == o.capacity and all(v <= x for v in g.values())
            col = [gg.get(d, 0) for gg in grants]
            col_full = sum(col) == C.headroom(rack, d, ONE) and all(v <= x for v in col)
            assert row_full or col_full, (r, d)


def test_bad_circuit():
    with pytest.raises(ValueError, match="bad circuit"):
        C.run_slot(C.FabricState.empty(3), [(0, 0)])
    with pytest.raises(ValueError, match="bad circuit"):
        C.run_slot(C.FabricState.empty(3), [(0, 3)])
