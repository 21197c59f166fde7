"""The one-switch fabric's entities (issue #15, docs/one-switch.md): a frame walked through the
tables exactly as oneswitch.p4 walks it, against the schedule and the multi-switch routes.  The
ptf suite (one_switch_tests.py) proves the P4 on BMv2; here the entities are checked at every
slice, every rack pair and every class without a switch."""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.schedule import topology as TP
from p4rotor.control.fabric_roles import fabric_roles
from p4rotor.schedule import routes as R

DATA = Path(__file__).parent / "data"
SCHEMA = fy.P4Schema(DATA / "oneswitch.p4info.txtpb")
OPERA = S.generate_opera(8, 4, 1000, 100)


def tables(ents) -> dict[str, list]:
    out: dict[str, list] = {}
    for e in ents:
        out.setdefault(e.table_id, []).append(e)
    return out


class Walk:
    """oneswitch.p4's ingress, pass by pass, over the builder's entities."""

    def __init__(self, topo: TP.Topology, epsilon_us: float = 0.0):
        self.topo = topo
        routes = R.compute(topo.schedule, epsilon_us=epsilon_us)
        ents = C.one_switch_entities(topo, routes, dp.MODE_CLOCK, epsilon_us=epsilon_us)
        t = tables(ents)
        self.hop_limit = t[dp.ONE_T_FABRIC_CONFIG][0].action.args["hop_limit_"]
        self.host_rack = {e.match["port"]: e.action.args["rack"] for e in t[dp.ONE_T_HOST_PORT]}
        self.prefixes = [(ipaddress.ip_network(e.match["ipv4_dst"]), e.action.args["rack"]) for e in t[dp.ONE_T_RACK_OF]]
        self.hosts = {e.match["ipv4_dst"]: e.action.args["port"] for e in t[dp.ONE_T_LOCAL_HOST]}
        self.live = {e.match["slice"]: e.action.args["live"] for e in t[dp.ONE_T_SLICE_INFO]}
        self.route = {(e.match["rack"], e.match["slice"], e.match["dst_rack"], e.match["tclass"]): e.action
                      for e in t[dp.ONE_T_ROUTE]}
        self.rotor_phase = [(e.match["rotor"], *e.match["phase"], e.action.args) for e in t[dp.ONE_T_ROTOR_PHASE]]
        self.circuit = {(e.match["rotor"], e.match["matching"], e.match["in_rack"]): e.action.args["rack"]
                        for e in t[dp.ONE_T_CIRCUIT]}
        self.slices = [(*e.match["phase"], e.action.args["index"]) for e in t[dp.ONE_T_CLOCK_PHASE]]

    def rotor_at(self, rotor: int, phase: int) -> tuple[int, int]:
        [hit] = [a for r, lo, hi, a in self.rotor_phase if r == rotor and lo <= phase <= hi]
        return hit["index"], hit["day_start_"]

    def slice_at(self, phase: int) -> int:
        [s] = [i for lo, hi, i in self.slices if lo <= phase <= hi]
        return s

    def send(self, port: int, dst_ip: str, tclass: int, phase: int) -> tuple[str, object]:
        """("deliver", port) or ("drop", cause), and the racks visited."""
        rack = self.host_rack[port]
        dst = next(r for net, r in self.prefixes if ipaddress.ip_address(dst_ip) in net)
        visited, hops = [rack], 0
        sl = self.slice_at(phase)
        while True:
            if dst == rack:
                return "deliver", self.hosts[dst_ip], visited
            if hops >= self.hop_limit:
                return "drop", "HOP_LIMIT", visited
            act = self.route.get((rack, sl, dst, tclass))
            if act is None:
                return "drop", "NO_ROUTE", visited
            rotor, mask, until = act.args["rotor_"], act.args["mask"], act.args["until"]
            if self.live[sl] & mask == 0:
                return "drop", "DARK_UPLINK", visited
            if phase >= until:
                return "drop", "STALE", visited
            m, day = self.rotor_at(rotor, phase)
            if phase < day:
                return "drop", "NIGHT", visited
            nxt = self.circuit.get((rotor, m, rack))
            if nxt is None:
                return "drop", "NO_CIRCUIT", visited
            if act.name == dp.ONE_A_VIA_VLB:
                tclass = dp.TCLASS_BULK_TRANSIT
            rack, hops = nxt, hops + 1
            visited.append(rack)


@pytest.fixture(scope="module")
def opera():
    topo = TP.generate(OPERA, "s.json", hosts_per_rack=1, one_switch=True)
    return topo, Walk(topo)


