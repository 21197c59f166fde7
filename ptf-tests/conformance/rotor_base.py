"""Base class and domain helpers for the rotor conformance suite (run by ptf).

Test parameters (``--test-params``), set by ptf-tests/test_conformance.py:
  target      "bmv2" (default) or "ebpf"
  grpc_addrs  comma-separated P4Runtime addresses, one per switch (device index order; bmv2)
  p4info, p4blob  the compiled rotor program (tor_*, one_*: the ToR's, the one-switch fabric's)
  thrift_ports comma-separated BMv2 thrift ports (for queue-rate control)
  pipelines   ebpf: the NIKSS pipelines the harness loaded, "rotor=100,101;tor=102,103" (device order)
  sw_ifaces   ebpf: the switch side of each port's veth, "0:1=s0p1,0:2=s0p2,..."

A target lacks some of what the suite uses (the eBPF programs: clock mode only, no CPU port, no
clock port, no queue between ingress and egress, no one-switch program): a test class names what
it needs (``needs``, inherited and added up along the class's bases) and is skipped on a target
that lacks it, with the reason (``LACKS``).  Everything else that differs is here, not in the
tests: the switch (``SyncSwitch`` over P4Runtime, ``NikssTestSwitch`` over nikss-ctl), the time
units of the entities, and the switch's clock (on eBPF CLOCK_MONOTONIC, the test's own).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import queue
import socket
import struct
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
from p4rotor.control.target import EBPF

PORTS = (1, 2, 3, 4)


def params() -> dict:
    return tu.test_params_get()


def target_name() -> str:
    return params().get("target", "bmv2")


# What a target lacks, by the name a test's ``needs`` uses, and why (docs/targets.md).
LACKS: dict[str, dict[str, str]] = {
    "bmv2": {},
    "ebpf": {
        "signal": "signal mode: the PSA programs run in clock mode only (no CPU port, so no "
                  "control packet sets a slot)",
        "packet_io": "PacketOut/PacketIn: the PSA programs have no CPU port (acks, time probes, refusals)",
        "clock_port": "the clock port: the PSA programs reflect no clock probes (every switch reads "
                      "the kernel's clock, nothing to measure)",
        "queue_rate": "BMv2's thrift queue rate: on eBPF egress runs when the redirect is flushed, "
                      "there is no queue to hold frames in",
        "oneswitch": "the one-switch fabric program: it has no PSA version",
        "rotor_mtu": "the rotor's MTU check: the PSA rotor has none (docs/targets.md, 'The MTU check')",
    },
}


def needs_of(cls) -> tuple[str, ...]:
    """What a test class needs: its own ``needs`` and its bases', in order, once each."""
    out: list[str] = []
    for c in reversed(cls.__mro__):
        for n in c.__dict__.get("needs", ()):
            if n not in out:
                out.append(n)
    return tuple(out)


def lacking(cls, target: str) -> str | None:
    """Why ``target`` cannot run the test class ``cls`` (None: it can)."""
    why = [f"{target} lacks {LACKS[target][n]}" for n in needs_of(cls) if n in LACKS.get(target, {})]
    return "; ".join(why) or None


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


# The tables whose default action the controller writes, with the program's initial one (what
# P4Runtime restores when SyncSwitch.clear resets the defaults; NIKSS's CLI has no reset).
INITIAL_DEFAULTS = {
    dp.T_CONFIG: ("RotorIngress.slot_state.unconfigured", {}),
    dp.TOR_T_CONFIG: ("TorIngress.slot_state.unconfigured", {}),
    dp.T_TOR_CONFIG: (dp.A_SET_RACK, {"rack": 0xFFFF, "hop_limit": 0}),
}
class NikssTestSwitch:
    """eBPF: one device's NIKSS pipeline for the test's program, with SyncSwitch's blocking API.

    The harness loads a pipeline per (program, device) and owns them (it unloads them and
    deletes the namespace); a test attaches its device's ports to its program's pipeline (moving
    them from another program's) and writes through control.nikss.NikssSwitch: the controller's
    entities in the EBPF target's units, ports as ifindexes.  ``clear`` deletes every entry and
    restores the defaults; counters, like BMv2's, outlive a test."""

    attached: dict[int, int] = {}   # device -> the pipeline its ports are attached to (this process)

    def __init__(self, name: str, device: int, pipeline: int, p4info: str, ifaces: dict[int, str]):
        from p4rotor.control.nikss import NikssSwitch, cli_runner

        self.run = cli_runner()     # ptf runs in the switches' namespace, with the BPF file system
        self.device, self.pipeline = device, pipeline
        self._attach(ifaces)
        ports = {p: socket.if_nametoindex(i) for p, i in ifaces.items()}
        self.ctl = NikssSwitch(name, pipeline, Path(p4info), ports, runner=self.run)

    def _attach(self, ifaces: dict[int, str]) -> None:
        old = self.attached.get(self.device)
        if old == self.pipeline:
            return
        for iface in ifaces.values():
            if old is not None:
                self.run(["del-port", "pipe", str(old), "dev", iface])
            self.run(["add-port", "pipe", str(self.pipeline), "dev", iface])
        self.attached[self.device] = self.pipeline

    def write(self, updates) -> None:
        self.ctl.write(list(updates))

    def clear(self) -> None:
        self.ctl.clear()
        self.ctl.write([~fy.P4TableEntry(t, is_default_action=True, action=fy.P4TableAction(a, **args))
                        for t, (a, args) in INITIAL_DEFAULTS.items() if t in self.ctl.schema.tables])

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """A contract counter's cell, where the PSA program keeps it; drops are counted at
        ingress and at egress (PSA counters live in a control), summed as BMv2 counts them."""
        from p4rotor.control.nikss import counter_name

        if name in dp.SLOT_COUNTERS + dp.SLOT_LL_COUNTERS:   # the controller's way: the cell looked up, not the 65 536 printed
            return self.ctl.slot_cells(counter_name(name, self.ctl.kind), [index]).get(index, (0, 0))
        pk = by = 0
        for c in (name, "egress_drop_counter") if name == dp.C_DROP else (name,):
            cpk, cby = self.ctl.counter(counter_name(c, self.ctl.kind)).get(index, (0, 0))
            pk, by = pk + cpk, by + cby
        return pk, by

    def packet_in(self, timeout: float = 2.0):
        raise AssertionError("the eBPF target has no PacketIn (a test that needs one says needs = ('packet_io',))")

    def close(self) -> None:
        pass


