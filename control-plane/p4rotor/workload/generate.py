"""Poisson flow arrivals at a target load, inter-rack pairs only, seeded.

Every host starts flows as a Poisson process of rate

    lambda = load x access_bps / (8 x E[wire bytes per flow])

so that on average it offers ``load`` of its access rate, headers counted.  A flow of ``size``
payload bytes is ``ceil(size / mss)`` packets (at least one) and occupies
``size + packets x header_bytes`` bytes of the access link.  The default header is 54 bytes:
Ethernet 14 + IPv4 20 + TCP 20, which is what a Linux shaper (tc on the host's veth) counts for a
frame; preamble, FCS and inter-frame gap are not counted.  The mean is exact, from the CDF of the
sizes as written (after scaling, :mod:`.scale`), not estimated from samples.

The network-wide process (rate hosts x lambda) gives each flow a source uniform among all hosts
and a destination uniform among the hosts of the other racks, as the pHost and Opera generators
do (all-to-all, inter-rack only).  With ``zipf=A`` the destination's rack is drawn by Zipf
weights instead (a hot spot, :mod:`.hotspot`: the arrival rate and the sources are unchanged, so
the mean host load is still ``load``, while a hot rack's downlinks receive more; at 8 racks and
A = 0.8 the hottest rack gets 0.301 of the flows, 2.41x the offered load).  Start times are
seconds on the clock the access rate is given in (the emulation's wall clock for
:func:`p4rotor.workload.cli`), rounded to nanoseconds.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, Sequence

from ..inputs import MAX_FLOWS
from . import hotspot as Z
from .cdf import Cdf, WorkloadError
from .scale import MSS, Scaling

HEADER_BYTES = 14 + 20 + 20  # Ethernet + IPv4 + TCP, per packet


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    ip: str
    rack: int


@dataclasses.dataclass(frozen=True)
class Flow:
    id: int
    src: str
    dst: str
    size: int      # payload bytes
    start: float   # seconds


def packets(size: int, mss: int = MSS) -> int:
    return max(1, math.ceil(size / mss))


def wire_bytes(size: int, mss: int = MSS, header: int = HEADER_BYTES) -> int:
    """Bytes a flow of ``size`` payload bytes puts on its access link."""
    return size + packets(size, mss) * header


def mean_wire_bytes(sizes: Cdf, mss: int = MSS, header: int = HEADER_BYTES) -> float:
    """E[wire bytes per flow] under a CDF of payload sizes (exact)."""
    return sizes.mean() + header * sizes.mean_packets(mss)


def grid_hosts(racks: int, hosts_per_rack: int) -> list[Host]:
    """The hosts ``p4rotor topology generate`` / ``p4rotor run`` create (h<rack>x<i>, 10.0.<rack>.<i+1>)."""
    if not 2 <= racks <= 250:
        raise WorkloadError(f"--racks must be 2..250, got {racks}")
    if not 1 <= hosts_per_rack <= 253:
        raise WorkloadError(f"--hosts-per-rack must be 1..253, got {hosts_per_rack}")
    return [Host(f"h{r}x{h}", f"10.0.{r}.{h + 1}", r) for r in range(racks) for h in range(hosts_per_rack)]


def topology_hosts(topo: Any) -> list[Host]:
    """The hosts of a :class:`p4rotor.schedule.topology.Topology`."""
    return [Host(h.name, h.ip, k.id) for k in topo.racks for h in k.hosts]


@dataclasses.dataclass
class Workload:
    flows: list[Flow]
    meta: dict[str, Any]


def _check_hosts(hosts: Sequence[Host]) -> None:
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise WorkloadError(f"host {dup!r} appears twice")
    if len({h.rack for h in hosts}) < 2:
        raise WorkloadError("inter-rack flows need hosts in at least 2 racks")


def generate(hosts: Sequence[Host], sizes: Cdf, *, access_bps: float, load: float, seed: int,
             flows: int | None = None, duration_s: float | None = None, scaling: Scaling | None = None,
             mss: int = MSS, header: int = HEADER_BYTES, name: str = "", zipf: float | None = None) -> Workload:
    """Flows with Poisson arrivals offering ``load`` of every host's ``access_bps``.

    ``sizes``: the real system's flow-size CDF; ``scaling`` (default: none) maps each sampled
    size to the emulation's.  Exactly one of ``flows`` (that many flows) and ``duration_s``
    (every arrival in [0, duration_s)) is given.  ``zipf``: destination racks by Zipf weights
    of this exponent (:mod:`.hotspot`); None (the default): uniform, drawing no random number
    beyond the uniform list's (a seed gives the same list with or without the keyword).
    """
    if not 0 < load < 1:
        raise WorkloadError(f"load must be > 0 and < 1 (a fraction of the access rate), got {load:g}")
    if not (math.isfinite(access_bps) and access_bps > 0):
        raise WorkloadError(f"access rate must be > 0, got {access_bps:g} b/s")
    if (flows is None) == (duration_s is None):
        raise WorkloadError("give a flow count or a duration, not both")
    if flows is not None and not 1 <= flows <= MAX_FLOWS:
        raise WorkloadError(f"flow count must be 1..{MAX_FLOWS}, got {flows}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise WorkloadError(f"duration must be > 0 seconds, got {duration_s:g}")
    if header < 0:
        raise WorkloadError(f"header bytes must be >= 0, got {header}")
    zipf = Z.check(zipf)
    _check_hosts(hosts)
    scaling = scaling or Scaling(1.0, mss)
    if scaling.mss != mss:
        raise WorkloadError(f"the scaling's packet size {scaling.mss} != mss {mss}")
    written = scaling.cdf(sizes)  # the sizes as written, for the exact mean
    mean_wire = mean_wire_bytes(written, mss, header)
    per_host = load * access_bps / (8 * mean_wire)  # flows per second per host
    total = per_host * len(hosts)
    if duration_s is not None and total * duration_s > MAX_FLOWS:
        raise WorkloadError(f"--duration {duration_s:g} s would give ~{total * duration_s:.3g} flows "
                            f"(more than {MAX_FLOWS}); shorten it")

    others = {r: [h.name for h in hosts if h.rack != r] for r in {h.rack for h in hosts}}
    hot = None
    if zipf is not None:
        by_rack: dict[int, list[str]] = {}
        for h in hosts:
            by_rack.setdefault(h.rack, []).append(h.name)
        hot = Z.Destinations(by_rack, zipf, seed)
    rng = random.Random(seed)
    out: list[Flow] = []
    clamped = 0
    t = 0.0
    while True:
        t += rng.expovariate(total)
        if flows is not None and len(out) == flows:
            break  # t is the next arrival: the list covers [0, t)
        if duration_s is not None and t >= duration_s:
            break
        src = rng.choice(hosts)
        dst = rng.choice(others[src.rack]) if hot is None else hot.draw(rng, src.rack)
        real = sizes.sample(rng)
        clamped += scaling.clamps(real)
        out.append(Flow(len(out), src.name, dst, scaling.size(real), round(t, 9)))
    if not out:
        raise WorkloadError(f"no flow arrives within {duration_s:g} s (expected {total * duration_s:.2g}); "
                            "give a longer duration")
    window = duration_s if duration_s is not None else t
    meta = {
        "workload": name or sizes.source, "cdf": sizes.source,
        "load": load, "access_bps": access_bps, "seed": seed,
        "mss": mss, "header_bytes": header,
        "duration_s": round(window, 9),
        "flows_per_s_per_host": per_host,
        "mean_size_bytes": written.mean(), "mean_wire_bytes": mean_wire,
        "size_percentiles_bytes": {str(q): written.quantile(q / 100) for q in (50, 90, 99)},
        "scaling": {**scaling.to_json(), "clamped": clamped, "clamped_share": clamped / len(out),
                    "expected_clamped_share": scaling.clamped_share(sizes)},
        "hosts": {h.name: {"ip": h.ip, "rack": h.rack} for h in hosts},
    }
    if hot is not None:  # absent when uniform: a uniform list's file carries no hot-spot keys
        source_share = {r: len(v) / len(hosts) for r, v in hot.hosts.items()}
        meta["zipf"] = zipf
        meta["zipf_hotspot"] = hot.meta(zipf, source_share)
    return Workload(out, meta)


def offered_load(flows: Sequence[Flow], hosts: int, access_bps: float, duration_s: float,
                 mss: int = MSS, header: int = HEADER_BYTES) -> float:
    """Wire bits of every flow over what ``hosts`` access links carry in ``duration_s``."""
    bits = 8 * sum(wire_bytes(f.size, mss, header) for f in flows)
    return bits / (hosts * access_bps * duration_s)
