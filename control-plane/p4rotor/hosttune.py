"""Host tuning for precise runs: keep the CPUs awake.

On a virtual machine an idle vCPU halts, and a thread woken on it (BMv2's receive thread
when a frame arrives; the controller's timer thread at a slot boundary) runs only after
the hypervisor resumes the vCPU: ~20-100 us later here, 300+ us in the tail.  A busy
loop at SCHED_IDLE priority on each CPU keeps the vCPUs running without taking time
from anything else: the kernel runs a SCHED_IDLE task only when nothing else wants the
CPU and preempts it at once on a wake-up.  It is the user-space form of booting with
``idle=poll`` (what low-latency setups do); it costs power, not throughput.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator, Sequence

_SPIN = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "while True:\n"
    "    pass\n"
)


def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@contextlib.contextmanager
def keep_awake(enabled: bool = True, cpu_list: Sequence[int] | None = None) -> Iterator[list[int]]:
    """One SCHED_IDLE busy loop per CPU for the duration; yields their PIDs (stopped by PID)."""
    procs: list[subprocess.Popen] = []
    try:
        if enabled:
            for c in (cpus() if cpu_list is None else cpu_list):
                procs.append(subprocess.Popen([sys.executable, "-c", _SPIN, str(c)],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGKILL)
            p.wait()


def is_idle_policy(pid: int) -> bool:
    return os.sched_getscheduler(pid) == os.SCHED_IDLE
