"""The same forwarding cases on both fabrics (issue #15): every case below runs once on the
multi-switch fabric and once on the one-switch fabric, and both must do what schedule.routes
says -- delivered to the same host, unchanged, across the same number of circuits, or dropped
under the same cause.

A case is data (`Case`): hosts, class, and the slice it is sent in.  A fabric is a way to carry
one frame (`carry`):

* multi-switch: the ToR program, provisioned hop by hop as the rack the frame is at (uplinks a=1,
  b=2, that rack's hosts on 3, 4) and told the slice (signal mode).  A frame leaving on an uplink
  crosses that rotor's live matching (the rotor itself is rotor_tests' subject) and enters the
  next rack's ToR on the same rotor's uplink, as the bytes the first ToR sent: every rack the
  frame visits is seen, and must be the route's;
* one-switch: the oneswitch program aimed at the middle of the slice (clock mode), the frame sent
  on its host's port, the circuits it crossed read from the hop counter.

The fabric is rotor_base.one_switch_topology()'s: 4 racks, rotors a (pairs 0-1, 2-3) and b (0-2,
1-3, half a slot later), slots of 1 s; racks 0 (two hosts), 1 and 2 (one each) have hosts."""

from __future__ import annotations

import dataclasses
from typing import Callable

import ptf.testutils as tu

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.schedule import topology as TP
from p4rotor.schedule import routes as R
from rotor_base import SIGNAL_MODE, OneSwitchTest, RotorTest, aim_stretch, one_switch_topology, stretched

UPLINKS = {"a": 1, "b": 2}  # multi-switch: the ToR under test's uplink per rotor
HOST_PORT0 = 3              # multi-switch: the rack's first host port


def both_live(sr: R.SliceRoutes) -> bool:
    return sr.live_mask == 0b11


def a_dark(sr: R.SliceRoutes) -> bool:
    return sr.slice.live[0] is None and sr.slice.live[1] is not None


@dataclasses.dataclass(frozen=True)
class Case:
    """One frame from ``src`` to ``dst`` (host names) with ``dscp``, sent in the first slice
    ``when`` accepts; ``route`` is what schedule.routes must say for it (the case checks it is
    testing what it claims): "local", "direct", "vlb", "multi-hop" or "none" (then ``drop``)."""
    src: str
    dst: str
    dscp: int
    when: Callable[[R.SliceRoutes], bool]
    route: str
    drop: dp.DropCause | None = None

    @property
    def tclass(self) -> int:
        return {dp.DSCP_LOW_LATENCY: dp.TCLASS_LOW_LATENCY}.get(self.dscp, dp.TCLASS_BULK)


LOCAL = Case("h0x0", "h0x1", 0, both_live, "local")
DIRECT = Case("h0x0", "h1x0", 0, both_live, "direct")
VLB = Case("h1x0", "h2x0", 0, both_live, "vlb")
MULTI_HOP = Case("h1x0", "h2x0", dp.DSCP_LOW_LATENCY, both_live, "multi-hop")
DIRECT_ONLY_NO_CIRCUIT = Case("h1x0", "h2x0", dp.DSCP_DIRECT_ONLY, both_live, "none", dp.DropCause.NO_ROUTE)
NO_PATH_WHILE_DARK = Case("h0x0", "h1x0", 0, a_dark, "none", dp.DropCause.NO_ROUTE)


@dataclasses.dataclass
class Carried:
    """What a fabric did with the frame: delivered on a host (the bytes it got, the circuits it
    crossed, the racks it visited if the fabric shows them) or dropped (the causes that moved)."""
    host: str | None
    frame: bytes | None
    circuits: int
    racks: list[int] | None = None
    drops: dict[str, int] = dataclasses.field(default_factory=dict)