def test_rotor_phase_tiles_the_hyperperiod_as_the_schedule_says(opera):
    topo, w = opera
    s = topo.schedule
    for ri, r in enumerate(s.rotors):
        for t in range(0, s.hyperperiod_us, 7):
            _, m, night = s.state_at(r, t)
            got_m, day = w.rotor_at(ri, t)
            assert (got_m, t < day) == (m, night), (r.name, t)


def test_every_pair_every_slice_every_class_follows_the_multi_switch_routes(opera):
    """The path a frame takes through the one switch is the path the ToRs' routes give it."""
    topo, w = opera
    s = topo.schedule
    routes = R.compute(s)
    ports = C.host_ports(topo)
    checked = 0
    for sr in routes:
        mid = (sr.slice.start_us + sr.slice.end_us) // 2
        for a in topo.racks:
            for b in topo.racks:
                if a.id == b.id:
                    continue
                for tclass in (dp.TCLASS_LOW_LATENCY, dp.TCLASS_BULK, dp.TCLASS_BULK_TRANSIT):
                    hop = sr.hops.get((a.id, b.id, tclass))
                    what, where, visited = w.send(ports[a.hosts[0].name], b.hosts[0].ip, tclass, mid)
                    if hop is None:
                        assert (what, where) == ("drop", "NO_ROUTE")
                        continue
                    assert (what, where) == ("deliver", ports[b.hosts[0].name]), (sr.index, a.id, b.id, tclass)
                    if tclass == dp.TCLASS_LOW_LATENCY or not hop.vlb:
                        assert tuple(visited) == hop.path
                    else:  # VLB: the first hop, then the transit rack's direct circuit
                        assert tuple(visited) == hop.path and len(visited) == 3
                    checked += 1
    assert checked > 1000


def test_local_delivery_and_the_negative_cases(opera):
    topo, w = opera
    ports = C.host_ports(topo)
    h0, h1 = topo.racks[0].hosts[0], topo.racks[1].hosts[0]
    assert w.send(ports[h0.name], h0.ip, dp.TCLASS_BULK, 5)[:2] == ("deliver", ports[h0.name])
    # A slice where rack 0 has no direct circuit to rack 1: direct-only has no route.
    routes = R.compute(topo.schedule)
    sr = next(r for r in routes if (0, 1, dp.TCLASS_BULK_TRANSIT) not in r.hops)
    mid = (sr.slice.start_us + sr.slice.end_us) // 2
    assert w.send(ports[h0.name], h1.ip, dp.TCLASS_BULK_TRANSIT, mid)[:2] == ("drop", "NO_ROUTE")
    # Hop limit 1: a low-latency path longer than one circuit is dropped at its second ToR.
    sr = next(r for r in routes if len(r.hops[(0, 5, dp.TCLASS_LOW_LATENCY)].path) > 2)
    w.hop_limit = 1
    try:
        mid = (sr.slice.start_us + sr.slice.end_us) // 2
        assert w.send(ports[h0.name], topo.racks[5].hosts[0].ip, dp.TCLASS_LOW_LATENCY, mid)[:2] == \
            ("drop", "HOP_LIMIT")
    finally:
        w.hop_limit = 8


def test_host_ports_and_the_role(tmp_path):
    topo = TP.generate(OPERA, "s.json", hosts_per_rack=2, one_switch=True)
    assert C.host_ports(topo) == {h.name: i + 1 for i, h in enumerate(h for k in topo.racks for h in k.hosts)}
    [role] = fabric_roles(topo, tmp_path)
    assert (role.kind, role.spec.name, role.spec.port) == ("one-switch", "fabric", topo.one_switch.grpc_port)
    ents = role.entities(dp.MODE_CLOCK, 0, 0, 1, C.BMV2)
    for e in ents:  # every entity encodes against the program's P4Info
        e.encode(SCHEMA)
    with pytest.raises(C.ControllerError, match="clock mode only"):
        role.entities(dp.MODE_SIGNAL, 0, 0, 1, C.BMV2)


def test_topology_round_trip_and_bad_one_switch(tmp_path):
    topo = TP.generate(OPERA, "s.json", hosts_per_rack=1, one_switch=True)
    (tmp_path / "s.json").write_text(OPERA.dumps())
    (tmp_path / "t.json").write_text(topo.dumps())
    back = TP.load(tmp_path / "t.json")
    assert back.one_switch == topo.one_switch and back.switches() == [("fabric", 200, topo.one_switch.grpc_port)]
    d = topo.to_json()
    d["one_switch"] = {"name": "tor3", "device_id": 1, "grpc_port": 5}
    with pytest.raises(TP.TopologyError, match="also a rotor's or a ToR's"):
        TP.from_json(d, base=tmp_path)
    d["one_switch"] = {"name": "x"}
    with pytest.raises(TP.TopologyError, match="one_switch must be"):
        TP.from_json(d, base=tmp_path)
