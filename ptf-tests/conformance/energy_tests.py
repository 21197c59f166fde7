"""Energy per port state, in the data plane: the per-slot counters per port (what the energy
accounting's measured activity is) and the sleep plan's ports (a frame through a sleeping port
is dropped and counted SLEEPING).  One behaviour per class; p4src/shared/control/port_energy.p4."""

from __future__ import annotations

import ptf.testutils as tu

from p4rotor import control as C
from p4rotor import p4 as dp
from rotor_base import PORTS, FourRackTest, TorTest

H0, H1 = 3, 4   # the ToR tests' host ports (rotor_base.tor_topology)


def cell(test, counter: str, slot: int, port: int, sw=None) -> tuple[int, int]:
    return (sw or test.sw).counter(counter, dp.energy_cell(slot, port))


class SlotCountersCountPerSlotAndPort(FourRackTest):
    """Frames across a circuit are counted in the cells of their slot position (the live
    matching): in on their ingress port, out on their egress port, frames and bytes; a frame in
    another matching moves that matching's cells and not these."""

    def runTest(self):
        m = self.matching_joining(0, 1)
        other = next(i for i in range(len(self.rotor.matchings)) if i != m)
        watched = [(dp.C_SLOT_RX, m, PORTS[0]), (dp.C_SLOT_TX, m, PORTS[1]),
                   (dp.C_SLOT_RX, other, PORTS[0]), (dp.C_SLOT_TX, other, PORTS[1])]
        before = {w: cell(self, *w) for w in watched}
        self.set_slot(1, m)
        frames = [self.frame(PORTS[0], i) for i in range(3)]
        for f in frames:
            tu.send_packet(self, PORTS[0], f)
            tu.verify_packet(self, f, PORTS[1])
        tu.verify_no_other_packets(self)
        moved = {w: tuple(a - b for a, b in zip(cell(self, *w), before[w])) for w in watched}
        nbytes = sum(len(f) for f in frames)
        self.assertEqual(moved[(dp.C_SLOT_RX, m, PORTS[0])], (3, nbytes), moved)
        self.assertEqual(moved[(dp.C_SLOT_TX, m, PORTS[1])], (3, nbytes), moved)
        self.assertEqual(moved[(dp.C_SLOT_RX, other, PORTS[0])], (0, 0), moved)
        self.assertEqual(moved[(dp.C_SLOT_TX, other, PORTS[1])], (0, 0), moved)


class SleepingTransmitterDropsAndCounts(FourRackTest):
    """A port asleep (out) in the live matching: a frame that would leave through it is dropped
    and counted SLEEPING, and not counted as sent in its slot."""

    def runTest(self):
        m = self.matching_joining(0, 1)
        self.sw.write([+e for e in C.sleep_entries("rotor", {PORTS[1]: {"out": [m]}})])
        self.set_slot(1, m)
        before = self.drops(dp.DropCause.SLEEPING)
        tx0 = cell(self, dp.C_SLOT_TX, m, PORTS[1])
        for i in range(4):
            tu.send_packet(self, PORTS[0], self.frame(PORTS[0], i))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.SLEEPING) - before, 4)
        self.assertEqual(cell(self, dp.C_SLOT_TX, m, PORTS[1]), tx0)


class SleepingReceiverDropsAndCounts(FourRackTest):
    """A port asleep (in) in the live matching: a frame that came in on it is dropped and
    counted SLEEPING; the other direction of the circuit is awake."""

    def runTest(self):
        m = self.matching_joining(0, 1)
        self.sw.write([+e for e in C.sleep_entries("rotor", {PORTS[0]: {"in": [m]}})])
        self.set_slot(1, m)
        before = self.drops(dp.DropCause.SLEEPING)
        tu.send_packet(self, PORTS[0], self.frame(PORTS[0], 1))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.SLEEPING) - before, 1)
        f = self.frame(PORTS[1], 2)
        tu.send_packet(self, PORTS[1], f)
        tu.verify_packet(self, f, PORTS[0])
        tu.verify_no_other_packets(self)


class SleepOnlyInItsPlannedSlot(FourRackTest):
    """Negative: a port asleep in one matching is awake in the others: no frame dropped, nothing
    counted SLEEPING."""

    def runTest(self):
        m = self.matching_joining(0, 1)
        other = next(i for i in range(len(self.rotor.matchings)) if i != m)
        self.sw.write([+e for e in C.sleep_entries("rotor", {p: {"in": [m], "out": [m]} for p in PORTS})])
        before = self.drops(dp.DropCause.SLEEPING)
        self.set_slot(1, other)
        self.expect_circuit(self.rotor.matchings[other])
        self.assertEqual(self.drops(dp.DropCause.SLEEPING) - before, 0)


class TorSlotCountersCountHostPorts(TorTest):
    """The ToR counts per slice and port: a local delivery moves the sending host's rx cell and
    the receiving host's tx cell of the live slice."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        before = (cell(self, dp.C_SLOT_RX, 1, H0), cell(self, dp.C_SLOT_TX, 1, H1))
        f = self.host_frame("10.0.0.2")
        for _ in range(2):
            tu.send_packet(self, H0, f)
            tu.verify_packet(self, f, H1)
        tu.verify_no_other_packets(self)
        after = (cell(self, dp.C_SLOT_RX, 1, H0), cell(self, dp.C_SLOT_TX, 1, H1))
        self.assertEqual([(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before)], [(2, 2 * len(f))] * 2)


class TorSleepingHostPortDropsAndCounts(TorTest):
    """A ToR host port asleep (out) in the live slice: a local delivery to it is dropped and
    counted SLEEPING."""

    def runTest(self):
        self.install_tor()
        self.sw.write([+e for e in C.sleep_entries("tor", {H1: {"out": [1]}})])
        self.set_slice(1)
        before = self.drops(dp.DropCause.SLEEPING)
        tu.send_packet(self, H0, self.host_frame("10.0.0.2"))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.SLEEPING) - before, 1)
