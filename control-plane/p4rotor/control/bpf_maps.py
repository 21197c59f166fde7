"""The bpf(2) and BTF layer of the eBPF adapter's fast path (nikss_maps.py): pinned maps opened,
read and written by the system call (ctypes), and a map's key and value layouts read from its BTF
as NIKSS (lib/nikss_table.c) takes them."""

from __future__ import annotations

import ctypes
import dataclasses
import errno as errno_mod
import os
import struct
from pathlib import Path


BPFFS = Path("/sys/fs/bpf")
_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine, 321)
_MAP_LOOKUP_ELEM, _MAP_UPDATE_ELEM, _MAP_DELETE_ELEM, _MAP_GET_NEXT_KEY = 1, 2, 3, 4
_OBJ_GET, _OBJ_GET_INFO_BY_FD, _BTF_GET_FD_BY_ID = 7, 15, 19
_MAP_LOOKUP_BATCH = 24  # Linux 5.6
BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2
MAP_HASH, MAP_ARRAY, MAP_LPM_TRIE = 1, 2, 11
# BTF kinds (include/uapi/linux/btf.h)
_INT, _PTR, _ARRAY, _STRUCT, _UNION, _TYPEDEF = 1, 2, 3, 4, 5, 8
_BTF_EXTRA = {1: lambda v: 4, 3: lambda v: 12, 4: lambda v: 12 * v, 5: lambda v: 12 * v, 6: lambda v: 8 * v,
              13: lambda v: 8 * v, 14: lambda v: 4, 15: lambda v: 12 * v, 17: lambda v: 4, 19: lambda v: 12 * v}
_BTF_BARE = {2, 7, 8, 9, 10, 11, 12, 16, 18}    # kinds with nothing after their type record

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


class _ObjGetAttr(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32),
                ("file_flags", ctypes.c_uint32), ("path_fd", ctypes.c_int32)]


class _ElemAttr(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


class _BatchAttr(ctypes.Structure):
    _fields_ = [("in_batch", ctypes.c_uint64), ("out_batch", ctypes.c_uint64), ("keys", ctypes.c_uint64),
                ("values", ctypes.c_uint64), ("count", ctypes.c_uint32), ("map_fd", ctypes.c_uint32),
                ("elem_flags", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


class _InfoAttr(ctypes.Structure):
    _fields_ = [("bpf_fd", ctypes.c_uint32), ("info_len", ctypes.c_uint32), ("info", ctypes.c_uint64)]


class _IdAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32),
                ("token_fd", ctypes.c_uint32)]


class _MapInfo(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("id", ctypes.c_uint32), ("key_size", ctypes.c_uint32),
                ("value_size", ctypes.c_uint32), ("max_entries", ctypes.c_uint32), ("map_flags", ctypes.c_uint32),
                ("name", ctypes.c_char * 16), ("ifindex", ctypes.c_uint32),
                ("btf_vmlinux_value_type_id", ctypes.c_uint32), ("netns_dev", ctypes.c_uint64),
                ("netns_ino", ctypes.c_uint64), ("btf_id", ctypes.c_uint32), ("btf_key_type_id", ctypes.c_uint32),
                ("btf_value_type_id", ctypes.c_uint32), ("btf_vmlinux_id", ctypes.c_uint32),
                ("map_extra", ctypes.c_uint64)]


class _BtfInfo(ctypes.Structure):
    _fields_ = [("btf", ctypes.c_uint64), ("btf_size", ctypes.c_uint32), ("id", ctypes.c_uint32),
                ("name", ctypes.c_uint64), ("name_len", ctypes.c_uint32), ("kernel_btf", ctypes.c_uint32)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    """bpf(2); the result, or -errno."""
    r = _syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    return r if r >= 0 else -ctypes.get_errno()


def _check(r: int, what: str) -> int:
    if r < 0:
        raise OSError(-r, f"{what}: {os.strerror(-r)}")
    return r


def obj_get(pin: Path | str) -> int:
    path = ctypes.create_string_buffer(os.fsencode(pin))
    return _check(_bpf(_OBJ_GET, _ObjGetAttr(pathname=ctypes.addressof(path))), f"BPF_OBJ_GET {pin}")


def _info(fd: int, info: ctypes.Structure) -> ctypes.Structure:
    _check(_bpf(_OBJ_GET_INFO_BY_FD, _InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info),
                                              info=ctypes.addressof(info))), "BPF_OBJ_GET_INFO_BY_FD")
    return info


def map_info(fd: int) -> _MapInfo:
    return _info(fd, _MapInfo())


def btf_bytes(btf_id: int) -> bytes:
    """The raw BTF (header, types, strings) the kernel holds as ``btf_id``."""
    fd = _check(_bpf(_BTF_GET_FD_BY_ID, _IdAttr(id=btf_id)), f"BPF_BTF_GET_FD_BY_ID {btf_id}")
    try:
        size = _info(fd, _BtfInfo()).btf_size
        buf = ctypes.create_string_buffer(size)
        _info(fd, _BtfInfo(btf=ctypes.addressof(buf), btf_size=size))
        return buf.raw
    finally:
        os.close(fd)


