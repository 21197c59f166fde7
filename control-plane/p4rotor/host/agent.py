"""The RotorLB host agent (run by host/agent_cli.py): bulk held at the hosts, offered and
relayed over the circuits ([McGuinness21 §2.5.1]; the thesis's testbed ran RotorLB the same way, as
user-space agents on the servers: stock BMv2 cannot keep queues per destination).

One agent per rack, on a host of that rack (the experiment runs one host per rack).  It keeps
bulk per *final destination rack*: L (local: made by its own flows) and N (non-local: relayed for
other racks), as queues of whole frames: N in arrival order, L one flow at a time in turn
(host/flowqueue.py: a small flow does not wait for a large one to the same rack).  For every circuit of its rack (host/gate.py), inside
the circuit's day less a guard at both ends, it runs one RotorLB exchange with the agent at the
other end, deciding every amount with the pure algorithm in ``p4rotor.rotorlb.core`` (the same code
the fluid model runs; amounts are in frames, capacity = frames one window carries):

1. phase 1: send N[peer] (FIFO), then L[peer];
2. OFFER its spare capacity and L for third racks; on the peer's OFFER, ACCEPT by water-filling
   against its headroom; on the peer's ACCEPT, phase 3: send the granted L frames, relayed;
3. frames it receives for itself are delivered (exactly once: (origin, flow, seq) seen before is
   counted as a duplicate); frames for another rack join N[final rack].

All agent frames ride the direct-only class (DSCP 8): a live direct circuit or a counted drop.
Each window's frames are paced at the circuit's rate (host/window.py); what the agent reports,
its summary at the end included, is host/agent_stats.py's.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import time
from fractions import Fraction
from pathlib import Path

from .. import p4 as dp
from .. import schedule as S
from ..rotorlb import core
from . import agent_stats as stats
from ..rotorlb import wire
from ..rotorlb.wire import WINDOW_SLACK
from .agent_stats import Diagnostics
from .delivery import Delivery
from .exchange import offer_accept
from .flowqueue import FlowQueue
from .phases import Phases
from .gate import Circuit, circuits
from .priority import BusyPriority
from .resend import Resend
from .window import HostLink, Window, pace

PORT = 9977
TUN_FLOW = 0xF0000000  # flow id of a TUN interface's packets to rack r: TUN_FLOW + r


class Agent:
    def __init__(self, sched: S.Schedule, t0_ns: int, rack: int, peers: dict[int, str], *, rate: float,
                 frame: int, guard_us: float, flows: list[dict], one_hop: bool, stop_ns: int,
                 end_ns: int, measure: tuple[int, int], retransmit_us: float = 0.0, start_ns: int = 0,
                 ready_file: Path | None = None, ack_direct: bool = False, progress_file: Path | None = None,
                 share=None, host_rate: float | None = None, planes: int = 1, fill: float = 1 - WINDOW_SLACK,
                 phases: dict | None = None):
        self.s, self.t0, self.me, self.peers = sched, t0_ns, rack, peers
        self.rate, self.frame, self.one_hop = rate, frame, one_hop
        self.phases = Phases(phases, one_hop)  # one run for many matrices (host/phases.py)
        self.guard_ns = int(guard_us * 1000)
        window_s = (sched.day_us * 1000 - 2 * self.guard_ns) / 1e9
        # Frames one circuit window carries, with WINDOW_SLACK of it kept free: a user-space
        # sender's pacing slips (timer granularity, a busy CPU), and a frame that misses its window
        # waits a whole cycle, breaking RotorLB's promise that a relay delivers before the pair
        # meets again (with 10%, 1-3 of ~35 000 relayed frames per full sweep waited 9-12 slots).
        # ``fill``: the share of the window's time frames are planned for (default 1 - WINDOW_SLACK;
        # the rotorlb experiment can measure it instead: experiments/windows.py).
        self.fill = fill
        self.capacity = planes * max(0, int(rate / planes * window_s * fill))
        # Hosts sharing their rack's circuits (host/share.py): ``rate`` is then the whole
        # circuit's, which carries its ``planes`` hosts' windows (exactly what a plane per host
        # gives them together), each window's frames are claimed from the rack's agents, and the
        # host's own link (``host_rate`` frames/s, every circuit's sends together) paces what leaves.
        self.share = share
        self.link = HostLink(host_rate)
        self.host_rate = host_rate
        # Windows open now, by (rotor, slot): what a claim may still ask of the host's link
        # (:meth:`_room`), and where a flow that starts mid-window joins (:meth:`_join_open`).
        self.open_windows: dict[tuple[int, int], Window] = {}
        self.stop_ns, self.end_ns = stop_ns, end_ns
        # No window opens before start_ns: the harness starts every agent's clock at once, after all
        # of them listen (a frame sent to an agent not yet listening is lost, counted as NoPorts).
        self.start_ns, self.ready_file = start_ns, ready_file
        # Frames received per (origin, flow), published once a second: the harness ends an FCT
        # run once every flow is whole, instead of waiting out its worst-case drain.
        self.progress_file = progress_file
        # (flow, seq, payload) and (origin, flow, seq, accepted slot, payload); payload b"": synthetic
        self.local: dict[int, FlowQueue] = collections.defaultdict(FlowQueue)
        self.relay: dict[int, collections.deque] = collections.defaultdict(collections.deque)
        self.tun = None  # a TUN interface whose packets are bulk data (host/tun.py)
        self.flows = flows
        self.next_seq = {f["flow"]: 0 for f in flows}
        self.accepted = collections.Counter()       # flow -> frames taken from the application
        self.rx = Delivery(measure)  # frames for this rack, exactly once (host/delivery.py)
        self.sent = collections.Counter()           # direct / relay_first / relay_second
        self.missed = collections.Counter()         # offer / accept not received in time
        self.waiters: dict[tuple, asyncio.Future] = {}
        # Keys whose wait timed out (newest last): an OFFER / ACCEPT arriving for one is late,
        # counted as missed late_offer / late_accept (a peer with nothing to offer sends none).
        self.expired: collections.OrderedDict = collections.OrderedDict()
        self.quiet = 0  # offers not sent: nothing to relay, or no spare capacity
        self.claimed = 0  # frames of shared windows this agent claimed and kept (host/share.py)
        self.share_moves = collections.Counter()  # topped_up: frames of flows joining an open shared window
        # How each flow sent from here went, for the flows an FCT run finds slow (experiments/fct.py:
        # ``bulk_paths``): flow -> [first ns, last ns, frames sent, resent, returned unsent from a
        # window that closed].
        self.flow_tx: dict[int, list[int]] = {}
        self.resend = Resend(int(retransmit_us * 1000), ack_direct)  # host/resend.py
        # SCHED_RR while it holds bulk (host/priority.py); host/agent_cli.py sets the priority.
        self.priority = BusyPriority(None)
        # The pending curve and what explains a frame that missed its window (host/agent_stats.py).
        self.diag = Diagnostics()
        for f in flows:
            if f.get("frames", -1) > 0 and "start_ns" not in f:
                self._make(f, f["frames"])

    # -- application side ----------------------------------------------------------------
    def _make(self, f: dict, n: int) -> None:
        q = self.local[f["dst"]]
        for _ in range(n):
            q.append((f["flow"], self.next_seq[f["flow"]], b""))
            self.next_seq[f["flow"]] += 1
        self.accepted[f["flow"]] += n
        if n > 0:
            self.priority.set(True)
        if "start_ns" in f:
            self._join_open(f["dst"])

    def holds(self) -> bool:
        """Frames queued here (own or relayed) or still to leave in an open window."""
        return (any(self.local.values()) or any(self.relay.values())
                or any(w.queued() for w in self.open_windows.values()))

    def _join_open(self, dst: int) -> None:
        """A flow that starts while a circuit to its rack is open sends in it, as far as the
        window has room (:meth:`_room`; shared, what a sibling left: ``share.top_up``), instead
        of waiting for the next window (half a slot at the median: docs/notes/late-grants.md)."""
        for w, win in self.open_windows.items():
            if win.c.peer != dst:
                continue
            n = min(len(self.local[dst]), self._room(w, win.end))
            if n > 0 and self.share is not None:
                n = self.share.top_up(w, n)
                self.claimed += n
                self.share_moves["topped_up"] += n
            for _ in range(n):
                flow, seq, payload = self.local[dst].popleft()
                win.out.append(self._data(win.c, self.me, flow, seq, dst, False, win.c.slot, payload))
            if n > 0:
                self.sent["direct"] += n
                self.sent["joined_open_window"] += n
                win.more.set()

    def saturating(self, f: dict, now: int) -> bool:
        """A saturated flow (frames -1) makes data from its start_ns (default: at once) until its
        stop_ns (default: the agent's)."""
        return (f.get("frames", -1) < 0 and f.get("start_ns", 0) <= now < min(f.get("stop_ns", self.stop_ns),
                                                                               self.stop_ns))

    def one_hop_at(self, t_ns: int) -> bool:
        return self.phases.one_hop_at(t_ns)

    def rx_counts(self) -> tuple[dict[tuple[int, int], list[int]], int]:
        """Frames received per (origin, flow) (:meth:`flow_rx`), and the wall time they were counted."""
        return self.flow_rx(), time.time_ns()

    def _refill(self) -> None:
        """Saturated flows keep two windows' worth queued until the sending stops."""
        now = time.time_ns()
        if now >= self.stop_ns:
            return
        for f in self.flows:
            if self.saturating(f, now):
                short = 2 * self.capacity - len(self.local[f["dst"]])
                if short > 0:
                    self._make(f, short)

    # -- the algorithm's view of the queues (frames as exact fractions) --------------------
    def queues(self) -> core.RackQueues:
        relay = {}
        for d, q in self.relay.items():
            chunks: list[core.Chunk] = []
            for origin, _, _, acc, _ in q:
                if chunks and chunks[-1].origin == origin and chunks[-1].slot == acc:
                    chunks[-1] = core.Chunk(origin, acc, chunks[-1].amount + 1)
                else:
                    chunks.append(core.Chunk(origin, acc, Fraction(1)))
            if chunks:
                relay[d] = tuple(chunks)
        return core.RackQueues(local={d: Fraction(len(q)) for d, q in self.local.items() if q}, relay=relay)

    # -- one circuit ----------------------------------------------------------------------
    async def exchange(self, c: Circuit) -> None:
        start, end = c.window(self.guard_ns)
        await _sleep_until(start)
        self._refill()
        cap = Fraction(self.capacity)
        win = self.open_windows[(c.rotor, c.slot)] = Window(c, end)
        out = win.out  # every frame of this window goes to the circuit's peer
        if self.share is not None:
            # Claimed at the window's start for all that is held.  Claiming only what the circuit
            # can take from the agent, within the host link's room, giving back what RotorLB did
            # not plan and topping up from the siblings fell further behind at Web
            # Search 10 % (mean pending 5.98 MB against 4.22; docs/rotorlb.md): not kept.
            held = sum(map(len, self.local.values())) + sum(map(len, self.relay.values()))
            cap = Fraction(self.share.claim((c.rotor, c.slot), min(self.capacity, held)))
            self.claimed += int(cap)
        rq, direct = core.phase1(self.queues(), c.peer, cap)
        n_relay = int(sum(ch.amount for ch in direct.relayed))
        for _ in range(n_relay):
            origin, flow, seq, acc, payload = self.relay[c.peer].popleft()
            out.append(self._data(c, origin, flow, seq, c.peer, True, acc, payload))
        for _ in range(int(direct.local)):
            flow, seq, payload = self.local[c.peer].popleft()
            out.append(self._data(c, self.me, flow, seq, c.peer, False, c.slot, payload))
        self.sent["relay_second"] += n_relay
        self.sent["direct"] += int(direct.local)
        if self.resend.ack_direct:
            for buf in self.resend.acks_for(c.peer):
                self._send(c.peer, buf)
        # The pacer sleeps while it has nothing to send and wakes when frames are added
        # (``more``): polling every 2 ms, 4 pacers per agent kept 16 idle agents at 1.3 of the
        # 2 cores and held BMv2's frames for 10-25 ms.
        more = win.more
        sender = asyncio.ensure_future(pace(win, self.rate, self.link, lambda buf: self._send_frame(c.peer, buf)))
        if not self.one_hop_at(start):
            moved = await offer_accept(self, c, rq, cap - direct.total, start, end)
            for d, amount in sorted(moved.items()):
                for _ in range(int(amount)):
                    flow, seq, payload = self.local[d].popleft()
                    out.append(self._data(c, self.me, flow, seq, d, False, c.slot, payload))
                    self.sent["relay_first"] += 1
            more.set()
        sent = await sender
        del self.open_windows[(c.rotor, c.slot)]
        # What the window could not carry (or what was granted after it closed) goes back to the
        # head of its queue: never dropped.
        for buf in reversed(out[sent:]):
            m = wire.decode(buf)
            if m.relayed or m.origin != self.me:
                self.relay[m.dst].appendleft((m.origin, m.flow, m.seq, m.accepted_slot, m.payload))
            else:
                self.local[m.dst].appendleft((m.flow, m.seq, m.payload))
                if m.flow in self.flow_tx:
                    self.flow_tx[m.flow][4] += 1
            self.sent["unsent_returned"] += 1
        self.priority.set(self.holds())  # idle again: give the CPU priority back

    def _room(self, w: tuple[int, int], end: int) -> int:
        """More frames window ``w`` can send before ``end``: the circuit at the agent's rate less
        what ``w`` still has to send, and the host's link (``host_rate``, every circuit together)
        less what every open window still has to send (WINDOW_SLACK kept free, as in
        :attr:`capacity`)."""
        t = max(0, end - time.time_ns()) / 1e9 * (1 - WINDOW_SLACK)
        room = int(self.rate * t) - self.open_windows[w].queued()
        if self.host_rate:
            queued = sum(x.queued() for x in self.open_windows.values())
            room = min(room, int(self.host_rate * t) - queued)
        return max(0, room)

    def _data(self, c: Circuit, origin: int, flow: int, seq: int, dst: int, relayed: bool, acc: int,
              payload: bytes = b"") -> bytes:
        return wire.encode_data(wire.Data(c.rotor, c.slot, origin, flow, seq, dst, relayed, acc, time.time_ns(),
                                          payload), self.frame)

    def _send_frame(self, peer: int, buf: bytes) -> None:
        """A window's frame leaves: its own frames (direct or to a relay) are counted per flow and,
        with retransmission, held until acknowledged."""
        self._send(peer, buf)
        m = wire.decode(buf)
        if m.origin == self.me and not m.relayed:
            sent_ns = time.time_ns()
            self.resend.sent(m, sent_ns)
            tx = self.flow_tx.setdefault(m.flow, [sent_ns, 0, 0, 0, 0])
            tx[1] = sent_ns
            tx[2] += 1

    async def _wait(self, key: tuple, timeout: float):
        fut = self.waiters.setdefault(key, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            self.expired[key] = None
            while len(self.expired) > 4096:
                self.expired.popitem(last=False)
            return None
        finally:
            self.waiters.pop(key, None)

    # -- network ----------------------------------------------------------------------------
    def _send(self, peer: int, buf: bytes) -> None:
        self.sock.sendto(buf, (self.peers[peer], PORT))

    def _send_ll(self, peer: int, buf: bytes) -> None:
        """Over the low-latency class (ACKs): any path, now."""
        self.ll_sock.sendto(buf, (self.peers[peer], PORT))

    def received(self, buf: bytes) -> None:
        try:
            m = wire.decode(buf)
        except wire.WireError:
            self.missed["bad_message"] += 1
            return
        if isinstance(m, wire.Ack):
            self.resend.acked(m)
            return
        if isinstance(m, (wire.Offer, wire.Accept)):
            peer = self.s.rotors[m.rotor].matchings[m.slot % len(self.s.rotors[m.rotor].matchings)][self.me]
            kind = "offer" if isinstance(m, wire.Offer) else "accept"
            if self.expired.pop((kind, m.rotor, m.slot, peer), 0) is None:
                self.missed["late_" + kind] += 1  # its wait is over: too late to use
                return
            fut = self.waiters.setdefault((kind, m.rotor, m.slot, peer), asyncio.get_running_loop().create_future())
            if not fut.done():
                fut.set_result(m)
            return
        if m.dst == self.me:
            self.resend.received(m)
            if not self.rx.take(m, time.time_ns()):
                return
            if m.payload and self.tun is not None and not self.tun.write(m.payload):
                self.missed["tun_write"] += 1  # delivered to the agent, refused by the kernel
        else:  # first hop of a relay: hold it for its final rack (N)
            self.relay[m.dst].append((m.origin, m.flow, m.seq, m.slot, m.payload))
            self.priority.set(True)

    def from_tun(self, packet: bytes) -> None:
        """An IP packet an application sent to another rack's TUN address: bulk data for that rack
        (its flow: TUN_FLOW + rack), accepted now, delivered exactly once or counted lost."""
        dst = self.tun.rack_of(packet)
        if dst is None or dst == self.me or dst not in self.peers:
            self.missed["tun_unroutable"] += 1
            return
        flow = TUN_FLOW + dst
        seq = self.next_seq.get(flow, 0)
        self.next_seq[flow] = seq + 1
        self.local[dst].append((flow, seq, packet))
        self.accepted[flow] += 1
        self.priority.set(True)

    def _start_timed_flows(self) -> None:
        """Flows with a ``start_ns`` (an FCT run's bulk flows) join their queue at that time."""
        loop = asyncio.get_running_loop()
        for f in self.flows:
            if "start_ns" in f and f.get("frames", 0) > 0:
                delay = max(0.0, (f["start_ns"] - time.time_ns()) / 1e9)
                loop.call_later(delay, self._make, f, f["frames"])

    def _held(self) -> tuple[int, int]:
        """Frames held here: local, relayed (the pending curve, once a slot)."""
        return sum(len(q) for q in self.local.values()), sum(len(q) for q in self.relay.values())

    async def _acknowledge(self) -> None:
        """Every 20 ms: ACK what was delivered here to each origin (low-latency class)."""
        while True:
            await asyncio.sleep(0.02)
            for origin in list(self.resend.owed):
                for buf in self.resend.acks_for(origin):
                    self._send_ll(origin, buf)

    async def _retransmit(self) -> None:
        """Own frames not acknowledged ``retransmit_us`` after they left go back to the head of
        their queue (the receiver drops a second copy: exactly once)."""
        while True:
            await asyncio.sleep(0.05)
            for (flow, seq), dst, payload in self.resend.overdue(time.time_ns()):
                self.local[dst].appendleft((flow, seq, payload))
                self.priority.set(True)
                if flow in self.flow_tx:
                    self.flow_tx[flow][3] += 1

    async def run(self) -> dict:
        await self.open()
        if self.ready_file is not None:  # listening: the harness polls for this file
            stats.write_json(self.ready_file, {"ready_ns": time.time_ns()})
        self.priority.set(self.holds())  # listening: an idle agent gives its start-up priority back
        self.stopping = asyncio.Event()
        self.diag.gc.start()
        self._start_timed_flows()
        sampler = asyncio.ensure_future(self.diag.sample_pending(self.s.slot_us * 1000, self._held))
        helpers = ([asyncio.ensure_future(self._retransmit())] if self.resend.after_ns else [])
        if self.resend.after_ns and not self.resend.ack_direct:
            helpers.append(asyncio.ensure_future(self._acknowledge()))
        if self.progress_file is not None:
            helpers.append(asyncio.ensure_future(stats.publish_progress(self.progress_file, self.flow_rx)))
        if self.phases.snapshot_at:
            helpers.append(asyncio.ensure_future(self.phases.take_snapshots(self.rx_counts)))
        # The windows open now, and the first one that failed.  A finished window is let go at once:
        # keeping every window's task until the end (40 windows/s: ~230 000 of them 1.6 h into
        # an FCT run) made each full garbage collection walk them all, and the agents'
        # loops stopped for up to 0.6 s (Data Mining 1 %: RotorNet's lone flow 1441 waited out its
        # direct circuit behind one, at 1.29x the bulk bound).
        live: set[asyncio.Task] = set()
        failed: list[asyncio.Task] = []

        def reap(t: asyncio.Task) -> None:
            live.discard(t)
            if not t.cancelled() and t.exception() is not None:
                failed.append(t)

        # No window closer than one slot to the end: whatever is sent arrives before the receivers stop.
        last_ns = self.end_ns - self.s.slot_us * 1000
        for c in circuits(self.s, self.t0, self.me, max(time.time_ns(), self.start_ns)):
            if c.day_start_ns < self.start_ns:
                continue
            if failed or c.day_end_ns > last_ns or await self._stopped_by(c.day_start_ns - 5_000_000):
                break
            if c.window(self.guard_ns)[1] <= time.time_ns():
                self.missed["window_over"] += 1  # the loop woke after it (a stall): nothing to send in
                continue
            t = asyncio.ensure_future(self.exchange(c))
            live.add(t)
            t.add_done_callback(reap)
            self.diag.windows_open(len(live))
        await asyncio.gather(*live)  # windows already open finish (frames that do not fit go back)
        if failed:
            raise failed[0].exception()
        if not self.stopping.is_set():
            await self._stopped_by(self.end_ns)
        else:
            await asyncio.sleep(0.2)  # what is still in flight to us
        sampler.cancel()
        for h in helpers:
            h.cancel()
        if self.progress_file is not None:
            stats.write_json(self.progress_file, stats.progress(self.flow_rx()))  # the last word: as the summary
        self.diag.gc.stop()
        doc = self.summary()
        self.close()
        return doc

    def summary(self) -> dict:
        return stats.summary(self)

    def flow_rx(self) -> dict[tuple[int, int], list[int]]:
        """(origin, flow) -> [frames received, ns of the last] (the progress file)."""
        return self.rx.flow_rx

    def stop(self) -> None:
        """SIGTERM/SIGINT: open no new window, let open ones finish, write the summary."""
        self.stopping.set()

    async def _stopped_by(self, t_ns: int) -> bool:
        """Sleep until ``t_ns``; True if told to stop first."""
        try:
            await asyncio.wait_for(self.stopping.wait(), max(0.0, (t_ns - time.time_ns()) / 1e9))
            return True
        except asyncio.TimeoutError:
            return False

    async def open(self) -> None:
        """The agent's UDP socket, in the direct-only class, and its TUN interface if it has one
        (tests replace open/close/_send)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dp.DSCP_DIRECT_ONLY << 2)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("0.0.0.0", PORT))
        self.sock.setblocking(False)
        self.ll_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ll_sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dp.DSCP_LOW_LATENCY << 2)
        self.ll_sock.setblocking(False)
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._drain_socket)
        if self.tun is not None:
            asyncio.get_running_loop().add_reader(self.tun.fd, self._drain_tun)

    def _drain_tun(self) -> None:
        for packet in self.tun.read_all():
            self.from_tun(packet)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()
        self.ll_sock.close()
        if self.tun is not None:
            asyncio.get_running_loop().remove_reader(self.tun.fd)
            self.tun.close()

    def _drain_socket(self) -> None:
        while True:
            try:
                buf = self.sock.recv(65535)
            except BlockingIOError:
                return
            self.received(buf)


async def _sleep_until(t_ns: int) -> None:
    d = (t_ns - time.time_ns()) / 1e9
    if d > 0:
        await asyncio.sleep(d)
