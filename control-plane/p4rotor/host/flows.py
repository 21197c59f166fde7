"""Short flows over the kernel's TCP (``python -m p4rotor.host.flows``), one process per host.

The low-latency half of an FCT run ([Gao20 §5.4] method; Opera's split, [McGuinness21 §2.6]: flows
below a cutoff ride the expander's multi-hop paths at once).  The process

* serves: accepts TCP connections on ``--port``; each carries one flow: a 16-byte header
  (flow id, size: two big-endian u64) then ``size`` bytes.  When the last byte is in, it writes one
  JSON line ``{"id", "bytes", "first_ns", "rx_ns", "done_ns", "retrans"}`` to ``--rx-log`` and
  answers one byte.  ``rx_ns``: when the last of the bytes reached this host (the kernel's
  receive stamp of its segment, SO_TIMESTAMPNS); ``done_ns``: when this process read it, later by
  however long it waited for a CPU (0.05-0.8 ms on the fct fabric, docs/notes/tcp-flow-timing.md);
* sends: for each of its flows (``--flows``: a JSON list of ``{"id", "dst", "size", "start_ns"}``),
  at ``start_ns`` it opens a connection with the DSCP set (``--dscp``, default 46: the
  low-latency class), sends the header and the bytes, waits for the answer and writes one JSON
  line ``{"id", "start_ns", "issued_ns", "sent_ns", "ack_ns", "error", "retrans"}`` to ``--tx-log``.

``retrans``: the segments this side's kernel sent again (``tcpi_total_retrans`` of TCP_INFO: the
sender's SYN and data, the receiver's SYN-ACK), read when the flow is done; ``dsack`` (sender only):
how many of them the receiver reported as duplicates (``tcpi_dsack_dups``: it had the first copy),
read after the receiver's FIN: a sender that resent half-closes after the answer, the receiver
closes only after the sender's FIN, so every duplicate's DSACK is in by then.  (Read on the
answer, half of the resends at Web Search 5 % were duplicates the receivers reported later.)  A tail-loss probe resends
the last segment after ~2 round trips whether or not it was lost, and Opera moves a flow to a
longer path mid-flow, so ``retrans`` alone over-counts: ``retrans - dsack`` are the segments the
fabric lost (or held past a timeout) -- a loss costs a flow 0.2-1 s, then it completes, so a run
counts them, not only the flows that never finished.

Both directions carry the DSCP: the listening socket has it too, so the SYN-ACK, the ACKs and the
answer ride the flow's class (an unmarked reverse path rode the bulk class and lost SYN-ACKs).

Primers (``--primer-us``, with ``--primer-log``): ``primer_us`` before each flow, a one-byte flow
to the same destination whose FCT nobody judges.  On these VMs a sender and receiver that have
done nothing for a while run a flow's software path (the socket, the handshake's wake-up, the
write) ~200 us slower than right after another flow: one-packet flows alone on the Opera fabric,
p5 548 us 30 ms after the last flow, 343 us 2 ms after a primer (docs/notes/flow-primers.md).
Under load the hosts are warm by other work and a flow is faster than alone cold, so an ideal
measured cold is not a lower bound.  A primer before every flow, in the calibration and the run
alike, puts both in the warm state whatever the load.  Its id is the flow's with ``PRIMER_BIT``
set; both ends log it to the primer log (``"side": "tx"/"rx"``), never to the flow logs.

FCT = the receiver's ``rx_ns`` (:func:`arrival_ns`) - ``issued_ns`` (every host shares the
machine's clock): from the moment the sender really began the flow, at or after ``start_ns``, to
the moment its last byte reached the receiver -- neither process's wait for a CPU counts, as
the fabric did not cause it ([Gao20 §5.4]: the FCT of a flow in the network).  A flow
with an error or no ``done_ns`` is unfinished, never dropped silently.  The process stops at
``--end-ns`` (or SIGTERM), closing the logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import struct
import sys
import time
from pathlib import Path

PORT = 9988
HEADER = struct.Struct("!QQ")
CHUNK = 64 * 1024
CLOSE_WAIT_S = 5.0  # how long either end waits for the other's FIN (DSACKs come before it)
_ZEROS = bytes(CHUNK)
PRIMER_BIT = 1 << 62  # a primer's id: its flow's with this bit set (ids are u64 on the wire)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; absent from Python's socket module
_STAMP = struct.Struct("qq")  # struct timespec
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux; absent from older Pythons
# Byte offsets of u32 fields of Linux's struct tcp_info (include/uapi/linux/tcp.h).
_TCPI_RTT, _TCPI_TOTAL_RETRANS, _TCPI_DSACK_DUPS = 68, 100, 216



async def _recv_stamped(sock: socket.socket, n: int) -> tuple[bytes, int | None]:
    """Up to ``n`` bytes from a non-blocking TCP socket with SO_TIMESTAMPNS on, and the kernel's
    receive stamp of the last segment they came from (None if the kernel gave none)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            data, anc, _, _ = sock.recvmsg(n, socket.CMSG_SPACE(_STAMP.size))
        except (BlockingIOError, InterruptedError):
            ready = loop.create_future()
            loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(sock.fileno())
            continue
        stamp = None
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _STAMP.size:
                sec, ns = _STAMP.unpack(raw[:_STAMP.size])
                stamp = sec * 1_000_000_000 + ns
        return data, stamp