def lookup_array(pin: Path | str, keys: list[int]) -> dict[int, bytes]:
    """The values at ``keys`` of a pinned array map (u32 keys; a key it lacks is left out):
    a few cells of a large counter without reading it whole.  Many keys close together are read
    as their range in one BPF_MAP_LOOKUP_BATCH (a per-slot counter's cells of a run: ~700 system
    calls become one), else one lookup each."""
    fd = obj_get(pin)
    try:
        info = map_info(fd)
        if len(keys) >= BATCH_MIN_KEYS and info.type == MAP_ARRAY:
            lo, hi = min(keys), min(max(keys), info.max_entries - 1)
            if lo <= hi and hi - lo + 1 <= BATCH_SPAN_PER_KEY * len(keys):
                raw = _lookup_range(fd, lo, hi - lo + 1, info.value_size)
                if raw is not None:  # only the wanted cells are cut out of it (a range is ~7 000)
                    vs = info.value_size
                    return {k: raw[(k - lo) * vs:(k - lo + 1) * vs] for k in keys if lo <= k <= hi}
        key, val = ctypes.c_uint32(0), ctypes.create_string_buffer(info.value_size)
        attr = _ElemAttr(map_fd=fd, key=ctypes.addressof(key), value=ctypes.addressof(val))
        out = {}
        for k in keys:
            key.value = k
            if _bpf(_MAP_LOOKUP_ELEM, attr) == 0:
                out[k] = val.raw
        return out
    finally:
        os.close(fd)


BATCH_MIN_KEYS = 16      # fewer keys: one lookup each
BATCH_SPAN_PER_KEY = 64  # a range at most this many cells per key wanted is read whole


def _lookup_range(fd: int, first: int, count: int, value_size: int) -> bytes | None:
    """Cells ``first .. first + count - 1`` of an array map, by batches, as one buffer (cell i at
    ``i * value_size``); None if the kernel has no batch lookup (the caller looks them up one by
    one).  The batch's ``in_batch`` is the key before the first read (NULL: from key 0)."""
    vals = ctypes.create_string_buffer(count * value_size)
    keys = (ctypes.c_uint32 * count)()
    prev, out_b = ctypes.c_uint32(first - 1), ctypes.c_uint32(0)
    done = 0
    while done < count:
        attr = _BatchAttr(in_batch=ctypes.addressof(prev) if first + done > 0 else 0,
                          out_batch=ctypes.addressof(out_b),
                          keys=ctypes.addressof(keys) + 4 * done, values=ctypes.addressof(vals) + value_size * done,
                          count=count - done, map_fd=fd)
        r = _bpf(_MAP_LOOKUP_BATCH, attr)
        if r < 0 and r != -errno_mod.ENOENT:  # ENOENT: the map's end reached, attr.count filled
            return None if done == 0 else _check(r, "BPF_MAP_LOOKUP_BATCH")
        if attr.count == 0:
            break
        done += attr.count
        prev.value = out_b.value
        if r == -errno_mod.ENOENT:
            break
    # An array's keys come in order, one each: the first and the last placed are every one.
    if done != count or keys[0] != first or keys[count - 1] != first + count - 1:
        return None
    return vals.raw


