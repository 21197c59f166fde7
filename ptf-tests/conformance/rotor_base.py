"""Base class and domain helpers for the rotor conformance suite (run by ptf).

Test parameters (``--test-params``), set by ptf-tests/test_conformance.py:
  grpc_addrs  comma-separated P4Runtime addresses, one per switch (device index order)
  p4info, p4blob  the compiled rotor program
  thrift_ports comma-separated BMv2 thrift ports (for queue-rate control)
"""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import subprocess
import threading
import time
from pathlib import Path

import finsy as fy
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S

PORTS = (1, 2, 3, 4)


def params() -> dict:
    return tu.test_params_get()


class SyncSwitch:
    """A finsy Switch driven from a private event loop, with a blocking API for tests."""

    def __init__(self, name: str, address: str, device_id: int, p4info: str, p4blob: str,
                 election_id: int = 100):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.packet_ins: queue.Queue = queue.Queue()
        self.sw = fy.Switch(name, address, fy.SwitchOptions(
            p4info=Path(p4info), p4blob=Path(p4blob), device_id=device_id,
            initial_election_id=election_id))
        self.call(self.sw.__aenter__())
        self.reader = asyncio.run_coroutine_threadsafe(self._read(), self.loop)

    def call(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _read(self):
        async for pkt in self.sw.read_packets():
            self.packet_ins.put((time.time_ns(), pkt))

    async def _collect(self, ent):
        return [e async for e in self.sw.read(ent)]

    def write(self, updates) -> None:
        self.call(C.write_batched(self.sw, list(updates)))

    def clear(self) -> None:
        self.call(self.sw.delete_all())
        while not self.packet_ins.empty():
            self.packet_ins.get_nowait()

    def counter(self, name: str, index: int) -> tuple[int, int]:
        ents = self.call(self._collect(fy.P4CounterEntry(name, index=index)))
        d = ents[0].data
        return (d.packet_count, d.byte_count) if d else (0, 0)

    def packet_in(self, timeout: float = 2.0):
        return self.packet_ins.get(timeout=timeout)

    def close(self) -> None:
        self.reader.cancel()
        try:
            self.call(self.sw.__aexit__(None, None, None), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


class RotorTest(BaseTest):
    """Connects to every switch, clears it on setUp and tearDown, offers rotor helpers."""

    num_switches = 1
    program_keys = ("p4info", "p4blob")  # which test params name the program to run

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        p = params()
        addrs = p["grpc_addrs"].split(",")
        self.thrift_ports = [int(x) for x in p.get("thrift_ports", "").split(",") if x]
        self.switches = []
        for d in range(self.num_switches):
            sw = SyncSwitch(f"sw{d}", addrs[d], d + 1, p[self.program_keys[0]], p[self.program_keys[1]])
            sw.clear()
            self.switches.append(sw)
        self.sw = self.switches[0]
        self.seq = 0

    def tearDown(self):
        for sw in getattr(self, "switches", []):
            try:
                sw.clear()
            finally:
                sw.close()
        BaseTest.tearDown(self)

    # ---- schedule helpers ------------------------------------------------
    @staticmethod
    def port_map(racks: int = 4) -> dict[int, int]:
        return {i: PORTS[i] for i in range(racks)}

    _generation = (int(time.time()) & 0x3FFF) << 2

    @classmethod
    def next_generation(cls) -> int:
        """Every install gets a new config generation: register state of earlier tests is void."""
        RotorTest._generation = (RotorTest._generation + 1) & 0xFFFF or 1
        return RotorTest._generation

    def install(self, sched: S.Schedule, rotor: S.Rotor, mode: int, sw=None, *, offset_us: int = 0,
                epoch_us: int = 0, generation: int | None = None, link_mtus: dict[int, int] | None = None) -> None:
        generation = generation or self.next_generation()
        (sw or self.sw).write(C.rotor_entities(sched, rotor, self.port_map(sched.racks), mode,
                                               offset_us=offset_us, epoch_us=epoch_us,
                                               generation=generation, link_mtus=link_mtus))

    def set_slot(self, slot: int, index: int, night: bool = False, sw=None, expect_ok: bool = True):
        """Signal mode: move the slot and wait until the pipeline has applied it (ack)."""
        sw = sw or self.sw
        self.seq += 1
        sw.write([C.set_slot_packet(slot, index, night, seq=self.seq, ack=True)])
        _, pkt = sw.packet_in()
        self.assertEqual(pkt["seq"], self.seq)
        if expect_ok:
            self.assertEqual(pkt["opcode"], dp.OP_SET_SLOT, "slot change refused")
        return pkt

    def send_control(self, opcode: int, index: int = 0, slot: int = 0, flags: int = 0, sw=None):
        sw = sw or self.sw
        self.seq += 1
        sw.write([fy.P4PacketOut(b"", opcode=opcode, flags=flags, index=index, slot=slot, seq=self.seq,
                                 at=0, night_us=0)])
        return sw.packet_in()[1]

    def set_slot_at(self, slot: int, index: int, at_us: int, night_us: int = 0, sw=None):
        """Signal mode, timed: slot ``slot`` starts at switch time ``at_us`` (installed offset
        0: common time = local).  Returns the ack (OP_SET_SLOT, or OP_ERROR if refused)."""
        sw = sw or self.sw
        self.seq += 1
        sw.write([C.set_slot_packet(slot, index, seq=self.seq, ack=True, at_us=at_us, night_us=night_us)])
        _, pkt = sw.packet_in()
        self.assertEqual(pkt["seq"], self.seq)
        return pkt

    def ctrl(self, which: dp.CtrlCounter, sw=None) -> int:
        return (sw or self.sw).counter(dp.C_CTRL, int(which))[0]

    def local_us_now(self, sw=None) -> int:
        """The switch's current local time (us), from the best of a few time probes."""
        wall, local = self.local_now_us(sw)
        return local + (time.time_ns() - wall) // 1000

    def local_now_us(self, sw=None) -> tuple[int, int]:
        """(wall ns at the middle of the probe, switch-local us): maps wall time to switch time."""
        sw = sw or self.sw
        best = None
        for _ in range(5):
            self.seq += 1
            t0 = time.time_ns()
            sw.write([C.time_probe_packet(self.seq)])
            t1, pkt = sw.packet_in()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) // 2, pkt["timestamp"])
        return best[1], best[2]

    def clock_port_probe(self, seq: int, device: int = 0):
        """Send a time probe into the clock port; (wall ns before sending, reflected probe
        (seq, T2, T3), wall ns after it came back)."""
        from p4rotor.control import clockport as CP

        t1 = time.time_ns()
        tu.send_packet(self, (device, dp.CLOCK_PORT), CP.probe_frame(seq))
        res = tu.dp_poll(self, device_number=device, port_number=dp.CLOCK_PORT, timeout=2)
        t4 = time.time_ns()
        if not isinstance(res, self.dataplane.PollSuccess):
            self.fail("no reflected clock probe on the clock port")
        p = CP.parse_probe(bytes(res.packet))
        self.assertIsNotNone(p, "what came back on the clock port is not a clock probe")
        return t1, p, t4

    def clock_port_iface(self, device: int = 0) -> str:
        return ptf.config["port_map"][(device, dp.CLOCK_PORT)]

    def port_iface_mtu(self, port: int, device: int = 0) -> int:
        """The MTU of the ptf-side veth wired to ``port`` (both ends of a veth are set alike)."""
        ifc = ptf.config["port_map"][(device, port)]
        return int(Path(f"/sys/class/net/{ifc}/mtu").read_text())

    @staticmethod
    def sized_frame(frame_len: int, dscp: int = 0, dst_ip: str = "10.0.1.1", src_ip: str = "10.0.0.1") -> bytes:
        """An Ethernet/IPv4/UDP frame of exactly ``frame_len`` bytes (no FCS)."""
        head = Ether(src="02:00:0a:00:00:01", dst="02:00:0a:00:00:99") / IP(
            src=src_ip, dst=dst_ip, tos=dscp << 2, ttl=64) / UDP(sport=4000, dport=7)
        return bytes(head / Raw(b"\xa5" * (frame_len - len(head))))

    def drops(self, cause: dp.DropCause, sw=None) -> int:
        return (sw or self.sw).counter(dp.C_DROP, int(cause))[0]

    def frame_ledger(self, in_port: int, out_port: int, sw=None):
        """Where the frames sent into ``in_port`` towards ``out_port`` went, from here on."""
        from ledger import FrameLedger

        return FrameLedger(self, sw or self.sw, in_port, out_port)

    # ---- frames ----------------------------------------------------------
    @staticmethod
    def frame(src_port: int, tag: int = 0) -> bytes:
        pkt = (Ether(src=f"00:00:00:00:00:{src_port:02x}", dst="00:00:00:00:00:ff")
               / IP(src=f"10.0.0.{src_port}", dst="10.0.0.254") / UDP(sport=1000 + tag, dport=2000)
               / (b"rotor-%04d" % tag))
        return bytes(pkt)

    def expect_circuit(self, matching, device: int = 0, tag: int = 0) -> None:
        """Send one frame into every port, then check each left on its matched port only.

        All frames go out first so the whole check sits inside a short slot.
        """
        sent = []
        for i, in_port in enumerate(PORTS[:len(matching)]):
            f = self.frame(in_port, tag)
            tu.send_packet(self, (device, in_port), f)
            sent.append((f, matching[i]))
        for f, j in sent:
            if j is not None:
                tu.verify_packet(self, f, (device, PORTS[j]))
        tu.verify_no_other_packets(self, device_number=device)

    def expect_dark(self, device: int = 0, tag: int = 0) -> None:
        for in_port in PORTS:
            tu.send_packet(self, (device, in_port), self.frame(in_port, tag))
        tu.verify_no_other_packets(self, device_number=device)

    def wait_all_left(self, n: int, stale0: int, port: int, tx0: int, timeout: float = 15) -> None:
        """Until all n held frames left the queue (dropped stale or sent): BMv2 fixes each frame's
        departure time when it is queued, so restoring the rate does not release them sooner."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            done = (self.drops(dp.DropCause.STALE) - stale0) + (self.sw.counter(dp.C_TX, port)[0] - tx0)
            if done >= n:
                return
            time.sleep(0.1)
        self.fail(f"held frames did not leave the queue within {timeout} s")

    # ---- BMv2 queue control (thrift) ---------------------------------------
    def set_queue_rate(self, pps: int, port: int, device: int = 0) -> None:
        """BMv2's egress queue rate (thrift runtime CLI), to hold frames between ingress and egress."""
        import glob
        import os
        import shutil
        import sys

        cli = shutil.which("simple_switch_CLI")
        if not cli:
            self.skipTest("simple_switch_CLI (BMv2 thrift CLI) not found")
        # BMv2 installs its Python modules under the /usr/local prefix, which Debian's Python
        # does not search; run the CLI with this interpreter (thrift from PyPI) and that path.
        extra = glob.glob("/usr/local/lib/python3*/site-packages")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(extra + [os.environ.get("PYTHONPATH", "")])}
        cmd = f"set_queue_rate {pps} {port}\n"
        r = subprocess.run([sys.executable, cli, "--thrift-port", str(self.thrift_ports[device])],
                           input=cmd, capture_output=True, text=True, timeout=20, env=env)
        if r.returncode != 0 or "Error" in r.stdout:
            self.fail(f"simple_switch_CLI failed: {r.stdout} {r.stderr}")


