"""The compiled per-frame data path of a RotorLB host agent (``rlbd``, control-plane/native/rlbd.c)
as a Python value: start it, tell it what to do with frames, read what it counted.

The agent (host/fast_agent.py) decides per slot; rlbd does per frame.  They talk over a
SOCK_SEQPACKET socket pair, one little-endian struct per message (the layouts are rlbd.c's
header comment).  Requests that need an answer wait for it; the events rlbd sends unasked (a
window ended) go to ``on_window_done``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import struct
import subprocess
from pathlib import Path
from typing import Callable

from .. import cliutil

ADD_LOCAL, STATE, WIN_OPEN, WIN_ADD, STATS, LINK, STOP, ADD_STREAM, DROP_FLOW = 1, 2, 3, 4, 5, 6, 7, 8, 9
WIN_ADD_FLOW = 11
STATS_FINAL = 10  # STATS with the bulk gaps still missing frames (a scan as long as the gaps: once, at the end)
WIN_DONE, DELIVER, REPLY, READY = 100, 101, 200, 300
STREAM_MAX = 60_000  # bytes per ADD_STREAM message (rlbd splits them into frames)
# WIN_ADD kinds: relayed frames for the window's peer (second hop); own frames to the peer;
# own frames for a third rack, to the peer as their relay (first hop).
RELAYED, DIRECT, RELAY_FIRST = 0, 1, 2
REPLY_TIMEOUT_S = 10.0


class DataPathError(RuntimeError):
    pass


def binary() -> Path:
    """rlbd: $P4ROTOR_RLBD, else the checkout's build/rlbd (``make deps`` builds it), else PATH."""
    env = os.environ.get("P4ROTOR_RLBD")
    if env:
        return Path(env)
    for p in cliutil.built("rlbd"):
        if p.is_file():
            return p
    found = shutil.which("rlbd")
    if found:
        return Path(found)
    raise DataPathError("rlbd not found: run `make deps` (it builds build/rlbd) or set P4ROTOR_RLBD")


def missing() -> str | None:
    """Why rlbd cannot run here (tests skip, benchmarks leave it out, naming this), else None."""
    try:
        binary()
    except DataPathError as ex:
        return str(ex)
    return None


