"""Two-way time probes on the data path: the switch's clock port (docs/dataplane.md, "Clock port").

A PacketOut time probe crosses gRPC and PI on its way into the switch and back, and
the two directions are not alike (on BMv2 the way in is slower by ~100 us), so the
midpoint of its round trip is biased.  A clock-port probe never leaves the data path:

* t1: the host kernel's send stamp (``SO_TIMESTAMPING``, software TX);
* T2, T3: the switch's ingress and egress timestamps, written into the probe by the
  pipeline, which sends it back out of the clock port;
* t4: the host kernel's receive stamp (``SO_TIMESTAMPNS``).

With ``common = local + offset``: ``t1 <= T2 + offset`` and ``T3 + offset <= t4``.  Every
probe bounds the offset from both sides, with no symmetry assumed; over a few probes
(sent in bursts, so some find BMv2's receive thread awake) the tightest bounds bracket
it to within BMv2's receive and transmit latency floors.
"""

from __future__ import annotations

import dataclasses
import math
import select
import socket
import struct
import time
from typing import Iterable

from .. import p4 as dp

# <linux/net_tstamp.h>, <asm-generic/socket.h>
SO_TIMESTAMPING = 37
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
PACKET_OUTGOING = 4

PROBE_DST = bytes.fromhex("027034726f74")  # locally administered: "p4rot"
PROBE_SRC = bytes.fromhex("027034726f01")
_PROBE = struct.Struct("!I6s6s")  # clock_probe_t: seq, t_ingress, t_egress
BURST = 8       # probes sent back to back
QUORUM = 4      # the spread of the 4 best bounds says whether the floors were met


class ClockPortError(OSError):
    pass


def probe_frame(seq: int, t_ingress: int = 0, t_egress: int = 0) -> bytes:
    """Ethernet + clock_probe_t (p4src/shared/headers.p4), padded to the 60-byte minimum."""
    f = (PROBE_DST + PROBE_SRC + struct.pack("!H", dp.ETHERTYPE_CLOCK_PROBE)
         + _PROBE.pack(seq & 0xFFFFFFFF, t_ingress.to_bytes(6, "big"), t_egress.to_bytes(6, "big")))
    return f + b"\0" * (60 - len(f))


def parse_probe(frame: bytes) -> tuple[int, int, int] | None:
    """(seq, T2, T3) of a reflected probe, or None if it is not one."""
    if len(frame) < 14 + _PROBE.size or frame[12:14] != struct.pack("!H", dp.ETHERTYPE_CLOCK_PROBE):
        return None
    seq, t2, t3 = _PROBE.unpack_from(frame, 14)
    return seq, int.from_bytes(t2, "big"), int.from_bytes(t3, "big")


@dataclasses.dataclass(frozen=True)
class Sample:
    t1_ns: int   # host: sent (kernel stamp)
    t2_us: int   # switch: ingress
    t3_us: int   # switch: egress
    t4_ns: int   # host: received (kernel stamp)


@dataclasses.dataclass(frozen=True)
class Bracket:
    low_us: float    # the offset is at least this (from t1 <= T2 + offset)
    high_us: float   # ... and at most this (from T3 + offset <= t4)
    spread_us: float  # how far the QUORUM-th best bounds are from the best (both sides, larger)
    probes: int

    @property
    def offset_us(self) -> int:
        return math.floor((self.low_us + self.high_us) / 2 + 0.5)

    @property
    def half_width_us(self) -> float:
        """The most the offset can be off: half the bracket."""
        return (self.high_us - self.low_us) / 2


