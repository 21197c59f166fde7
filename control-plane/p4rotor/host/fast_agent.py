"""A RotorLB host agent whose frames are moved by the compiled data path (host/datapath.py, rlbd):
``--datapath c`` of host/agent_cli.py.

Everything per slot is host/agent.py's: the slot gate, OFFER/ACCEPT, and every amount from
``rotorlb.core`` (the code the fluid model runs).  Everything per frame is rlbd's: the queues per
destination, the frames of each circuit window paced at the circuit's rate, relay
store-and-forward, sequence numbers and exactly-once delivery.  OFFER and ACCEPT stay on the
agent's UDP port (``PORT``); data frames use ``DATA_PORT``, which rlbd owns.

Not on this data path, refused in one line: TUN interfaces.  Unmodified TCP applications use
split connections instead (``tcp_split``: host/stream.py).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import socket
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from .. import p4 as dp
from ..rotorlb import core, wire
from . import agent_stats as stats
from .agent import PORT, Agent, _sleep_until
from .datapath import DIRECT, RELAY_FIRST, RELAYED, DataPath
from .exchange import offer_accept
from .gate import Circuit, circuits
from .resend import Resend

DATA_PORT = PORT + 1
HURRY_FRAMES = 8  # a window's frames taken out of turn for short stream writes, at most (``hurry``)


class _Window:
    """A window open now, as far as the agent knows it: what it planned into it, and the future
    rlbd's WIN_DONE resolves with (sent, returned)."""

    def __init__(self, c: Circuit, end: int, start: int, done: asyncio.Future):
        self.c, self.end, self.start, self.done = c, end, start, done
        self.planned = self.hurried = 0


