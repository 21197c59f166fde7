"""The predictive policy's sleep plan for the data plane (``p4rotor control --port-sleep``):
per switch and port, the slot positions in which the port sleeps, receiving ("in") and
transmitting ("out"); installed as the port_sleep tables (entities.sleep_entries), a frame
through a sleeping port is dropped and counted SLEEPING (docs/energy.md).

A plan is a file, or ``schedule``: what the schedule and the routes know to be idle.  A rotor's
port sleeps, both ways, in each matching that gives its rack no circuit; a ToR's uplink
transmitter sleeps in each slice in which none of the ToR's routes leaves through it (a frame
is routed in the slice it arrives in, so none can).  Nothing else is known ahead: a host port,
or an uplink's receiver, may see a frame in any slice.  With that plan no frame should ever be
counted SLEEPING.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..schedule import routes as R
from ..schedule.topology import Topology
from .errors import ControllerError

Plan = dict[str, dict[int, dict[str, list[int]]]]
def read_sleep_plan(path: str) -> Plan:
    """``--port-sleep``: {switch: {port: {"in": [slot, ...], "out": [...]}}}; a list for a port is
    both directions (the link sleeps).  Bad input: one ControllerError line."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as ex:
        raise ControllerError(f"--port-sleep {path}: {type(ex).__name__}: {str(ex)[:80]}") from None
    out: dict[str, dict[int, dict[str, list[int]]]] = {}
    if not isinstance(doc, dict):
        raise ControllerError(f"--port-sleep {path}: an object of switches")
    for sw, ports in doc.items():
        if not isinstance(ports, dict):
            raise ControllerError(f"--port-sleep {path}: {sw}: an object of ports")
        for port, v in ports.items():
            dirs = {"in": v, "out": v} if isinstance(v, list) else v
            ok = (isinstance(dirs, dict) and set(dirs) <= {"in", "out"} and str(port).isdigit()
                  and 0 < int(port) < 512 and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 0x10000
                                                  for x in dirs.values() if isinstance(x, list) for s in x)
                  and all(isinstance(x, list) for x in dirs.values()))
            if not ok:
                raise ControllerError(f"--port-sleep {path}: {sw} port {str(port)[:10]}: slot lists "
                                      "(0..65535) for \"in\" and \"out\", or one list for both")
            out.setdefault(sw, {})[int(port)] = {d: list(x) for d, x in dirs.items()}
    return out


def schedule_plan(topo: Topology, routes: Sequence[R.SliceRoutes]) -> Plan:
    """The plan the schedule and the routes give (module docstring), for every rotor and ToR."""
    s = topo.schedule
    plan: Plan = {}
    for rs in topo.rotors:
        rot = s.rotor(rs.name)
        for rack, port in rs.ports.items():
            idle = [m for m, mm in enumerate(rot.matchings) if mm[rack] is None or mm[rack] == rack]
            if idle:
                plan.setdefault(rs.name, {})[port] = {"in": idle, "out": idle}
    index = {r.name: i for i, r in enumerate(s.rotors)}
    for rack in topo.racks:
        for name, port in rack.tor.uplinks.items():
            r = index[name]
            idle = [sr.index for sr in routes
                    if not any(key[0] == rack.id and hop.rotor == r for key, hop in sr.hops.items())]
            if idle:
                plan.setdefault(rack.tor.name, {})[port] = {"out": idle}
    return plan
