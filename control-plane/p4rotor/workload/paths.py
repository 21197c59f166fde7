"""The path a flow met: alone in Opera a flow rides the low-latency path of the slice it starts in
(1-3 rack hops at 8 x 4), so its calibrated ideal is its path class's (:class:`PathKeys`; the
packet switch's one path: :class:`OneSwitch`; workload/ideal.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..schedule import routes as R
from ..stats import percentile
from . import fct as F
from .scale import MSS


def arrival_ns(rec: dict) -> int:
    """When a received flow's last byte reached its host: ``rx_ns`` (the kernel's stamp), or, in
    logs written before it was recorded, ``done_ns`` (when the receiver read it).  The record is
    host/flows.py's receive log line."""
    return rec["rx_ns"] if rec.get("rx_ns") is not None else rec["done_ns"]


class PathKeys:
    """A TCP flow's path class: "F-B", the rack hops of the low-latency path there (SYN, data)
    and back (SYN-ACK) in the slice where it began (``t_ns``, wall; ``t0_ns``: the schedule's
    slot 0), None if either has no path then."""

    def __init__(self, clock: R.PathClock, t0_ns: int, racks: dict[str, int]):
        self.clock, self.t0_ns, self.racks = clock, t0_ns, racks

    def __call__(self, src: int, dst: int, t_ns: int) -> str | None:
        t_us = (t_ns - self.t0_ns) / 1000
        there, back = self.clock.hops(t_us, src, dst), self.clock.hops(t_us, dst, src)
        return None if there is None or back is None else f"{there}-{back}"

    def of(self, d: F.Done) -> str | None:
        return self(self.racks[d.flow.src], self.racks[d.flow.dst], d.start_ns)


class OneSwitch:
    """:class:`PathKeys` for the packet switch: every flow crosses its one switch, one path."""

    KEY = "switch"

    def __call__(self, src: int, dst: int, t_ns: int) -> str:
        return self.KEY

    def of(self, d: F.Done) -> str:
        return self.KEY


def alone_samples(d: Path, rack_of_host: dict[str, int], rack_of_ip: dict[str, int]) -> list[tuple[int, int, int, float]]:
    """The one-packet flows alone (experiments/fct/calibrate.py: ``measure_alone``), from its files
    in ``d`` (what each host sent, when it began each, when each arrived): (source rack,
    destination rack, issued ns, FCT s) per flow."""
    sent: dict[int, tuple[str, str]] = {}
    for f in d.glob("flows-*.json"):
        for fl in json.loads(f.read_text()):
            sent[fl["id"]] = (f.name[len("flows-"):-len(".json")], fl["dst"])
    issued: dict[int, int] = {}
    for f in d.glob("tx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            issued[r["id"]] = r["issued_ns"]
    out = []
    for f in d.glob("rx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["id"] in sent and r["id"] in issued:
                src, dst = sent[r["id"]]
                out.append((rack_of_host[src], rack_of_ip[dst], issued[r["id"]], (arrival_ns(r) - issued[r["id"]]) / 1e9))
    return out


def one_packet(d: F.Done) -> bool:
    """A low-latency flow of one segment's payload: its alone FCT is the floor (by path), no size curve."""
    return d.cls == "low-latency" and d.flow.size <= MSS


QUANTILES = (0, 5, 10, 25, 50, 75, 90, 95, 99, 100)


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    return {f"p{q}": round(percentile(xs, q), 7) for q in QUANTILES} if xs else None


def by_path(done: list, cal) -> dict[str, dict]:
    """The one-packet low-latency flows of a run, judged (``ideal.with_ideal`` set each one's
    ``path``), by the path class they met, each
    class with its calibrated base (``cal``: workload/ideal.py) and the run's FCT percentiles:
    what fct.json keeps and paths_plot draws.  Nothing here changes a denominator."""
    fcts: dict[str, list[float]] = {}
    for d in done:
        if one_packet(d) and d.fct_s is not None:
            fcts.setdefault(d.path, []).append(d.fct_s)
    return {k: {"base_s": round(cal.base(k), 7), "calibration_samples": cal.samples.get(k, 0),
                "calibration_expected_below": cal.expected_below(k),
                "calibration_fct_s": cal.spread.get(k), "run_flows": len(xs), "run_fct_s": _quantiles(sorted(xs)),
                "run_below_base": sum(x < cal.base(k) for x in xs)}
            for k, xs in sorted(fcts.items())}
