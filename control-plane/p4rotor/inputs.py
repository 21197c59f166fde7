"""Reading the files a user gives us: text or JSON, or a one-line error naming the file.

Every loader (schedules, topologies, fault plans, flow lists, CDFs, traffic matrices) reads
through here, so a file that cannot be read, is not UTF-8, is not JSON or nests too deeply gets
the same kind of message, raised as the caller's own error class (the CLI turns it into exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_text(path: str | Path, error: type[Exception]) -> str:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as ex:
        raise error(f"{p}: cannot read: {ex.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as ex:
        line = raw[:ex.start].count(b"\n") + 1
        raise error(f"{p}:{line}: not UTF-8 text (byte 0x{raw[ex.start]:02x})") from None


def read_json(path: str | Path, error: type[Exception]) -> Any:
    text = read_text(path, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as ex:
        raise error(f"{path}: bad JSON at line {ex.lineno} column {ex.colno}: {ex.msg}") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply") from None
