"""Generate ``constants.py`` from the P4 side's one source of numeric constants,
``p4src/shared/defines.p4`` (``const <type> NAME = VALUE;`` and ``#define NAME VALUE``).

    python -m p4rotor.p4.generate p4src/shared/defines.p4 > control-plane/p4rotor/p4/constants.py

``make constants`` runs it; a unit test regenerates it from the P4 and fails when the committed
file differs, so P4 and Python cannot disagree silently.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_CONST = re.compile(r"^\s*const\s+[\w<>]+\s+(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>0x[0-9A-Fa-f]+|\d+)\s*;"
                    r"\s*(?://\s*(?P<comment>.*))?$")
_DEFINE = re.compile(r"^\s*#define\s+(?P<name>[A-Z][A-Z0-9_]*)\s+(?P<value>0x[0-9A-Fa-f]+|\d+)\s*"
                     r"(?://\s*(?P<comment>.*))?$")


def parse(text: str) -> list[tuple[str, int, str, str]]:
    """(name, value, literal as written, comment) for every numeric constant, in file order."""
    out = []
    for line in text.splitlines():
        m = _CONST.match(line) or _DEFINE.match(line)
        if m:
            out.append((m["name"], int(m["value"], 0), m["value"], (m["comment"] or "").strip()))
    return out


def render(defines: Path) -> str:
    rows = parse(defines.read_text())
    lines = ['"""Numeric constants of the P4 programs.  GENERATED from p4src/shared/defines.p4 by',
             "``python -m p4rotor.p4.generate`` (``make constants``): edit the P4, not this file.", '"""',
             "", "# fmt: off"]
    for name, _, literal, comment in rows:
        lines.append(f"{name} = {literal}" + (f"  # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m p4rotor.p4.generate p4src/shared/defines.p4", file=sys.stderr)
        return 2
    sys.stdout.write(render(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
