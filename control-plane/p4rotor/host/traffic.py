"""Probe traffic through a switch: paced raw-socket senders, timestamping receivers.

Each probe frame is a 64-byte Ethernet frame (ethertype 0x88B5, local experimental)
carrying a magic, the sender's port, a sequence number and the wall-clock send
time.  Receivers take the kernel's receive timestamp (SO_TIMESTAMPNS), so the
analysis knows when every frame was sent and when (and on which port) it came out.
Runs inside the namespace that holds the switch's veth peers.
"""

from __future__ import annotations

import dataclasses
import select
import socket
import struct
import threading
import time
from typing import Sequence

ETH_P_ALL = 0x0003
ETHERTYPE = 0x88B5
MAGIC = b"P4RT"
PACKET_OUTGOING = 4
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_HDR = struct.Struct("!4sHQQ")  # magic, in_port, seq, send_ns
FRAME_LEN = 64


@dataclasses.dataclass(frozen=True)
class Rx:
    rx_ns: int
    out_port: int
    in_port: int
    seq: int
    send_ns: int


def make_frame(in_port: int, seq: int, send_ns: int) -> bytes:
    eth = bytes.fromhex("020000000000") + bytes([2, 0, 0, 0, 0, in_port & 0xFF]) + struct.pack("!H", ETHERTYPE)
    body = _HDR.pack(MAGIC, in_port, seq, send_ns)
    return (eth + body).ljust(FRAME_LEN, b"\0")


def parse_frame(data: bytes) -> tuple[int, int, int] | None:
    if len(data) < 14 + _HDR.size or data[12:14] != struct.pack("!H", ETHERTYPE):
        return None
    magic, in_port, seq, send_ns = _HDR.unpack_from(data, 14)
    if magic != MAGIC:
        return None
    return in_port, seq, send_ns


def open_socket(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    return s


class Receiver:
    """Collects probe frames arriving on the given interfaces ({port: ifname})."""

    def __init__(self, ifaces: dict[int, str]):
        self.socks = {open_socket(ifc): port for port, ifc in ifaces.items()}
        self.rx: list[Rx] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Receiver":
        self._t.start()
        return self

    def _run(self) -> None:
        socks = list(self.socks)
        while not self._stop.is_set():
            ready, _, _ = select.select(socks, [], [], 0.05)
            for s in ready:
                while True:
                    try:
                        data, anc, _flags, addr = s.recvmsg(2048, 256, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    p = parse_frame(data)
                    if p is None:
                        continue
                    rx_ns = time.time_ns()
                    for level, typ, val in anc:
                        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                            sec, nsec = struct.unpack("qq", val[:16])
                            rx_ns = sec * 1_000_000_000 + nsec
                    self.rx.append(Rx(rx_ns, self.socks[s], p[0], p[1], p[2]))

    def stop(self, drain_s: float = 0.3) -> list[Rx]:
        time.sleep(drain_s)
        self._stop.set()
        self._t.join(2)
        for s in self.socks:
            s.close()
        return self.rx


def receive_until(ifaces: dict[int, str], stop, out_path: str, ready=None) -> None:
    """Run a Receiver until ``stop`` (an Event) is set, in a process of its own so that the
    process driving the switch shares no interpreter lock with it; write the frames to
    ``out_path`` as JSON lines. ``ready`` (an Event) is set once the sockets listen."""
    import json

    rcv = Receiver(ifaces).start()
    if ready is not None:
        ready.set()
    stop.wait()
    rx = rcv.stop(0.0)
    with open(out_path, "w") as f:
        for r in rx:
            f.write(json.dumps(dataclasses.asdict(r)) + "\n")


def load_rx(path: str) -> list[Rx]:
    import json

    with open(path) as f:
        return [Rx(**json.loads(line)) for line in f if line.strip()]


def send_paced(ifaces: dict[int, str], rate_pps: float, duration_s: float, start_ns: int | None = None,
               ports: Sequence[int] | None = None) -> int:
    """Send probes round-robin from ``ports`` at ``rate_pps`` in total; returns frames sent."""
    ports = list(ports or ifaces)
    socks = {p: open_socket(ifaces[p]) for p in ports}
    gap = 1e9 / rate_pps
    t0 = start_ns or time.time_ns()
    n = int(duration_s * rate_pps)
    sent = 0
    try:
        for i in range(n):
            target = t0 + int(i * gap)
            while True:
                now = time.time_ns()
                if now >= target:
                    break
                if target - now > 400_000:  # sleep most of the gap, spin only the end: 2 cores
                    time.sleep((target - now - 250_000) / 1e9)
            p = ports[i % len(ports)]
            socks[p].send(make_frame(p, i, time.time_ns()))
            sent += 1
    finally:
        for s in socks.values():
            s.close()
    return sent


TRAIN_SEQ_BASE = 1 << 40  # train frames' sequence numbers: (train << 16 | frame), above paced ones


def send_trains(ifname: str, in_port: int, boundaries_ns: Sequence[int], before_us: float, after_us: float,
                gap_us: float, warmup_us: float = 100.0) -> int:
    """Around each boundary, a train of frames every ``gap_us`` from ``before_us`` ahead of it
    to ``after_us`` past it (busy-waiting for each send time).  Returns frames sent.

    A warm-up frame goes ``warmup_us`` before the train: the first send after idle takes
    ~20 us longer (the switch's receive thread wakes up) and would open a hole in the train.
    Train ``i``'s frames have seq ``TRAIN_SEQ_BASE + (i << 16) + j`` (j = 0: the warm-up).
    """
    s = open_socket(ifname)
    sent = 0
    n = int((before_us + after_us) / gap_us) + 1
    try:
        for i, b in enumerate(boundaries_ns):
            base = TRAIN_SEQ_BASE + (i << 16)
            frames = [make_frame(in_port, base + j, 0) for j in range(n + 1)]
            t_first = b - int(before_us * 1000)
            times = [t_first - int(warmup_us * 1000)] + [t_first + int(j * gap_us * 1000) for j in range(n)]
            now = time.time_ns()
            if times[0] - now > 4_000_000:
                time.sleep((times[0] - now - 3_000_000) / 1e9)
            if time.time_ns() > times[0]:
                continue  # fell behind (or overslept): skip this boundary, never send a shifted train
            for f, target in zip(frames, times):
                left = target - time.time_ns()
                if left > 400_000:  # long gaps: sleep most of it, spin only the end (2 cores)
                    time.sleep((left - 250_000) / 1e9)
                while time.time_ns() < target:
                    pass
                s.send(f)
                sent += 1
    finally:
        s.close()
    return sent


def blast(ifname: str, in_port: int, count: int) -> float:
    """Send ``count`` frames as fast as possible; returns seconds taken."""
    s = open_socket(ifname)
    frames = [make_frame(in_port, i, 0) for i in range(256)]
    t = time.perf_counter()
    try:
        for i in range(count):
            while True:
                try:
                    s.send(frames[i & 255])
                    break
                except BlockingIOError:
                    time.sleep(0.0001)
    finally:
        s.close()
    return time.perf_counter() - t