class FastAgent(Agent):
    def __init__(self, *args, bind: str = "0.0.0.0", lose_every: int = 0, tcp_split: bool = False, plane: int = 0,
                 spin_ns: int | None = None, incarnation: int = 0, resend_streams_only: bool = False,
                 **kw):
        """``incarnation``: how many times the harness restarted this host's agent before
        (host/stream.py: its connection ids are new, and its peers are told to reset theirs with
        it); ``resend_streams_only``: rlbd resends stream frames only (host/datapath.py)."""
        self.dp: DataPath | None = None
        self._early: list[tuple[int, int, int]] = []  # local frames made before rlbd runs
        self.bind, self.lose_every, self.spin_ns = bind, lose_every, spin_ns
        self.tcp_split, self.plane = tcp_split, plane
        self.incarnation, self.resend_streams_only = incarnation, resend_streams_only
        self.splitter = None  # host/stream.py, with tcp_split
        super().__init__(*args, **kw)
        # rlbd resends and acknowledges; the base agent's helpers for it stay off.
        self.retransmit_ns, self.ack_direct = self.resend.after_ns, self.resend.ack_direct
        self.resend = Resend(0, False)
        self._wins: dict[int, _Window] = {}
        self._next_win = 0
        self._urgent: dict[tuple[int, int], int] = {}  # (dst, stream) -> hurry its frames below this
        self.hurried = collections.Counter()  # frames hurried: direct / relay_first

    # -- frames live in rlbd; the agent sees counts ------------------------------------------
    def _make(self, f: dict, n: int) -> None:
        if n <= 0:
            return
        if self.dp is None:
            self._early.append((f["dst"], f["flow"], n))
        else:
            self.dp.add_local(f["dst"], f["flow"], n)
        self.accepted[f["flow"]] += n
        self.priority.set(True)
        if "start_ns" in f and f.get("frames", -1) > 0:  # a timed flow (a saturated one fills at windows' starts)
            self._join_open(f["dst"])

    def _state(self):
        return self.dp.state() if self.dp is not None else ({}, [])

    def queues(self) -> core.RackQueues:
        local, chunks = self._state()
        relay: dict[int, list[core.Chunk]] = collections.defaultdict(list)
        for d, origin, slot, n in chunks:
            relay[d].append(core.Chunk(origin, slot, Fraction(n)))
        return core.RackQueues(local={d: Fraction(n) for d, n in local.items() if n},
                               relay={d: tuple(c) for d, c in relay.items()})

    def _held(self) -> tuple[int, int]:
        local, chunks = self._state()
        return sum(local.values()), sum(c[3] for c in chunks)

    def holds(self) -> bool:
        return any(self._held()) or bool(self._wins)

    def _refill(self) -> None:
        now = time.time_ns()
        if now >= self.stop_ns:
            return
        local, _ = self._state()
        for f in self.flows:
            if self.saturating(f, now):
                self._make(f, 2 * self.capacity - local.get(f["dst"], 0))

    def _join_open(self, dst: int) -> None:
        """A flow starting while a circuit to its rack is open sends in it, as far as the window's
        remaining time holds frames at the rate (what it already planned counted as unsent)."""
        if self.dp is None:
            return
        now = time.time_ns()
        for wid, w in self._wins.items():
            if w.c.peer != dst or w.end <= now:
                continue
            sent_by_now = int(self.rate * (now - w.start) / 1e9)
            room = int(self.rate * (w.end - now) / 1e9 * self.fill) - max(0, w.planned - sent_by_now)
            if self.host_rate:
                room = min(room, int(self.host_rate * (w.end - now) / 1e9 * self.fill))
            room = min(room, self._state()[0].get(dst, 0))
            if room > 0 and self.share is not None:  # what the rack's agents left of the window
                room = self.share.top_up((w.c.rotor, w.c.slot), room)
                self.claimed += room
                self.share_moves["topped_up"] += room
            n = self.dp.win_add(wid, DIRECT, dst, room)
            w.planned += n
            self.sent["joined_open_window"] += n

    # -- short stream writes: the soonest path ----------------------------------------------
    def hurry(self, dst: int, flow: int, below: int) -> None:
        """A short write on an otherwise idle stream (host/stream.py: an application's request, a
        handshake, a FIN) should not wait for its turn in RotorLB's queues, up to a cycle: its
        frames (numbered below ``below``) go ahead of the bulk in the open window that gets them to
        ``dst`` soonest -- the direct circuit, or a first hop to a rack whose circuit to ``dst``
        opens before this rack's own does.  No window is better now: they are tried again as each
        window opens (``exchange``).  At most ``HURRY_FRAMES`` a window: the relay did not offer
        for them."""
        self._urgent[(dst, flow)] = max(below, self._urgent.get((dst, flow), 0))
        self._hurry()

    def _hurry(self) -> None:
        if self.dp is None or not self._urgent:
            return
        now = time.time_ns()
        for (dst, flow), below in list(self._urgent.items()):
            best = self._soonest(dst, now)
            if best is None:
                continue
            wid, kind = best
            w = self._wins[wid]
            if w.hurried >= HURRY_FRAMES:
                continue
            moved, left = self.dp.win_add_flow(wid, kind, dst, flow, below, HURRY_FRAMES - w.hurried)
            w.hurried += moved
            w.planned += moved
            self.hurried["direct" if kind == DIRECT else "relay_first"] += moved
            if not left:
                del self._urgent[(dst, flow)]

    def _margin_ns(self) -> int:
        """How long before its window ends (or its next hop's opens) a hurried frame must leave."""
        return self.guard_ns + int(2e9 / self.rate)

    def _next_window(self, rack: int, dst: int, after_ns: int) -> int | None:
        """When ``rack``'s next window to ``dst`` opens, at or after ``after_ns``."""
        two_cycles = 2 * len(self.s.rotors) * max(len(r.matchings) for r in self.s.rotors)
        for c in itertools.islice(circuits(self.s, self.t0, rack, after_ns), two_cycles):
            start = c.window(self.guard_ns)[0]
            if c.peer == dst and start >= after_ns:
                return start
        return None  # never in two cycles

    def _soonest(self, dst: int, now: int) -> tuple[int, int] | None:
        """The open window (id, kind) that gets a frame to ``dst`` soonest, if one beats waiting for
        this rack's own next circuit to it."""
        margin = self._margin_ns()
        best_t, best = self._next_window(self.me, dst, now), None
        for wid, w in self._wins.items():
            if w.end - now < margin:
                continue
            if w.c.peer == dst:
                return wid, DIRECT
            t = self._next_window(w.c.peer, dst, now + margin)
            if t is not None and (best_t is None or t < best_t):
                best_t, best = t, (wid, RELAY_FIRST)
        return best

    # -- one circuit --------------------------------------------------------------------------
    async def exchange(self, c: Circuit) -> None:
        start, end = c.window(self.guard_ns)
        await _sleep_until(start)
        self._refill()
        cap = Fraction(self.capacity)
        if self.share is not None:  # host/agent.py: claimed at the window's start for all that is held
            cap = Fraction(self.share.claim((c.rotor, c.slot), min(self.capacity, sum(self._held()))))
            self.claimed += int(cap)
        wid = self._next_win = self._next_win + 1
        w = self._wins[wid] = _Window(c, end, time.time_ns(), asyncio.get_running_loop().create_future())
        self.dp.win_open(wid, c.rotor, c.peer, c.slot, end, int(1e9 / self.rate))
        rq, direct = core.phase1(self.queues(), c.peer, cap)
        w.planned += self.dp.win_add(wid, RELAYED, c.peer, int(sum(ch.amount for ch in direct.relayed)))
        w.planned += self.dp.win_add(wid, DIRECT, c.peer, int(direct.local))
        if not self.one_hop_at(start):  # host/agent.py: phase 2, then the granted first hops into the window
            moved = await offer_accept(self, c, rq, cap - direct.total, start, end)
            for d, amount in sorted(moved.items()):
                w.planned += self.dp.win_add(wid, RELAY_FIRST, d, int(amount))
        self._hurry()
        await w.done  # rlbd counts what each window sent and returned (its stats)
        del self._wins[wid]
        self.priority.set(self.holds())

    def _window_done(self, wid: int, sent: int, returned: int) -> None:
        w = self._wins.get(wid)
        if w is not None and not w.done.done():
            w.done.set_result((sent, returned))

    def received(self, buf: bytes) -> None:
        """OFFER and ACCEPT only: data frames go to rlbd's port."""
        if buf[:1] == bytes([wire.DATA]) or buf[:1] == bytes([wire.ACK]):
            self.missed["bad_message"] += 1
            return
        super().received(buf)

    # -- network ------------------------------------------------------------------------------
    async def open(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dp.DSCP_DIRECT_ONLY << 2)
        self.sock.bind((self.bind, PORT))
        self.sock.setblocking(False)
        self.ll_sock = None
        loop = asyncio.get_running_loop()
        loop.add_reader(self.sock.fileno(), self._drain_socket)
        self.dp = DataPath(self.me, self.s.racks, self.frame, {r: (ip, DATA_PORT) for r, ip in self.peers.items()}, bind=self.bind,
                           port=DATA_PORT, tos=dp.DSCP_DIRECT_ONLY << 2, measure=self.rx.measure,
                           retransmit_ns=self.retransmit_ns, ack_direct=self.ack_direct,
                           ll_tos=dp.DSCP_LOW_LATENCY << 2, lose_every=self.lose_every, spin_ns=self.spin_ns,
                           resend_streams_only=self.resend_streams_only)
        self.dp.on_window_done = self._window_done
        await loop.run_in_executor(None, self.dp.start)
        loop.add_reader(self.dp.fileno(), self.dp.pump)
        if self.host_rate:  # the host's own link, over every window together
            self.dp.link(int(1e9 / self.host_rate))
        for dst, flow, n in self._early:
            self.dp.add_local(dst, flow, n)
        self._early.clear()
        if self.tcp_split:  # the host's TCP connections to other racks' bulk addresses end here
            from .stream import Splitter

            self.splitter = Splitter(self.dp, self.me, self.s.racks, plane=self.plane, incarnation=self.incarnation)
            self.dp.on_deliver = self.splitter.delivered
            self.splitter.on_short = self.hurry
            await self.splitter.start(self.bind)
            if self.incarnation:  # a restarted agent: its peers drop their connections with its predecessor
                self.splitter.announce_restart(r for r in self.peers if r != self.me)
        self._stats_dir = tempfile.TemporaryDirectory(prefix="rlbd-")

    def close(self) -> None:
        if self.splitter is not None:
            self.splitter.close()
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.sock.fileno())
        self.sock.close()
        if self.dp is not None:
            loop.remove_reader(self.dp.fileno())
            self.dp_errors = self.dp.stop().strip()
            self._stats_dir.cleanup()

    def dp_stats(self, final: bool = False) -> dict:
        return self.dp.stats(Path(self._stats_dir.name) / "stats.json", final)

    def flow_rx(self) -> dict[tuple[int, int], list[int]]:
        if self.dp is None:
            return {}
        return _flows_rx(self.dp_stats())

    def rx_counts(self) -> tuple[dict[tuple[int, int], list[int]], int]:
        """rlbd's counts, and when rlbd took them (its frames wait while it writes them)."""
        if self.dp is None:
            return {}, time.time_ns()
        d = self.dp_stats()
        return _flows_rx(d), d["now_ns"]

    def summary(self) -> dict:
        return summary(self, self.dp_stats(final=True))