def tcp_info(sock: socket.socket | None) -> dict:
    """``retrans`` (segments ``sock``'s connection sent again, SYN / SYN-ACK included), ``dsack``
    (of those, reported back as duplicates; None on kernels before 5.3) and ``rtt_us``; {} if
    unknown."""
    try:
        if sock is None:
            return {}
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return {}
    if len(info) < _TCPI_TOTAL_RETRANS + 4:
        return {}
    out = {"retrans": struct.unpack_from("I", info, _TCPI_TOTAL_RETRANS)[0],
           "rtt_us": struct.unpack_from("I", info, _TCPI_RTT)[0], "dsack": None}
    if len(info) >= _TCPI_DSACK_DUPS + 4:
        out["dsack"] = struct.unpack_from("I", info, _TCPI_DSACK_DUPS)[0]
    return out


def total_retrans(sock: socket.socket | None) -> int | None:
    """The segments ``sock``'s connection retransmitted (SYN / SYN-ACK included), None if unknown."""
    return tcp_info(sock).get("retrans")


class Flows:
    def __init__(self, flows: list[dict], *, port: int = PORT, dscp: int = 46, rx_log: Path, tx_log: Path,
                 end_ns: int, connect_timeout: float = 10.0, pace_Bps: int = 0, primer_ns: int = 0,
                 primer_log: Path | None = None):
        if primer_ns and primer_log is None:
            raise ValueError("primers need a primer log")
        self.flows = sorted(flows, key=lambda f: f["start_ns"])
        self.port, self.dscp, self.end_ns = port, dscp, end_ns
        self.pace_Bps = pace_Bps  # a sender's most bytes/s (SO_MAX_PACING_RATE; 0: the kernel's own)
        self.connect_timeout = connect_timeout
        self.rx = open(rx_log, "w", buffering=1)
        self.tx = open(tx_log, "w", buffering=1)
        self.primer_ns = primer_ns
        # Every end logs its primers here, sent or received (a receiver may get them unasked).
        self.primers = open(primer_log, "w", buffering=1) if primer_log is not None else None
        self.tasks: set[asyncio.Task] = set()    # senders
        self.serving: set[asyncio.Task] = set()  # accepted connections

    # -- receiver ---------------------------------------------------------------------------
    def listener(self) -> socket.socket:
        """The listening socket, with the flows' DSCP: Linux gives it to the SYN-ACK and to every
        accepted connection, so the receiver's ACKs and its answer ride the same class as the data.
        (Unmarked, they rode the bulk class: a lost SYN-ACK costs TCP's 1 s initial timeout.)"""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.dscp << 2)
        # Receive stamps, here rather than on the accepted socket (which inherits it): a flow's
        # bytes can arrive before this process accepts its connection, and a segment is stamped
        # only if stamping was on when it came in.
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind(("0.0.0.0", self.port))
        sock.listen(512)
        sock.setblocking(False)
        return sock

    async def _serve_one(self, sock: socket.socket) -> None:
        """One accepted connection: its flow in, the line, the answer; read with the kernel's
        receive stamps (:func:`_recv_stamped`), as a stream reader would lose them."""
        loop = asyncio.get_running_loop()
        try:
            sock.setblocking(False)
            head = b""
            while len(head) < HEADER.size:
                chunk, stamp = await _recv_stamped(sock, HEADER.size - len(head))
                if not chunk:
                    raise asyncio.IncompleteReadError(head, HEADER.size)
                head += chunk
            fid, size = HEADER.unpack(head)
            first = time.time_ns()
            left = size
            while left:
                chunk, stamp = await _recv_stamped(sock, min(left, CHUNK))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(chunk)
            done = time.time_ns()
            retrans = total_retrans(sock)
            rec = {"id": fid, "bytes": size, "first_ns": first, "rx_ns": stamp, "done_ns": done, "retrans": retrans}
            if fid & PRIMER_BIT:
                self._primer_line(dict(rec, side="rx"))
            else:
                self.rx.write(json.dumps(rec) + "\n")
            await loop.sock_sendall(sock, b"\x01")
            # Close only after the sender has: a duplicate of a resent segment that reaches us
            # after the answer still gets its DSACK (closed, we would answer it with a RST), and
            # it gets it before our FIN, which the sender waits for.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(loop.sock_recv(sock, 1), CLOSE_WAIT_S)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass  # the sender records the error: the flow is unfinished
        finally:
            sock.close()

    async def _serve(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(listener)
            t = asyncio.create_task(self._serve_one(sock))
            self.serving.add(t)
            t.add_done_callback(self.serving.discard)

    def _primer_line(self, rec: dict) -> None:
        if self.primers is not None:
            self.primers.write(json.dumps(rec) + "\n")
        # else: a primer from a sender that has a primer log, to a receiver without one -- a
        # receiver of the same run always has one (experiments/fct/hosts.py)

    # -- sender -----------------------------------------------------------------------------
    async def _send_one(self, f: dict, after: asyncio.Task | None = None) -> None:
        if after is not None:
            # Its primer first: a timer late by more than ``primer_ns`` (a busy machine) would
            # send both at once, the flow cold and behind its primer.  Its start then is later
            # (``start_lag``, reported), its FCT counts from ``issued_ns`` as always.
            await asyncio.wait({after}, timeout=self.connect_timeout)
        # issued_ns: when the flow really began here (this process's timer fires late on a busy
        # machine); its FCT counts from then, and the lag is reported (experiments/fct.py).
        rec = {"id": f["id"], "start_ns": f["start_ns"], "issued_ns": time.time_ns(), "sent_ns": None,
               "ack_ns": None, "error": None, "retrans": None, "dsack": None}
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.dscp << 2)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.pace_Bps:
                sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, self.pace_Bps)
            sock.setblocking(False)
            await asyncio.wait_for(loop.sock_connect(sock, (f["dst"], self.port)), self.connect_timeout)
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.write(HEADER.pack(f["id"], f["size"]))
            left = f["size"]
            while left:
                n = min(left, CHUNK)
                writer.write(_ZEROS[:n])
                await writer.drain()
                left -= n
            rec["sent_ns"] = time.time_ns()
            await reader.readexactly(1)
            rec["ack_ns"] = time.time_ns()
            if tcp_info(sock).get("retrans"):
                # Resent segments: their duplicates may still be on the way (or in this host's
                # queue), and a duplicate's DSACK comes back only once it arrives.  Our FIN leaves
                # behind them and the receiver closes only after it (``_serve_one``), so its FIN
                # comes after every DSACK: read TCP_INFO then.  (Nothing resent: nothing to wait for.)
                writer.write_eof()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)
            info = tcp_info(sock)
            rec["retrans"], rec["dsack"] = info.get("retrans"), info.get("dsack")
            writer.close()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError) as ex:
            rec["error"] = type(ex).__name__
            rec["retrans"] = total_retrans(sock)
            sock.close()
        except asyncio.CancelledError:
            if rec["ack_ns"] is None:
                rec["error"] = "stopped"
            else:  # stopped while waiting for the DSACKs: the flow itself is done
                info = tcp_info(sock)
                rec["retrans"], rec["dsack"] = info.get("retrans"), info.get("dsack")
            sock.close()
        if f["id"] & PRIMER_BIT:
            self._primer_line(dict(rec, side="tx"))
        else:
            self.tx.write(json.dumps(rec) + "\n")

    def _events(self) -> list[tuple[int, dict]]:
        """(start ns, flow) for each flow and, ``primer_ns`` before it, its primer: by start."""
        ev = [(f["start_ns"], 1, f) for f in self.flows]
        if self.primer_ns:
            ev += [(f["start_ns"] - self.primer_ns, 0, {"id": f["id"] | PRIMER_BIT, "dst": f["dst"], "size": 1,
                                                        "start_ns": f["start_ns"] - self.primer_ns})
                   for f in self.flows]
        return [(t, f) for t, _, f in sorted(ev, key=lambda e: (e[0], e[1]))]

    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        listener = self.listener()
        server = asyncio.create_task(self._serve(listener))
        primers: dict[int, asyncio.Task] = {}  # by primer id, until its flow starts
        try:
            for start, f in self._events():
                if stop.is_set() or start >= self.end_ns:
                    break
                delay = (start - time.time_ns()) / 1e9
                if delay > 0:
                    try:
                        await asyncio.wait_for(stop.wait(), delay)
                        break
                    except asyncio.TimeoutError:
                        pass
                t = asyncio.create_task(self._send_one(f, primers.pop(f["id"] | PRIMER_BIT, None)))
                if f["id"] & PRIMER_BIT:
                    primers[f["id"]] = t
                self.tasks.add(t)
                t.add_done_callback(self.tasks.discard)
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, (self.end_ns - time.time_ns()) / 1e9))
            except asyncio.TimeoutError:
                pass
        finally:
            for t in list(self.tasks):
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            for t in [server, *self.serving]:
                t.cancel()
            await asyncio.gather(server, *self.serving, return_exceptions=True)
            listener.close()
            self.rx.close()
            self.tx.close()
            if self.primers is not None:
                self.primers.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="p4rotor.host.flows", description=__doc__.splitlines()[0])
    p.add_argument("--flows", required=True, help="JSON file: this host's flows [{id, dst, size, start_ns}]")
    p.add_argument("--port", type=int, default=PORT)
    p.add_argument("--dscp", type=int, default=46)
    p.add_argument("--rx-log", required=True)
    p.add_argument("--tx-log", required=True)
    p.add_argument("--end-ns", type=int, required=True)
    p.add_argument("--pace-bps", type=float, default=0.0,
                   help="send no flow faster than this many bits/s of IP packets (0: no cap)")
    p.add_argument("--primer-us", type=float, default=0.0,
                   help="this long before each flow, a one-byte primer flow to the same host (0: none)")
    p.add_argument("--primer-log", help="JSON lines: the primers this host sent and received")
    a = p.parse_args(argv)
    flows = json.loads(Path(a.flows).read_text())
    runner = Flows(flows, port=a.port, dscp=a.dscp, rx_log=Path(a.rx_log), tx_log=Path(a.tx_log),
                   end_ns=a.end_ns, pace_Bps=int(a.pace_bps / 8), primer_ns=int(a.primer_us * 1000),
                   primer_log=Path(a.primer_log) if a.primer_log else None)

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await runner.run(stop)

    asyncio.run(go())
    return 0


if __name__ == "__main__":
    sys.exit(main())