def dump_map(fd: int) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a map, in key order (BPF_MAP_GET_NEXT_KEY, BPF_MAP_LOOKUP_ELEM)."""
    info = map_info(fd)
    key, nxt = ctypes.create_string_buffer(info.key_size), ctypes.create_string_buffer(info.key_size)
    val = ctypes.create_string_buffer(info.value_size)
    out, first = [], True
    while True:
        r = _bpf(_MAP_GET_NEXT_KEY, _ElemAttr(map_fd=fd, key=0 if first else ctypes.addressof(key),
                                              value=ctypes.addressof(nxt)))
        if r == -errno_mod.ENOENT:
            return sorted(out)
        _check(r, "BPF_MAP_GET_NEXT_KEY")
        first = False
        ctypes.memmove(key, nxt, info.key_size)
        if _bpf(_MAP_LOOKUP_ELEM, _ElemAttr(map_fd=fd, key=ctypes.addressof(key), value=ctypes.addressof(val))) == 0:
            out.append((key.raw, val.raw))


# -- BTF ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Type:
    kind: int
    name: str
    size_or_type: int
    vlen: int
    kind_flag: bool
    members: list[tuple[str, int, int]]       # (name, type, offset) of a struct or union
    array: tuple[int, int] | None = None      # (element type, count)


class Btf:
    """The types of one BTF object, enough to lay out map keys and values as NIKSS does."""

    def __init__(self, raw: bytes):
        magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", raw)
        if magic != 0xEB9F:
            raise ValueError("not BTF (or not little-endian)")
        strings = raw[hdr_len + str_off: hdr_len + str_off + str_len]

        def name(off: int) -> str:
            return strings[off:strings.index(b"\0", off)].decode()

        self.types: list[_Type | None] = [None]
        pos, end = hdr_len + type_off, hdr_len + type_off + type_len
        while pos < end:
            name_off, info, st = struct.unpack_from("<III", raw, pos)
            pos += 12
            kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, bool(info >> 31)
            t = _Type(kind, name(name_off), st, vlen, kflag, [])
            if kind in (_STRUCT, _UNION):
                t.members = [(name(n), ty, off) for n, ty, off in struct.iter_unpack("<III", raw[pos:pos + 12 * vlen])]
            elif kind == _ARRAY:
                elem, _idx, n = struct.unpack_from("<III", raw, pos)
                t.array = (elem, n)
            if kind not in _BTF_EXTRA and kind not in _BTF_BARE:
                raise ValueError(f"BTF kind {kind} unknown here")   # its size unknown: the rest unreadable
            pos += _BTF_EXTRA[kind](vlen) if kind in _BTF_EXTRA else 0
            self.types.append(t)
        if pos != end:
            raise ValueError("BTF types overrun their section")

    def follow(self, tid: int) -> int:
        """NIKSS's follow_types: through typedefs and pointers (not const or volatile)."""
        while tid and self.types[tid].kind in (_TYPEDEF, _PTR):
            tid = self.types[tid].size_or_type
        return tid

    def size(self, tid: int) -> int | None:
        """btf_get_type_size_by_id: ints, structs, unions and arrays have one; others not."""
        tid = self.follow(tid)
        t = self.types[tid] if tid else None
        if t is None:
            return None
        if t.kind in (_INT, _STRUCT, _UNION):
            return t.size_or_type
        if t.kind == _ARRAY:
            elem = self.size(t.array[0])
            return None if elem is None else elem * t.array[1]
        return None

    def fields(self, tid: int) -> list[tuple[str, int, int]] | None:
        """(name, byte offset, size) of a struct's or union's members; None when one is a bit
        field or has no size (NIKSS would not lay it out byte by byte as this does)."""
        t = self.types[tid]
        out = []
        for n, ty, off in t.members:
            if t.kind_flag and off >> 24:
                return None
            bit = off & 0xFFFFFF if t.kind_flag else off
            size = self.size(ty)
            if bit % 8 or size is None:
                return None
            out.append((n, bit // 8, size))
        return out


# -- layouts ------------------------------------------------------------------------------------

class _Unsupported(Exception):
    """This map is not written in-process: its commands go to the fallback."""


@dataclasses.dataclass
class _Value:
    size: int
    action_offset: int
    action_size: int
    actions: dict[str, tuple[int, list[tuple[int, int]]]]   # name -> (id, [(offset, size)] of params)


def _value_layout(btf: Btf, tid: int, size: int) -> _Value:
    tid = btf.follow(tid)
    if not tid or btf.types[tid].kind != _STRUCT or btf.types[tid].size_or_type != size:
        raise _Unsupported("value is not a struct of the map's size")
    members = btf.fields(tid)
    if members is None or sorted(m[0] for m in members) != ["action", "u"]:
        raise _Unsupported("value holds more than an action and its data (direct objects, references)")
    by_name = {n: (off, sz) for n, off, sz in members}
    if not 4 <= by_name["action"][1] <= 8:
        raise _Unsupported("action id field not of 4 to 8 bytes")
    utid = btf.follow(next(ty for n, ty, _ in btf.types[tid].members if n == "u"))
    if btf.types[utid].kind != _UNION:
        raise _Unsupported("u is not a union")
    base = by_name["u"][0]
    offsets = btf.fields(utid)
    if offsets is None:
        raise _Unsupported("u has a member without a size")
    actions = {}
    for idx, ((aname, aty, _), (_, aoff, _)) in enumerate(zip(btf.types[utid].members, offsets)):
        atid = btf.follow(aty)
        params = btf.fields(atid) if atid and btf.types[atid].kind == _STRUCT else None
        if params is None:
            raise _Unsupported(f"action {aname}'s data is not a plain struct")
        actions[aname] = (idx, [(base + aoff + off, sz) for _, off, sz in params])
    return _Value(size, *by_name["action"], actions)


def _key_layout(btf: Btf, tid: int, size: int) -> list[tuple[int, int]]:
    tid = btf.follow(tid)
    if not tid or btf.types[tid].kind != _STRUCT or btf.types[tid].size_or_type != size:
        raise _Unsupported("key is not a struct of the map's size")
    t = btf.types[tid]
    if len(t.members) == 1 and t.members[0][0] == "__dummy_table_key":
        return []                                   # a keyless table: its key stays zeroed
    fields = btf.fields(tid)
    if fields is None:
        raise _Unsupported("key has a bit field or a member without a size")
    return [(off, sz) for _, off, sz in fields]
