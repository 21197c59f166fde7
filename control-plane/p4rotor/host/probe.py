"""UDP probes between emulated hosts (run inside a Mininet host: ``python -m p4rotor.probe``).

Each probe carries (src host index, seq, send wall ns); the receiver logs (recv wall ns, src,
seq, send ns) as JSON lines.  Sending can be gated on the schedule: a destination rack is only
sent to while a direct circuit to it is live and more than ``guard`` from its end (TDMA-style
host gating, [TDMA12] / [McGuinness21 §2.2.1]).

Many hosts start together: with ``--ready`` and ``--go`` a probe reports once its receiver is
bound and waits for the start time to be written into the go file, so the caller starts sending
only after every receiver is listening (Python start-up of 64+ processes on 2 cores takes seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time

PORT = 9999
_P = struct.Struct("!IIQ")


# The kernel's receive time of each datagram (struct timespec, CLOCK_REALTIME), not the time this
# process got to it: the sender's busy wait holds the GIL for up to sys.getswitchinterval() (5 ms),
# which would make a probe look as if it arrived in a later slice than it did.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TS = struct.Struct("@qq")


def bind_receiver(port: int = PORT) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.1)
    return s


def kernel_rx_ns(ancdata) -> int | None:
    """The SCM_TIMESTAMPNS receive time (wall ns) in a recvmsg's ancillary data, if there."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TS.size:
            sec, nsec = _TS.unpack_from(data)
            return sec * 1_000_000_000 + nsec
    return None


def receiver(out_path: str, stop: threading.Event, s: socket.socket) -> None:
    with open(out_path, "w") as f:
        while not stop.is_set():
            try:
                data, anc, _, addr = s.recvmsg(65535, 64)
            except socket.timeout:
                continue
            now = kernel_rx_ns(anc) or time.time_ns()
            if len(data) >= _P.size:
                src, seq, sent = _P.unpack_from(data)
                f.write(f'{{"rx": {now}, "src": {src}, "seq": {seq}, "tx": {sent}, "len": {len(data)}}}\n')


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="p4rotor.host.probe")
    p.add_argument("--me", type=int, required=True, help="this host's index")
    p.add_argument("--dst", action="append", default=[], help="IP to probe (repeat)")
    p.add_argument("--rate", type=float, default=200, help="probes/s in total")
    p.add_argument("--size", type=int, default=64, help="UDP payload bytes")
    p.add_argument("--dscp", type=int, default=0)
    p.add_argument("--start-ns", type=int, default=0, help="wall time to start sending")
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--rx", help="log received probes here")
    p.add_argument("--tx", help="log sent probes here")
    p.add_argument("--linger", type=float, default=1.0, help="keep receiving this long after sending")
    p.add_argument("--count", type=int, default=0,
                   help="shuffle: send this many to every --dst, each only while its gate is open")
    p.add_argument("--gate", help="JSON (or @file with it): {\"t0_ns\":…, \"period_ns\":…, "
                   "\"open\": {dst_ip: [[a, b],…]}}: send to dst only while (now - t0) mod period is in a window; "
                   "each send opportunity goes to the next destination whose gate is open")
    p.add_argument("--ready", help="write this file once the receiver is bound and the sender is set up")
    p.add_argument("--go", help="wait for this file and take the start time (wall ns) from it; "
                   "overrides --start-ns")
    p.add_argument("--go-timeout", type=float, default=300.0, help="give up waiting for --go after this many s")
    a = p.parse_args(argv)
    stop = threading.Event()
    rt = None
    if a.rx:
        rt = threading.Thread(target=receiver, args=(a.rx, stop, bind_receiver()), daemon=True)
        rt.start()
    sent_log = open(a.tx, "w") if a.tx else None
    gate = None
    if a.gate:
        gate = json.loads(open(a.gate[1:]).read() if a.gate.startswith("@") else a.gate)
    if a.dst:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, a.dscp << 2)
    if a.ready:
        tmp = a.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, a.ready)
    if a.go:
        a.start_ns = _wait_go(a.go, a.go_timeout)
    if a.dst:
        start = a.start_ns or time.time_ns()
        while time.time_ns() < start:
            time.sleep(min(0.01, max(0, (start - time.time_ns()) / 1e9)))
        gap = 1.0 / a.rate
        n = int(a.duration * a.rate)
        pad = b"\0" * max(0, a.size - _P.size)
        if a.count:
            _shuffle(a, s, gate, start, gap, n, pad, sent_log)
            n = 0
        nxt = 0  # gated: round-robin position among the destinations
        for i in range(n):
            target = start + int(i * gap * 1e9)
            while time.time_ns() < target:
                d = (target - time.time_ns()) / 1e9
                if d > 0.002:
                    time.sleep(d - 0.001)
            now = time.time_ns()
            if gate:
                k = _next_open(gate, a.dst, nxt, now)
                if k is None:
                    continue
                dst, nxt = a.dst[k], k + 1
            else:
                dst = a.dst[i % len(a.dst)]
            try:
                s.sendto(_P.pack(a.me, i, now) + pad, (dst, PORT))
            except OSError:
                continue
            if sent_log:
                sent_log.write(f'{{"tx": {now}, "dst": "{dst}", "seq": {i}}}\n')
    if sent_log:
        sent_log.close()
    # A receive-only host stays up as long as the senders: until start + duration + linger.
    end = (a.start_ns or time.time_ns()) + int(a.duration * 1e9)
    time.sleep(max(0.0, (end - time.time_ns()) / 1e9) + a.linger)
    stop.set()
    if rt:
        rt.join(2)
    return 0


def _shuffle(a, s, gate, start, gap, n, pad, sent_log) -> None:
    """Every send opportunity goes to a destination whose gate is open and that still needs frames."""
    left = {d: a.count for d in a.dst}
    i = 0
    while any(left.values()) and i < n:
        target = start + int(i * gap * 1e9)
        i += 1
        while time.time_ns() < target:
            d = (target - time.time_ns()) / 1e9
            if d > 0.002:
                time.sleep(d - 0.001)
        now = time.time_ns()
        for dst in a.dst:
            if left[dst] and (not gate or _open(gate, dst, now)):
                try:
                    s.sendto(_P.pack(a.me, i, now) + pad, (dst, PORT))
                except OSError:
                    break
                left[dst] -= 1
                if sent_log:
                    sent_log.write(f'{{"tx": {now}, "dst": "{dst}", "seq": {i}}}\n')
                break


def _wait_go(path: str, timeout: float) -> int:
    """Poll for the go file (written atomically by the caller) and return the start time in it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (FileNotFoundError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"p4rotor.probe: no start time in {path} after {timeout:.0f} s")
        time.sleep(0.01)


def _next_open(gate: dict, dsts: list[str], first: int, now: int) -> int | None:
    """Index of the first destination at or after ``first`` (cyclically) whose gate is open."""
    for d in range(len(dsts)):
        k = (first + d) % len(dsts)
        if _open(gate, dsts[k], now):
            return k
    return None


def _open(gate: dict, dst: str, now: int) -> bool:
    windows = gate["open"].get(dst)
    if windows is None:
        return True
    phase = (now - gate["t0_ns"]) % gate["period_ns"]
    return any(a <= phase < b for a, b in windows)


if __name__ == "__main__":
    sys.exit(main())