class FabricCaseTest(RotorTest):
    """One case, checked against the routes; subclasses say how a fabric carries a frame."""

    def setUp(self):
        RotorTest.setUp(self)
        self.topo = one_switch_topology()
        if self.emulates_signal():   # slices long enough to aim at (RotorTest.aim)
            s = self.topo.schedule
            s = stretched(s, aim_stretch([(sl.start_us, sl.end_us) for sl in s.slices()]))
            self.topo = TP.Topology(s, "inline", self.topo.rotors, self.topo.racks, one_switch=self.topo.one_switch)
        self.sched = self.topo.schedule
        self.routes = R.compute(self.sched)
        self.rack_of = {h.name: k.id for k in self.topo.racks for h in k.hosts}
        self.ip = {h.name: h.ip for k in self.topo.racks for h in k.hosts}

    def carry(self, case: Case, sr: R.SliceRoutes, frame: bytes) -> Carried:
        raise NotImplementedError

    def poll_ours(self, frame: bytes, timeout: float = 2.0):
        """The next packet on any port that carries ``frame``'s payload (its tag), or None: the
        kernel sends its own packets on the ptf veths now and then (IPv6 neighbour discovery),
        and one of those is not the frame coming out of the fabric."""
        import time

        marker = frame[-8:]  # b"fab-NNNN"
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            res = tu.dp_poll(self, device_number=0, timeout=left)
            if not isinstance(res, self.dataplane.PollSuccess):
                return None
            if bytes(res.packet).find(marker) >= 0:
                return res
        return None

    def frame(self, case: Case, tag: int) -> bytes:
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw

        return bytes(Ether(src="02:00:0a:00:00:01", dst="02:00:0a:00:00:99")
                     / IP(src=self.ip[case.src], dst=self.ip[case.dst], tos=case.dscp << 2, ttl=64)
                     / UDP(sport=1000 + tag, dport=7) / Raw(b"fab-%04d" % tag))

    def expected_racks(self, sr: R.SliceRoutes, case: Case) -> list[int]:
        """The racks the routes take the frame through, hop by hop as each ToR looks it up."""
        a, b = self.rack_of[case.src], self.rack_of[case.dst]
        racks, t = [a], case.tclass
        while racks[-1] != b:
            hop = sr.hops[(racks[-1], b, t)]
            racks.append(hop.next_rack)
            if hop.vlb:
                t = dp.TCLASS_BULK_TRANSIT
            self.assertLess(len(racks), 8, "the routes loop")
        return racks

    def check(self, case: Case, tag: int = 0) -> None:
        sr = next((r for r in self.routes if case.when(r)), None)
        self.assertIsNotNone(sr, "no slice for this case")
        a, b = self.rack_of[case.src], self.rack_of[case.dst]
        hop = sr.hops.get((a, b, case.tclass)) if case.dscp != dp.DSCP_DIRECT_ONLY else (
            sr.hops.get((a, b, dp.TCLASS_BULK)) if (a, b, dp.TCLASS_BULK) in sr.hops
            and not sr.hops[(a, b, dp.TCLASS_BULK)].vlb else None)
        kind = ("local" if a == b else "none" if hop is None else "vlb" if hop.vlb
                else "direct" if hop.next_rack == b else "multi-hop")
        self.assertEqual(kind, case.route, f"the routes send this case {kind}, not {case.route}")
        f = self.frame(case, tag)
        got = self.carry(case, sr, f)
        if case.route == "none":
            self.assertIsNone(got.host, f"delivered to {got.host}: the routes have no path (slice {sr.index}, "
                                        f"{sr.slice.start_us}-{sr.slice.end_us} us)")
            self.assertEqual(got.drops.get(case.drop.name, 0), 1,
                             f"not dropped once under {case.drop.name}: drops that moved {got.drops}")
            return
        want = [a] if a == b else self.expected_racks(sr, case)
        self.assertEqual(got.host, case.dst, f"delivered to {got.host}, not {case.dst}; drops {got.drops}")
        self.assertEqual(got.frame, f, "the host got another frame than was sent")
        self.assertEqual(got.circuits, len(want) - 1, f"crossed {got.circuits} circuits, the route {want}")
        if got.racks is not None:
            self.assertEqual(got.racks, want)


class MultiSwitchFabric(FabricCaseTest):
    """The ToR program, provisioned as each rack the frame reaches in turn (signal mode)."""

    program_keys = ("tor_p4info", "tor_p4blob")

    def tor_view(self, rack: int) -> tuple[TP.Topology, TP.Rack]:
        """The multi-switch topology with ``rack``'s ToR wired to the ptf ports."""
        racks = list(self.topo.racks)
        k = racks[rack]
        hosts = tuple(TP.Host(h.name, h.ip, h.mac, HOST_PORT0 + i) for i, h in enumerate(k.hosts))
        racks[rack] = TP.Rack(k.id, k.prefix, TP.Tor(k.tor.name, k.tor.device_id, k.tor.grpc_port, dict(UPLINKS),
                                                     hop_limit=k.tor.hop_limit), hosts)
        topo = TP.Topology(self.sched, "inline", self.topo.rotors, racks)
        return topo, racks[rack]

    def all_drops(self) -> dict[str, int]:
        return {c.name: self.drops(c) for c in dp.DropCause}

    def carry(self, case: Case, sr: R.SliceRoutes, frame: bytes) -> Carried:
        rack = self.rack_of[case.src]
        _, k = self.tor_view(rack)
        port = next(h.port for h in k.hosts if h.name == case.src)
        data, racks = frame, [rack]
        for _ in range(len(self.sched.rotors) * self.sched.racks):
            topo, k = self.tor_view(rack)
            self.sw.clear()
            self.write_tor(topo, k, self.routes, SIGNAL_MODE)
            self.set_slot(sr.index, sr.index)
            before = self.all_drops()
            tu.send_packet(self, port, data)
            res = self.poll_ours(frame)
            if res is None:
                moved = {n: v - before[n] for n, v in self.all_drops().items() if v != before[n]}
                return Carried(None, None, len(racks) - 1, racks, moved)
            tu.verify_no_other_packets(self)
            out, data = res.port, bytes(res.packet)
            up = {p: r for r, p in UPLINKS.items()}
            if out not in up:  # a host port: delivered
                host = next(h.name for h in k.hosts if h.port == out)
                return Carried(host, data, len(racks) - 1, racks)
            r_idx = [r.name for r in self.sched.rotors].index(up[out])
            live = sr.slice.live[r_idx]
            self.assertIsNotNone(live, f"rack {rack}'s ToR sent on rotor {up[out]}'s uplink while it is dark")
            rack = self.sched.rotors[r_idx].matchings[live][rack]
            racks.append(rack)
            port = out  # the circuit lands on the same rotor's uplink of the next rack
        self.fail(f"still in the fabric after {len(racks) - 1} circuits: {racks}")