def bracket(samples: Iterable[Sample], ref_ns: int, quorum: int = QUORUM) -> Bracket:
    """The offset bracket from probes (common time = (wall ns - ref_ns) / 1000 us).

    The switch's timestamps are whole microseconds, truncated: a bound can be off by
    up to 1 us, so a bracket narrower than that (low > high) is widened to 1 us.
    """
    lows, highs = [], []
    for s in samples:
        lows.append((s.t1_ns - ref_ns) / 1000 - s.t2_us)
        highs.append((s.t4_ns - ref_ns) / 1000 - s.t3_us)
    if not lows:
        raise ValueError("no clock-port probe came back")
    lows.sort(reverse=True)
    highs.sort()
    lo, hi = lows[0], highs[0]
    if hi - lo < -1.5:
        raise ValueError(f"clock-port probes disagree: offset >= {lo:.1f} us but <= {hi:.1f} us "
                         f"(is the switch's clock stepping?)")
    if hi < lo + 1:
        mid = (lo + hi) / 2
        lo, hi = mid - 0.5, mid + 0.5
    q = min(quorum, len(lows)) - 1
    spread = max(lows[0] - lows[q], highs[q] - highs[0])
    return Bracket(lo, hi, spread, len(lows))


class ClockPort:
    """A host interface wired to a switch's clock port: sends probes, collects the reflections."""

    def __init__(self, iface: str):
        self.iface = iface
        try:
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # send only
            self.tx.bind((iface, 0))
            # Protocol 0 at creation, the probe's at bind: a socket opened with its protocol hears
            # that protocol on every interface until bind narrows it, and with several switches'
            # clock ports probed at once another switch's reflection (the same sequence numbers)
            # would be read as this one's.
            self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self.rx.bind((iface, dp.ETHERTYPE_CLOCK_PROBE))  # CPython byte-swaps this one itself
            self.rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError as ex:
            raise ClockPortError(f"clock port interface {iface!r}: {ex.strerror or ex}") from None
        self.kernel_stamps = True
        try:
            self.tx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                               SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
                               | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY)
        except OSError:
            self.kernel_stamps = False  # fall back to the time just before send(): a looser low bound

    def _tx_stamp(self, before: int, wait_s: float = 0.005) -> int:
        if not self.kernel_stamps:
            return before
        deadline = time.monotonic() + wait_s
        while True:
            try:
                _, anc, _, _ = self.tx.recvmsg(64, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return before
                select.select([self.tx], [], [], left)
                continue
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
                    sec, nsec = struct.unpack_from("qq", data, 0)
                    if sec or nsec:
                        return sec * 1_000_000_000 + nsec
            return before

    def send(self, seq: int) -> int:
        """Send probe ``seq``; wall-clock ns at which it left (kernel stamp when available)."""
        before = time.time_ns()
        self.tx.send(probe_frame(seq))
        return self._tx_stamp(before)

    def collect(self, want: set[int], timeout_s: float = 0.5) -> dict[int, tuple[int, int, int]]:
        """Reflections of the probes in ``want``: seq -> (T2, T3, t4 ns)."""
        got: dict[int, tuple[int, int, int]] = {}
        deadline = time.monotonic() + timeout_s
        while want - got.keys():
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rx], [], [], left)[0]:
                break
            data, anc, _, addr = self.rx.recvmsg(2048, 256)
            if addr[2] == PACKET_OUTGOING or addr[0] != self.iface:
                continue
            p = parse_probe(data)
            if p is None or p[0] not in want:
                continue
            t4 = time.time_ns()
            for level, kind, val in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack_from("qq", val, 0)
                    t4 = sec * 1_000_000_000 + nsec
            got[p[0]] = (p[1], p[2], t4)
        return got

    def measure(self, n: int = 32, first_seq: int = 0, burst: int = BURST) -> list[Sample]:
        """``n`` probes in bursts of ``burst``; the samples that came back."""
        out: list[Sample] = []
        seq = first_seq
        while seq < first_seq + n:
            sent = {}
            for _ in range(min(burst, first_seq + n - seq)):
                sent[seq & 0xFFFFFFFF] = self.send(seq)
                seq += 1
            for s, (t2, t3, t4) in self.collect(set(sent)).items():
                out.append(Sample(sent[s], t2, t3, t4))
            time.sleep(0.002)
        return out

    def close(self) -> None:
        self.tx.close()
        self.rx.close()

    def __enter__(self) -> "ClockPort":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


