"""Rotor/selector circuit switch conformance: one behaviour per class."""

from __future__ import annotations

import queue
import time

import ptf.testutils as tu
from scapy.layers.l2 import Ether

from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor import control as C
from rotor_base import PORTS, FourRackTest, RotorTest, four_rack_rotornet

SIGNAL, CLOCK = dp.MODE_SIGNAL, dp.MODE_CLOCK


class SignalEverySlotEveryPort(FourRackTest):
    """Signal mode: in every slot of a 3-matching cycle (two cycles), a frame entering
    each port leaves on exactly the matched port and nowhere else."""

    needs = ("signal",)

    def runTest(self):
        r = self.rotor
        for k in range(2 * len(r.matchings)):
            idx = k % len(r.matchings)
            self.set_slot(k, idx)
            self.expect_circuit(r.matchings[idx], tag=k)


class NightDropsAndCounts(FourRackTest):
    """During night every frame is dropped and counted under 'night'; the day after works."""

    def runTest(self):
        r = self.rotor
        before = self.drops(dp.DropCause.NIGHT)
        self.set_slot(5, 2, night=True)
        self.expect_dark()
        self.assertEqual(self.drops(dp.DropCause.NIGHT) - before, len(PORTS))
        self.set_slot(5, 2, night=False)
        self.expect_circuit(r.matchings[2])


class NotStartedDropsAndCounts(FourRackTest):
    """Before any slot is set (configured, no signal yet) frames are dropped as 'not started'."""

    def runTest(self):
        before = self.drops(dp.DropCause.NOT_STARTED)
        self.expect_dark()
        self.assertEqual(self.drops(dp.DropCause.NOT_STARTED) - before, len(PORTS))


class IdleRackHasNoCircuit(RotorTest):
    """A rack idle in the live matching (null) has no circuit: dropped, counted 'no circuit'."""

    def runTest(self):
        s = S.from_json({"version": 1, "racks": 4, "slot_us": 1000, "reconfig_us": 0, "rotors": [
            {"name": "r", "offset_us": 0, "matchings": [[1, 0, None, None]]}]})
        self.install(s, s.rotors[0], SIGNAL)
        self.set_slot(0, 0)
        before = self.drops(dp.DropCause.NO_CIRCUIT)
        self.expect_circuit(s.rotors[0].matchings[0])
        self.assertEqual(self.drops(dp.DropCause.NO_CIRCUIT) - before, 2)


class AnyFrameIsCircuitSwitched(FourRackTest):
    """Non-IP, garbage and runt frames leave unchanged on the circuit: the rotor never parses."""

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 0)
        frames = [
            bytes(Ether(dst="ff:ff:ff:ff:ff:ff", type=0x88B5) / (b"\x00" * 50)),  # non-IP
            bytes(Ether(type=0x0800)) + b"\x45\x00\xff",  # truncated IPv4 header
            bytes(range(256)) * 2,  # no sensible header at all
            b"\x01" * 14,  # bare 14-byte frame
        ]
        dst = PORTS[r.matchings[0][0]]
        for f in frames:
            tu.send_packet(self, PORTS[0], f)
            tu.verify_packet(self, f, dst)
        tu.verify_no_other_packets(self)


class CountersMatchTraffic(FourRackTest):
    """rx/tx per-port counters count exactly the frames sent and delivered."""

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 1)
        rx0 = {p: self.sw.counter(dp.C_RX, p)[0] for p in PORTS}
        tx0 = {p: self.sw.counter(dp.C_TX, p)[0] for p in PORTS}
        n = 3
        for t in range(n):
            self.expect_circuit(r.matchings[1], tag=t)
        for i, p in enumerate(PORTS):
            self.assertEqual(self.sw.counter(dp.C_RX, p)[0] - rx0[p], n)
            self.assertEqual(self.sw.counter(dp.C_TX, PORTS[r.matchings[1][i]])[0]
                             - tx0[PORTS[r.matchings[1][i]]], n)


class BadMatchingIndexRefused(FourRackTest):
    """A slot change naming a matching the rotor does not have is refused (OP_ERROR, counted)
    and the switch keeps forwarding on the previous matching, never on a wrong port."""

    needs = ("signal", "packet_io")

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 1)
        before = self.drops(dp.DropCause.CTRL_ERROR)
        for bad in (3, 7, 0xFFFF):
            pkt = self.set_slot(1, bad, expect_ok=False)
            self.assertEqual(pkt["opcode"], dp.OP_ERROR)
        self.assertEqual(self.drops(dp.DropCause.CTRL_ERROR) - before, 3)
        self.expect_circuit(r.matchings[1])


