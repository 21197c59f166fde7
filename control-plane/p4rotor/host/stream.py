"""Unmodified TCP applications over RotorLB, as split connections (docs/rotorlb.md, "TCP at the
circuits' capacity").

TCP run end to end through the agents waits a cycle for every ACK, and relayed segments arrive out
of order.  So the connection ends at the source host's agent instead.  The host's kernel sends an
application's connection to another rack's bulk address (10.200.R.N) to the agent's port
(``iptables -t nat ... REDIRECT``, installed by the harness: fabric/agents.py).  The agent reads
the bytes and hands them to rlbd as a stream (host/datapath.py ``add_stream``), which RotorLB
carries once: direct or relayed, resent if lost, put back in order at the destination's rlbd.
The destination's agent opens a new connection to the application there (127.0.0.1, the port
the source asked for) and writes the bytes into it.  The answer comes back the same way, on a
stream of its own.

* Stream ids: ``FORWARD | cid`` from the source, ``REVERSE | rack << 18 | cid`` back (``rack``:
  the source's); ``cid`` is the source agent's connection number.  (origin rack, flow) names a
  stream at either end, and no host sends two streams on one id: rlbd numbers a flow's frames
  per id, so a reply to rack 0's connection 1 and one to rack 2's connection 1, on one id, had
  the second wait for sequence numbers the first had used (an eight-pair run hung on it).
* The forward stream's first bytes say where it goes: ``OPEN`` = magic, IPv4 address, port.
* A stream ends with rlbd's FIN frame; the other side then half-closes its connection
  (``write_eof``).  A connection the destination refuses gets an empty reverse stream that ends
  at once: the source closes its side, and the agent counts it (``refused``).
* An agent the harness restarted (``incarnation`` N > 0) knows nothing of its predecessor's
  connections, and rlbd's record of what its predecessor delivered died with it.  Its connection
  ids start at ``N << INCARNATION_SHIFT`` (new stream ids: nothing it sends is taken for its
  predecessor's), and it first sends every peer a RESTART stream (``OPEN`` with magic ``RLBX``, on
  the connection id ``N << INCARNATION_SHIFT``, ended at once).  A peer that receives it resets
  every connection it has with that rack (the application sees ECONNRESET: SO_LINGER 0) and counts
  them (``reset_peer_restarted``): a connection across an agent restart ends cleanly, at once, not
  after a timeout.  Its frames still queued at the peer's rlbd, or sent and unacknowledged, are
  dropped (``stream_frames_dropped``, rlbd's DROP_FLOW): they would take the restarted agent's
  windows from the connections that come after.  The stream's frames its predecessor had not delivered are never delivered (the
  restarted rlbd waits for their first frame, which its predecessor had): nothing is duplicated.
* Short writes: a write of at most ``SHORT_BYTES`` while at most ``SHORT_QUEUE`` of the host's
  frames wait for that rack (a request, a handshake, a FIN) is handed to the agent's ``hurry``
  (host/fast_agent.py): it goes ahead of the bulk in the open window that gets it there soonest,
  directly or through a relay, instead of waiting its turn for up to a cycle.  An exchange of
  several such messages (iperf3's start) then takes a few slots, not a cycle each.
* Back-pressure: once more than ``HIGH_FRAMES`` of the host's frames wait for that rack, the
  agent stops reading the application's socket until they are under ``LOW_FRAMES`` again, so
  TCP's own flow control holds the application at what the circuits carry.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import socket
import struct

from ..rotorlb.wire import SPLIT_TCP_PORT as PROXY_PORT
from .datapath import DataPath
FORWARD, REVERSE, KIND = 0xE0000000, 0xD0000000, 0xF0000000
CID_BITS = 18  # connections per agent before ids repeat; the rack (up to 1024) above them
OPEN = struct.Struct("!4s4sH")  # magic, IPv4 destination, port
MAGIC = b"RLB1"
RESTART_MAGIC = b"RLBX"  # a restarted agent's announcement: reset every connection with my rack
INCARNATION_SHIFT = 12    # connection ids per incarnation: 4095 (an agent restarted at most 63 times)
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
READ = 1 << 16
HIGH_FRAMES, LOW_FRAMES = 4096, 1024
# A write this short, with at most this many of the host's frames queued for its rack (its own
# included), is a request, a handshake or a FIN, not bulk: it takes the soonest path
# (host/fast_agent.py: hurry) instead of waiting its turn, up to a cycle.
SHORT_BYTES, SHORT_QUEUE = 4096, 8


def original_dst(sock: socket.socket) -> tuple[str, int]:
    """Where a REDIRECTed connection was going (netfilter's SO_ORIGINAL_DST)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, ip = struct.unpack_from("!2xH4s", raw)
    return str(ipaddress.IPv4Address(ip)), port


def bulk_address(ip: str) -> tuple[int, int] | None:
    """(rack R, host index N - 1) of a bulk address 10.200.R.N, else None."""
    a = ipaddress.IPv4Address(ip).packed
    return (a[2], a[3] - 1) if a[:2] == bytes([10, 200]) and a[3] >= 1 else None


class Conn:
    def __init__(self, rack: int, send_flow: int, writer: asyncio.StreamWriter | None = None):
        self.rack, self.send_flow, self.writer = rack, send_flow, writer
        self.early: list[bytes] = []   # bytes that came before the connection was open
        self.ended_in = self.ended_out = False
        self.reset = False  # ended by a restarted peer (Splitter._peer_restarted)
        self.bytes_in = self.bytes_out = 0


class Splitter:
    """One agent's split connections: ``start`` listens for the host's redirected connections;
    ``delivered`` takes what rlbd hands over (DataPath.on_deliver)."""

    def __init__(self, dp: DataPath, me: int, racks: int, target_host: str = "127.0.0.1", plane: int = 0,
                 incarnation: int = 0):
        """``plane``: this host's index in its rack; its agent's peers are the hosts of that index
        (fabric/agents.py), so only 10.200.R.(plane + 1) is reachable through it.
        ``incarnation``: how often this host's agent was restarted before (above)."""
        if not 0 <= incarnation < 1 << (CID_BITS - INCARNATION_SHIFT):
            raise ValueError(f"incarnation {incarnation}: 0..{(1 << (CID_BITS - INCARNATION_SHIFT)) - 1}")
        self.dp, self.me, self.racks, self.target_host, self.plane = dp, me, racks, target_host, plane
        self.conns: dict[tuple[int, int], Conn] = {}  # (rack, flow it arrives on) -> connection
        self.cid_base = incarnation << INCARNATION_SHIFT
        self.next_cid = self.cid_base + 1
        self.counts = collections.Counter()
        self.server: asyncio.AbstractServer | None = None
        self.tasks: set[asyncio.Task] = set()
        self.resolve = original_dst  # where a connection was going (tests give their own)
        self.on_short = None  # (rack, stream, next seq) of a short write: the agent hurries it

    async def start(self, bind: str = "0.0.0.0", port: int = PROXY_PORT) -> None:
        self.server = await asyncio.start_server(self._accepted, bind, port, reuse_address=True)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in self.tasks:
            t.cancel()

    def summary(self) -> dict:
        return {**self.counts, "open": len(self.conns)}

    # -- the source side ------------------------------------------------------------------------
    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ip, port = self.resolve(writer.get_extra_info("socket"))
        except OSError:  # not redirected: someone connected to the agent's port itself
            self.counts["not_redirected"] += 1
            writer.close()
            return
        where = bulk_address(ip)
        if where is None or where[0] == self.me or not 0 <= where[0] < self.racks:
            self.counts["unroutable"] += 1
            writer.close()
            return
        rack, host = where
        if host != self.plane:  # another host index: not a peer of this agent (refused, counted)
            self.counts["other_plane"] += 1
            writer.close()
            return
        cid = self.next_cid
        span = (1 << INCARNATION_SHIFT) - 1
        self.next_cid = self.cid_base + (self.next_cid - self.cid_base) % span + 1
        conn = Conn(rack, FORWARD | cid, writer)
        self.conns[(rack, REVERSE | self.me << CID_BITS | cid)] = conn
        self.counts["opened"] += 1
        self._push(conn, OPEN.pack(MAGIC, ipaddress.IPv4Address(ip).packed, port))
        await self._pump(reader, conn)

    def announce_restart(self, racks) -> None:
        """A restarted agent: tell every peer rack to reset its connections with this one."""
        for rack in racks:
            self._push(Conn(rack, FORWARD | self.cid_base), OPEN.pack(RESTART_MAGIC, bytes(4), 0), fin=True)
            self.counts["restart_announced"] += 1

    def _peer_restarted(self, origin: int) -> None:
        """Every connection with ``origin`` ends: its agent restarted and has forgotten it."""
        gone = {id(c): c for c in self.conns.values() if c.rack == origin}
        for k in [k for k, c in self.conns.items() if c.rack == origin]:
            del self.conns[k]
        for c in gone.values():
            c.reset = True
            # its frames still queued or awaiting an ACK would only fill the restarted peer's windows
            self.counts["stream_frames_dropped"] += self.dp.drop_flow(c.rack, c.send_flow)
            if c.writer is not None:
                sock = c.writer.get_extra_info("socket")
                try:  # RST, not FIN: the application must not take a cut stream for a whole one
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except (OSError, AttributeError):
                    pass
                c.writer.transport.abort()
            self.counts["reset_peer_restarted"] += 1

    # -- both sides: the application's bytes into the stream -----------------------------------
    def _push(self, conn: Conn, data: bytes, fin: bool = False) -> int:
        conn.bytes_out += len(data)
        self.counts["bytes_sent"] += len(data)
        queued, next_seq = self.dp.add_stream(conn.rack, conn.send_flow, data, fin)
        if self.on_short is not None and len(data) <= SHORT_BYTES and queued <= SHORT_QUEUE:
            self.counts["short_writes"] += 1
            self.on_short(conn.rack, conn.send_flow, next_seq)
        return queued

    async def _pump(self, reader: asyncio.StreamReader, conn: Conn) -> None:
        try:
            while not conn.reset:
                data = await reader.read(READ)
                if not data or conn.reset:
                    break
                if self._push(conn, data) > HIGH_FRAMES:  # the circuits are behind: let TCP wait
                    self.counts["paused"] += 1
                    while self.dp.state()[0].get(conn.rack, 0) > LOW_FRAMES and not conn.reset:
                        await asyncio.sleep(0.005)
        except (ConnectionError, OSError):
            if not conn.reset:
                self.counts["reset_by_application"] += 1
        if conn.reset:  # its peer restarted (_peer_restarted): nothing more goes to it
            return
        self._push(conn, b"", fin=True)
        conn.ended_out = True
        self._maybe_close(conn)

    # -- both sides: the stream's bytes into the application -----------------------------------
    def delivered(self, origin: int, flow: int, data: bytes, fin: bool) -> None:
        conn = self.conns.get((origin, flow))
        if conn is None:
            if flow & KIND != FORWARD:
                self.counts["unknown_stream"] += 1
                return
            conn = self._incoming(origin, flow, data)
            if conn is None:
                return
            data = data[OPEN.size:]
        conn.bytes_in += len(data)
        self.counts["bytes_delivered"] += len(data)
        if conn.writer is None:
            conn.early.append(data)
        elif data:
            conn.writer.write(data)
        if fin:
            conn.ended_in = True
            if conn.writer is not None:
                self._eof(conn)
                self._maybe_close(conn)

    def _incoming(self, origin: int, flow: int, data: bytes) -> Conn | None:
        """A new stream from ``origin``: its OPEN header, then a connection to the application
        (or a restarted peer's announcement: every connection with it is reset)."""
        if len(data) >= OPEN.size and data[:4] == RESTART_MAGIC:
            self.counts["peer_restarts"] += 1
            self._peer_restarted(origin)
            return None
        if len(data) < OPEN.size or data[:4] != MAGIC:
            self.counts["bad_open"] += 1
            return None
        _, _, port = OPEN.unpack_from(data)
        conn = Conn(origin, REVERSE | origin << CID_BITS | (flow & ((1 << CID_BITS) - 1)))
        self.conns[(origin, flow)] = conn
        self.counts["accepted"] += 1
        t = asyncio.ensure_future(self._connect(conn, port))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)
        return conn

    async def _connect(self, conn: Conn, port: int) -> None:
        try:
            reader, writer = await asyncio.open_connection(self.target_host, port)
        except OSError:
            self.counts["refused"] += 1  # the reverse stream ends at once: the source closes
            conn.ended_out = True
            self._push(conn, b"", fin=True)
            return
        conn.writer = writer
        for part in conn.early:
            writer.write(part)
        conn.early.clear()
        if conn.ended_in:
            self._eof(conn)
        await self._pump(reader, conn)

    def _maybe_close(self, conn: Conn) -> None:
        """Both directions over: the connection is closed and forgotten."""
        if conn.ended_in and conn.ended_out:
            if conn.writer is not None:
                conn.writer.close()
            for k in [k for k, c in self.conns.items() if c is conn]:
                del self.conns[k]
            self.counts["closed"] += 1

    def _eof(self, conn: Conn) -> None:
        try:
            if conn.writer.can_write_eof():
                conn.writer.write_eof()
        except OSError:
            pass
