"""Flow lists as files anyone can replay: JSON or CSV, columns id, src, dst, size, start.

* CSV: a header line ``id,src,dst,size,start``, then one flow per line; nothing else.
* JSON: ``{"version": 1, "columns": [...], "meta": {...}, "flows": [{"id": 0, "src": "h0x0",
  "dst": "h5x1", "size": 8760, "start": 0.000123456}, ...]}``, one flow per line.  ``meta``
  records how the list was made (workload, load, access rate, seed, scaling, hosts, duration).

``src``/``dst`` are host names, ``size`` payload bytes, ``start`` seconds from the start of the
replay.  Reading checks every flow and fails with one line naming the file and the line or flow.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from ..inputs import (MAX_FLOW_BYTES, MAX_FLOWS, MAX_MBPS, MAX_PACKET_BYTES, MAX_START_S, in_range,
                      parse_json as _parse_json, write_output)
from .cdf import WorkloadError, read_text
from .generate import Flow
from .hotspot import check as check_zipf

COLUMNS = ("id", "src", "dst", "size", "start")
FORMAT_VERSION = 1


def _fmt_start(t: float) -> str:
    return f"{t:.9f}"


def dumps_csv(flows: Sequence[Flow]) -> str:
    lines = [",".join(COLUMNS)]
    for f in flows:
        for name in (f.src, f.dst):
            if any(c in name for c in ',"\n\r'):
                raise WorkloadError(f"host name {name!r} cannot be written to CSV")
        lines.append(f"{f.id},{f.src},{f.dst},{f.size},{_fmt_start(f.start)}")
    return "\n".join(lines) + "\n"


def dumps_json(flows: Sequence[Flow], meta: dict[str, Any] | None = None) -> str:
    head = {"version": FORMAT_VERSION, "columns": list(COLUMNS), "meta": meta or {}}
    out = ["{"]
    for k, v in head.items():
        out.append(f" {json.dumps(k)}: {json.dumps(v)},")
    out.append(' "flows": [')
    rows = [json.dumps({"id": f.id, "src": f.src, "dst": f.dst, "size": f.size}, separators=(", ", ": "))[:-1]
            + f', "start": {_fmt_start(f.start)}}}' for f in flows]
    out.append(",\n".join("  " + r for r in rows))
    out.append(" ]")
    out.append("}")
    return "\n".join(out) + "\n"


def kind_of(path: str | Path) -> str:
    """The format by the file's suffix: json or csv (one-line error otherwise)."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".json", ".csv"):
        raise WorkloadError(f"{path}: a flow list is .json or .csv, not {suffix or 'no suffix'!r}")
    return suffix[1:]


def dumps(path: str | Path, flows: Sequence[Flow], meta: dict[str, Any] | None = None) -> str:
    """The text :func:`write` would write to ``path`` (format by suffix)."""
    return dumps_json(flows, meta) if kind_of(path) == "json" else dumps_csv(flows)


def write(path: str | Path, flows: Sequence[Flow], meta: dict[str, Any] | None = None) -> None:
    text = dumps(path, flows, meta)  # every error before the file is touched
    write_output(path, text, WorkloadError)


def _check(flows: list[Flow], where: list[str]) -> None:
    if len(flows) > MAX_FLOWS:
        raise WorkloadError(f"{where[-1].split(':')[0]}: {len(flows)} flows, at most {MAX_FLOWS}")
    seen: dict[int, str] = {}
    for f, w in zip(flows, where):
        if f.id in seen:
            raise WorkloadError(f"{w}: id {f.id} already used ({seen[f.id]})")
        seen[f.id] = w
        if f.id < 0:
            raise WorkloadError(f"{w}: id must be >= 0, got {f.id}")
        if not f.src or not f.dst:
            raise WorkloadError(f"{w}: src and dst must be host names")
        if f.src == f.dst:
            raise WorkloadError(f"{w}: src and dst are the same host {f.src!r}")
        if f.size < 1:
            raise WorkloadError(f"{w}: size must be >= 1 byte, got {f.size}")
        if f.size > MAX_FLOW_BYTES:
            raise WorkloadError(f"{w}: size must be <= {MAX_FLOW_BYTES:g} bytes, got {f.size:.3g}")
        if not (math.isfinite(f.start) and 0 <= f.start <= MAX_START_S):
            raise WorkloadError(f"{w}: start must be a finite number of seconds in [0, {MAX_START_S:g}], got {f.start:.6g}")