class OneSwitchFabric(OneSwitchTest, FabricCaseTest):
    """The oneswitch program: the whole fabric in one pipeline (clock mode)."""

    def setUp(self):
        FabricCaseTest.setUp(self)
        self.ports = C.host_ports(self.topo)

    def carry(self, case: Case, sr: R.SliceRoutes, frame: bytes) -> Carried:
        # Clock mode: the frame must meet the switch inside the slice.  A dark rotor's slice is
        # its night, 100 ms here, and a loaded machine can take that long between the install
        # and the send: then aim again (the frame is sent only once the phase is checked).
        width = sr.slice.end_us - sr.slice.start_us
        # The counters first: reading 19 of them takes ~100 ms, longer than a night.
        before, hops = self.all_drops(), self.hops()
        for _ in range(5):
            self.sw.clear()  # entities only: counters keep counting
            # install_at aims 20 ms after its clock read; aim early in the slice, for the phase
            # probe below takes time too
            self.install_at(sr.slice.start_us + max(25_000, width // 10))
            phase = self.phase_now_us()
            if sr.slice.start_us + 2_000 <= phase < sr.slice.start_us + width // 2:
                break
        else:
            self.fail(f"could not aim at slice {sr.index} ({sr.slice.start_us}-{sr.slice.end_us} us) in 5 tries")
        tu.send_packet(self, self.ports[case.src], frame)
        res = self.poll_ours(frame)
        # The hop counter counts each circuit a frame crosses under its hop number: one frame's
        # circuits are the sum of the increments.
        circuits = sum(b - a for a, b in zip(hops, self.hops()))
        if res is None:
            moved = {n: v - before[n] for n, v in self.all_drops().items() if v != before[n]}
            return Carried(None, None, circuits, None, moved)
        tu.verify_no_other_packets(self)
        host = {p: n for n, p in self.ports.items()}.get(res.port)
        return Carried(host, bytes(res.packet), circuits)


# ---- the cases, once per fabric ---------------------------------------------------------

class MultiSwitchLocal(MultiSwitchFabric):
    """A host of the same rack: straight to its port, no circuit."""

    def runTest(self):
        self.check(LOCAL, 1)


class OneSwitchLocal(OneSwitchFabric):
    """A host of the same rack: straight to its port, no circuit."""

    def runTest(self):
        self.check(LOCAL, 1)


class MultiSwitchDirect(MultiSwitchFabric):
    """Bulk on a live direct circuit: one circuit."""

    def runTest(self):
        self.check(DIRECT, 2)


class OneSwitchDirect(OneSwitchFabric):
    """Bulk on a live direct circuit: one circuit."""

    def runTest(self):
        self.check(DIRECT, 2)


class MultiSwitchVlbTwoHops(MultiSwitchFabric):
    """Bulk with no direct circuit: VLB, two circuits through the route's middle rack."""

    def runTest(self):
        self.check(VLB, 3)


class OneSwitchVlbTwoHops(OneSwitchFabric):
    """Bulk with no direct circuit: VLB, two circuits."""

    def runTest(self):
        self.check(VLB, 3)


class MultiSwitchLowLatencyMultiHop(MultiSwitchFabric):
    """Low latency: the slice's shortest path, hop by hop as each ToR looks it up."""

    def runTest(self):
        self.check(MULTI_HOP, 4)


class OneSwitchLowLatencyMultiHop(OneSwitchFabric):
    """Low latency: the slice's shortest path, as many circuits."""

    def runTest(self):
        self.check(MULTI_HOP, 4)


class MultiSwitchDirectOnlyWithoutCircuit(MultiSwitchFabric):
    """Direct-only with no direct circuit: dropped at the first ToR, counted NO_ROUTE."""

    def runTest(self):
        self.check(DIRECT_ONLY_NO_CIRCUIT, 5)


class OneSwitchDirectOnlyWithoutCircuit(OneSwitchFabric):
    """Direct-only with no direct circuit: dropped, counted NO_ROUTE."""

    def runTest(self):
        self.check(DIRECT_ONLY_NO_CIRCUIT, 5)


class MultiSwitchNoPathWhileRotorDark(MultiSwitchFabric):
    """Bulk while the only circuit it could use is dark (no direct, no VLB): dropped, NO_ROUTE."""

    def runTest(self):
        self.check(NO_PATH_WHILE_DARK, 6)


class OneSwitchNoPathWhileRotorDark(OneSwitchFabric):
    """Bulk while the only circuit it could use is dark: dropped, counted NO_ROUTE."""

    def runTest(self):
        self.check(NO_PATH_WHILE_DARK, 6)
