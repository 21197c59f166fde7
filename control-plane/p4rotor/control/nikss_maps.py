"""The fast path of the eBPF adapter: table writes done in this process on the pipeline's pinned maps.

``nikss-ctl`` costs a process per entry (docs/targets.md has the rate).  A NIKSS pipeline pins
its maps under /sys/fs/bpf/pipeline<id>/maps/<name>: an exact-match table ``T`` is the BPF hash
map ``T``, its default action the one-cell array map ``T_defaultAction``.  ``map_runner`` is a
``Runner`` (control/nikss.py) that executes these ``nikss-ctl`` commands itself, with the bpf(2)
system call, and hands every other one to the fallback runner (nikss-ctl) unchanged:

- ``table add|update pipe ID T action name A [key K...] [data D...] [priority P]`` on a hash map;
- ``table delete pipe ID T key K...`` on a hash map (without a key it clears: nikss-ctl's);
- ``table default set pipe ID T action name A [data D...]`` where ``T`` is a map (not ternary).

It writes the bytes nikss-ctl (lib/nikss_table.c) writes: the key and value layouts come from the
map's BTF, as NIKSS takes them; a field gets the number's bytes in host order (network order right
aligned for a field over 8 bytes), the action id (the action's index in the value's union ``u``)
at ``action``, its parameters in that union; a keyless table's key is its zeroed dummy byte; an
exact table takes no priority.  add is BPF_NOEXIST, update BPF_EXIST, a default BPF_ANY.  Its
errors are nikss-ctl's, one line naming the table (``NikssError``).  Whatever nikss-ctl would not
do in BTF mode (a wrong number of keys or parameters, a number too wide for its field: it falls
back to a byte-by-byte mode then), whatever this module does not parse (an action by id, direct
counters, IPv6 or MAC values, widths), and tables with more in their value than an action and
its data (direct counters or meters, action profiles) or with a cache map go to the fallback.

Map descriptors and layouts are cached per (pipeline, map); a pin replaced (the pipeline
reloaded) is opened again.  ``close()`` (or ``with``) closes the descriptors.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from pathlib import Path
from typing import Sequence

from .nikss import NikssError, Runner
from .bpf_maps import (BPFFS, BPF_EXIST, BPF_NOEXIST, Btf, MAP_ARRAY, MAP_HASH, _ElemAttr, _MAP_DELETE_ELEM, _MAP_UPDATE_ELEM, _NR_BPF, _Unsupported, _Value, _key_layout, _syscall, _value_layout, btf_bytes, map_info, obj_get)


class _Buffer:
    """A map's key or value bytes, filled in place, at a fixed address for bpf(2)."""

    def __init__(self, size: int):
        self.bytes = bytearray(max(size, 1))
        self.zero = bytes(len(self.bytes))
        self.view = (ctypes.c_char * len(self.bytes)).from_buffer(self.bytes)   # the bytes cannot move
        self.addr = ctypes.addressof(self.view)


class _Table:
    """One table of one pipeline: its hash map (``fd``; -1 when only its default is written
    here: an LPM table's), key fields (offset, size, byte order), value layout and default
    map (``default_fd``; -1 if none), with the buffers and bpf(2) attributes its writes use."""

    def __init__(self, ino: int, fd: int, key_size: int, key: list[tuple[int, int]] | None, value: _Value,
                 default_fd: int):
        self.ino, self.fd, self.default_fd = ino, fd, default_fd
        self.key = None if key is None else [(off, sz, "big" if sz > 8 else "little") for off, sz in key]
        self.actions = {name: (aid.to_bytes(value.action_size, "little"),
                               [(off, sz, "big" if sz > 8 else "little") for off, sz in params])
                        for name, (aid, params) in value.actions.items()}
        self.action_at = slice(value.action_offset, value.action_offset + value.action_size)
        self.k, self.v = _Buffer(key_size), _Buffer(value.size)
        self.default_key = _Buffer(4)
        self.write = _ElemAttr(map_fd=max(fd, 0), key=self.k.addr, value=self.v.addr)
        self.write_default = _ElemAttr(map_fd=max(default_fd, 0), key=self.default_key.addr, value=self.v.addr)
        self.delete = _ElemAttr(map_fd=max(fd, 0), key=self.k.addr)   # nothing after the key (EINVAL)
        self.write_ref = ctypes.byref(self.write)
        self.delete_ref = ctypes.byref(self.delete)
        self.write_default_ref = ctypes.byref(self.write_default)

    def close(self) -> None:
        for f in (self.fd, self.default_fd):
            if f >= 0:
                os.close(f)
        self.fd = self.default_fd = -1