class DataPath:
    def __init__(self, rack: int, racks: int, frame: int, peers: dict[int, tuple[str, int]], *,
                 bind: str = "0.0.0.0", port: int, tos: int, measure: tuple[int, int] = (0, 0),
                 retransmit_ns: int = 0, ack_direct: bool = False, ll_tos: int = 0, lose_every: int = 0,
                 spin_ns: int | None = None, resend_streams_only: bool = False):
        """``retransmit_ns``: resend own frames not acknowledged this long after they left (0:
        never, and owe no ACKs); ACKs go over the direct circuit (``ack_direct``) or at once in
        the ``ll_tos`` class.  ``lose_every``: tests only, every n-th data frame is not sent (a
        frame the fabric lost; counted as injected_loss).  ``spin_ns``: stay awake this long before
        each frame is due (None: a quarter of a frame time, at most 60 us; a host with a core of its
        own can afford more: what a sleep's late wake-up costs at 100 000 frames/s; 0: never --
        many agents on few cores, where one agent's spin is another's missed window).
        ``resend_streams_only``: with ``retransmit_ns``, only stream frames are resent; a bulk frame
        is sent once (delivered at most once, even by a restarted receiver; a lost one is lost)."""
        self.args = ["--rack", str(rack), "--racks", str(racks), "--frame", str(frame), "--bind", bind,
                     "--port", str(port), "--tos", str(tos), "--measure", f"{measure[0]},{measure[1]}"]
        if retransmit_ns:
            self.args += ["--retransmit-ns", str(retransmit_ns), "--ll-tos", str(ll_tos)]
            if ack_direct:
                self.args.append("--ack-direct")
            if resend_streams_only:
                self.args.append("--resend-streams-only")
        if spin_ns is not None:
            self.args += ["--spin-ns", str(spin_ns)]
        if lose_every:
            self.args += ["--lose-every", str(lose_every)]
        for r, (ip, p) in sorted(peers.items()):
            self.args += ["--peer", f"{r}={ip}:{p}"]
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.on_window_done: Callable[[int, int, int], None] = lambda win, sent, returned: None
        # a stream's bytes, in order: (origin rack, flow, bytes, the stream ended)
        self.on_deliver: Callable[[int, int, bytes, bool], None] = lambda origin, flow, data, fin: None
        self._req = 0
        # Replies read by a call other than their own: an event handled while a call waits may
        # make a call of its own (a restarted peer's announcement resets connections: drop_flow),
        # which then reads the outer call's reply first.
        self._replies: dict[int, bytes] = {}

    def start(self, timeout_s: float = 10.0) -> None:
        """Start rlbd; returns once its socket is bound (or raises with what it said)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([str(binary()), "--ctl", str(theirs.fileno()), *self.args],
                                     pass_fds=[theirs.fileno()], stderr=subprocess.PIPE)
        theirs.close()
        self.sock = mine
        mine.settimeout(timeout_s)
        try:
            msg = mine.recv(64)
        except socket.timeout:
            msg = b""
        if msg[:4] != struct.pack("<I", READY):
            self.proc.kill()
            err = self.proc.communicate()[1].decode(errors="replace").strip()
            raise DataPathError(f"rlbd did not start: {err or 'no answer'}")
        # Non-blocking: the event loop drains events (``pump``) without waiting, and a request
        # waits for its reply with select (a socket timeout would make every recv wait it out).
        mine.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- messages --------------------------------------------------------------------------------
    def _send(self, op: int, payload: bytes = b"") -> int:
        self._req += 1
        msg = struct.pack("<BBHI", op, 0, 0, self._req) + payload
        while True:
            try:
                self.sock.send(msg)
                return self._req
            except BlockingIOError:  # rlbd's end is full: it reads between frames
                if not select.select([], [self.sock], [], REPLY_TIMEOUT_S)[1]:
                    raise DataPathError(f"rlbd took no request for {REPLY_TIMEOUT_S} s") from None

    def _call(self, op: int, payload: bytes = b"") -> bytes:
        req = self._send(op, payload)
        while True:
            if req in self._replies:  # read by a call made while an event was handled
                return self._replies.pop(req)
            if not select.select([self.sock], [], [], REPLY_TIMEOUT_S)[0]:
                raise DataPathError(f"rlbd did not answer request {op} in {REPLY_TIMEOUT_S} s")
            msg = self.sock.recv(1 << 21)
            if not msg:
                raise DataPathError("rlbd ended")
            if self._dispatch(msg) is None:
                (got,) = struct.unpack_from("<I", msg, 4)
                if got == req:
                    return msg[8:]
                self._replies[got] = msg[8:]  # an outer call's: it looks here first

    def _dispatch(self, msg: bytes):
        """An event is handled here (returns True); a reply is returned to the caller (None)."""
        (op,) = struct.unpack_from("<I", msg)
        if op == WIN_DONE:
            self.on_window_done(*struct.unpack_from("<III", msg, 4))
            return True
        if op == DELIVER:
            origin, fin, _, flow, n = struct.unpack_from("<HBBII", msg, 4)
            self.on_deliver(origin, flow, msg[16:16 + n], bool(fin))
            return True
        return None

    def pump(self) -> None:
        """Handle the events waiting (the event loop calls this when the socket is readable)."""
        while True:
            try:
                msg = self.sock.recv(1 << 21, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            if not msg:
                return
            self._dispatch(msg)

    def add_local(self, dst: int, flow: int, frames: int) -> None:
        self._send(ADD_LOCAL, struct.pack("<HHII", dst, 0, flow, frames))

    def add_stream(self, dst: int, flow: int, data: bytes, fin: bool = False) -> tuple[int, int]:
        """Bytes of stream ``flow`` for rack ``dst`` (``fin``: its last): rlbd cuts them into frames,
        numbered on from the stream's last.  Returns the frames now queued for ``dst`` (the
        caller's back-pressure) and the stream's next sequence number (one past these frames)."""
        queued = next_seq = 0
        for i in range(0, max(1, len(data)), STREAM_MAX):
            part = data[i:i + STREAM_MAX]
            last = fin and i + STREAM_MAX >= len(data)
            queued, next_seq = struct.unpack(
                "<II", self._call(ADD_STREAM, struct.pack("<HBBI", dst, last, 0, flow) + part))
        return queued, next_seq

    def drop_flow(self, dst: int, flow: int) -> int:
        """Forget stream ``flow``'s frames for rack ``dst`` (its connection was reset): those queued
        are dropped, those sent and unacknowledged never resent.  Returns how many."""
        return struct.unpack("<I", self._call(DROP_FLOW, struct.pack("<HHI", dst, 0, flow)))[0]

    def state(self) -> tuple[dict[int, int], list[tuple[int, int, int, int]]]:
        """Own frames per destination, and the relayed frames as (dst, origin, accepted slot, frames)
        chunks in each destination's order."""
        b = self._call(STATE)
        (n,) = struct.unpack_from("<I", b)
        local = {d: fr for d, _, fr in struct.iter_unpack("<HHI", b[4:4 + 8 * n])}
        off = 4 + 8 * n
        (m,) = struct.unpack_from("<I", b, off)
        chunks = list(struct.iter_unpack("<HHII", b[off + 4:off + 4 + 12 * m]))
        return local, chunks

    def win_open(self, win: int, rotor: int, peer: int, slot: int, end_ns: int, gap_ns: int) -> None:
        self._send(WIN_OPEN, struct.pack("<IHHIIQQ", win, rotor, peer, slot, 0, end_ns, gap_ns))

    def win_add(self, win: int, kind: int, dst: int, frames: int) -> int:
        """Move ``frames`` into window ``win`` (fewer if its queue has fewer); returns how many."""
        if frames <= 0:
            return 0
        return struct.unpack("<I", self._call(WIN_ADD, struct.pack("<IBBHI", win, kind, 0, dst, frames)))[0]

    def win_add_flow(self, win: int, kind: int, dst: int, flow: int, below: int, most: int) -> tuple[int, int]:
        """Up to ``most`` own frames of ``flow`` for rack ``dst`` numbered below ``below`` into window
        ``win``, ahead of its unsent frames (kind DIRECT or RELAY_FIRST).  Returns how many moved,
        and how many of that flow's frames below ``below`` are still queued."""
        msg = struct.pack("<IBBHIII", win, kind, 0, dst, flow, below, most)
        moved, left = struct.unpack("<II", self._call(WIN_ADD_FLOW, msg))
        return moved, left

    def link(self, gap_ns: int) -> None:
        self._send(LINK, struct.pack("<Q", gap_ns))

    def stats(self, path: Path, final: bool = False) -> dict:
        if not struct.unpack("<I", self._call(STATS_FINAL if final else STATS, str(path).encode() + b"\0"))[0]:
            raise DataPathError(f"rlbd could not write {path}")
        return json.loads(Path(path).read_text())

    def stop(self) -> str:
        """End rlbd; returns what it wrote on stderr."""
        if self.proc is None:
            return ""
        try:
            self._send(STOP)
        except OSError:
            pass
        try:
            _, err = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.sock.close()
        self.proc = None
        return err.decode(errors="replace")