def _int(v: Any, what: str, w: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and len(v) <= 20:
            try:
                return int(v)
            except ValueError:
                pass
        raise WorkloadError(f"{w}: {what} must be an integer, got {repr(v)[:40]}")
    return v


def _float(v: Any, what: str, w: str) -> float:
    if isinstance(v, bool):
        raise WorkloadError(f"{w}: {what} must be a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise WorkloadError(f"{w}: {what} must be a number, got {repr(v)[:40]}") from None


def _str(v: Any, what: str, w: str) -> str:
    if not isinstance(v, str):
        raise WorkloadError(f"{w}: {what} must be a host name (a string), got {repr(v)[:40]}")
    return v


def parse_csv(text: str, source: str) -> list[Flow]:
    lines = text.splitlines()
    if not lines or [c.strip() for c in lines[0].split(",")] != list(COLUMNS):
        raise WorkloadError(f"{source}:1: the header must be {','.join(COLUMNS)}")
    flows, where = [], []
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        w = f"{source}:{n}"
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(COLUMNS):
            raise WorkloadError(f"{w}: expected {len(COLUMNS)} columns ({','.join(COLUMNS)}), got {len(cells)}")
        i, src, dst, size, start = cells
        flows.append(Flow(_int(i, "id", w), src, dst, _int(size, "size", w), _float(start, "start", w)))
        where.append(w)
    _check(flows, where)
    return flows


def parse_json(text: str, source: str) -> tuple[list[Flow], dict[str, Any]]:
    doc = _parse_json(text, source, WorkloadError)
    if isinstance(doc, list):
        doc = {"version": FORMAT_VERSION, "flows": doc}
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or not isinstance(doc.get("flows"), list):
        raise WorkloadError(f"{source}: expected {{\"version\": {FORMAT_VERSION}, \"flows\": [...]}}")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise WorkloadError(f"{source}: meta must be an object")
    _check_meta(meta, source)
    flows, where = [], []
    for k, d in enumerate(doc["flows"]):
        w = f"{source}: flow {k}"
        if not isinstance(d, dict):
            raise WorkloadError(f"{w}: must be an object with {', '.join(COLUMNS)}")
        missing = [c for c in COLUMNS if c not in d]
        if missing:
            raise WorkloadError(f"{w}: missing {', '.join(missing)}")
        if any(isinstance(d[c], str) for c in ("id", "size", "start")):
            raise WorkloadError(f"{w}: id, size and start must be JSON numbers")
        flows.append(Flow(_int(d["id"], "id", w), _str(d["src"], "src", w), _str(d["dst"], "dst", w),
                          _int(d["size"], "size", w), _float(d["start"], "start", w)))
        where.append(w)
    _check(flows, where)
    return flows, meta


# meta's numbers that the readers compute with, and their ranges
META_NUMBERS = {"access_bps": (0, MAX_MBPS * 1e6), "duration_s": (0, MAX_START_S), "mss": (1, MAX_PACKET_BYTES),
                "header_bytes": (0, MAX_PACKET_BYTES), "load": (0, 1), "flows_per_s_per_host": (0, 1e12),
                "mean_size_bytes": (0, MAX_FLOW_BYTES), "mean_wire_bytes": (0, 2 * MAX_FLOW_BYTES)}
META_OBJECTS = ("hosts", "scaling", "size_percentiles_bytes", "zipf_hotspot")


def _check_meta(meta: dict[str, Any], source: str) -> None:
    for key, (lo, hi) in META_NUMBERS.items():
        if meta.get(key) is not None:
            in_range(meta[key], lo, hi, f"{source}: meta.{key}", WorkloadError)
    for key in META_OBJECTS:
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise WorkloadError(f"{source}: meta.{key} must be an object")
    if meta.get("zipf") is not None:  # the hot spot's exponent (hotspot.py); absent or null: uniform
        try:
            check_zipf(meta["zipf"])
        except WorkloadError as ex:
            raise WorkloadError(f"{source}: meta.zipf: {str(ex).removeprefix('--zipf ')}") from None


def read(path: str | Path) -> tuple[list[Flow], dict[str, Any]]:
    """(flows, meta) from a .json or .csv flow list; a CSV has no meta."""
    kind = kind_of(path)
    text = read_text(path)
    if kind == "csv":
        return parse_csv(text, str(path)), {}
    return parse_json(text, str(path))
