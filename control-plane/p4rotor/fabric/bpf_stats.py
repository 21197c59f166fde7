"""What the kernel says about a loaded eBPF pipeline: its programs' run time and its maps' memory.

A NIKSS pipeline pins its programs and maps under /sys/fs/bpf/pipeline<id>/.  Opening a pin
(bpf(2) BPF_OBJ_GET) gives a file descriptor whose /proc/self/fdinfo entry carries the numbers:
``run_time_ns`` and ``run_cnt`` for a program (counted only while the sysctl
``kernel.bpf_stats_enabled`` is 1: ``stats_enabled()`` turns it on for a measurement and restores
it), ``memlock`` for a map (the bytes the kernel charges for it).  No bpftool needed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
from pathlib import Path
from typing import Iterator

BPFFS = Path("/sys/fs/bpf")
STATS_SYSCTL = Path("/proc/sys/kernel/bpf_stats_enabled")
_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine, 321)
_BPF_OBJ_GET = 7


class _ObjGetAttr(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32),
                ("file_flags", ctypes.c_uint32), ("path_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)


def fdinfo(pin: Path) -> dict[str, str]:
    """The fdinfo fields of the pinned program or map at ``pin``."""
    path = ctypes.create_string_buffer(os.fsencode(pin))
    attr = _ObjGetAttr(pathname=ctypes.cast(path, ctypes.c_void_p).value)
    fd = _libc.syscall(_NR_BPF, _BPF_OBJ_GET, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"BPF_OBJ_GET: {os.strerror(err)}", str(pin))
    try:
        text = Path(f"/proc/self/fdinfo/{fd}").read_text()
    finally:
        os.close(fd)
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


@dataclasses.dataclass(frozen=True)
class ProgStats:
    name: str
    run_time_ns: int
    run_cnt: int


def pipeline_dir(pipeline: int) -> Path:
    return BPFFS / f"pipeline{pipeline}"


def prog_stats(pipeline: int) -> list[ProgStats]:
    """Run time and runs of every program the pipeline pinned (zero unless stats are enabled)."""
    out = []
    for pin in sorted(p for p in pipeline_dir(pipeline).iterdir() if p.is_file()):
        info = fdinfo(pin)
        if "run_cnt" in info:
            out.append(ProgStats(pin.name, int(info["run_time_ns"]), int(info["run_cnt"])))
    return out


def map_memlock(pipeline: int) -> int:
    """Bytes the kernel charges for the pipeline's maps (its tables, registers, counters)."""
    maps = pipeline_dir(pipeline) / "maps"
    return sum(int(fdinfo(p).get("memlock", 0)) for p in sorted(maps.iterdir()) if p.is_file())


@contextlib.contextmanager
def stats_enabled() -> Iterator[None]:
    """kernel.bpf_stats_enabled = 1 for the block (it costs two clock reads per program run), then
    back to what it was."""
    before = STATS_SYSCTL.read_text().strip()
    STATS_SYSCTL.write_text("1")
    try:
        yield
    finally:
        STATS_SYSCTL.write_text(before)
