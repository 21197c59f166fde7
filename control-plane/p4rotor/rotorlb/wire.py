"""The RotorLB agents' messages (UDP payloads, network byte order), as values.

Every agent message rides the direct-only class (DSCP 8, ``DSCP_DIRECT_ONLY``): the ToR forwards it
only over a live circuit to the rack of its IP destination, and drops it (counted, NO_ROUTE)
otherwise, so an agent's frame never takes a multi-hop path the algorithm did not choose.

* OFFER  (phase 2): rotor, slot, the offerer's spare capacity and its local demand per
  destination rack, in frames.
* ACCEPT (phase 2): rotor, slot, the frames granted per destination rack.
* ACK (with ``--retransmit-us``): the (flow, seq) of data frames delivered to the sender's
  rack, sent back to their origin over the low-latency class (DSCP 46: tiny, and it must not wait
  for a circuit; needs a schedule with low-latency paths, Opera's).
* DATA: one frame of bulk data: origin rack, flow, sequence number in the flow, final destination
  rack, flags (bit 0: being relayed, second hop; bit 1: carries a payload), the slot its relay
  accepted it in, then the payload (an IP packet from a TUN interface) or zero padding.
"""

from __future__ import annotations

import dataclasses
import struct

OFFER, ACCEPT, DATA, ACK = 1, 2, 3, 4
_HEAD = struct.Struct("!BHI")         # type, rotor, slot
_PAIR = struct.Struct("!HI")          # dst rack, frames
_OFFER = struct.Struct("!IH")         # spare frames, entries
_DATA = struct.Struct("!HIIHBIQ")     # origin, flow, seq, final dst, relayed, accepted slot, sent ns
DATA_HEADER = _HEAD.size + _DATA.size
# What the wire adds to each agent datagram: Ethernet (14), IPv4 (20) and UDP (8) headers.
UDP_OVERHEAD = 42
# The share of a circuit window's time an agent leaves free (its frames are paced in the rest):
# a user-space sender cannot hit a window's last microseconds.  The models that predict the
# agents' capacity (workload/plane.py) use the same share.
WINDOW_SLACK = 0.2
_ACK = struct.Struct("!II")           # flow, seq
ACK_MAX = 160                         # entries per ACK message (1285 bytes)


# Where a host's TCP connections to other racks' bulk addresses are redirected: its agent's split
# connections (host/stream.py); the harness's netfilter rule (fabric/agents.py) sends them here.
SPLIT_TCP_PORT = 9979


class WireError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Offer:
    rotor: int
    slot: int
    spare: int
    demand: dict[int, int]


@dataclasses.dataclass(frozen=True)
class Accept:
    rotor: int
    slot: int
    grant: dict[int, int]


@dataclasses.dataclass(frozen=True)
class Data:
    rotor: int
    slot: int
    origin: int
    flow: int
    seq: int
    dst: int
    relayed: bool
    accepted_slot: int
    sent_ns: int
    payload: bytes = b""


@dataclasses.dataclass(frozen=True)
class Ack:
    frames: tuple[tuple[int, int], ...]  # (flow, seq) delivered


def encode_ack(m: Ack) -> bytes:
    if len(m.frames) > ACK_MAX:
        raise WireError(f"an ACK carries at most {ACK_MAX} frames, not {len(m.frames)}")
    return (_HEAD.pack(ACK, 0, 0) + struct.pack("!H", len(m.frames))
            + b"".join(_ACK.pack(f, s) for f, s in m.frames))


def encode_offer(m: Offer) -> bytes:
    return (_HEAD.pack(OFFER, m.rotor, m.slot) + _OFFER.pack(m.spare, len(m.demand))
            + b"".join(_PAIR.pack(d, n) for d, n in sorted(m.demand.items())))


def encode_accept(m: Accept) -> bytes:
    return (_HEAD.pack(ACCEPT, m.rotor, m.slot) + struct.pack("!H", len(m.grant))
            + b"".join(_PAIR.pack(d, n) for d, n in sorted(m.grant.items())))


def encode_data(m: Data, size: int) -> bytes:
    """A data frame: the payload if there is one, else zero padding up to ``size`` bytes."""
    flags = int(m.relayed) | (2 if m.payload else 0)
    head = _HEAD.pack(DATA, m.rotor, m.slot) + _DATA.pack(m.origin, m.flow, m.seq, m.dst, flags,
                                                         m.accepted_slot, m.sent_ns)
    return head + (m.payload if m.payload else bytes(max(0, size - len(head))))


def decode(buf: bytes) -> Offer | Accept | Data | Ack:
    try:
        kind, rotor, slot = _HEAD.unpack_from(buf)
        off = _HEAD.size
        if kind == OFFER:
            spare, n = _OFFER.unpack_from(buf, off)
            off += _OFFER.size
            return Offer(rotor, slot, spare, dict(_PAIR.unpack_from(buf, off + i * _PAIR.size) for i in range(n)))
        if kind == ACCEPT:
            (n,) = struct.unpack_from("!H", buf, off)
            off += 2
            return Accept(rotor, slot, dict(_PAIR.unpack_from(buf, off + i * _PAIR.size) for i in range(n)))
        if kind == ACK:
            (n,) = struct.unpack_from("!H", buf, off)
            off += 2
            return Ack(tuple(_ACK.unpack_from(buf, off + i * _ACK.size) for i in range(n)))
        if kind == DATA:
            origin, flow, seq, dst, flags, acc, sent = _DATA.unpack_from(buf, off)
            payload = bytes(buf[off + _DATA.size:]) if flags & 2 else b""
            return Data(rotor, slot, origin, flow, seq, dst, bool(flags & 1), acc, sent, payload)
    except struct.error as ex:
        raise WireError(f"truncated agent message: {ex}") from None
    raise WireError(f"unknown agent message type {kind}")
