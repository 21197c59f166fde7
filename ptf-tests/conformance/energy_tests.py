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


UP = {0: 1, 1: 2}  # the ToR tests' uplinks: rotor index -> port (rotor_base.tor_topology)


def moved(test, before: dict) -> dict:
    return {w: tuple(a - b for a, b in zip(cell(test, *w), v)) for w, v in before.items()}


class TorLowLatencyCountersTakeAHostsClass(TorTest):
    """A ToR counts apart, in the cells of the live slice, the frames not known to be bulk: a
    host's bulk frame (DSCP 0) and its low-latency one (DSCP 46), of one length, both move the
    host port's rx total and their uplinks' tx totals; the low-latency cells move for the DSCP 46
    frame only, by the bytes the total counted for it.  (At egress BMv2 counts a frame's bytes as
    it came in, eBPF as it leaves, fabric header added: the totals' bytes, whichever, not a length.)"""

    def runTest(self):
        from p4rotor.schedule import routes as R

        self.install_tor()
        k = self.slice_where(lambda sr: (0, 3, R.TCLASS_BULK) in sr.hops)
        self.set_slice(k)
        hops = {t: self.routes[k].hops[(0, 3, t)] for t in (R.TCLASS_BULK, R.TCLASS_LOW_LATENCY)}
        watched = [(c, k, p) for c in dp.SLOT_COUNTERS + dp.SLOT_LL_COUNTERS for p in (H0, *UP.values())]
        before = {w: cell(self, *w) for w in watched}
        sent = {}
        for dscp, t in ((0, R.TCLASS_BULK), (46, R.TCLASS_LOW_LATENCY)):
            f = self.host_frame("10.0.3.1", dscp=dscp, tag=t)
            out = self.with_fabric(f, 3, 0, 1, R.TCLASS_BULK_TRANSIT if hops[t].vlb else t)
            tu.send_packet(self, H0, f)
            tu.verify_packet(self, out, UP[hops[t].rotor])
            sent[t] = (f, out, UP[hops[t].rotor])
        tu.verify_no_other_packets(self)
        m = moved(self, before)
        ll_in, _, ll_up = sent[R.TCLASS_LOW_LATENCY]
        self.assertEqual(m[(dp.C_SLOT_RX, k, H0)], (2, 2 * len(ll_in)), m)
        self.assertEqual(m[(dp.C_SLOT_RX_LL, k, H0)], (1, len(ll_in)), m)
        up_frames, up_bytes = (sum(m[(dp.C_SLOT_TX, k, p)][i] for p in UP.values()) for i in (0, 1))
        self.assertEqual(up_frames, 2, m)
        self.assertEqual(m[(dp.C_SLOT_TX_LL, k, ll_up)], (1, up_bytes // 2), m)
        bulk_up = sent[R.TCLASS_BULK][2]
        if bulk_up != ll_up:
            self.assertEqual(m[(dp.C_SLOT_TX_LL, k, bulk_up)], (0, 0), m)


class TorLowLatencyCountersTakeTheFabricHeadersClass(TorTest):
    """Frames from an uplink carry their class in the fabric header: a bulk one and a
    low-latency one, of one length, delivered to a host both move the uplink's rx total and the
    host port's tx total; the low-latency cells (rx on the uplink, tx on the host port) move for
    the second only, by the bytes the total counted for it (at egress: as the previous test says)."""

    def runTest(self):
        from p4rotor.schedule import routes as R

        self.install_tor()
        self.set_slice(1)
        watched = [(c, 1, p) for c in dp.SLOT_COUNTERS + dp.SLOT_LL_COUNTERS for p in (UP[1], H1)]
        before = {w: cell(self, *w) for w in watched}
        frames = {}
        for t in (R.TCLASS_BULK, R.TCLASS_LOW_LATENCY):
            inner = self.host_frame("10.0.0.2", src_ip="10.0.3.1", tag=t)
            f = self.with_fabric(inner, 0, 3, 2, t)
            tu.send_packet(self, UP[1], f)
            tu.verify_packet(self, inner, H1)
            frames[t] = (f, inner)
        tu.verify_no_other_packets(self)
        m = moved(self, before)
        f, _ = frames[R.TCLASS_LOW_LATENCY]
        self.assertEqual(m[(dp.C_SLOT_RX, 1, UP[1])], (2, 2 * len(f)), m)
        self.assertEqual(m[(dp.C_SLOT_RX_LL, 1, UP[1])], (1, len(f)), m)
        tx_frames, tx_bytes = m[(dp.C_SLOT_TX, 1, H1)]
        self.assertEqual(tx_frames, 2, m)
        self.assertEqual(m[(dp.C_SLOT_TX_LL, 1, H1)], (1, tx_bytes // 2), m)


class TorUnclassifiedFrameCountsAsLowLatency(TorTest):
    """A frame the ToR cannot route (not IPv4) has no class it can read: counted low-latency (not
    bulk, what unset metadata would read), besides its drop as BAD_HEADER."""

    def runTest(self):
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw

        self.install_tor()
        self.set_slice(1)
        before = {w: cell(self, *w) for w in ((dp.C_SLOT_RX, 1, H0), (dp.C_SLOT_RX_LL, 1, H0))}
        f = bytes(Ether(type=0x88B5) / Raw(b"x" * 40))
        tu.send_packet(self, H0, f)
        tu.verify_no_other_packets(self)
        m = moved(self, before)
        self.assertEqual(m[(dp.C_SLOT_RX, 1, H0)], (1, len(f)), m)
        self.assertEqual(m[(dp.C_SLOT_RX_LL, 1, H0)], (1, len(f)), m)
