"""The input gate: every file, number and output path a user gives us passes here, with limits.

Every loader (schedules, topologies, fault plans, flow lists, CDFs, traffic matrices, fct
results) reads through here, so a file that cannot be read, is not a regular file, is too large,
is not UTF-8, is not JSON, nests too deeply or holds a number no real input has gets the same
kind of message, raised as the caller's own error class (the CLI turns it into one line on stderr
and exit 2, ``cliutil.die``).  Numeric flags use :func:`int_flag` / :func:`float_flag` as their
argparse ``type`` (``OneLineParser`` makes a refusal one line, exit 2).  Output files go through
:func:`check_output` before any work and :func:`write_output` at the end: a missing parent
directory is refused, never created, and a refusal leaves nothing behind.

The limits are generous for real use (Opera 108 racks x 6 rotors, RotorNet 128 x 4, flow lists of
100 000+ flows are far inside them) and small enough that a typo cannot make a command run for
hours or exhaust memory.  docs/schedule-format.md lists them for users.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Callable

# ---- files -------------------------------------------------------------------------------------
MAX_INPUT_BYTES = 128 * 2 ** 20  # a 100 000-flow list is ~10 MB, an fct.json ~1 KB per flow
MAX_JSON_DEPTH = 32              # our formats nest at most ~8 deep (an fct.json's modes/classes/buckets)
MAX_INT_DIGITS = 20              # any 64-bit value (a t0_ns of ~1.8e18 has 19 digits)

# ---- schedules ---------------------------------------------------------------------------------
MAX_RACKS = 4096                 # 32x the largest published fabric (RotorNet/Opera: 108-128 racks)
MAX_ROTORS = 64                  # published fabrics have 4-8 rotors per rack
MAX_SLOT_US = 10 ** 9            # 1000 s: real slots are us to ms, x100 dilated still < 1 s
MAX_TIME_US = 10 ** 12           # ~11.6 days of schedule time (offsets, fault times): more is a typo
MAX_HYPERPERIOD_SLOTS = 10 ** 5  # lcm of the rotors' matching counts; Opera 108x6: 18, RotorNet 128x4: 32
MAX_SLICE_WORK = 5 * 10 ** 7     # slots x rotors x (racks^2 + SLOT_OVERHEAD) to list and analyse the slices
                                 # (Opera 108x6: 1.3e6, RotorNet 128x4: 2.1e6; ~0.4 us each: ~20 s at the limit)
SLOT_OVERHEAD = 256              # a slot's fixed cost in rack pairs' worth (measured: a slice ~50 us, plus
                                 # ~0.2 us a rack pair), so that few racks and many slots count too

# ---- the RotorLB model -------------------------------------------------------------------------
MAX_MATRICES = 10 ** 4           # --count, or matrices in a --matrices file
MAX_CYCLES = 10 ** 5             # --warmup-cycles, --measure-cycles
MAX_MODEL_WORK = 2 * 10 ** 8     # matrices x cycles x cycle slots x (racks^2 + SLOT_OVERHEAD); ~0.8 us each
                                 # (Opera 108x6 with the defaults, 8 matrices x 24 cycles: 4e7, ~35 s;
                                 # RotorNet 128x4: 1e8; ~3 min at the limit)

# ---- flow lists and workloads ------------------------------------------------------------------
MAX_FLOWS = 10 ** 6              # 10x the largest lists run so far
MAX_FLOW_BYTES = 10 ** 12        # 1 TB; the shipped CDFs' largest flow is 1 GB
MAX_START_S = 10 ** 6            # ~11.6 days of emulated wall clock (a 2000-flow run: ~10 min)
MAX_HOSTS = 65536                # hosts sharing a load (--hosts; racks x hosts per rack)
MAX_HOSTS_PER_RACK = 250         # a rack's hosts are 10.0.RACK.1-250
MAX_MBPS = 10 ** 7               # 10 Tb/s: access rates in Mb/s
MAX_FACTOR = 10 ** 6             # dilations and other ratios
MAX_PACKET_BYTES = 65535         # --mss, --header-bytes: an IP packet's size field
MAX_ZIPF = 10.0                  # --zipf: a Zipf exponent; at 10 the hottest rack has 99.9 % of the flows


# ---- reading -----------------------------------------------------------------------------------
def read_bytes(path: str | Path, error: type[Exception]) -> bytes:
    """A regular file's bytes, at most :data:`MAX_INPUT_BYTES`.  A FIFO, device or socket is
    refused before anything is read (opened non-blocking: a FIFO with no writer does not hang)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as ex:
        raise error(f"{p}: cannot read: {ex.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{p}: cannot read: Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: not a regular file (a FIFO, device or socket): refused")
        if st.st_size > MAX_INPUT_BYTES:
            raise error(f"{p}: {st.st_size} bytes, over the limit of {MAX_INPUT_BYTES} for an input file")
        chunks, size = [], 0
        while size <= MAX_INPUT_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_INPUT_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_INPUT_BYTES:  # it grew while we read
            raise error(f"{p}: over the limit of {MAX_INPUT_BYTES} bytes for an input file")
        return b"".join(chunks)
    except OSError as ex:
        raise error(f"{p}: cannot read: {ex.strerror}") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, error: type[Exception]) -> str:
    p = Path(path)
    raw = read_bytes(p, error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as ex:
        line = raw[:ex.start].count(b"\n") + 1
        raise error(f"{p}:{line}: not UTF-8 text (byte 0x{raw[ex.start]:02x})") from None


class _Refused(Exception):
    """A number the JSON hooks refuse (turned into the caller's error by :func:`parse_json`)."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise _Refused(f"a number out of range ({text[:30]})")
    return x


def _parse_constant(text: str) -> float:
    raise _Refused(f"{text} is not a number JSON allows")


def parse_json(text: str, source: str, error: type[Exception], *, nonfinite: bool = False) -> Any:
    """JSON text, with numbers and nesting held to the limits; errors name ``source``.
    ``nonfinite``: accept NaN and Infinity as Python writes them (the fct.json results do, for
    a slowdown without a bound); the reader then checks the values it computes with."""
    try:
        if nonfinite:
            doc = json.loads(text, parse_int=_parse_int)
        else:
            doc = json.loads(text, parse_int=_parse_int, parse_float=_parse_float,
                             parse_constant=_parse_constant)
    except json.JSONDecodeError as ex:
        raise error(f"{source}: bad JSON at line {ex.lineno} column {ex.colno}: {ex.msg}") from None
    except _Refused as ex:
        raise error(f"{source}: {ex}") from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as ex:  # a conversion limit the hooks did not see
        raise error(f"{source}: bad JSON: {str(ex)[:80]}") from None
    stack = [(doc, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise error(f"{source}: JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return doc


def read_json(path: str | Path, error: type[Exception], *, nonfinite: bool = False) -> Any:
    return parse_json(read_text(path, error), str(path), error, nonfinite=nonfinite)


# Exceptions code raises when it reads a document of the wrong shape (a list where an object
# belongs, a string where a number does): where a reader does not check every field itself, it
# turns these into one line naming the file.
MALFORMED = (KeyError, TypeError, AttributeError, IndexError, ValueError, OverflowError, ZeroDivisionError)


# ---- numbers -----------------------------------------------------------------------------------
def in_range(v: Any, lo: float, hi: float, what: str, error: type[Exception]) -> Any:
    """``v`` if it is a finite number in [lo, hi], else a one-line ``error`` naming ``what``."""
    ok = (not isinstance(v, bool) and isinstance(v, (int, float))
          and (isinstance(v, int) or math.isfinite(v)) and lo <= v <= hi)
    if not ok:
        raise error(f"{what} must be in [{lo:g}, {hi:g}], got {show_value(v)}")
    return v


def show_value(v: Any) -> str:
    """A value for an error message: short, and a huge integer by its digit count."""
    s = repr(v) if not isinstance(v, int) or abs(v) < 10 ** 30 else f"an integer of {len(str(abs(v)))} digits"
    return s if len(s) <= 40 else s[:37] + "..."


def check_work(amount: float, limit: float, what: str, error: type[Exception]) -> None:
    """Refuse before a loop whose length comes from the input: ``amount`` (steps it would take)
    over ``limit``."""
    if amount > limit:
        raise error(f"{what}: {amount:.3g} steps of work, over the limit of {limit:.3g}")


def int_flag(lo: int, hi: int) -> Callable[[str], int]:
    """argparse ``type``: an integer in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            v = int(text) if len(text) <= MAX_INT_DIGITS + 1 else None
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in {lo}..{hi}, got {text[:30]!r}")
        return v
    return parse


def float_flag(lo: float, hi: float, *, above: bool = False) -> Callable[[str], float]:
    """argparse ``type``: a finite number in [lo, hi] (``above``: in (lo, hi])."""
    def parse(text: str) -> float:
        try:
            v = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and (lo < v if above else lo <= v) and v <= hi):  # also refuses nan
            span = f"({lo:g}, {hi:g}]" if above else f"[{lo:g}, {hi:g}]"
            raise argparse.ArgumentTypeError(f"must be a number in {span}, got {text[:30]!r}")
        return v
    return parse


# ---- output ------------------------------------------------------------------------------------
def check_output(path: str | Path | None, error: type[Exception], flag: str = "-o") -> None:
    """Before any work: ``path``'s directory must exist (it is not created) and ``path`` must not
    be a directory."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise error(f"{flag} {p}: directory {parent} does not exist (create it first)")
    if p.is_dir():
        raise error(f"{flag} {p}: is a directory")


def write_output(path: str | Path, text: str, error: type[Exception], flag: str = "-o") -> None:
    """Write ``text`` whole or not at all: to a temporary file beside ``path``, renamed over it
    (a device such as /dev/stdout is written directly)."""
    p = Path(path)
    check_output(p, error, flag)
    try:
        if p.exists() and not p.is_file():
            with open(p, "w") as f:
                f.write(text)
            return
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, p)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as ex:
        raise error(f"{flag} {p}: cannot write: {ex.strerror}") from None
