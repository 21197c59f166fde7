"""RotorLB agents over an in-process fabric: a frame goes from rack a to rack b only while the
schedule has a circuit a-b in its day (one hop, 0.5 ms), no switch, no sockets.  The agents'
logic (OFFER/ACCEPT, pacing, relays, accounting) runs exactly as in a host; what is left out is
the kernel and BMv2.  Used by the unit tests (tests/test_agent.py) and by the agents' benchmark
(bench/agents.py: CPU per relayed MB, the rate the agents keep up with)."""

from __future__ import annotations

import asyncio
import random
import time

from .. import schedule as S
from ..rotorlb import wire
from .agent import Agent

DELAY_S = 0.0005  # one hop


class Fabric:
    """Delivers a frame from rack a to rack b if a circuit a-b is in its day now (one hop)."""

    def __init__(self, s: S.Schedule, t0_ns: int, loss: float = 0.0, seed: int = 7):
        self.s, self.t0, self.agents = s, t0_ns, {}
        self.dropped = 0   # sent while no circuit a-b was in its day
        self.lost = 0      # injected loss (data frames only)
        self.loss = loss
        self.rng = random.Random(seed)

    def connected(self, a: int, b: int) -> bool:
        t = (time.time_ns() - self.t0) / 1000
        for r in self.s.rotors:
            k, m, night = self.s.state_at(r, t)
            if not night and r.matchings[m][a] == b:
                return True
        return False

    def attach(self, agent: Agent) -> None:
        self.agents[agent.me] = agent

        async def opened():
            return None

        agent.open = opened
        agent.close = lambda: None
        agent._send = lambda peer, buf, me=agent.me: self.send(me, peer, buf)
        # the low-latency class (ACKs): always a path
        agent._send_ll = lambda peer, buf: asyncio.get_running_loop().call_later(
            DELAY_S, self.agents[peer].received, buf)

    def send(self, a: int, b: int, buf: bytes) -> None:
        if not self.connected(a, b):
            self.dropped += 1
            return
        if self.loss and buf[0] == wire.DATA and self.rng.random() < self.loss:
            self.lost += 1  # a corrupted frame: gone
            return
        asyncio.get_running_loop().call_later(DELAY_S, self.agents[b].received, buf)


def run_fabric(pairs, one_hop=False, cycles=6, slot_us=60_000, loss=0.0, retransmit_us=0.0, drain_cycles=2,
               frames=-1, guard_us=2000, rate=2000, frame=200, racks=4, ack_direct=False, progress_dir=None,
               planes=1, shared=False, host_rate=None, flow_start_us=None):
    """Agents on ``racks`` racks (one rotor, RotorNet) over the in-process fabric; ``frames`` per
    flow (-1: saturated until the sending stops after ``cycles`` cycles); they end
    ``drain_cycles`` later; with ``progress_dir`` each publishes its progress there
    (``agent-<rack>.progress``).  ``planes`` hosts per rack, plane 0 sending ``pairs`` (a pair ``(o, d, p)``: plane ``p``),
    the others idle, each plane at ``rate`` on its own fabric; ``shared``: the rack's agents share
    its circuits instead (each at ``rate`` x ``planes``, claiming windows: host/share.py), and
    ``host_rate`` caps what one agent sends over all its circuits.  ``flow_start_us``: every flow
    starts that long after slot 0 (an FCT run's timed flow) instead of at once.  Returns (the agents'
    summaries, plane 0's then the others', the fabric of plane 0, CPU seconds used)."""
    from .share import MemoryShare

    s = S.generate_rotornet(racks, 1, slot_us, slot_us // 10)
    t0 = time.time_ns() + 50_000_000
    H = s.hyperperiod_us * 1000
    stop = t0 + cycles * H
    end = stop + drain_cycles * H  # drain: every relay meets its destination within a cycle
    fabs = [Fabric(s, t0, loss) for _ in range(planes)]
    fab = fabs[0]
    agents = []
    each = rate * planes if shared else rate
    shares = {}
    for p in range(planes):
        for r in range(racks):
            flows = [{"flow": 100 * r + d + 1000 * p, "dst": d, "frames": frames}
                     for (o, d, *q) in pairs if o == r and (q[0] if q else 0) == p]
            if flow_start_us is not None:
                for f in flows:
                    f["start_ns"] = t0 + int(flow_start_us * 1000)
            a = Agent(s, t0, r, {i: f"10.0.{i}.{p + 1}" for i in range(racks)}, rate=each, frame=frame,
                      guard_us=guard_us, flows=flows, one_hop=one_hop, stop_ns=stop, end_ns=end,
                      measure=(t0 + H, stop), retransmit_us=retransmit_us, ack_direct=ack_direct,
                      progress_file=None if progress_dir is None or p else progress_dir / f"agent-{r}.progress",
                      host_rate=host_rate, planes=planes if shared else 1)
            if shared:
                a.share = shares.setdefault(r, MemoryShare(a.capacity)).member(p)
            fabs[p].attach(a)
            agents.append(a)

    async def main():
        return await asyncio.gather(*(a.run() for a in agents))

    cpu = time.process_time()
    res = asyncio.run(main())
    return res, fab, time.process_time() - cpu


def run_compiled(pairs, one_hop=False, cycles=6, slot_us=60_000, drain_cycles=2, frames=-1, guard_us=2000,
                 rate=2000, frame=200, racks=4, flow_start_us=None, retransmit_us=0.0, ack_direct=False,
                 lose_every=0):
    """As :func:`run_fabric`, with agents on the compiled data path (host/fast_agent.py): every
    frame goes through the kernel's UDP over loopback, rack ``r`` at 127.0.1.``r+1``.  No switch
    gates the circuits here: the agents send only inside their windows, and the receivers' counts
    say what arrived.  ``lose_every``: every n-th data frame an agent sends is lost.  Returns (the summaries, CPU seconds of this process and of the rlbd
    processes)."""
    import resource

    from .fast_agent import FastAgent

    s = S.generate_rotornet(racks, 1, slot_us, slot_us // 10)
    t0 = time.time_ns() + 300_000_000  # every rlbd started and bound by then
    H = s.hyperperiod_us * 1000
    stop = t0 + cycles * H
    end = stop + drain_cycles * H
    peers = {i: f"127.0.1.{i + 1}" for i in range(racks)}
    agents = []
    for r in range(racks):
        flows = [{"flow": 100 * r + d, "dst": d, "frames": frames} for (o, d) in pairs if o == r]
        if flow_start_us is not None:
            for f in flows:
                f["start_ns"] = t0 + int(flow_start_us * 1000)
        agents.append(FastAgent(s, t0, r, peers, rate=rate, frame=frame, guard_us=guard_us, flows=flows,
                                one_hop=one_hop, stop_ns=stop, end_ns=end, measure=(t0 + H, stop),
                                start_ns=t0, bind=peers[r], retransmit_us=retransmit_us, ack_direct=ack_direct,
                                lose_every=lose_every))

    async def main():
        return await asyncio.gather(*(a.run() for a in agents))

    cpu, kids = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = asyncio.run(main())
    k = resource.getrusage(resource.RUSAGE_CHILDREN)
    return res, time.process_time() - cpu, (k.ru_utime + k.ru_stime) - (kids.ru_utime + kids.ru_stime)