# -- the runner ---------------------------------------------------------------------------------

_HEX = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                   r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\Z")


def _number(text: str) -> tuple[int, int] | None:
    """A value as nikss-ctl reads it (translate_data_to_bytes): (number, its byte length), for a
    dotted IPv4 address (4 bytes) or a decimal or hexadecimal number (its least bytes, one for
    0); None for anything else (IPv6, MAC, width, octal, binary: left to nikss-ctl)."""
    if text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1):
        v = int(text)
    elif _HEX.match(text):
        v = int(text, 16)
    elif _IPV4.match(text):
        a, b, c, d = map(int, text.split("."))
        return (a << 24) | (b << 16) | (c << 8) | d, 4
    else:
        return None
    return v, (v.bit_length() + 7) >> 3 or 1


def _fill(buf: bytearray, fields: list[tuple[int, int, str]], texts: list[str]) -> bool:
    """write_buffer_btf for each field: the number in host order, or in network order right
    aligned in a field over 8 bytes; False where nikss-ctl would leave BTF mode (a count that
    does not match, more bytes than the field) or this module does not parse the value."""
    if len(texts) != len(fields):
        return False
    for (off, size, order), text in zip(fields, texts):
        r = _number(text)
        if r is None or r[1] > size:
            return False
        buf[off:off + size] = r[0].to_bytes(size, order)
    return True


_ADD_OPS = {"add": BPF_NOEXIST, "update": BPF_EXIST}