def four_rack_rotornet(slot_us: int = 1000, night_us: int = 100) -> S.Schedule:
    """4 racks, 1 rotor, 3 bidirectional matchings: every pair once per cycle."""
    return S.generate_rotornet(4, 1, slot_us, night_us)


def joining(rotor: S.Rotor, a: int, b: int) -> int:
    """The index of ``rotor``'s matching that connects rack ``a`` to rack ``b``."""
    return next(i for i, mm in enumerate(rotor.matchings) if mm[a] == b)


class FourRackTest(RotorTest):
    """A test on one rotor of the four-rack RotorNet schedule (``four_rack_rotornet``), installed
    in signal mode before the test runs: ``self.sched``, ``self.rotor``.  A test that needs
    other slot lengths or another mode builds its own schedule."""

    def setUp(self):
        super().setUp()
        self.sched = four_rack_rotornet()
        self.rotor = self.sched.rotors[0]
        self.install(self.sched, self.rotor, dp.MODE_SIGNAL)

    def matching_joining(self, a: int, b: int) -> int:
        """The index of the rotor's matching that connects rack ``a`` to rack ``b``."""
        return joining(self.rotor, a, b)


# ---------------------------------------------------------------------------
# ToR
# ---------------------------------------------------------------------------



from p4rotor.schedule import routes as R  # noqa: E402
from p4rotor.schedule import topology as TP  # noqa: E402

