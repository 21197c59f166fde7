"""Measured per-slot activity: the switches' per-(slot, port) counters, read by the controller
into the run's ``activity.json`` (what ``p4rotor energy RUN`` reads; docs/energy.md).

The data plane counts, per slot position of its cycle (a rotor: the live matching; a ToR: the
slice) and port, the frames and bytes that came in and that left (``slot_rx_counter``,
``slot_tx_counter``: p4src/shared/control/port_energy.p4); a ToR also counts, in the same cells,
the frames of them not known to be bulk (``slot_rx_ll_counter``, ``slot_tx_ll_counter``: the
low-latency class, or a frame it could not classify; the rotor parses no class).  Each switch's
cells are read every
``cycles_per_read`` whole cycles (at least ``MIN_READ_S`` apart: a P4Runtime read is not free),
and what moved since the last read is written as one interval, sparse.  Reads are not aligned
to slot boundaries: the slot in progress at a read has its frames split between two intervals;
every frame is in exactly one interval.  Each read's interval is appended to the file in place
(its closing ``]}`` overwritten by the interval and a new ``]}``), so a run that is stopped still
leaves what was measured, and a read costs the same at the end of an hour's run as at its start
(rewriting the whole file after each read grew with the run: 1.8 s of CPU per read at 18 000
intervals).

The file (``version`` 2)::

    {"version": 2, "source": ..., "schedule": {...}, "cycles_per_read": n, "t0_unix": T,
     "switches": {NAME: {"kind": "rotor"|"tor", "cycle_us": C, "slot_spans_us": [[a, b], ...],
                         "low_latency": true|false,
                         "ports": {PORT: {"tx": {"link", "channel", "class", "rotor"},
                                          "rx": {...}}}}},
     "intervals": [{"t_s": seconds since the first read,
                    "switches": {NAME: {"tx": {"PORT:SLOT": [frames, bytes]}, "rx": {...},
                                        "tx_ll": {...}, "rx_ll": {...}}}}]}

``t0_unix``: the wall clock (Unix seconds) of the first read, from which every ``t_s`` counts
(absent until that read); :func:`window` cuts a part of a run out by it.

``low_latency``: the switch counts its frames by class, and ``tx_ll``/``rx_ll`` hold what moved
of its low-latency counts (a cell absent: none); a switch without (the rotor), and every switch
of a version 1 file (no class counted), has only ``tx``/``rx``: its frames' classes are not known.

``tx``/``rx`` of a port name the transmitter whose frames they are (the energy accounting's
port: a link and its channel, 0 up and 1 down); ``slot_spans_us`` place each slot position in
the schedule's time (a rotor's slots from its offset, a ToR's slices).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import finsy as fy

from .. import p4 as dp

if TYPE_CHECKING:
    from ..schedule import Schedule
    from .runtime import Controller

MIN_READ_S = 0.2
VERSION = 2
TAIL = "]}\n"  # how the file ends: the intervals' list and the document closed
# What a switch's read returns, per direction: its total counter, and its low-latency counter
# where it has one (the ToR).
TOTALS = (("rx", dp.C_SLOT_RX), ("tx", dp.C_SLOT_TX))
LOW_LATENCY = (("rx_ll", dp.C_SLOT_RX_LL), ("tx_ll", dp.C_SLOT_TX_LL))


@dataclasses.dataclass(frozen=True)
class EnergyPorts:
    """One switch's ports as the energy accounting names them, and its slot positions' times."""

    kind: str                                   # "rotor" or "tor"
    cycle_us: int
    slot_spans_us: tuple[tuple[int, int], ...]  # per slot position, in schedule time
    ports: dict[int, dict[str, dict[str, Any]]]  # port -> {"tx": transmitter, "rx": transmitter}
    schedule: "Schedule"

    @property
    def low_latency(self) -> bool:
        """The switch counts its low-latency frames apart (the ToR parses the class; the rotor not)."""
        return self.kind == "tor"

    def doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "cycle_us": self.cycle_us, "slot_spans_us": [list(s) for s in self.slot_spans_us],
                "low_latency": self.low_latency, "ports": {str(p): v for p, v in sorted(self.ports.items())}}


def _tx(link: str, channel: int, cls: str, rotor: int | None) -> dict[str, Any]:
    return {"link": link, "channel": channel, "class": cls, "rotor": rotor}


def rotor_ports(sched: "Schedule", rotor_name: str, port_map: dict[int, int]) -> EnergyPorts:
    """A rotor: the port of rack i sends down the link tor<i>~<rotor> (channel 1, rotor-port) and
    receives what that ToR's uplink sends (channel 0)."""
    r = next(i for i, x in enumerate(sched.rotors) if x.name == rotor_name)
    rot = sched.rotors[r]
    spans = tuple((rot.offset_us + j * sched.slot_us, rot.offset_us + (j + 1) * sched.slot_us)
                  for j in range(len(rot.matchings)))
    ports = {p: {"tx": _tx(f"tor{i}~{rotor_name}", 1, "rotor-port", r),
                 "rx": _tx(f"tor{i}~{rotor_name}", 0, "tor-uplink", r)} for i, p in port_map.items()}
    return EnergyPorts("rotor", len(rot.matchings) * sched.slot_us, spans, ports, sched)


