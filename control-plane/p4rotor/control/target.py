"""The target record: what differs between BMv2 (v1model), Tofino (TNA) and eBPF (PSA on NIKSS)
for the controller.

Every target runs the same P4 programs with the same P4Info names (p4/program.py), but they
count time differently, report timestamps in other units, find the CPU port differently and
take another device config (eBPF: none, and no P4Runtime either: ``nikss_switch.py``).  Inside the controller every time is in microseconds; a
``Target`` converts at the boundary: times written into tables and PacketOuts
(``to_units``, ``duration_units``) and timestamps read back (``reported_to_us``).
docs/targets.md explains each field.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from fractions import Fraction
from pathlib import Path
from typing import Iterable

import finsy as fy

from ..p4.constants import MODE_CLOCK
from .errors import ControllerError

DURATION_BITS = 32  # cycle, night, slot_start/slot_end, until, night_us: bit<32> in the programs


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    time_unit_ns: int            # unit of every time the controller writes (table params, PacketOut)
    time_bits: int               # width of absolute times (offset, epoch_us, at): they wrap
    report_unit_ns: int          # unit of timestamps the switch reports (PacketIn, clock probes)
    modes: tuple[str, ...]       # slot modes the programs support here; the first is the default
    cpu_port: int                # where PacketOuts enter and PacketIns leave
    clock_port: int | None       # the clock port (None: none)
    # Parser value sets the controller writes the ports into ("{Kind}" -> "Rotor" or "Tor");
    # None: the port is a constant of the P4 program.
    cpu_value_set: str | None
    clock_value_set: str | None
    drop_counters: tuple[str, ...]   # counters indexed by DropCause; summed per cause
    # The compiler's output: None, BMv2's JSON build/<program>.json; else the name of the binary
    # in build/<build_subdir>/<program>/pipe/, packed with context.json (Barefoot's device config).
    device_bin: str | None = None
    build_subdir: str = ""
    # The clock's cycle register the controller starts before each config (None: the program
    # restarts its clock itself, as v1model does); one cell per generation parity.
    cycle_register: str | None = None
    # Width of the clock_phase range key: a cycle must be shorter than 2^phase_bits units.
    phase_bits: int = 32
    # Width of the durations the programs take (cycle, night, slot bounds).
    duration_bits: int = DURATION_BITS
    # Every switch reads the controller's own clock (eBPF: bpf_ktime_get_ns is the kernel's
    # CLOCK_MONOTONIC): common time is that clock, each offset is 0 by construction, no probes.
    shared_clock: bool = False
    # How the controller reaches a switch: "p4runtime" (finsy, gRPC) or "nikss" (nikss-ctl on
    # a NIKSS pipeline id: nikss_switch.py).
    api: str = "p4runtime"

    # -- times written --------------------------------------------------------------
    def _units(self, us: float) -> int:
        """us -> units, rounded half up (exact: no float error on large values)."""
        return math.floor(Fraction(us) * 1000 / self.time_unit_ns + Fraction(1, 2))

    def to_units(self, us: float) -> int:
        """An absolute time (common-time epoch, offset, ``at``), in units, wrapped to time_bits.

        Linear, so an offset converts like the times it is added to: (local + offset) in units
        is common time in units, modulo 2^time_bits (the programs compare by subtraction)."""
        return self._units(us) & ((1 << self.time_bits) - 1)

    def duration_units(self, us: float, what: str = "duration") -> int:
        """A duration or a time within the cycle, in units; never wraps."""
        n = self._units(us)
        if not 0 <= n < 1 << self.duration_bits:
            raise ControllerError(f"{what} {us} us is {n} {self.name} time units: outside "
                                  f"0..2^{self.duration_bits}-1")
        return n

    # -- times read back ------------------------------------------------------------
    def reported_to_us(self, ts: int) -> float:
        """A timestamp the switch reported, in microseconds (an int where the unit is whole us)."""
        if self.report_unit_ns % 1000 == 0:
            return ts * (self.report_unit_ns // 1000)
        return ts * self.report_unit_ns / 1000

    # -- ports ----------------------------------------------------------------------
    def with_ports(self, cpu_port: int | None = None, clock_port: int | None = None) -> "Target":
        """This target with the CPU and clock ports set (None: keep the default).  A port the P4
        program fixes (no value set) cannot be moved."""
        t = self
        if self.api == "nikss" and (cpu_port is not None or clock_port is not None):
            raise ControllerError(f"target {self.name} has no CPU or clock port (no PacketOut/PacketIn)")
        for what, port, vs, cur in (("cpu", cpu_port, self.cpu_value_set, self.cpu_port),
                                    ("clock", clock_port, self.clock_value_set, self.clock_port)):
            if port is None:
                continue
            if not 0 <= port < 512:
                raise ControllerError(f"bad --{what}-port {port}: 0..511")
            if vs is None and port != cur:
                raise ControllerError(f"--{what}-port {port}: the {what} port of target {self.name} is fixed "
                                      f"in the P4 program ({cur})")
            t = dataclasses.replace(t, **{f"{what}_port": port})
        return t

    def port_value_sets(self, kind: str, declared: Iterable[str]) -> list[tuple[str, int]]:
        """(value set, port) to write into a ``kind`` ("rotor"/"tor") switch whose P4Info declares
        the value sets ``declared``.  A CPU port value set the P4Info lacks is skipped; a clock
        port asked for with no value set to hold it is an error."""
        names = list(declared)
        out = []
        for what, template, port in (("cpu", self.cpu_value_set, self.cpu_port),
                                     ("clock", self.clock_value_set, self.clock_port)):
            if template is None or port is None:
                continue
            wanted = template.format(Kind=kind.capitalize())
            name = find_value_set(wanted, names)
            if name is not None:
                out.append((name, port))
            elif what == "clock":
                raise ControllerError(f"--clock-port {port}: the {kind} P4Info declares no value set {wanted}")
        return out

    # -- pipeline -------------------------------------------------------------------
    def pipeline_files(self, build_dir: Path, program: str) -> tuple[Path, Path]:
        """(P4Info, compiler output) of ``program``: bmv2 build/<p>.json; tofino build/tofino/<p>/;
        ebpf build/ebpf/<p>.o (loaded by whoever runs the switch, never by the controller)."""
        if self.api == "nikss":
            d = build_dir / self.build_subdir
            return d / f"{program}.p4info.txtpb", d / f"{program}.o"
        if self.device_bin:
            d = build_dir / self.build_subdir
            return d / f"{program}.p4info.txtpb", d / program
        return build_dir / f"{program}.p4info.txtpb", build_dir / f"{program}.json"

    def p4blob(self, output: Path) -> Path | bytes:
        """What finsy sends as p4_device_config: BMv2's JSON (the file itself), or Tofino's packed
        config built from the bf-p4c output directory (program name = the directory's name)."""
        if self.api == "nikss":
            return output  # never sent: the harness loads the pipeline (fabric/nikss.py)
        if not self.device_bin:
            if not output.is_file():
                raise ControllerError(f"pipeline {output} not found: run 'make build' first")
            return output
        return self.device_config(output)

    def device_config(self, output: Path) -> bytes:
        if not self.device_bin:
            return self.p4blob(output).read_bytes()
        parts = []
        for f in (output / "pipe" / self.device_bin, output / "pipe" / "context.json"):
            if not f.is_file():
                raise ControllerError(f"pipeline {f} not found: compile the Tofino program with bf-p4c first")
            parts.append(f.read_bytes())
        return pack_tofino_config(output.name, *parts)


def is_slot_config(e: object) -> bool:
    """The slot config update (the ``slot_state.config`` default action, rotor or ToR)."""
    return (isinstance(e, fy.P4TableEntry) and e.is_default_action and e.action is not None
            and str(e.table_id).endswith(".slot_state.config")
            and str(e.action.name).endswith(".slot_state.configure"))


def clock_start_entities(target: Target, entities: Iterable[object], now_us: float | None = None) -> list[object]:
    """What the controller writes before ``entities`` so that the clock starts right (TNA,
    p4src/tna/include/control/slot_state.p4): cell ``gen & 1`` of the cycle register holds the
    switch-local time at which cycle 0 ends, epoch - offset + cycle, in units, wrapped.  Read
    from the config entry about to be written, so the two cannot disagree.  Also refuses a
    cycle the phase key cannot hold.  Nothing for a target whose program restarts itself.

    ``now_us`` (common time): a config rewritten mid-run (a new offset, same epoch) starts the
    cell at the end of the cycle running then instead: from cycle 0's end the register would
    catch up one cycle per packet, each dropped as NOT_STARTED.  A cycle boundary passing before
    the write lands costs one such packet, never a wrong matching (every cycle end the cell can
    hold is epoch-aligned)."""
    out: list[object] = []
    for e in entities:
        if not is_slot_config(e):
            continue
        a = e.action.args
        if a["cycle"] >= 1 << target.phase_bits:
            raise ControllerError(f"cycle of {a['cycle']} {target.name} time units is too long: the phase key "
                                  f"holds {target.phase_bits} bits (a cycle under "
                                  f"{(1 << target.phase_bits) * target.time_unit_ns / 1e6:g} ms)")
        if target.cycle_register is None or a["mode"] != MODE_CLOCK:
            continue
        control = str(e.table_id)[: -len(".config")]
        mask = (1 << target.time_bits) - 1
        cycles = 0
        if now_us is not None and a["cycle"] > 0:
            since = (target.to_units(now_us) - a["epoch_us"]) & mask
            # Signed: a time before the epoch starts at cycle 0, like an install.
            cycles = 0 if since >> (target.time_bits - 1) else since // a["cycle"]
        end = (a["epoch_us"] - a["offset"] + (cycles + 1) * a["cycle"]) & mask
        out.append(~fy.P4RegisterEntry(f"{control}.{target.cycle_register}", index=a["gen"] & 1, data=end))
    return out


def find_value_set(wanted: str, declared: Iterable[str]) -> str | None:
    """``wanted`` as the P4Info names it: exactly, or with a prefix (bf-p4c may qualify names
    with the pipeline, "pipe.RotorIngressParser.cpu_port"); None when absent or ambiguous."""
    names = list(declared)
    if wanted in names:
        return wanted
    hits = [n for n in names if n.endswith("." + wanted)]
    return hits[0] if len(hits) == 1 else None


def pack_tofino_config(program: str, tofino_bin: bytes, context_json: bytes) -> bytes:
    """Barefoot's p4_device_config (what bf_switchd's P4Runtime server takes): little-endian
    u32 length + bytes, for the program name, tofino.bin and context.json in turn."""
    out = b""
    for part in (program.encode(), tofino_bin, context_json):
        out += struct.pack("<I", len(part)) + part
    return out


def unpack_tofino_config(blob: bytes) -> tuple[str, bytes, bytes]:
    """The inverse of pack_tofino_config: (program, tofino.bin, context.json)."""
    parts, i = [], 0
    for _ in range(3):
        if i + 4 > len(blob):
            raise ValueError("truncated Tofino device config")
        (n,) = struct.unpack_from("<I", blob, i)
        i += 4
        if i + n > len(blob):
            raise ValueError("truncated Tofino device config")
        parts.append(blob[i:i + n])
        i += n
    if i != len(blob):
        raise ValueError(f"{len(blob) - i} bytes after the Tofino device config")
    return parts[0].decode(), parts[1], parts[2]


BMV2 = Target(name="bmv2", time_unit_ns=1000, time_bits=48, report_unit_ns=1000, modes=("signal", "clock"),
              cpu_port=255, clock_port=254, cpu_value_set=None, clock_value_set=None,
              drop_counters=("drop_counter",))

# Tofino: times in units of 1024 ns (bits [41:10] of the 48-bit ns timestamp), 32 bits wide;
# CPU port 320 is pipe 0's PCIe port on a 4-pipe Tofino 1 (192 on 2-pipe parts: --cpu-port).
TOFINO = Target(name="tofino", time_unit_ns=1024, time_bits=32, report_unit_ns=1, modes=("clock",),
                cpu_port=320, clock_port=None, cpu_value_set="{Kind}IngressParser.cpu_port",
                clock_value_set="{Kind}IngressParser.clock_port",
                drop_counters=("drop_counter", "egress_drop_counter"), device_bin="tofino.bin",
                build_subdir="tofino", cycle_register="clock_cycle_end", phase_bits=16)

# PSA on eBPF (p4src/psa, NIKSS): times in ns of the kernel clock every switch shares
# (CLOCK_MONOTONIC: the offset is 0), 64 bits wide, durations too: a microsecond schedule converts
# exactly, so the program finds the slot by dividing the phase by a grain of the bounds.  Clock
# mode only (no CPU port).  Its entities go through control/nikss.py, not P4Runtime; the counters
# are the v1model names, which the adapter finds in the PSA controls (nikss.counter_name).
EBPF = Target(name="ebpf", time_unit_ns=1, time_bits=64, report_unit_ns=1, modes=("clock",),
              cpu_port=0, clock_port=None, cpu_value_set=None, clock_value_set=None,
              drop_counters=("drop_counter", "egress_drop_counter"),
              build_subdir="ebpf", phase_bits=64, duration_bits=64, shared_clock=True, api="nikss")

TARGETS = {t.name: t for t in (BMV2, TOFINO, EBPF)}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        names = list(TARGETS)
        raise ControllerError(f"unknown target {name!r} ({', '.join(names[:-1])} or {names[-1]})") from None
