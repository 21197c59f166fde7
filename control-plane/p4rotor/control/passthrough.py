"""The passthrough program's entries (p4src/v1model/passthrough.p4): the trivial port-to-port
baseline the throughput benchmark measures the rotor against (bench/inside.py)."""

from __future__ import annotations

import finsy as fy


def forward_entry(in_port: int, out_port: int) -> fy.P4TableEntry:
    """Frames in on ``in_port`` leave on ``out_port``."""
    return fy.P4TableEntry("PIngress.port_map", match=fy.P4TableMatch(in_port=in_port),
                           action=fy.P4TableAction("PIngress.forward", port=out_port))
