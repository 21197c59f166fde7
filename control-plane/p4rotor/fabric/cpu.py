"""Idle CPUs poll instead of halting while a timing-sensitive emulation runs (Linux PM QoS).

On a VM an idle vCPU halts (here: ``cpuidle`` driver haltpoll, with guest polling off), and the
first packet after a quiet spell pays for waking it at every BMv2 thread it crosses.  Measured on
the fct fabric (docs/notes/cold-switches.md): a SYN took 1.5-1.7 ms across three
switches where the same flow's data segment took 0.55 ms a few ms later, and one-packet flows
after 2.5 s of quiet took 5.5 ms at the median against 4.7 ms 50 ms after another flow.  With a
CPU latency request of 0 us (``/dev/cpu_dma_latency``) the idle loop polls: the same flows took
3.9 and 2.9 ms, the one-packet floor 2.42 -> 1.98 ms.

The request lasts while the file stays open and ends when it is closed or this process exits,
so nothing outlives the emulation.  The cost: idle CPUs spin (they still yield to any runnable
task at once).  Where the file is absent or not writable (no root, a container) the emulation
runs as before and says so.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

DEVICE = Path("/dev/cpu_dma_latency")


class IdlePoll:
    """Hold a CPU wake-up latency request of ``latency_us`` (0: poll) until :meth:`release`."""

    def __init__(self, device: Path = DEVICE, latency_us: int = 0):
        self.device = device
        self.latency_us = latency_us
        self.fd: int | None = None
        self.why_not: str | None = None

    def hold(self) -> bool:
        """True if the request now holds; else ``why_not`` says why (one line)."""
        if self.fd is not None:
            return True
        try:
            fd = os.open(self.device, os.O_WRONLY)
        except OSError as ex:
            self.why_not = f"cannot open {self.device}: {ex.strerror}"
            return False
        try:
            os.write(fd, struct.pack("i", self.latency_us))  # the kernel reads a 32-bit int
        except OSError as ex:
            os.close(fd)
            self.why_not = f"cannot write {self.device}: {ex.strerror}"
            return False
        self.fd, self.why_not = fd, None
        return True

    @property
    def held(self) -> bool:
        return self.fd is not None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "IdlePoll":
        self.hold()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# -- Which CPUs the switches run on ----------------------------------------------------------
#
# On a 2-CPU machine with the switches free to run anywhere, a one-packet flow's FCT was 4.1 ms
# (median) and its sender's and receiver's Python took 0.67 and 0.78 ms of it to answer: the
# switches' real-time threads held both CPUs.  With every switch on the last CPU the same flows
# took 2.3 ms, the two Pythons 0.31 and 0.05 ms, and a switch's frames no longer cross CPUs
# between its threads.  Not the fct default: the fastest flow gains more than the typical one,
# so slowdowns against it rise at low load (docs/notes/switch-cpus.md).


def cpu_list(text: str, available: set[int] | None = None) -> str:
    """``text``, a CPU list as taskset takes it ("1", "0-1", "1,3"), checked against the CPUs this
    process may use (``available``; default its affinity) and normalised ("1,3"); ValueError
    with a one-line reason otherwise."""
    avail = set(os.sched_getaffinity(0)) if available is None else set(available)
    cpus: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            raise ValueError(f"CPU list {text!r}: {part!r} is not a CPU number or range (e.g. 1, 0-1, 1,3)") from None
        if a < 0 or b < a:
            raise ValueError(f"CPU list {text!r}: {part!r} is not a range of CPU numbers")
        cpus.update(range(a, b + 1))
    missing = sorted(cpus - avail)
    if missing:
        raise ValueError(f"CPU list {text!r}: CPU {missing[0]} is not one this machine lets us use "
                         f"({_ranges(sorted(avail))})")
    if cpus == avail:
        raise ValueError(f"CPU list {text!r}: leaves no CPU for the hosts (use 'none' to let the switches "
                         "run anywhere)")
    return ",".join(map(str, sorted(cpus)))


def default_switch_cpus(available: set[int] | None = None) -> str | None:
    """The switches' CPUs by default: the upper half of the CPUs this process may use (with 2:
    the last one); None (anywhere) on one CPU."""
    avail = sorted(os.sched_getaffinity(0) if available is None else available)
    if len(avail) < 2:
        return None
    return ",".join(map(str, avail[len(avail) - len(avail) // 2:]))


def _ranges(cpus: list[int]) -> str:
    return ",".join(map(str, cpus)) if cpus else "none"