def tor_ports(sched: "Schedule", rack: int, hosts: dict[str, int], uplinks: dict[str, int],
              slices: list[tuple[int, int]]) -> EnergyPorts:
    """A ToR: a host's port sends down its host link (channel 1) and receives what the host sends
    (channel 0); an uplink sends up to its rotor (channel 0) and receives the rotor port's frames."""
    index = {x.name: i for i, x in enumerate(sched.rotors)}
    ports: dict[int, dict[str, dict[str, Any]]] = {}
    for h, p in hosts.items():
        ports[p] = {"tx": _tx(f"{h}~tor{rack}", 1, "host-link", None), "rx": _tx(f"{h}~tor{rack}", 0, "host-link", None)}
    for name, p in uplinks.items():
        r = index[name]
        ports[p] = {"tx": _tx(f"tor{rack}~{name}", 0, "tor-uplink", r), "rx": _tx(f"tor{rack}~{name}", 1, "rotor-port", r)}
    return EnergyPorts("tor", sched.hyperperiod_us, tuple(slices), ports, sched)


class ActivityRecorder:
    """Reads every switch's per-slot counters and keeps ``path`` up to date (module docstring)."""

    def __init__(self, ctl: "Controller", path: Path, views: dict[str, EnergyPorts]):
        self.ctl, self.path, self.views = ctl, Path(path), views
        sched = next(iter(views.values())).schedule
        cycle_s = max(v.cycle_us for v in views.values()) / 1e6 if views else 1.0
        self.cycles_per_read = max(1, -(-MIN_READ_S // cycle_s)) if cycle_s > 0 else 1
        self.every_s = self.cycles_per_read * cycle_s
        self.last: dict[str, dict[str, dict[str, tuple[int, int]]]] = {}
        self.pending: dict[str, dict[str, dict[str, list[int]]]] = {}
        self.n_intervals = 0  # written to the file (they are not kept: an hour's run holds ~20 000)
        self.t0: float | None = None
        self.doc = {"version": VERSION, "source": "measured: the switches' per-slot counters "
                    f"({dp.C_SLOT_RX}, {dp.C_SLOT_TX}; a ToR's {dp.C_SLOT_RX_LL}, {dp.C_SLOT_TX_LL}) "
                    "read by the controller",
                    "schedule": sched.to_json(), "cycles_per_read": int(self.cycles_per_read),
                    "read_every_s": self.every_s, "switches": {n: v.doc() for n, v in sorted(views.items())}}

    def cells(self, name: str) -> list[int]:
        v = self.views[name]
        return [dp.energy_cell(j, p) for j in range(len(v.slot_spans_us)) for p in v.ports]

    async def read(self, sw: Any) -> dict[str, dict[str, tuple[int, int]]]:
        """{"tx"|"rx"[|"tx_ll"|"rx_ll"]: {"PORT:SLOT": (frames, bytes)}} cumulative, for the
        switch's ports.  Reads are not atomic: a frame counted between the total's read and the
        low-latency one's is in one interval of each, not the same (the reader never subtracts)."""
        v = self.views[sw.name]
        by_cell = {dp.energy_cell(j, p): f"{p}:{j}" for j in range(len(v.slot_spans_us)) for p in v.ports}
        out: dict[str, dict[str, tuple[int, int]]] = {}
        raw = getattr(sw, "read_cells", None)  # the eBPF switch: the cells as numbers, in one batch
        for d, counter in TOTALS + (LOW_LATENCY if v.low_latency else ()):
            cur: dict[str, tuple[int, int]] = {}
            if raw is not None:
                for c, (pk, by) in (await raw(counter, list(by_cell))).items():
                    if pk or by:
                        cur[by_cell[c]] = (pk, by)
            else:
                async for e in sw.read([fy.P4CounterEntry(counter, index=c) for c in by_cell]):
                    if e.data is not None and (e.data.packet_count or e.data.byte_count):
                        cur[by_cell[e.index]] = (e.data.packet_count, e.data.byte_count)
            out[d] = cur
        return out

    def add(self, name: str, now: dict[str, dict[str, tuple[int, int]]]) -> dict[str, dict[str, list[int]]]:
        """What moved since the last read of switch ``name`` (sparse); the first read is the base."""
        before = self.last.get(name)
        self.last[name] = now
        if before is None:
            return {}
        moved: dict[str, dict[str, list[int]]] = {}
        for d, cells in now.items():
            for key, (pk, by) in cells.items():
                b = before.get(d, {}).get(key, (0, 0))
                if pk - b[0] or by - b[1]:
                    moved.setdefault(d, {})[key] = [pk - b[0], by - b[1]]
        return moved

    def interval(self, moves: dict[str, dict[str, dict[str, list[int]]]], t_s: float) -> None:
        if not self.path.exists():
            self.write()
        self.append({"t_s": round(t_s, 6), "switches": moves})
        self.n_intervals += 1

    def write(self) -> None:
        """The header and no interval, atomically (at the start, and when the first read sets
        ``t0_unix``: before any interval).  "intervals" is the last key: append() relies on it."""
        assert self.n_intervals == 0, "the header is rewritten only before the first interval"
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(dict(self.doc, intervals=[]), separators=(",", ":"))[:-2] + TAIL)
        os.replace(tmp, self.path)

    def append(self, iv: dict[str, Any]) -> None:
        """One interval more, written over the file's closing ``]}`` in one write: the file is
        whole JSON again as soon as the write returns (a reader that catches it halfway reads
        again: :func:`load`)."""
        text = ("," if self.n_intervals else "") + json.dumps(iv, separators=(",", ":")) + TAIL
        with open(self.path, "r+b") as f:
            f.seek(-len(TAIL), os.SEEK_END)
            f.write(text.encode())

    async def run(self, switches: dict[str, Any]) -> None:
        """Read every switch once per ``every_s``; one interval per round (all switches)."""
        self.write()
        while True:
            t = time.monotonic()
            if self.t0 is None:
                self.t0 = t
                self.doc["t0_unix"] = round(time.time(), 6)
                self.write()
            moves = {}
            for name, sw in switches.items():
                m = self.add(name, await self.read(sw))
                if m:
                    moves[name] = m
            if len(self.last) == len(switches) and t > self.t0:
                self.interval(moves, t - self.t0)
            await asyncio.sleep(max(0.0, self.every_s - (time.monotonic() - t)))


def load(path: Path, tries: int = 5) -> dict[str, Any]:
    """A recorder's file, read while it may be appending (a read that catches an append halfway
    is not JSON: read again, 20 ms later).  Raises OSError or ValueError."""
    for i in range(tries):
        try:
            return json.loads(Path(path).read_text())
        except ValueError:
            if i == tries - 1:
                raise
            time.sleep(0.02)
    raise AssertionError("unreachable")


def window(doc: dict[str, Any], start_unix: float, end_unix: float) -> dict[str, Any]:
    """The part of a recorder's file (``doc``) that covers ``[start_unix, end_unix]`` of wall
    time, as a file of its own: the intervals from the last read at or before the start to the
    first read after the end (every frame moved in the window is in them; up to a read's worth
    of time on each side is not the window's), times counted from that first read.  ``window``
    says what was asked (``asked_s``) and what the reads cover (``read_s``) in those times.  Raises ValueError when the file has no
    ``t0_unix`` or no read ends in the window."""
    if not isinstance(doc.get("t0_unix"), (int, float)):
        raise ValueError("the activity file has no t0_unix (no read was made, or an older recorder wrote it)")
    a, b = start_unix - doc["t0_unix"], end_unix - doc["t0_unix"]
    ivs = doc["intervals"]
    ends = [float(iv["t_s"]) for iv in ivs]
    first = next((i for i, t in enumerate(ends) if t > a), None)
    if first is None or b <= a:
        raise ValueError(f"no read of the activity file ends in the window ({a:.1f} s to {b:.1f} s after its "
                         f"first read; its last read at {ends[-1] if ends else 0:.1f} s)")
    last = next((i for i, t in enumerate(ends) if t > b), len(ends) - 1)
    base = ends[first - 1] if first else 0.0
    out = {k: v for k, v in doc.items() if k != "intervals"}
    out["t0_unix"] = round(doc["t0_unix"] + base, 6)
    out["intervals"] = [dict(iv, t_s=round(float(iv["t_s"]) - base, 6)) for iv in ivs[first:last + 1]]
    out["window"] = {"asked_unix": [round(start_unix, 6), round(end_unix, 6)],
                     "asked_s": [round(a - base, 6), round(b - base, 6)],
                     "read_s": [0.0, round(ends[last] - base, 6)]}
    return out
