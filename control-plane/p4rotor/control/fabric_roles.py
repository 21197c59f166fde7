"""A whole fabric: ToRs and rotors of one topology, driven by one controller."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

from ..schedule import routes as R
from ..schedule.topology import Topology
from .activity_recorder import rotor_ports, tor_ports
from .errors import ControllerError
from .one_switch import one_switch_entities
from .roles import Role, SwitchSpec, rotor_role, with_pipelines
from .target import BMV2, Target
from .tor import slice_boundaries, tor_entities


def fabric_roles(topo: Topology, build: Path, addr: str = "127.0.0.1", epsilon_us: float = 0.0,
                 only: set[str] | None = None, target: Target = BMV2,
                 clock_ifaces: Mapping[str, str] | None = None,
                 pipelines: Mapping[str, SwitchSpec] | None = None) -> list[Role]:
    """Every switch of the topology; ``target`` says where in ``build`` its programs are.  A
    one-switch fabric is one role, holding every ToR's and rotor's state (docs/one-switch.md).
    ``clock_ifaces``: switch name -> the host interface wired to its clock port (time probes on
    the data path, docs/dataplane.md); a name that is not a switch of the topology is an error.
    ``pipelines`` (target ebpf): switch name -> its NIKSS pipeline (``--pipeline``), one per role."""
    s = topo.schedule
    routes = R.compute(s, epsilon_us=epsilon_us)
    if clock_ifaces:
        names = {name for name, _, _ in topo.switches()}
        unknown = sorted(set(clock_ifaces) - names)
        if unknown:
            raise ControllerError(f"--clock-iface {unknown[0]}=...: the topology has no switch named {unknown[0]!r}")
    roles = _roles(topo, routes, build, addr, epsilon_us, only, target)
    if clock_ifaces:
        roles = [dataclasses.replace(r, spec=dataclasses.replace(r.spec, clock_iface=clock_ifaces[r.spec.name]))
                 if r.spec.name in clock_ifaces else r for r in roles]
    if target.api == "nikss":
        roles = with_pipelines(roles, dict(pipelines or {}))
    return roles


def _roles(topo: Topology, routes, build: Path, addr: str, epsilon_us: float, only: set[str] | None,
           target: Target) -> list[Role]:
    s = topo.schedule
    if topo.one_switch is not None:
        return [one_switch_role(topo, routes, build, addr, epsilon_us, only, target)]
    roles = []
    rinfo, rblob = target.pipeline_files(build, "rotor")
    tinfo, tblob = target.pipeline_files(build, "tor")
    for rs in topo.rotors:
        if only and rs.name not in only:
            continue
        spec = SwitchSpec(rs.name, addr, rs.grpc_port, rs.device_id)
        role = rotor_role(s, spec, rinfo, rblob, port_map=rs.ports, link_mtus=topo.rotor_link_mtus(rs))
        roles.append(dataclasses.replace(role, energy=rotor_ports(s, rs.name, rs.ports)))
    for rack in topo.racks:
        if only and rack.tor.name not in only:
            continue
        spec = SwitchSpec(rack.tor.name, addr, rack.tor.grpc_port, rack.tor.device_id)

        def ents(mode, offset, epoch, gen, target, rack=rack):
            return tor_entities(topo, rack, routes, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                                  epsilon_us=epsilon_us, target=target)

        roles.append(Role(spec=spec, kind="tor", p4info=tinfo, p4blob=tblob, entities=ents,
                            boundaries=lambda t0, now: slice_boundaries(topo, routes, t0, now),
                            data_ports=tuple(sorted(topo.tor_link_mtus(rack))),
                            energy=tor_ports(s, rack.id, {h.name: h.port for h in rack.hosts}, dict(rack.tor.uplinks),
                                             [(sr.slice.start_us, sr.slice.end_us) for sr in routes])))
    return roles


def one_switch_role(topo: Topology, routes, build: Path, addr: str, epsilon_us: float,
                    only: set[str] | None, target: Target) -> Role:
    o = topo.one_switch
    assert o is not None
    if only and only != {o.name}:
        raise ControllerError(f"--only {','.join(sorted(only))}: a one-switch fabric has one switch, {o.name}")
    if target.name != "bmv2":
        raise ControllerError("the one-switch fabric has a v1model program only (bmv2)")
    info, blob = target.pipeline_files(build, "oneswitch")
    spec = SwitchSpec(o.name, addr, o.grpc_port, o.device_id)

    def ents(mode, offset, epoch, gen, target):
        return one_switch_entities(topo, routes, mode, offset_us=offset, epoch_us=epoch, generation=gen,
                                     epsilon_us=epsilon_us, target=target)

    return Role(spec=spec, kind="one-switch", p4info=info, p4blob=blob, entities=ents,
                  boundaries=lambda t0, now: slice_boundaries(topo, routes, t0, now))
