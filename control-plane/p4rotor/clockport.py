"""Time probes on the data path: the switch's clock port (docs/dataplane.md, "Clock port").

A PacketOut time probe crosses gRPC and PI on its way into the switch and back, and
the two directions are not alike (on BMv2 the way in is slower by tens of us), so the
midpoint of the round trip is biased.  A clock-port probe enters the switch through a
data port instead: the kernel stamps the moment the frame leaves the host interface
(``SO_TIMESTAMPING``, software TX), the pipeline stamps the moment it received it, and
only the answer takes the slow path, whose delay does not matter.  The largest
``send - stamp`` over a few probes is the offset, off by the switch's receive-latency
floor alone.
"""

from __future__ import annotations

import math
import select
import socket
import statistics
import struct
import time
from typing import Iterable

from . import dataplane as dp

# <linux/net_tstamp.h>, <asm-generic/socket.h>
SO_TIMESTAMPING = 37
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11

PROBE_DST = bytes.fromhex("027034726f74")  # locally administered: "p4rot"
PROBE_SRC = bytes.fromhex("027034726f01")


class ClockPortError(OSError):
    pass


def probe_frame(seq: int) -> bytes:
    """Ethernet + clock_probe_t (p4src/shared/headers.p4), padded to the 60-byte minimum."""
    f = PROBE_DST + PROBE_SRC + struct.pack("!HI", dp.ETHERTYPE_CLOCK_PROBE, seq & 0xFFFFFFFF)
    return f + b"\0" * (60 - len(f))


class ClockPortSender:
    """Sends probes on a host interface wired to a switch's clock port; returns kernel send times."""

    def __init__(self, iface: str):
        self.iface = iface
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # send only
            self.sock.bind((iface, 0))
        except OSError as ex:
            raise ClockPortError(f"clock port interface {iface!r}: {ex.strerror or ex}") from None
        self.kernel_stamps = True
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                                 SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
                                 | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY)
        except OSError:
            self.kernel_stamps = False  # fall back to the time just before send()

    def send(self, seq: int, wait_s: float = 0.005) -> int:
        """Send probe ``seq``; wall-clock ns at which it left (kernel stamp when available)."""
        before = time.time_ns()
        self.sock.send(probe_frame(seq))
        if not self.kernel_stamps:
            return before
        deadline = time.monotonic() + wait_s
        while True:
            try:
                _, anc, _, _ = self.sock.recvmsg(64, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return before
                select.select([self.sock], [], [], left)
                continue
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
                    sec, nsec = struct.unpack_from("qq", data, 0)
                    if sec or nsec:
                        return sec * 1_000_000_000 + nsec
            return before

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "ClockPortSender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def one_way_offset(samples: Iterable[tuple[int, int]], ref_ns: int) -> tuple[int, float, int]:
    """From (sent wall ns, switch local us) -> (offset us, jitter us, probes).

    The switch stamped each probe ``d >= 0`` after it left, so ``common(sent) - local``
    is ``offset - d``: the largest value is the offset, short by the smallest ``d``
    (BMv2's receive-latency floor).  ``jitter`` is the median distance from the best:
    how much an unlucky single probe would have been off.
    """
    vals = [(sent - ref_ns) / 1000 - local for sent, local in samples]
    if not vals:
        raise ValueError("no clock-port probe came back")
    best = max(vals)
    return math.floor(best + 0.5), statistics.median(best - v for v in vals), len(vals)
