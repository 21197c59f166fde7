"""UDP probes between emulated hosts (run inside a Mininet host: ``python -m p4rotor.probe``).

Each probe carries (src host index, seq, send wall ns); the receiver logs (recv wall ns, src,
seq, send ns) as JSON lines.  Sending can be gated on the schedule: a destination rack is only
sent to while a direct circuit to it is live and more than ``guard`` from its end (TDMA-style
host gating, seed 002 / seed 000 §2.2.1).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time

PORT = 9999
_P = struct.Struct("!IIQ")


def receiver(out_path: str, stop: threading.Event, port: int = PORT) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.1)
    with open(out_path, "w") as f:
        while not stop.is_set():
            try:
                data, addr = s.recvfrom(65535)
            except socket.timeout:
                continue
            now = time.time_ns()
            if len(data) >= _P.size:
                src, seq, sent = _P.unpack_from(data)
                f.write(f'{{"rx": {now}, "src": {src}, "seq": {seq}, "tx": {sent}, "len": {len(data)}}}\n')


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="p4rotor.probe")
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
    p.add_argument("--gate", help="JSON: {\"t0_ns\":…, \"slot_ns\":…, \"open\": [[rack, [[a,b],…]],…]} windows mod period")
    a = p.parse_args(argv)
    stop = threading.Event()
    rt = None
    if a.rx:
        rt = threading.Thread(target=receiver, args=(a.rx, stop), daemon=True)
        rt.start()
    sent_log = open(a.tx, "w") if a.tx else None
    if a.dst:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, a.dscp << 2)
        gate = json.loads(a.gate) if a.gate else None
        start = a.start_ns or time.time_ns()
        while time.time_ns() < start:
            time.sleep(min(0.01, max(0, (start - time.time_ns()) / 1e9)))
        gap = 1.0 / a.rate
        n = int(a.duration * a.rate)
        pad = b"\0" * max(0, a.size - _P.size)
        if a.count:
            _shuffle(a, s, gate, start, gap, n, pad, sent_log)
            n = 0
        for i in range(n):
            target = start + int(i * gap * 1e9)
            while time.time_ns() < target:
                d = (target - time.time_ns()) / 1e9
                if d > 0.002:
                    time.sleep(d - 0.001)
            dst = a.dst[i % len(a.dst)]
            now = time.time_ns()
            if gate and not _open(gate, dst, now):
                continue
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


def _open(gate: dict, dst: str, now: int) -> bool:
    windows = gate["open"].get(dst)
    if windows is None:
        return True
    phase = (now - gate["t0_ns"]) % gate["period_ns"]
    return any(a <= phase < b for a, b in windows)


if __name__ == "__main__":
    sys.exit(main())