ETH_FABRIC = dp.ETHERTYPE_FABRIC
SIGNAL_MODE = dp.MODE_SIGNAL


def four_rack_fabric() -> S.Schedule:
    """4 racks, 2 rotors staggered by half a slot (100 ms slots, 10 ms nights):
    rotor a pairs 0-1, 2-3; rotor b pairs 0-2, 1-3."""
    return S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": 100_000, "reconfig_us": 10_000,
                        "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                   {"name": "b", "offset_us": 50_000, "matchings": [[2, 3, 0, 1]]}]})


def tor_topology(sched: S.Schedule) -> TP.Topology:
    """Rack 0's ToR under test: uplinks a->port 1, b->port 2; hosts on ports 3 and 4."""
    t = TP.generate(sched, "inline")
    racks = list(t.racks)
    r0 = racks[0]
    hosts = tuple(TP.Host(h.name, h.ip, h.mac, 3 + i) for i, h in enumerate(r0.hosts))
    tor = TP.Tor(r0.tor.name, r0.tor.device_id, r0.tor.grpc_port, {"a": 1, "b": 2}, hop_limit=4)
    racks[0] = TP.Rack(r0.id, r0.prefix, tor, hosts)
    return TP.Topology(sched, "inline", t.rotors, racks)


class TorTest(RotorTest):
    """A ToR (rack 0) under test; the switch runs the tor program."""

    epsilon_us = 0
    program_keys = ("tor_p4info", "tor_p4blob")

    def setUp(self):
        RotorTest.setUp(self)
        self.sched = four_rack_fabric()
        self.topo = tor_topology(self.sched)
        self.routes = R.compute(self.sched, epsilon_us=self.epsilon_us)

    def install_tor(self, mode: int = SIGNAL_MODE, epoch_us: int = 0) -> None:
        self.sw.write(C.tor_entities(self.topo, self.topo.racks[0], self.routes, mode, epoch_us=epoch_us,
                                     generation=self.next_generation()))

    def set_slice(self, idx: int) -> None:
        self.set_slot(idx, idx)

    def slice_where(self, pred) -> int:
        for sr in self.routes:
            if pred(sr):
                return sr.index
        self.fail("no such slice")

    @staticmethod
    def host_frame(dst_ip: str, dscp: int = 0, src_ip: str = "10.0.0.1", tag: int = 0) -> bytes:
        return bytes(Ether(src="02:00:0a:00:00:01", dst="02:00:0a:00:00:99")
                     / IP(src=src_ip, dst=dst_ip, tos=dscp << 2, ttl=64) / UDP(sport=1000 + tag, dport=7)
                     / Raw(b"tor-%04d" % tag))

    @staticmethod
    def with_fabric(frame: bytes, dst_rack: int, src_rack: int, hops: int, tclass: int) -> bytes:
        """The frame as it travels between racks: fabric header after Ethernet."""
        import struct

        eth = frame[:12] + struct.pack("!H", ETH_FABRIC)
        return eth + struct.pack("!HHBBH", dst_rack, src_rack, hops, tclass, 0x0800) + frame[14:]