class UnknownOpcodeRefused(FourRackTest):
    """A control packet with an unknown opcode is answered with OP_ERROR and counted."""

    needs = ("packet_io",)

    def runTest(self):
        before = self.drops(dp.DropCause.CTRL_ERROR)
        pkt = self.send_control(opcode=77)
        self.assertEqual(pkt["opcode"], dp.OP_ERROR)
        self.assertEqual(self.drops(dp.DropCause.CTRL_ERROR) - before, 1)


class SignalRefusedInClockMode(RotorTest):
    """In clock mode the data plane owns the slot: a signal-mode slot change is refused."""

    needs = ("signal", "packet_io")

    def runTest(self):
        s = four_rack_rotornet(slot_us=100000, night_us=10000)
        self.install(s, s.rotors[0], CLOCK, epoch_us=1)
        pkt = self.set_slot(0, 0, expect_ok=False)
        self.assertEqual(pkt["opcode"], dp.OP_ERROR)


class SelectorChoosesAnyMatching(RotorTest):
    """A selector switch: the controller picks any of the +1/+2 matchings in any order."""

    needs = ("signal",)

    def runTest(self):
        s = S.generate_selector(4, 1, 1000, 0)
        r = s.rotors[0]
        self.install(s, r, SIGNAL)
        for k, idx in enumerate([1, 0, 0, 1]):
            self.set_slot(k, idx)
            self.expect_circuit(r.matchings[idx], tag=k)