class RotorTest(BaseTest):
    """Connects to every switch, clears it on setUp and tearDown, offers rotor helpers."""

    num_switches = 1
    program_keys = ("p4info", "p4blob")  # which test params name the program to run
    needs: tuple[str, ...] = ()          # what the test needs that a target may lack (LACKS)

    def setUp(self):
        self.target = target_name()
        why = lacking(type(self), self.target)
        if why:
            self.skipTest(why)
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        p = params()
        # The units every time in the entities is written in (the EBPF target: ns, 64 bits).
        self.units = C.BMV2 if self.target == "bmv2" else EBPF
        self.thrift_ports = [int(x) for x in p.get("thrift_ports", "").split(",") if x]
        self.switches = []
        for d in range(self.num_switches):
            if self.target == "ebpf":
                program = {"p4info": "rotor", "tor_p4info": "tor"}[self.program_keys[0]]
                pipes = dict(kv.split("=") for kv in p["pipelines"].split(";"))
                pipeline = int(pipes[program].split(",")[d])
                ifaces = {int(k.split(":")[1]): v for k, v in (kv.split("=") for kv in p["sw_ifaces"].split(","))
                          if int(k.split(":")[0]) == d}
                sw = NikssTestSwitch(f"sw{d}", d, pipeline, p[self.program_keys[0]], ifaces)
            else:
                sw = SyncSwitch(f"sw{d}", p["grpc_addrs"].split(",")[d], d + 1,
                                p[self.program_keys[0]], p[self.program_keys[1]])
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
        """The rotor's entities, config last.  Signal mode on a clock-only target: see ``aim``."""
        generation = generation or self.next_generation()
        if mode == dp.MODE_SIGNAL and self.emulates_signal():
            sched = stretched(sched, aim_stretch([sp for k in range(len(rotor.matchings)) for sp in (
                (k * sched.slot_us, k * sched.slot_us + sched.reconfig_us),
                (k * sched.slot_us + sched.reconfig_us, (k + 1) * sched.slot_us))]))
            ents = C.rotor_entities(sched, sched.rotor(rotor.name), self.port_map(sched.racks), dp.MODE_CLOCK,
                                    offset_us=offset_us, epoch_us=self.local_us_now() + NEVER_US,
                                    generation=generation, link_mtus=link_mtus, target=self.units)
            self.aimable(sw, ents, lambda index, night: index * sched.slot_us + (0 if night else sched.reconfig_us))
        else:
            ents = C.rotor_entities(sched, rotor, self.port_map(sched.racks), mode, offset_us=offset_us,
                                    epoch_us=epoch_us, generation=generation, link_mtus=link_mtus,
                                    target=self.units)
        (sw or self.sw).write(ents)

    def write_tor(self, topo, rack, routes, mode: int = dp.MODE_SIGNAL, sw=None, *, epoch_us: int = 0) -> None:
        """A ToR's entities, config last; signal mode on a clock-only target: see ``aim`` (slot
        ``index`` is slice ``index``; the caller's schedule is already stretched)."""
        if mode == dp.MODE_SIGNAL and self.emulates_signal():
            ents = C.tor_entities(topo, rack, routes, dp.MODE_CLOCK, epoch_us=self.local_us_now() + NEVER_US,
                                  generation=self.next_generation(), target=self.units)
            self.aimable(sw, ents, lambda index, night: routes[index].slice.start_us)
        else:
            ents = C.tor_entities(topo, rack, routes, mode, epoch_us=epoch_us, generation=self.next_generation(),
                                  target=self.units)
        (sw or self.sw).write(ents)

    # ---- signal mode on a clock-only target (eBPF) ---------------------------------------
    # No control packet sets a slot on eBPF.  A test that installs in signal mode only to choose
    # which matching (ToR: slice) is live gets clock mode instead: installed with its epoch far
    # ahead (nothing started: NOT_STARTED, as before the first signal), and ``set_slot`` aims the
    # clock: the config is rewritten, a new generation, so that the slot (its night, or its day)
    # starts now.  The schedule is stretched so that its shortest night, day or slice lasts
    # AIM_SPAN_US, longer than a test takes to send its frames.  A test whose subject is signal
    # mode itself (slot numbers, acks, refusals, timed changes) says needs = ("signal",).
    def emulates_signal(self) -> bool:
        return "signal" in LACKS.get(self.target, {})

    def aimable(self, sw, entities, phase_of) -> None:
        """Remember the config among ``entities`` and where slot ``index`` starts (``phase_of``)."""
        cfg = next(e for e in entities if C.is_slot_config(e))
        self._aim = getattr(self, "_aim", {})
        self._aim[id(sw or self.sw)] = (cfg, phase_of)

    def aim(self, index: int, night: bool = False, sw=None) -> None:
        sw = sw or self.sw
        cfg, phase_of = self._aim[id(sw)]
        args = dict(cfg.action.args)
        args.update(epoch_us=self.units.to_units(self.local_us_now() - phase_of(index, night)),
                    gen=self.next_generation())
        sw.write([~fy.P4TableEntry(cfg.table_id, is_default_action=True,
                                   action=fy.P4TableAction(cfg.action.name, **args))])

    def set_slot(self, slot: int, index: int, night: bool = False, sw=None, expect_ok: bool = True):
        """Signal mode: move the slot and wait until the pipeline has applied it (ack).  On a
        clock-only target the clock is aimed at the slot instead (no ack: returns None)."""
        if self.emulates_signal():
            self.aim(index, night, sw)
            return None
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
        """(wall ns at the middle of the probe, switch-local us): maps wall time to switch time.

        eBPF: the switch's clock is the kernel's CLOCK_MONOTONIC (bpf_ktime_get_ns), this
        process's time.monotonic_ns(): read, not probed (the offset is exactly 0)."""
        if self.target == "ebpf":
            t0 = time.time_ns()
            mono = time.monotonic_ns()
            t1 = time.time_ns()
            return (t0 + t1) // 2, mono // 1000
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
        # SIOCGIFMTU in this process's namespace (on eBPF ptf runs under nsenter --net, whose
        # /sys still shows the namespace it came from).
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sk:
            req = fcntl.ioctl(sk, 0x8921, struct.pack("16si", ifc.encode(), 0))
        return struct.unpack("16si", req)[1]

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