# ---------------------------------------------------------------------------
# One-switch fabric
# ---------------------------------------------------------------------------

def one_switch_topology() -> TP.Topology:
    """The 4-rack, 2-rotor fabric on ONE switch, slots of 1 s (nights 100 ms) so a test can aim
    at a slice: rack 0's hosts on ports 1 and 2, rack 1's on 3, rack 2's on 4, rack 3 none."""
    sched = S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": 1_000_000, "reconfig_us": 100_000,
                         "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                    {"name": "b", "offset_us": 500_000, "matchings": [[2, 3, 0, 1]]}]})
    t = TP.generate(sched, "inline", hosts_per_rack=2, one_switch=True)
    racks = [TP.Rack(k.id, k.prefix, k.tor, k.hosts[:{0: 2, 1: 1, 2: 1, 3: 0}[k.id]]) for k in t.racks]
    return TP.Topology(sched, "inline", t.rotors, racks, one_switch=t.one_switch)


class OneSwitchTest(RotorTest):
    """The one-switch fabric program; clock mode, aimed at a slice by choosing the epoch."""

    program_keys = ("one_p4info", "one_p4blob")

    def setUp(self):
        RotorTest.setUp(self)
        self.topo = one_switch_topology()
        self.sched = self.topo.schedule
        self.routes = R.compute(self.sched)
        self.ports = C.host_ports(self.topo)

    def install_at(self, phase_us: int, hop_limit: int | None = None) -> None:
        """Install so that the switch is ``phase_us`` into the hyperperiod now (and for the next
        ~hundreds of ms: slices here last 400 ms)."""
        topo = self.topo
        if hop_limit is not None:
            topo = TP.Topology(topo.schedule, "inline", topo.rotors,
                               [TP.Rack(k.id, k.prefix, dataclasses.replace(k.tor, hop_limit=hop_limit), k.hosts)
                                for k in topo.racks], one_switch=topo.one_switch)
        ents = C.one_switch_entities(topo, self.routes, dp.MODE_CLOCK, generation=self.next_generation())
        self.sw.write(ents[:-1])
        # The config last, its epoch such that "now" (+ the write's few ms) is phase_us in.
        epoch = self.local_us_now() + 20_000 - phase_us
        cfg = C.one_switch_entities(topo, self.routes, dp.MODE_CLOCK, epoch_us=epoch,
                                    generation=self.next_generation())[-1]
        self.sw.write([cfg])
        self.epoch_us = epoch

    def phase_now_us(self) -> int:
        """Where in the hyperperiod the switch is now (after install_at)."""
        return (self.local_us_now() - self.epoch_us) % self.sched.hyperperiod_us

    def slice_mid(self, pred) -> int:
        for sr in self.routes:
            if pred(sr):
                return (sr.slice.start_us + sr.slice.end_us) // 2
        self.fail("no such slice")

    def host_frame(self, src: str, dst: str, dscp: int = 0, tag: int = 0) -> bytes:
        ip = {h.name: h.ip for k in self.topo.racks for h in k.hosts}
        return bytes(Ether(src="02:00:0a:00:00:01", dst="02:00:0a:00:00:99")
                     / IP(src=ip[src], dst=ip[dst], tos=dscp << 2, ttl=64) / UDP(sport=1000 + tag, dport=7)
                     / Raw(b"one-%04d" % tag))

    def hops(self) -> list[int]:
        return [self.sw.counter(dp.C_HOPS, i)[0] for i in range(8)]

    def all_drops(self) -> dict[str, int]:
        return {c.name: self.drops(c) for c in dp.DropCause}

    def verify_delivered(self, frame: bytes, port: int, drops_before: dict[str, int]) -> None:
        """The frame arrives on ``port``; if not, the failure names the drop causes that moved."""
        import ptf.testutils as tu

        try:
            tu.verify_packet(self, frame, port)
        except AssertionError:
            moved = {k: v - drops_before[k] for k, v in self.all_drops().items() if v != drops_before[k]}
            self.fail(f"not delivered on port {port}; drops that moved: {moved or 'none'}; hop counter {self.hops()}")