class ClockModeFollowsTime(RotorTest):
    """Clock mode: with no controller action after install, the pipeline switches matchings
    and nights by its own timestamp (slots of 600 ms, night 200 ms)."""

    def runTest(self):
        slot, night = 600_000, 200_000
        s = four_rack_rotornet(slot, night)
        r = s.rotors[0]
        wall_ns, local_us = self.local_now_us()
        epoch_local = local_us + 200_000  # slot 0 starts 200 ms from now (offset 0: common = local)
        self.install(s, r, CLOCK, epoch_us=epoch_local)
        night0 = self.drops(dp.DropCause.NIGHT)  # the counter outlives earlier tests

        def at(local_target_us):
            target_ns = wall_ns + (local_target_us - local_us) * 1000
            while time.time_ns() < target_ns:
                time.sleep(0.0005)

        for k in range(4):
            start = epoch_local + k * slot
            at(start + night // 2)
            self.expect_dark(tag=k)
            at(start + night + 50_000)
            self.expect_circuit(r.matchings[k % 3], tag=k)
        # Exactly the frames sent in the four nights: none from before the epoch, none in a day.
        self.assertEqual(self.drops(dp.DropCause.NIGHT) - night0, 4 * len(PORTS))


class ClockBeforeEpochNotStarted(RotorTest):
    """Clock mode before the epoch: nothing is forwarded, counted 'not started'."""

    def runTest(self):
        s = four_rack_rotornet(100_000, 10_000)
        _, local_us = self.local_now_us()
        self.install(s, s.rotors[0], CLOCK, epoch_us=local_us + 60_000_000)
        before = self.drops(dp.DropCause.NOT_STARTED)
        self.expect_dark()
        self.assertEqual(self.drops(dp.DropCause.NOT_STARTED) - before, len(PORTS))


class StaleFrameDroppedSignal(RotorTest):
    """Signal mode egress re-check: frames held in the queue past their slot are dropped as
    reconfiguration loss, even when the next slot has the same matching (same index, new slot)."""

    needs = ("signal", "queue_rate")

    def runTest(self):
        s = S.from_json({"version": 1, "racks": 4, "slot_us": 1000, "reconfig_us": 0, "rotors": [
            {"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})  # one matching: every slot alike
        self.install(s, s.rotors[0], SIGNAL)
        self.set_slot(10, 0)
        n = 6
        before = self.drops(dp.DropCause.STALE)
        tx0 = self.sw.counter(dp.C_TX, PORTS[1])[0]
        self.set_queue_rate(5, PORTS[1])  # egress port 2 drains 5 frames/s
        try:
            for t in range(n):
                tu.send_packet(self, PORTS[0], self.frame(PORTS[0], t))
            time.sleep(0.1)
            self.set_slot(11, 0)  # same matching, new slot: held frames are stale
            self.wait_all_left(n, before, PORTS[1], tx0)
        finally:
            self.set_queue_rate(100000, PORTS[1])
        stale = self.drops(dp.DropCause.STALE) - before
        self.assertGreaterEqual(stale, n - 2, "held frames must be dropped as stale")
        self.dataplane.flush()


class TimedSlotChangeAppliedAtItsTime(FourRackTest):
    """Signal mode, timed change: the switch holds a slot change until its start time (by its
    own clock), with the night it carries, then forwards on the new matching."""

    needs = ("signal", "packet_io")

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 0)
        at = self.local_us_now() + 400_000
        ack = self.set_slot_at(1, 1, at, night_us=300_000)
        self.assertEqual(ack["opcode"], dp.OP_SET_SLOT, "timed change refused")
        self.assertLess(ack["timestamp"], at, "the change must reach the switch before its time")
        self.expect_circuit(r.matchings[0], tag=1)  # before `at`: still the old matching
        while self.local_us_now() < at + 50_000:
            time.sleep(0.02)
        night0 = self.drops(dp.DropCause.NIGHT)
        self.expect_dark(tag=2)  # in the carried night
        self.assertEqual(self.drops(dp.DropCause.NIGHT) - night0, len(PORTS))
        while self.local_us_now() < at + 350_000:
            time.sleep(0.02)
        self.expect_circuit(r.matchings[1], tag=3)


class TimedSlotChangeSecondPendingRefused(FourRackTest):
    """Only one timed change can be pending: a second one before the first is due is refused
    (OP_ERROR, counted as a control error) and the first still applies at its time."""

    needs = ("signal", "packet_io")

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 0)
        at = self.local_us_now() + 300_000
        self.assertEqual(self.set_slot_at(1, 1, at)["opcode"], dp.OP_SET_SLOT)
        err0 = self.drops(dp.DropCause.CTRL_ERROR)
        self.assertEqual(self.set_slot_at(2, 2, at + 1000)["opcode"], dp.OP_ERROR)
        self.assertEqual(self.drops(dp.DropCause.CTRL_ERROR) - err0, 1)
        while self.local_us_now() < at + 20_000:
            time.sleep(0.02)
        self.expect_circuit(r.matchings[1])


class TimedSlotChangeLateAppliedAndCounted(FourRackTest):
    """A timed change that arrives after its start time is applied at once (by the next
    packet) and counted as late."""

    needs = ("signal", "packet_io")

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 0)
        late0 = self.ctrl(dp.CtrlCounter.SET_SLOT_LATE)
        at = self.local_us_now() - 10_000
        self.assertEqual(self.set_slot_at(1, 2, at)["opcode"], dp.OP_SET_SLOT)
        self.assertEqual(self.ctrl(dp.CtrlCounter.SET_SLOT_LATE) - late0, 1)
        self.expect_circuit(r.matchings[2])


class TimedSlotChangeBadIndexRefused(FourRackTest):
    """A timed change with a matching index outside the cycle is refused like an immediate one:
    nothing becomes pending, the current matching stays."""

    needs = ("signal", "packet_io")

    def runTest(self):
        r = self.rotor
        self.set_slot(0, 1)
        at = self.local_us_now() + 1000
        self.assertEqual(self.set_slot_at(1, len(r.matchings), at)["opcode"], dp.OP_ERROR)
        time.sleep(0.05)
        self.expect_circuit(r.matchings[1])


class StaleFrameDroppedTimed(RotorTest):
    """Signal mode egress re-check with a timed change: a frame held in the queue past the
    pending change's start time is dropped as stale even if no packet applied the change."""

    needs = ("signal", "packet_io", "queue_rate")

    def runTest(self):
        s = S.from_json({"version": 1, "racks": 4, "slot_us": 1000, "reconfig_us": 0, "rotors": [
            {"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})
        self.install(s, s.rotors[0], SIGNAL)
        self.set_slot(10, 0)
        n = 6
        before = self.drops(dp.DropCause.STALE)
        tx0 = self.sw.counter(dp.C_TX, PORTS[1])[0]
        self.set_queue_rate(5, PORTS[1])
        try:
            for t in range(n):
                tu.send_packet(self, PORTS[0], self.frame(PORTS[0], t))
            time.sleep(0.1)
            # Same matching, next slot, 50 ms from now; only the held frames pass after it.
            self.assertEqual(self.set_slot_at(11, 0, self.local_us_now() + 50_000)["opcode"], dp.OP_SET_SLOT)
            self.wait_all_left(n, before, PORTS[1], tx0)
        finally:
            self.set_queue_rate(100000, PORTS[1])
        self.assertGreaterEqual(self.drops(dp.DropCause.STALE) - before, n - 2)
        self.dataplane.flush()


class StaleFrameDroppedClock(RotorTest):
    """Clock mode egress re-check compares absolute time with the slot's end, so a frame held
    for a whole cycle is dropped even though its matching index is live again."""

    needs = ("queue_rate",)

    def runTest(self):
        slot = 100_000
        s = S.from_json({"version": 1, "racks": 4, "slot_us": slot, "reconfig_us": 0, "rotors": [
            {"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})  # cycle = 1 slot
        _, local_us = self.local_now_us()
        self.install(s, s.rotors[0], CLOCK, epoch_us=local_us)
        n = 6
        before = self.drops(dp.DropCause.STALE)
        tx0 = self.sw.counter(dp.C_TX, PORTS[1])[0]
        self.set_queue_rate(5, PORTS[1])
        try:
            for t in range(n):
                tu.send_packet(self, PORTS[0], self.frame(PORTS[0], t))
            self.wait_all_left(n, before, PORTS[1], tx0)
        finally:
            self.set_queue_rate(100000, PORTS[1])
        self.assertGreaterEqual(self.drops(dp.DropCause.STALE) - before, n - 2)
        self.dataplane.flush()


class ReinstallRestartsClock(RotorTest):
    """Installing a new config generation restarts the clock from its new epoch (it does not
    carry on counting cycles of the old one)."""

    def runTest(self):
        slot = 300_000
        s = four_rack_rotornet(slot, 0)
        r = s.rotors[0]
        wall, local = self.local_now_us()
        self.install(s, r, CLOCK, epoch_us=local + 50_000)

        def at_local(t):
            target = wall + (t - local) * 1000
            while time.time_ns() < target:
                time.sleep(0.0005)

        at_local(local + 50_000 + slot + 100_000)  # old clock: slot 1
        try:
            self.expect_circuit(r.matchings[1])
        except AssertionError:
            print("drops", {c.name: self.drops(c) for c in dp.DropCause}, "tx",
                  [self.sw.counter(dp.C_TX, p)[0] for p in PORTS])
            raise
        wall2, local2 = self.local_now_us()
        self.sw.clear()
        self.install(s, r, CLOCK, epoch_us=local2 + 50_000)
        wall, local = wall2, local2
        at_local(local2 + 150_000)  # new clock: slot 0 again
        self.expect_circuit(r.matchings[0])


class OperaStaggerTwoRotors(RotorTest):
    """Two rotor switches of an Opera schedule in clock mode, staggered by half a slot: while
    one is dark the other carries its matching, and they are never dark together.

    Each of the cycle's four moments (the middle of either rotor's night) is checked once.  A
    check is valid only if its frames left within ``MARGIN_US`` of that moment, well inside
    the night (``NIGHT_US`` / 2 each way); on a busy machine a check that started late waits for
    the same moment of a later cycle instead of judging the wrong one."""

    num_switches = 2
    SLOT_US, NIGHT_US, MARGIN_US, ATTEMPTS = 1_000_000, 400_000, 150_000, 6

    def runTest(self):
        slot, night = self.SLOT_US, self.NIGHT_US
        s = S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": slot, "reconfig_us": night,
                         "rotors": [
                             {"name": "rotor0", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1]]},
                             {"name": "rotor1", "offset_us": slot // 2, "matchings": [[3, 2, 1, 0], [1, 0, 3, 2]]}]})
        maps = [self.local_now_us(sw) for sw in self.switches]
        self.t0_wall = time.time_ns() + 300_000_000  # common slot-0 start, 300 ms from now
        for (wall_ns, local_us), sw, r in zip(maps, self.switches, s.rotors):
            epoch_local = local_us + (self.t0_wall - wall_ns) // 1000 + r.offset_us
            self.install(s, r, CLOCK, sw=sw, epoch_us=epoch_local)
        period = 2 * slot  # both rotors have two matchings
        r0, r1 = s.rotors
        # (moment in the cycle, the dark rotor's device, the live rotor's device, its live matching)
        moments = [(night // 2, 0, 1, r1.matchings[1]),                 # rotor1 in its slot -1 (== 1)
                   (slot // 2 + night // 2, 1, 0, r0.matchings[0]),
                   (slot + night // 2, 0, 1, r1.matchings[0]),
                   (slot + slot // 2 + night // 2, 1, 0, r0.matchings[1])]
        for i, (phase, dark, live, matching) in enumerate(moments):
            self.check_at(period, phase, dark, live, matching, tag=10 * i)

    def check_at(self, period: int, phase: int, dark: int, live: int, matching, tag: int) -> None:
        late = []
        for attempt in range(self.ATTEMPTS):
            now = (time.time_ns() - self.t0_wall) // 1000
            k = max(1, -(-(now - phase + self.MARGIN_US // 2) // period))  # from the second cycle on
            target = self.t0_wall + (phase + k * period) * 1000
            while time.time_ns() < target:
                time.sleep(0.0005)
            sent = []
            for dev, in_ports in ((dark, PORTS), (live, PORTS[:len(matching)])):
                for j, in_port in enumerate(in_ports):
                    f = self.frame(in_port, tag + attempt)
                    tu.send_packet(self, (dev, in_port), f)
                    if dev == live:
                        sent.append((f, matching[j]))
            off = time.time_ns() - target
            if off > self.MARGIN_US * 1000:
                late.append(off // 1_000_000)
                self.dataplane.flush()
                time.sleep(0.2)
                self.dataplane.flush()
                continue
            for f, j in sent:
                tu.verify_packet(self, f, (live, PORTS[j]))
            tu.verify_no_other_packets(self, device_number=dark)
            tu.verify_no_other_packets(self, device_number=live)
            return
        self.fail(f"moment {phase} us of the cycle: every attempt sent its frames too late (ms after it: {late})")


class ClockPortProbeReflected(RotorTest):
    """A time probe on the clock port (254) comes back out of port 254 with its sequence
    number and the switch's ingress and egress timestamps (egress >= ingress, both between
    the host's send and receive on the switch's clock); counted; nothing else is sent and
    no PacketIn is raised, with or without a configuration installed."""

    needs = ("clock_port", "packet_io")

    def runTest(self):
        n0 = self.sw.counter(dp.C_CTRL, int(dp.CtrlCounter.CLOCK_PORT_PROBE))[0]
        wall_ns, local_us = self.local_now_us()
        for seq in (0x60000001, 0x60000002, 7):
            t1, (s, t2, t3), t4 = self.clock_port_probe(seq)
            self.assertEqual(s, seq)
            self.assertGreater(t2, 0)
            self.assertGreaterEqual(t3, t2)
            expect_local = local_us + (t1 - wall_ns) // 1000
            self.assertLess(abs(t2 - expect_local), 1_000_000)
        tu.verify_no_other_packets(self)
        with self.assertRaises(queue.Empty):
            self.sw.packet_in(timeout=0.2)
        self.assertEqual(self.sw.counter(dp.C_CTRL, int(dp.CtrlCounter.CLOCK_PORT_PROBE))[0] - n0, 3)


class ClockPortBracketInsidePacketOutBracket(RotorTest):
    """The offset bracket proven by clock-port probes (kernel stamps, data path only)
    overlaps the one proven by PacketOut round trips: both bound the same clock.  How much
    narrower it is depends on the machine's load; `make bench` reports the two side by side."""

    needs = ("clock_port", "packet_io")

    def runTest(self):
        from p4rotor.control import clockport as CP

        ref = time.time_ns()
        with CP.ClockPort(self.clock_port_iface()) as cp:
            samples = cp.measure(32, first_seq=0x61000000)
        self.dataplane.flush()
        b = CP.bracket(samples, ref)
        self.assertGreaterEqual(b.probes, 24)
        lo = hi = None
        for _ in range(8):
            self.seq += 1
            t0 = time.time_ns()
            self.sw.write([C.time_probe_packet(self.seq)])
            t1, pkt = self.sw.packet_in()
            a, c = (t0 - ref) / 1000 - pkt["timestamp"], (t1 - ref) / 1000 - pkt["timestamp"]
            lo, hi = (a, c) if lo is None else (max(lo, a), min(hi, c))
        self.assertLessEqual(max(lo, b.low_us), min(hi, b.high_us) + 1,
                             f"clock port [{b.low_us:.0f}, {b.high_us:.0f}] vs PacketOut [{lo:.0f}, {hi:.0f}]")


class ClockPortOtherFramesDropped(RotorTest):
    """Anything on the clock port that is not a time probe is dropped and counted as a bad
    header: no PacketIn, nothing on any port."""

    needs = ("clock_port", "packet_io")

    def runTest(self):
        before = self.drops(dp.DropCause.BAD_HEADER)
        tu.send_packet(self, (0, dp.CLOCK_PORT), self.frame(1))
        tu.verify_no_other_packets(self)
        with self.assertRaises(queue.Empty):
            self.sw.packet_in(timeout=0.3)
        self.assertEqual(self.drops(dp.DropCause.BAD_HEADER) - before, 1)