def _flows_rx(d: dict) -> dict[tuple[int, int], list[int]]:
    """rlbd's "origin:flow" -> [frames, ns of the last], keyed (origin, flow)."""
    return {tuple(int(x) for x in k.split(":")): v for k, v in d["flows_rx"].items()}


def summary(agent: FastAgent, d: dict) -> dict:
    """host/agent_stats.py's summary, from rlbd's counts ``d`` and the agent's own."""
    return {"rack": agent.me, "datapath": "c", "capacity_frames": agent.capacity, "frame_bytes": agent.frame,
            "claimed_frames": agent.claimed if agent.share is not None else None,
            "share_moves": dict(agent.share_moves), "claims_skipped": getattr(agent.share, "skipped", None),
            # rlbd's count: every frame it was given, a stream's too (the agent knows its own flows only)
            "accepted": d["accepted"],
            "delivered": d["delivered"], "delivered_in_window": d["delivered_in_window"],
            "duplicates": d["duplicates"], "sent": {**d["sent"], **agent.sent},
            "held_local": d["held_local"], "held_relay": d["held_relay"],
            "held_relay_by_origin": d["held_relay_by_origin"], "relay_delay_slots": d["relay_delay_slots"],
            "held_relay_bulk_by_origin": d.get("held_relay_bulk_by_origin"),
            "held_local_by_flow": d.get("held_local_by_flow"),
            "missed": dict(agent.missed), "quiet_offers": agent.quiet, "refused": d["refused"],
            "pacing_error_us": d["pacing_error_us"], "transit_us": d["transit_us"], "fill": agent.fill,
            "windows": d["windows"], "injected_loss": d["injected_loss"],
            "udp_rcvbuf_errors": stats.udp_counter("RcvbufErrors"), "udp_no_ports": stats.udp_counter("NoPorts"),
            "flows_rx": d["flows_rx"], "flows_rx_via": d["flows_rx_via"], "flows_tx": d["flows_tx"],
            # bulk frames still missing, per gap: [origin, flow, frames, t0, t1] (arrivals around it, ns)
            "bulk_gaps": d.get("bulk_gaps"), "bulk_gaps_dropped": d.get("bulk_gaps_dropped"),
            # stream frames held for relay [origin, dst, flow, seq], and each stream's in-order prefix here
            "held_relay_streams": d.get("held_relay_streams"), "rx_stream_next": d.get("rx_stream_next"),
            "retransmitted": d["retransmitted"], "unacknowledged": d["unacknowledged"],
            "acks": {"in": d["acks_in"], "out": d["acks_out"]}, "stream_bytes": d["stream_bytes"],
            "stream_frames_dropped": d.get("stream_frames_dropped"),
            "late_adds": d["late_adds"],
            "hurried": dict(agent.hurried), "snapshots": agent.phases.snapshots,
            "tcp": agent.splitter.summary() if agent.splitter is not None else None, "priority": agent.priority.summary(),
            **agent.diag.summary()}
