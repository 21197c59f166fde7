"""Topologies as data: every switch's device id, gRPC port and every port number explicit.

Format (docs/addressing.md):

```json
{"version": 1, "schedule": "opera8.json", "link_mtu": {"host": 1500, "fabric": 1600},
 "rotors": [{"name": "rotor0", "device_id": 1, "grpc_port": 50101, "ports": {"0": 1, "1": 2}}],
 "racks": [{"id": 0, "prefix": "10.0.0.0/24",
            "tor": {"name": "tor0", "device_id": 101, "grpc_port": 50201,
                    "uplinks": {"rotor0": 1}, "hop_limit": 8},
            "hosts": [{"name": "h0x0", "ip": "10.0.0.1", "mac": "02:00:0a:00:00:01", "port": 11}]}]}
```

Rotor ``ports`` maps rack id -> rotor port; ToR ``uplinks`` maps rotor name -> ToR port; the link
ToR(rack i).uplinks[r] <-> rotor r port ports[i] is implied by those two numbers, never by order.

``one_switch`` (optional: ``{"name": "fabric", "device_id": 200, "grpc_port": 50100}``) makes it a
**one-switch fabric** (docs/one-switch.md): that one switch emulates every ToR and rotor listed,
every host is wired to it (ports 1, 2, ... in topology order), and the ToRs' and rotors' own
device ids, gRPC ports and port numbers are not used.

``link_mtu`` gives the MTU (bytes after the Ethernet header, as Linux counts it) of every link by
its kind: ``host`` for host <-> ToR links, ``fabric`` for ToR uplink <-> rotor links.  A fabric link
must carry a full-size host frame plus the fabric header the first ToR inserts, so
``fabric >= host + 8``; the switches drop (and count, DropCause.MTU) a frame longer than its egress
link instead of letting the link lose it silently.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from pathlib import Path
from typing import Any

from .. import schedule as S
from ..p4 import FABRIC_HEADER_BYTES

MAX_DATA_PORT = 253  # 254: clock port, 255: CPU port (p4src/shared/defines.p4)
HOST_MTU = 1500  # what every host and application expects
# Host frames plus the 8-byte fabric header, with room for one more header of up to 92 bytes.
FABRIC_MTU = 1600
MTU_RANGE = (576, 9216)  # IPv4's minimum datagram to a common jumbo limit


class TopologyError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str
    port: int


@dataclasses.dataclass(frozen=True)
class Tor:
    name: str
    device_id: int
    grpc_port: int
    uplinks: dict[str, int]
    hop_limit: int = 8


@dataclasses.dataclass(frozen=True)
class Rack:
    id: int
    prefix: str
    tor: Tor
    hosts: tuple[Host, ...]


@dataclasses.dataclass(frozen=True)
class RotorSwitch:
    name: str
    device_id: int
    grpc_port: int
    ports: dict[int, int]


@dataclasses.dataclass(frozen=True)
class OneSwitch:
    """The one switch of a one-switch fabric."""

    name: str
    device_id: int
    grpc_port: int


@dataclasses.dataclass
class Topology:
    schedule: S.Schedule
    schedule_path: str
    rotors: list[RotorSwitch]
    racks: list[Rack]
    host_mtu: int = HOST_MTU
    fabric_mtu: int = FABRIC_MTU
    one_switch: OneSwitch | None = None

    def switches(self) -> list[tuple[str, int, int]]:
        """(name, device id, gRPC port) of every switch process the fabric runs."""
        if self.one_switch is not None:
            o = self.one_switch
            return [(o.name, o.device_id, o.grpc_port)]
        return ([(r.name, r.device_id, r.grpc_port) for r in self.rotors]
                + [(k.tor.name, k.tor.device_id, k.tor.grpc_port) for k in self.racks])

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "schedule": self.schedule_path,
            "link_mtu": {"host": self.host_mtu, "fabric": self.fabric_mtu},
            "rotors": [{"name": r.name, "device_id": r.device_id, "grpc_port": r.grpc_port,
                        "ports": {str(k): v for k, v in r.ports.items()}} for r in self.rotors],
            "racks": [{"id": k.id, "prefix": k.prefix,
                       "tor": {"name": k.tor.name, "device_id": k.tor.device_id, "grpc_port": k.tor.grpc_port,
                               "uplinks": k.tor.uplinks, "hop_limit": k.tor.hop_limit},
                       "hosts": [dataclasses.asdict(h) for h in k.hosts]} for k in self.racks],
            **({"one_switch": dataclasses.asdict(self.one_switch)} if self.one_switch else {}),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"

    def tor_link_mtus(self, rack: Rack) -> dict[int, int]:
        """{ToR port: MTU of its link}: uplinks are fabric links, host ports host links."""
        out = {p: self.fabric_mtu for p in rack.tor.uplinks.values()}
        out.update({h.port: self.host_mtu for h in rack.hosts})
        return out

    def rotor_link_mtus(self, rotor: RotorSwitch) -> dict[int, int]:
        """{rotor port: MTU of its link}: every rotor port is a fabric link."""
        return {p: self.fabric_mtu for p in rotor.ports.values()}

def generate(sched: S.Schedule, schedule_path: str, hosts_per_rack: int = 2, grpc_base: int = 50100,
             rotor_dev_base: int = 1, tor_dev_base: int = 101, host_mtu: int = HOST_MTU,
             fabric_mtu: int = FABRIC_MTU, one_switch: bool = False) -> Topology:
    """``one_switch``: a one-switch fabric (switch "fabric", device 200, gRPC port ``grpc_base``)."""
    if sched.racks > 250:
        raise TopologyError("the generated addressing (10.<hi>.<lo>.0/24 per rack) covers up to 250 racks")
    rotors = []
    for j, r in enumerate(sched.rotors):
        rotors.append(RotorSwitch(name=r.name, device_id=rotor_dev_base + j, grpc_port=grpc_base + 1 + j,
                                  ports={i: i + 1 for i in range(sched.racks)}))
    racks = []
    for i in range(sched.racks):
        # Uplinks on ports 1..K (rotor order), hosts from port 11 on.
        uplinks = {r.name: j + 1 for j, r in enumerate(sched.rotors)}
        hosts = tuple(Host(name=f"h{i}x{h}", ip=f"10.0.{i}.{h + 1}", mac=f"02:00:0a:00:{i:02x}:{h + 1:02x}",
                           port=11 + h) for h in range(hosts_per_rack))
        tor = Tor(name=f"tor{i}", device_id=tor_dev_base + i, grpc_port=grpc_base + 101 + i, uplinks=uplinks)
        racks.append(Rack(id=i, prefix=f"10.0.{i}.0/24", tor=tor, hosts=hosts))
    topo = Topology(sched, schedule_path, rotors, racks, host_mtu=host_mtu, fabric_mtu=fabric_mtu,
                    one_switch=OneSwitch("fabric", 200, grpc_base) if one_switch else None)
    validate(topo)
    return topo


def load(path: str | Path) -> Topology:
    from ..inputs import read_json

    p = Path(path)
    d = read_json(p, TopologyError)
    try:
        return from_json(d, base=p.parent)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as ex:
        if isinstance(ex, (TopologyError, S.ScheduleError)):
            raise type(ex)(f"{p}: {ex}") from None
        raise TopologyError(f"{p}: malformed topology: {ex!r}") from None


def from_json(d: dict[str, Any], base: Path = Path(".")) -> Topology:
    if not isinstance(d, dict):
        raise TopologyError(f"a topology is a JSON object, not {type(d).__name__}")
    if d.get("version") != 1:
        raise TopologyError(f"unknown topology version {d.get('version')!r}")
    spath = d["schedule"]
    sched = S.load(base / spath)
    rotors = [RotorSwitch(r["name"], int(r["device_id"]), int(r["grpc_port"]),
                          {int(k): int(v) for k, v in r["ports"].items()}) for r in d["rotors"]]
    racks = []
    for k in d["racks"]:
        t = k["tor"]
        tor = Tor(t["name"], int(t["device_id"]), int(t["grpc_port"]), {n: int(p) for n, p in t["uplinks"].items()},
                  int(t.get("hop_limit", 8)))
        hosts = tuple(Host(h["name"], h["ip"], h["mac"], int(h["port"])) for h in k["hosts"])
        racks.append(Rack(int(k["id"]), k["prefix"], tor, hosts))
    mtu = d.get("link_mtu", {})
    if not isinstance(mtu, dict) or set(mtu) - {"host", "fabric"}:
        raise TopologyError('link_mtu must be {"host": N, "fabric": N}')
    one = d.get("one_switch")
    if one is not None:
        if not isinstance(one, dict) or set(one) != {"name", "device_id", "grpc_port"}:
            raise TopologyError('one_switch must be {"name": ..., "device_id": N, "grpc_port": N}')
        one = OneSwitch(str(one["name"]), int(one["device_id"]), int(one["grpc_port"]))
    topo = Topology(sched, spath, rotors, racks, host_mtu=mtu.get("host", HOST_MTU),
                    fabric_mtu=mtu.get("fabric", FABRIC_MTU), one_switch=one)
    validate(topo)
    return topo


def validate(t: Topology) -> None:
    s = t.schedule
    for who, text in ([("rotor name", r.name) for r in t.rotors]
                      + [(f"rack {k.id}: {what}", v) for k in t.racks
                         for what, v in (("tor name", k.tor.name), ("prefix", k.prefix))]
                      + [(f"rack {k.id}: host {what}", v) for k in t.racks for h in k.hosts
                         for what, v in (("name", h.name), ("ip", h.ip), ("mac", h.mac))]):
        if not isinstance(text, str) or not text:
            raise TopologyError(f"{who} must be a non-empty string, got {json.dumps(text)[:40]}")
    lo, hi = MTU_RANGE
    for kind, mtu in (("host", t.host_mtu), ("fabric", t.fabric_mtu)):
        if type(mtu) is not int or not lo <= mtu <= hi:
            raise TopologyError(f"link_mtu.{kind} must be an integer in {lo}..{hi}, got {mtu!r}")
    if t.fabric_mtu < t.host_mtu + FABRIC_HEADER_BYTES:
        raise TopologyError(f"link_mtu.fabric {t.fabric_mtu} cannot carry a full-size host frame "
                            f"({t.host_mtu}) plus the {FABRIC_HEADER_BYTES}-byte fabric header: "
                            f"need >= {t.host_mtu + FABRIC_HEADER_BYTES}")
    names = {r.name for r in s.rotors}
    if {r.name for r in t.rotors} != names:
        raise TopologyError(f"rotor switches {sorted(r.name for r in t.rotors)} != schedule rotors {sorted(names)}")
    if sorted(k.id for k in t.racks) != list(range(s.racks)):
        raise TopologyError(f"racks must be 0..{s.racks - 1}, one each")
    seen_dev, seen_grpc = {}, {}
    if t.one_switch is not None:
        o = t.one_switch
        if not o.name or not o.name.replace("-", "").replace("_", "").isalnum():
            raise TopologyError(f"one_switch name {o.name!r}: letters, digits, - and _ only")
        if not 0 < o.grpc_port < 65536:
            raise TopologyError(f"one_switch gRPC port {o.grpc_port} out of range")
        hosts = sum(len(k.hosts) for k in t.racks)
        if hosts > MAX_DATA_PORT:
            raise TopologyError(f"a one-switch fabric wires every host to one switch: {hosts} hosts, "
                                f"{MAX_DATA_PORT} ports")
        if {o.name} & ({r.name for r in t.rotors} | {k.tor.name for k in t.racks}):
            raise TopologyError(f"one_switch name {o.name!r} is also a rotor's or a ToR's")
    for name, dev, grpc in ([(r.name, r.device_id, r.grpc_port) for r in t.rotors]
                            + [(k.tor.name, k.tor.device_id, k.tor.grpc_port) for k in t.racks]):
        if dev in seen_dev:
            raise TopologyError(f"device id {dev} used by {seen_dev[dev]} and {name}")
        if grpc in seen_grpc:
            raise TopologyError(f"gRPC port {grpc} used by {seen_grpc[grpc]} and {name}")
        seen_dev[dev], seen_grpc[grpc] = name, name
    def check_ports(who: str, ports) -> None:
        for p in ports:
            if not 1 <= p <= MAX_DATA_PORT:
                raise TopologyError(f"{who}: port {p} outside 1..{MAX_DATA_PORT} (254 is the clock port, "
                                    f"255 the CPU port)")

    for r in t.rotors:
        check_ports(f"rotor {r.name}", r.ports.values())
        if sorted(r.ports) != list(range(s.racks)):
            raise TopologyError(f"rotor {r.name}: ports must map every rack 0..{s.racks - 1}")
        if len(set(r.ports.values())) != len(r.ports):
            raise TopologyError(f"rotor {r.name}: two racks on one port")
    nets = []
    for k in t.racks:
        if set(k.tor.uplinks) != names:
            raise TopologyError(f"{k.tor.name}: uplinks must name every rotor exactly once")
        ports = list(k.tor.uplinks.values()) + [h.port for h in k.hosts]
        check_ports(k.tor.name, ports)
        if len(set(ports)) != len(ports):
            raise TopologyError(f"{k.tor.name}: a port is used twice")
        net = ipaddress.ip_network(k.prefix)
        for h in k.hosts:
            if ipaddress.ip_address(h.ip) not in net:
                raise TopologyError(f"host {h.name} {h.ip} is outside its rack prefix {k.prefix}")
        nets.append(net)
    for a in range(len(nets)):
        for b in range(a + 1, len(nets)):
            if nets[a].overlaps(nets[b]):
                raise TopologyError(f"rack prefixes {nets[a]} and {nets[b]} overlap")