class MapRunner:
    """A ``Runner`` writing exact tables and default actions of NIKSS pipelines in-process
    (``pipeline``: only that one's; None: any), the rest through ``fallback``.  ``in_process`` and
    ``fallen_back`` count the commands each way."""

    def __init__(self, pipeline: int | None, fallback: Runner, bpffs: Path = BPFFS):
        self.pipeline = None if pipeline is None else str(pipeline)
        self.fallback = fallback
        self.bpffs = str(bpffs)
        self.in_process = 0
        self.fallen_back = 0
        # (pipeline, table) -> its layout (None: its commands go to the fallback) and the inode
        # of its pin (0: none); a pin with another inode is a pipeline loaded again.
        self._tables: dict[tuple[str, str], tuple[int, _Table | None]] = {}
        self._btf: dict[int, Btf] = {}
        self._lock = threading.Lock()

    # -- Runner ---------------------------------------------------------------------------
    def __call__(self, args: Sequence[str]) -> str:
        args = list(args)
        with self._lock:
            try:
                done = self._run(args)
            except NikssError:
                self.in_process += 1
                raise
            if done:
                self.in_process += 1
                return ""
            self.fallen_back += 1
        return self.fallback(args)

    def _run(self, a: list[str]) -> bool:
        """The command done in-process (True), or left to the fallback (False)."""
        n = len(a)
        if n < 7 or a[0] != "table":
            return False
        op = a[1]
        if op == "default":
            if a[2] != "set":
                return False
            i = 3
        elif op in _ADD_OPS or op == "delete":
            i = 2
        else:
            return False
        if a[i] != "pipe":
            return False
        pipe, table = a[i + 1], a[i + 2]
        if self.pipeline is not None and pipe != self.pipeline:
            return False
        if not (pipe.isdigit() and pipe.isascii() and (pipe[0] != "0" or pipe == "0")) or "/" in table:
            return False                        # nikss-ctl reads "0x65" as 101; a path is no table
        t = self._table(pipe, table)
        if t is None:
            return False
        i += 3
        if op == "delete":
            if t.fd < 0 or i >= n - 1 or a[i] != "key" or "data" in a or "priority" in a:
                return False                    # without a key: a clear
            key = t.k.bytes
            key[:] = t.k.zero
            if not _fill(key, t.key, a[i + 1:]):
                return False
            _ret(_syscall(_NR_BPF, _MAP_DELETE_ELEM, t.delete_ref, _ELEM_SIZE), a, "failed to delete entry")
            return True
        if i + 2 >= n or a[i] != "action" or a[i + 1] != "name":
            return False                        # an action by id, a reference: nikss-ctl's
        name = a[i + 2]
        i += 3
        action = t.actions.get(name)
        if action is None:
            raise NikssError(f"{_where(a)}: {name}: action not found")
        keys: list[str] = []
        if op != "default":
            if t.fd < 0:
                return False
            if i < n and a[i] == "key":
                j = i + 1
                while j < n and a[j] != "data" and a[j] != "priority":
                    j += 1
                keys, i = a[i + 1:j], j
                if not keys:
                    return False
        elif t.default_fd < 0:
            return False
        data: list[str] = []
        if i < n and a[i] == "data":
            j = i + 1
            while j < n and a[j] != "priority":
                j += 1
            data, i = a[i + 1:j], j
        if i < n and op != "default" and a[i] == "priority":
            if n != i + 2 or _number(a[i + 1]) is None:
                return False
            i = n                               # an exact table stores no priority
        if i != n:
            return False
        aid, params = action
        value = t.v.bytes
        value[:] = t.v.zero
        value[t.action_at] = aid
        if not _fill(value, params, data):
            return False
        if op == "default":
            _ret(_syscall(_NR_BPF, _MAP_UPDATE_ELEM, t.write_default_ref, _ELEM_SIZE), a, "failed to set up entry")
            return True
        key = t.k.bytes
        key[:] = t.k.zero
        if not _fill(key, t.key, keys):
            return False
        t.write.flags = _ADD_OPS[op]
        _ret(_syscall(_NR_BPF, _MAP_UPDATE_ELEM, t.write_ref, _ELEM_SIZE), a, "failed to set up entry")
        return True

    # -- maps -----------------------------------------------------------------------------
    def _table(self, pipe: str, table: str) -> _Table | None:
        maps = f"{self.bpffs}/pipeline{pipe}/maps/"
        try:
            ino = os.stat(maps + table).st_ino
        except OSError:
            ino = 0
        cached = self._tables.get((pipe, table))
        if cached is not None and cached[0] == ino:
            return cached[1]
        if cached is not None and cached[1] is not None:
            cached[1].close()
        try:
            t = self._open(maps, table, ino) if ino else None
        except (_Unsupported, OSError, ValueError, IndexError):
            t = None
        self._tables[(pipe, table)] = (ino, t)
        return t

    def _open(self, maps: str, table: str, ino: int) -> _Table:
        if os.path.exists(maps + table + "_cache"):
            raise _Unsupported("a table with a cache: nikss-ctl clears it on each write")
        fd = obj_get(maps + table)
        dfd = -1
        try:
            info = map_info(fd)
            if not info.btf_id or not info.btf_key_type_id or not info.btf_value_type_id:
                raise _Unsupported("map without BTF types")
            btf = self._btf.get(info.btf_id)
            if btf is None:
                btf = self._btf[info.btf_id] = Btf(btf_bytes(info.btf_id))
            value = _value_layout(btf, info.btf_value_type_id, info.value_size)
            key = _key_layout(btf, info.btf_key_type_id, info.key_size) if info.type == MAP_HASH else None
            if os.path.exists(maps + table + "_defaultAction"):
                dfd = obj_get(maps + table + "_defaultAction")
                d = map_info(dfd)
                if d.type != MAP_ARRAY or d.key_size != 4 or d.value_size != info.value_size:
                    os.close(dfd)               # nikss-ctl refuses it: its message
                    dfd = -1
            if key is None:                     # an LPM or array table: only its default here
                os.close(fd)
                fd = -1
            return _Table(ino, fd, info.key_size, key, value, dfd)
        except BaseException:
            for f in (fd, dfd):
                if f >= 0:
                    os.close(f)
            raise

    def close(self) -> None:
        with self._lock:
            for _, t in self._tables.values():
                if t is not None:
                    t.close()
            self._tables.clear()
            self._btf.clear()

    def __enter__(self) -> "MapRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_ELEM_SIZE = ctypes.sizeof(_ElemAttr)


def _where(a: list[str]) -> str:
    """The command up to its table: ``table add pipe 101 T``, ``table default set pipe 101 T``."""
    return " ".join(a[:6 if a[1] == "default" else 5])


def _ret(r: int, a: list[str], what: str) -> None:
    """NikssError for a failed bpf(2) call, with nikss-ctl's message (``what``: the strerror)."""
    if r < 0:
        raise NikssError(f"{_where(a)}: {what}: {os.strerror(ctypes.get_errno())}")


def map_runner(pipeline: int | None, fallback: Runner) -> MapRunner:
    """A Runner writing exact tables and default actions of pipeline ``pipeline`` (None: of any)
    in this process, everything else through ``fallback`` (``cli_runner()``)."""
    return MapRunner(pipeline, fallback)
