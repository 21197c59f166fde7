"""RotorLB's phase 2 between the two agents a circuit joins ([McGuinness21 §2.5.1]): OFFER,
ACCEPT, and phase 3 on what was granted -- every amount from ``rotorlb.core``, the code the fluid
model runs.  Both agents (host/agent.py, host/fast_agent.py) run it the same way; they differ
only in where the granted frames go."""

from __future__ import annotations

from fractions import Fraction

from ..rotorlb import core, wire
from .gate import Circuit


async def offer_accept(agent, c: Circuit, rq: core.RackQueues, spare: Fraction, start: int,
                       end: int) -> dict[int, Fraction]:
    """Phase 2 with the agent at the other end of ``c``: OFFER this rack's ``spare`` capacity and
    local demand, ACCEPT the peer's offer against ``rq``'s headroom, and on the peer's ACCEPT run
    phase 3 on the queues as they are now; returns the frames to send as first hops, per final
    rack (empty if nothing was granted)."""
    offer = core.make_offer(rq, agent.me, c.peer, spare)
    key = (c.rotor, c.slot, c.peer)
    # An offer with no whole frame to relay, or no spare capacity to send it in, can be
    # granted nothing: it is not sent (nor an ACCEPT awaited).  Idle circuits then carry
    # no RotorLB chatter: at 1 % load 16 agents' offers and accepts (~1 300/s through
    # the fabric) were most of what the BMv2 switches carried.
    demand = {d: int(v) for d, v in offer.demand.items() if int(v) > 0}
    offering = bool(demand) and int(offer.capacity) > 0
    if offering:
        agent._send(c.peer, wire.encode_offer(wire.Offer(c.rotor, c.slot, int(offer.capacity), demand)))
    else:
        agent.quiet += 1
    wait = max(0.001, min(0.05, (end - start) / 4e9))
    peer_offer = await agent._wait(("offer",) + key, wait)
    if peer_offer is not None:  # else the peer had nothing to offer, or offered too late
        # Headroom is a whole circuit per destination (RotorLB's one slot), shared or not.
        grant = core.accept(rq, agent.me, [core.Offer(Fraction(peer_offer.spare),
                                                      {d: Fraction(v) for d, v in peer_offer.demand.items()})],
                            Fraction(agent.capacity))[0]
        agent._send(c.peer, wire.encode_accept(wire.Accept(c.rotor, c.slot, {d: int(v) for d, v in grant.items()
                                                                            if int(v) > 0})))
    acc = await agent._wait(("accept",) + key, wait) if offering else None
    if acc is None:
        if offering:
            agent.missed["accept"] += 1
        return {}
    # Phase 3 on the queues as they are now: another rotor's circuit (Opera) may have sent
    # some of this L since the snapshot (the core clips grants the same way).
    return core.phase3(agent.queues(), {d: Fraction(v) for d, v in acc.grant.items()})[1]
