"""Check that a P4Info is the program the controller drives (names and ids from the contract)."""

from __future__ import annotations

from pathlib import Path

import finsy as fy

from .. import p4 as dp
from .errors import ControllerError


def check_p4info(p4info: Path, contract=dp.ROTOR_CONTRACT, counters=dp.ROTOR_COUNTERS) -> fy.P4Schema:
    """Load a P4Info and make sure it is the program this controller drives."""
    if not p4info.exists():
        raise ControllerError(f"P4Info {p4info} not found: run 'make build' first")
    try:
        schema = fy.P4Schema(p4info)
        _ = schema.tables  # force the parse
    except Exception as ex:  # finsy raises protobuf text-format errors
        raise ControllerError(f"P4Info {p4info} unreadable: {ex}") from None
    problems = []
    tables = {t.name: t for t in schema.tables}
    for tname, (keys, actions) in contract.items():
        t = tables.get(tname)
        if t is None:
            problems.append(f"table {tname} missing")
            continue
        have = tuple(f.name for f in t.match_fields)
        if have != keys:
            problems.append(f"table {tname} keys {have} != {keys}")
        for aname, params in actions.items():
            try:
                a = schema.actions[aname]
            except Exception:
                problems.append(f"action {aname} missing")
                continue
            got = tuple(p.name for p in a.params)
            if got != params:
                problems.append(f"action {aname} params {got} != {params}")
    names = {c.name for c in schema.counters}
    problems += [f"counter {c} missing" for c in counters if c not in names]
    for cpm, fields in (("packet_out", dp.PACKET_OUT_FIELDS), ("packet_in", dp.PACKET_IN_FIELDS)):
        try:
            got = tuple(m.name for m in schema.controller_packet_metadata[cpm].metadata)
        except Exception:
            problems.append(f"controller header {cpm} missing")
            continue
        if got != fields:
            problems.append(f"{cpm} fields {got} != {fields}")
    if problems:
        raise ControllerError(f"P4Info mismatch in {p4info} (rebuild with 'make build'?)", problems)
    return schema


