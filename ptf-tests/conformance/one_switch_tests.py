"""One-switch fabric conformance (issue #15): one behaviour per class.  The fabric is rotor_base's
one_switch_topology(): 4 racks, rotors a (pairs 0-1, 2-3) and b (0-2, 1-3, half a slot later);
rack 0's hosts on ports 1, 2, rack 1's on 3, rack 2's on 4.  Every delivery is checked against
the routes the multi-switch ToRs get (schedule.routes), hop by hop through the hop counter."""

from __future__ import annotations

import ptf.testutils as tu

from p4rotor import p4 as dp
from rotor_base import OneSwitchTest

P0, P0B, P1, P2 = 1, 2, 3, 4   # h0x0, h0x1, h1x0, h2x0


def both_live(sr) -> bool:
    return sr.live_mask == 0b11


class OneSwitchLocalDelivery(OneSwitchTest):
    """A frame for a host of the same rack goes straight to its port, crossing no circuit."""

    def runTest(self):
        self.install_at(self.slice_mid(both_live))
        before = self.hops()
        f = self.host_frame("h0x0", "h0x1")
        tu.send_packet(self, P0, f)
        tu.verify_packet(self, f, P0B)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.hops(), before)


class OneSwitchDirectCircuit(OneSwitchTest):
    """Bulk from rack 0 to rack 1 while rotor a's 0-1 circuit is live: delivered unchanged on
    rack 1's host port after one circuit, as the multi-switch route (direct, rotor a) says."""

    def runTest(self):
        mid = self.slice_mid(both_live)
        sr = next(r for r in self.routes if r.slice.start_us <= mid < r.slice.end_us)
        self.assertEqual(sr.hops[(0, 1, dp.TCLASS_BULK)].path, (0, 1))
        self.install_at(mid)
        before, drops = self.hops(), self.all_drops()
        f = self.host_frame("h0x0", "h1x0", tag=1)
        tu.send_packet(self, P0, f)
        self.verify_delivered(f, P1, drops)
        tu.verify_no_other_packets(self)
        self.assertEqual([a - b for a, b in zip(self.hops(), before)], [0, 1, 0, 0, 0, 0, 0, 0])


class OneSwitchVlbTwoHops(OneSwitchTest):
    """Bulk from rack 1 to rack 2 (never a direct circuit): the VLB path of the multi-switch
    route, two circuits, delivered on rack 2's host port."""

    def runTest(self):
        mid = self.slice_mid(both_live)
        sr = next(r for r in self.routes if r.slice.start_us <= mid < r.slice.end_us)
        hop = sr.hops[(1, 2, dp.TCLASS_BULK)]
        self.assertTrue(hop.vlb and len(hop.path) == 3)
        self.install_at(mid)
        before, drops = self.hops(), self.all_drops()
        f = self.host_frame("h1x0", "h2x0", tag=2)
        tu.send_packet(self, P1, f)
        self.verify_delivered(f, P2, drops)
        tu.verify_no_other_packets(self)
        self.assertEqual([a - b for a, b in zip(self.hops(), before)], [0, 1, 1, 0, 0, 0, 0, 0])


class OneSwitchLowLatencyMultiHop(OneSwitchTest):
    """Low-latency from rack 1 to rack 2: the expander's shortest path (two circuits) at once."""

    def runTest(self):
        mid = self.slice_mid(both_live)
        sr = next(r for r in self.routes if r.slice.start_us <= mid < r.slice.end_us)
        self.assertEqual(len(sr.hops[(1, 2, dp.TCLASS_LOW_LATENCY)].path), 3)
        self.install_at(mid)
        before, drops = self.hops(), self.all_drops()
        f = self.host_frame("h1x0", "h2x0", dscp=dp.DSCP_LOW_LATENCY, tag=3)
        tu.send_packet(self, P1, f)
        self.verify_delivered(f, P2, drops)
        tu.verify_no_other_packets(self)
        self.assertEqual([a - b for a, b in zip(self.hops(), before)], [0, 1, 1, 0, 0, 0, 0, 0])


class OneSwitchDirectOnlyWithoutCircuitDropped(OneSwitchTest):
    """Direct-only (DSCP 2) from rack 1 to rack 2 has no circuit ever: dropped, counted NO_ROUTE."""

    def runTest(self):
        self.install_at(self.slice_mid(both_live))
        before = self.drops(dp.DropCause.NO_ROUTE)
        tu.send_packet(self, P1, self.host_frame("h1x0", "h2x0", dscp=dp.DSCP_DIRECT_ONLY, tag=4))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, 1)


class OneSwitchHopLimit(OneSwitchTest):
    """With hop limit 1 a two-circuit path stops at its second rack: dropped, counted HOP_LIMIT."""

    def runTest(self):
        self.install_at(self.slice_mid(both_live), hop_limit=1)
        before = self.drops(dp.DropCause.HOP_LIMIT)
        tu.send_packet(self, P1, self.host_frame("h1x0", "h2x0", dscp=dp.DSCP_LOW_LATENCY, tag=5))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.HOP_LIMIT) - before, 1)


class OneSwitchNotStartedDropped(OneSwitchTest):
    """Before the epoch nothing crosses a circuit: dropped, counted NOT_STARTED (local delivery
    needs no clock and still works)."""

    def runTest(self):
        self.install_at(-5_000_000)  # the epoch 5 s from now
        before = self.drops(dp.DropCause.NOT_STARTED)
        tu.send_packet(self, P0, self.host_frame("h0x0", "h1x0", tag=6))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NOT_STARTED) - before, 1)
        f = self.host_frame("h0x0", "h0x1", tag=7)
        tu.send_packet(self, P0, f)
        tu.verify_packet(self, f, P0B)


class OneSwitchUnknownDestinationCounted(OneSwitchTest):
    """A destination in no rack's prefix: dropped, counted NO_ROUTE."""

    def runTest(self):
        self.install_at(self.slice_mid(both_live))
        before = self.drops(dp.DropCause.NO_ROUTE)
        f = bytearray(self.host_frame("h0x0", "h1x0", tag=8))
        f[30:34] = bytes([192, 168, 9, 9])  # the IPv4 destination (no checksum check on BMv2)
        tu.send_packet(self, P0, bytes(f))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, 1)
