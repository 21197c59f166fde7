"""Analysis of probe traces against a schedule (pure functions, unit-tested on synthetic traces).

Times: the schedule's slot 0 of the rotor starts at wall time ``t0_ns + rotor.offset_us``.
A received frame came in on ``in_port`` and left on ``out_port``; the matchings that
connect those ports tell which matching carried it.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Sequence

from ..experiments.frame_check import matchings_for
from ..host.traffic import Rx
from ..schedule import Rotor, Schedule


def one_way_us(rx: Sequence[Rx]) -> float:
    """Median host->switch->host transit / 2: the one-way estimate (veth paths are alike)."""
    if not rx:
        return float("nan")
    return statistics.median((r.rx_ns - r.send_ns) / 1000 for r in rx) / 2


def boundary_errors(rx: Sequence[Rx], sched: Schedule, rotor: Rotor, port_map: dict[int, int],
                    t0_ns: int, one_way: float | None = None) -> list[float]:
    """For every day start seen, (arrival at switch of the first frame on the new matching) - boundary, us.

    The arrival at the switch is estimated as send time + one-way latency; only
    frames sent at most one slot after the boundary count.  Resolution: the probe gap.
    Only days whose matching differs from the previous slot's are used.
    """
    conn = matchings_for(rotor, port_map)
    M = len(rotor.matchings)
    L = one_way_us(rx) if one_way is None else one_way
    first: dict[int, float] = {}
    for r in rx:
        ms = conn.get((r.in_port, r.out_port))
        if not ms:
            continue
        t_arr = (r.send_ns - t0_ns) / 1000 - rotor.offset_us + L
        k = math.floor((t_arr + sched.slot_us / 2) / sched.slot_us)  # nearest slot start
        for kk in (k, k - 1, k + 1):
            if kk >= 0 and kk % M in ms and (kk - 1) % M not in ms:
                day = kk * sched.slot_us + sched.reconfig_us
                err = t_arr - day
                if -sched.slot_us / 2 < err < sched.slot_us / 2:
                    first[kk] = min(first.get(kk, math.inf), err)
    return [first[k] for k in sorted(first)]


# ---------------------------------------------------------------------------
# Exact switch-side times from BMv2's --pcap files
# ---------------------------------------------------------------------------


def read_pcap(path) -> list[tuple[int, bytes]]:
    """(timestamp ns, frame) of a classic pcap file (us or ns resolution)."""
    import struct as st

    data = open(path, "rb").read()
    if len(data) < 24:
        return []
    magic = st.unpack_from("<I", data)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    else:
        e = ">"
        magic = st.unpack_from(">I", data)[0]
    nano = magic == 0xA1B23C4D
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = st.unpack_from(e + "IIII", data, off)
        off += 16
        out.append((sec * 1_000_000_000 + (frac if nano else frac * 1000), data[off:off + incl]))
        off += incl
    return out


@dataclasses.dataclass
class SwitchTimes:
    """Per probe (in_port, seq): when it entered the switch and when/where it left."""

    arrivals: dict[tuple[int, int], int]
    departures: dict[tuple[int, int], tuple[int, int]]  # -> (ns, out port)


def switch_times(pcap_dir, ports: dict[str, int]) -> SwitchTimes:
    """Parse ``<iface>_in.pcap`` / ``<iface>_out.pcap`` written by BMv2 (ports: iface -> port)."""
    from pathlib import Path

    from ..host.traffic import parse_frame

    arr, dep = {}, {}
    for ifc, port in ports.items():
        for kind, sink in (("in", arr), ("out", dep)):
            f = Path(pcap_dir) / f"{ifc}_{kind}.pcap"
            if not f.exists():
                continue
            for ts, frame in read_pcap(f):
                p = parse_frame(frame)
                if p is None:
                    continue
                key = (p[0], p[1])
                sink[key] = ts if kind == "in" else (ts, port)
    return SwitchTimes(arr, dep)


@dataclasses.dataclass
class DepartureCheck:
    departed: int
    outside: int               # left while its matching was not live (night or another matching)
    outside_us: list[float]    # for those: how far outside the nearest day of that matching
    misswitched: int           # arrived while its matching was not live
    miss_us: list[float]       # for those: distance from arrival to the nearest day of that matching

def outside_day_us(sched: Schedule, rotor: Rotor, m: int, t_us: float) -> float:
    """0 if matching m is live (in its day) at t, else the distance to its nearest day."""
    M = len(rotor.matchings)
    best = math.inf
    k = math.floor(t_us / sched.slot_us)
    k -= (k - m) % M  # latest slot of matching m at or before t
    for kk in (k - M, k, k + M):
        a, b = kk * sched.slot_us + sched.reconfig_us, (kk + 1) * sched.slot_us
        if a <= t_us < b:
            return 0.0
        best = min(best, a - t_us if t_us < a else t_us - b)
    return best


def check_departures(st: SwitchTimes, sched: Schedule, rotor: Rotor, port_map: dict[int, int],
                     t0_ns: int) -> DepartureCheck:
    """Was every frame switched, and did it leave, while its matching was live?"""
    conn = matchings_for(rotor, port_map)
    out_n = mis = 0
    out_us: list[float] = []
    miss: list[float] = []
    for key, (dep_ns, out_port) in st.departures.items():
        ms = conn.get((key[0], out_port))
        if not ms:
            out_n += 1
            out_us.append(math.inf)
            continue
        t_dep = (dep_ns - t0_ns) / 1000 - rotor.offset_us
        d = min(outside_day_us(sched, rotor, m, t_dep) for m in ms)
        if d > 0:
            out_n += 1
            out_us.append(d)
        if key in st.arrivals:
            t_arr = (st.arrivals[key] - t0_ns) / 1000 - rotor.offset_us
            d = min(outside_day_us(sched, rotor, m, t_arr) for m in ms)
            if d > 0:
                mis += 1
                miss.append(d)
    return DepartureCheck(len(st.departures), out_n, out_us, mis, miss)


# ---------------------------------------------------------------------------
# Boundary error from probe trains (exact switch arrival times)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class TrainBoundary:
    slot: int                  # absolute slot k whose day start is the boundary
    error_us: float | None     # arrival of the first frame carried by the new matching - boundary
    resolution_us: float       # gap between that frame and the train frame before it
    frames: int                # train frames seen arriving at the switch


def train_boundary_errors(st: SwitchTimes, sched: Schedule, rotor: Rotor, port_map: dict[int, int],
                          t0_ns: int, in_port: int, trains: Sequence[tuple[int, int]],
                          seq_base: int) -> list[TrainBoundary]:
    """For each (train i, slot k): when did the switch start carrying frames on slot k's matching?

    The boundary is the scheduled start of slot k's day.  Among train i's frames (seq
    ``seq_base + (i << 16) + j``), take the earliest *arrival at the switch* (BMv2's
    input pcap: kernel time) of a frame that left on the port slot k's matching
    connects ``in_port`` to; the error is that arrival minus the boundary: negative if
    the switch moved early, positive if late.  Its resolution is the gap to the train
    frame that arrived just before it.  ``error_us`` is None when no frame of the train
    left on the new matching (all dropped, e.g. stale at tiny slots).
    """
    M = len(rotor.matchings)
    rack = {p: r for r, p in port_map.items()}
    by_train: dict[int, list[tuple[int, int]]] = {}
    for (port, seq), a in st.arrivals.items():
        if port == in_port and seq >= seq_base:
            by_train.setdefault((seq - seq_base) >> 16, []).append((a, seq))
    out: list[TrainBoundary] = []
    for i, k in trains:
        m = rotor.matchings[k % M]
        dst = m[rack[in_port]]
        new_port = port_map[dst] if dst is not None else None
        boundary_ns = t0_ns + (rotor.offset_us + k * sched.slot_us + sched.reconfig_us) * 1000
        frames = by_train.get(i, [])
        arrivals = [a for a, _ in frames]
        first_new = None
        for a, seq in frames:
            dep = st.departures.get((in_port, seq))
            if dep is not None and dep[1] == new_port and (first_new is None or a < first_new):
                first_new = a
        if first_new is None:
            out.append(TrainBoundary(k, None, math.nan, len(arrivals)))
            continue
        before = [a for a in arrivals if a < first_new]
        res = (first_new - max(before)) / 1000 if before else math.nan
        out.append(TrainBoundary(k, (first_new - boundary_ns) / 1000, res, len(arrivals)))
    return out
