"""A whole fabric: ToRs and rotors of one topology, driven by one controller."""

from __future__ import annotations

from pathlib import Path

from .. import control as C
from ..schedule import routes as R
from .topology import Topology


def fabric_roles(topo: Topology, build: Path, addr: str = "127.0.0.1", epsilon_us: float = 0.0,
                 only: set[str] | None = None, target: C.Target = C.BMV2) -> list[C.Role]:
    """Every switch of the topology; ``target`` says where in ``build`` its programs are."""
    s = topo.schedule
    routes = R.compute(s, epsilon_us=epsilon_us)
    roles = []
    rinfo, rblob = target.pipeline_files(build, "rotor")
    tinfo, tblob = target.pipeline_files(build, "tor")
    for rs in topo.rotors:
        if only and rs.name not in only:
            continue
        spec = C.SwitchSpec(rs.name, addr, rs.grpc_port, rs.device_id)
        roles.append(C.rotor_role(s, spec, rinfo, rblob, port_map=rs.ports, link_mtus=topo.rotor_link_mtus(rs)))
    for rack in topo.racks:
        if only and rack.tor.name not in only:
            continue
        spec = C.SwitchSpec(rack.tor.name, addr, rack.tor.grpc_port, rack.tor.device_id)

        def ents(mode, offset, epoch, gen, target, rack=rack):
            return C.tor_entities(topo, rack, routes, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                                  epsilon_us=epsilon_us, target=target)

        roles.append(C.Role(spec=spec, kind="tor", p4info=tinfo, p4blob=tblob, entities=ents,
                            boundaries=lambda t0, now: C.slice_boundaries(topo, routes, t0, now)))
    return roles