NEVER_US = 10 ** 9 * 1000   # an epoch this far ahead: the clock never starts during a test
AIM_SPAN_US = 3_000_000    # the shortest span a stretched schedule has (see RotorTest.aim)


def aim_stretch(spans) -> int:
    """The factor that makes the shortest of ``spans`` ((start, end) us; empty ones ignored)
    last AIM_SPAN_US."""
    return max(1, -(-AIM_SPAN_US // min(b - a for a, b in spans if b > a)))


def stretched(sched: S.Schedule, k: int) -> S.Schedule:
    """``sched`` with every time ``k`` times longer: the same matchings, slices and routes."""
    j = sched.to_json()
    j["slot_us"] *= k
    j["reconfig_us"] *= k
    for r in j["rotors"]:
        r["offset_us"] *= k
    return S.from_json(j)


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


def four_rack_fabric(slot_us: int = 100_000, night_us: int = 10_000) -> S.Schedule:
    """4 racks, 2 rotors staggered by half a slot (100 ms slots, 10 ms nights unless told):
    rotor a pairs 0-1, 2-3; rotor b pairs 0-2, 1-3."""
    return S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": slot_us, "reconfig_us": night_us,
                        "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                   {"name": "b", "offset_us": slot_us // 2, "matchings": [[2, 3, 0, 1]]}]})


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
        k = 1
        if self.emulates_signal():   # slices long enough to aim at (RotorTest.aim)
            k = aim_stretch([(sl.start_us, sl.end_us) for sl in self.sched.slices()])
            self.sched = stretched(self.sched, k)
        self.topo = tor_topology(self.sched)
        self.routes = R.compute(self.sched, epsilon_us=self.epsilon_us * k)

    def install_tor(self, mode: int = SIGNAL_MODE, epoch_us: int = 0) -> None:
        self.write_tor(self.topo, self.topo.racks[0], self.routes, mode, epoch_us=epoch_us)

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
    needs = ("oneswitch",)

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
