"""bpf_maps.lookup_array reads many cells of an array map in one batch (BPF_MAP_LOOKUP_BATCH)
and gives what one lookup per key gives: on a map made here, pinned, and removed."""

from __future__ import annotations

import ctypes
import os
import random
from pathlib import Path

import pytest

from p4rotor.control import bpf_maps as B

BPFFS = Path("/sys/fs/bpf")


class _CreateAttr(ctypes.Structure):
    _fields_ = [("map_type", ctypes.c_uint32), ("key_size", ctypes.c_uint32), ("value_size", ctypes.c_uint32),
                ("max_entries", ctypes.c_uint32), ("map_flags", ctypes.c_uint32)]


class _PinAttr(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


def _skip() -> str | None:
    if os.geteuid() != 0:
        return "bpf batch lookup not tested: needs root"
    if not os.path.ismount(BPFFS):
        from p4rotor.fabric.nikss import ensure_bpffs  # what the eBPF harness does before a load

        try:
            ensure_bpffs()
        except Exception as ex:  # noqa: BLE001 (any failure to mount: the test is skipped, named)
            return f"bpf batch lookup not tested: no BPF file system at {BPFFS} ({ex})"
    return None


@pytest.fixture
def array_map():
    why = _skip()
    if why:
        pytest.skip(why)
    fd = B._check(B._bpf(0, _CreateAttr(map_type=B.MAP_ARRAY, key_size=4, value_size=16, max_entries=70_000)),
                  "BPF_MAP_CREATE")
    pin = BPFFS / f"p4rotor-test-batch-{os.getpid()}"
    path = ctypes.create_string_buffer(os.fsencode(pin))
    try:
        B._check(B._bpf(6, _PinAttr(pathname=ctypes.addressof(path), bpf_fd=fd)), "BPF_OBJ_PIN")
        yield fd, pin
    finally:
        os.close(fd)
        pin.unlink(missing_ok=True)
    assert not pin.exists()


def _put(fd: int, k: int, v: bytes) -> None:
    key, val = ctypes.c_uint32(k), ctypes.create_string_buffer(v, 16)
    B._check(B._bpf(B._MAP_UPDATE_ELEM, B._ElemAttr(map_fd=fd, key=ctypes.addressof(key),
                                                     value=ctypes.addressof(val))), "update")


def test_batch_is_the_lookups(array_map, monkeypatch):
    fd, pin = array_map
    rng = random.Random(3)
    cells = sorted(rng.sample(range(0, 28 * 256), 700)) + [0, 69_999]
    for k in cells:
        _put(fd, k, k.to_bytes(8, "little") + (3 * k).to_bytes(8, "little"))
    for keys in (cells, cells[:40], [0] + list(range(1, 30)), list(range(69_980, 70_000)), cells + [70_000, 80_000]):
        got = B.lookup_array(pin, keys)
        monkeypatch.setattr(B, "BATCH_MIN_KEYS", 10 ** 9)
        want = B.lookup_array(pin, keys)
        monkeypatch.undo()
        assert got == want and set(got) == {k for k in keys if k < 70_000}
    assert B.lookup_array(pin, cells)[cells[5]][8:] == (3 * cells[5]).to_bytes(8, "little")


def test_the_batch_is_used(array_map):
    fd, pin = array_map
    _put(fd, 300, b"\x01" * 16)
    got = B._lookup_range(fd, 256, 1024, 16)
    assert got is not None and len(got) == 1024 * 16 and got[44 * 16:45 * 16] == b"\x01" * 16 and got[:16] == b"\0" * 16
    assert B._lookup_range(fd, 0, 70_000, 16) is not None           # from key 0 (no in_batch) to the end
