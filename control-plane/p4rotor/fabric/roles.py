"""A whole fabric: ToRs and rotors of one topology, driven by one controller."""

from __future__ import annotations

from pathlib import Path

from .. import control as C
from ..schedule import routes as R
from .topology import Topology


def fabric_roles(topo: Topology, build: Path, addr: str = "127.0.0.1", epsilon_us: float = 0.0,
                 only: set[str] | None = None) -> list[C.Role]:
    s = topo.schedule
    routes = R.compute(s, epsilon_us=epsilon_us)
    roles = []
    rinfo, rblob = build / "rotor.p4info.txtpb", build / "rotor.json"
    tinfo, tblob = build / "tor.p4info.txtpb", build / "tor.json"
    for rs in topo.rotors:
        if only and rs.name not in only:
            continue
        spec = C.SwitchSpec(rs.name, addr, rs.grpc_port, rs.device_id)
        roles.append(C.rotor_role(s, spec, rinfo, rblob, port_map=rs.ports, link_mtus=topo.rotor_link_mtus(rs)))
    for rack in topo.racks:
        if only and rack.tor.name not in only:
            continue
        spec = C.SwitchSpec(rack.tor.name, addr, rack.tor.grpc_port, rack.tor.device_id)

        def ents(mode, offset, epoch, gen, rack=rack):
            return C.tor_entities(topo, rack, routes, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                                  epsilon_us=epsilon_us)

        roles.append(C.Role(spec=spec, kind="tor", p4info=tinfo, p4blob=tblob, entities=ents,
                            boundaries=lambda t0, now: C.slice_boundaries(topo, routes, t0, now)))
    return roles
