"""ToR conformance: one behaviour per class (rack 0's ToR; uplinks a=1, b=2; hosts on 3, 4)."""

from __future__ import annotations

import time

import ptf.testutils as tu
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.schedule import routes as R
from p4rotor.schedule import topology as TP
from rotor_base import TorTest, four_rack_fabric, tor_topology

UP = {0: 1, 1: 2}  # rotor index -> uplink port
H0, H1 = 3, 4


class TorLocalDelivery(TorTest):
    """A frame for a host of the same rack is delivered on that host's port, unchanged."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        f = self.host_frame("10.0.0.2")
        tu.send_packet(self, H0, f)
        tu.verify_packet(self, f, H1)
        tu.verify_no_other_packets(self)


class TorDirectUplinkPerSlice(TorTest):
    """Bulk to a rack with a live direct circuit leaves on that rotor's uplink, carrying the
    final rack; which uplink follows the slice."""

    def runTest(self):
        self.install_tor()
        for sr in self.routes:
            self.set_slice(sr.index)
            for dst in (1, 2):
                hop = sr.hops.get((0, dst, R.TCLASS_BULK))
                f = self.host_frame(f"10.0.{dst}.1", tag=sr.index)
                tu.send_packet(self, H0, f)
                if hop is not None and not hop.vlb:
                    tu.verify_packet(self, self.with_fabric(f, dst, 0, 1, R.TCLASS_BULK), UP[hop.rotor])
                tu.verify_no_other_packets(self)


class TorBulkVlbFirstHop(TorTest):
    """Bulk with no direct circuit takes a 2-hop VLB path: the first hop carries the final rack
    and is marked bulk-transit."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 3, R.TCLASS_BULK) in sr.hops)
        hop = self.routes[k].hops[(0, 3, R.TCLASS_BULK)]
        self.assertTrue(hop.vlb)
        self.set_slice(k)
        f = self.host_frame("10.0.3.1")
        tu.send_packet(self, H0, f)
        tu.verify_packet(self, self.with_fabric(f, 3, 0, 1, R.TCLASS_BULK_TRANSIT), UP[hop.rotor])
        tu.verify_no_other_packets(self)


class TorTransitForwardsDirect(TorTest):
    """A transit ToR sends a bulk-transit frame on directly (hops + 1), and drops it (counted,
    no route) when its direct circuit is not live."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 2, R.TCLASS_BULK_TRANSIT) in sr.hops
                             and (0, 3, R.TCLASS_BULK_TRANSIT) not in sr.hops)
        self.set_slice(k)
        inner = self.host_frame("10.0.2.1", src_ip="10.0.1.1")
        f = self.with_fabric(inner, 2, 1, 1, R.TCLASS_BULK_TRANSIT)
        tu.send_packet(self, UP[0], f)
        hop = self.routes[k].hops[(0, 2, R.TCLASS_BULK_TRANSIT)]
        tu.verify_packet(self, self.with_fabric(inner, 2, 1, 2, R.TCLASS_BULK_TRANSIT), UP[hop.rotor])
        before = self.drops(dp.DropCause.NO_ROUTE)
        tu.send_packet(self, UP[0], self.with_fabric(self.host_frame("10.0.3.1"), 3, 1, 1, R.TCLASS_BULK_TRANSIT))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, 1)


class TorLowLatencyNextHop(TorTest):
    """Low-latency (DSCP 46) frames take the next hop of the slice's shortest path, in every slice."""

    def runTest(self):
        self.install_tor()
        for sr in self.routes:
            self.set_slice(sr.index)
            for dst in (1, 2, 3):
                hop = sr.hops.get((0, dst, R.TCLASS_LOW_LATENCY))
                f = self.host_frame(f"10.0.{dst}.1", dscp=46, tag=dst)
                tu.send_packet(self, H0, f)
                if hop is not None:
                    tu.verify_packet(self, self.with_fabric(f, dst, 0, 1, R.TCLASS_LOW_LATENCY), UP[hop.rotor])
                tu.verify_no_other_packets(self)


class TorLowLatencyAvoidsCircuitAboutToGoDark(TorTest):
    """With epsilon, low-latency traffic never uses a rotor that goes dark within epsilon of
    the slice end, even though that rotor is live now: bulk to rack 2 takes rotor b's direct
    circuit, low latency to rack 2 (reachable only through b in this slice) is dropped as no
    route rather than sent on b; low latency to rack 1 still goes on a."""

    epsilon_us = 5_000

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: sr.live_mask == 0b11 and 1 not in sr.ll_rotors)
        sr = self.routes[k]
        self.assertNotIn((0, 2, R.TCLASS_LOW_LATENCY), sr.hops)
        self.set_slice(k)
        before = self.drops(dp.DropCause.NO_ROUTE)
        ll = self.host_frame("10.0.2.1", dscp=46)
        tu.send_packet(self, H0, ll)
        bulk = self.host_frame("10.0.2.1", dscp=0, tag=1)
        tu.send_packet(self, H0, bulk)
        tu.verify_packet(self, self.with_fabric(bulk, 2, 0, 1, R.TCLASS_BULK), UP[1])
        ll1 = self.host_frame("10.0.1.1", dscp=46, tag=2)
        tu.send_packet(self, H0, ll1)
        tu.verify_packet(self, self.with_fabric(ll1, 1, 0, 1, R.TCLASS_LOW_LATENCY), UP[0])
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, 1)


class TorClassSeparation(TorTest):
    """The same destination in the same slice: bulk takes VLB, low-latency its shortest path;
    the class is the DSCP marking (46 = low latency)."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 3, R.TCLASS_BULK) in sr.hops)
        self.set_slice(k)
        for dscp, tclass in ((0, R.TCLASS_BULK), (46, R.TCLASS_LOW_LATENCY)):
            hop = self.routes[k].hops[(0, 3, tclass)]
            f = self.host_frame("10.0.3.1", dscp=dscp)
            tu.send_packet(self, H0, f)
            mark = R.TCLASS_BULK_TRANSIT if hop.vlb else tclass
            tu.verify_packet(self, self.with_fabric(f, 3, 0, 1, mark), UP[hop.rotor])
        tu.verify_no_other_packets(self)


class TorDarkUplinkNeverUsed(TorTest):
    """While rotor a is dark, nothing leaves on its uplink: routes that would need it drop
    (counted as no route)."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: sr.live_mask == 0b10)
        self.set_slice(k)
        before = self.drops(dp.DropCause.NO_ROUTE)
        sent_no_route = 0
        for dst in (1, 2, 3):
            for dscp in (0, 46):
                f = self.host_frame(f"10.0.{dst}.1", dscp=dscp)
                tu.send_packet(self, H0, f)
                tclass = R.TCLASS_LOW_LATENCY if dscp else R.TCLASS_BULK
                hop = self.routes[k].hops.get((0, dst, tclass))
                if hop is None:
                    sent_no_route += 1
                else:
                    self.assertEqual(hop.rotor, 1)
                    mark = R.TCLASS_BULK_TRANSIT if hop.vlb else tclass
                    tu.verify_packet(self, self.with_fabric(f, dst, 0, 1, mark), UP[1])
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, sent_no_route)


class TorClockModeFollowsSlices(TorTest):
    """Clock mode, no controller action after install: in every slice of two hyperperiods, bulk
    and low-latency frames to every other rack leave on the uplink of the slice's route, with
    the fabric header, or are dropped (counted, no route); nothing leaves on a dark rotor's
    uplink, nor anywhere else.  Slots of 2 s, nights of 600 ms: slices of 400 and 600 ms.  A check
    is valid only if its frames left within the middle half of the slice; on a busy machine a check
    that started late waits for the same slice a hyperperiod later instead of judging another."""

    SLOT_US, NIGHT_US, ATTEMPTS = 2_000_000, 600_000, 4

    def runTest(self):
        sched = four_rack_fabric(self.SLOT_US, self.NIGHT_US)
        topo = tor_topology(sched)
        routes = R.compute(sched)
        wall_ns, local_us = self.local_now_us()
        epoch = local_us + 1_000_000   # after the install, however slow the writes
        self.t0_wall = wall_ns + (epoch - local_us) * 1000
        self.write_tor(topo, topo.racks[0], routes, dp.MODE_CLOCK, epoch_us=epoch)
        for cycle in range(2):
            for sr in routes:
                self.check_slice(sr, sched.hyperperiod_us, cycle, tag=10 * cycle + sr.index)

    def check_slice(self, sr, period: int, first_cycle: int, tag: int) -> None:
        width = sr.slice.end_us - sr.slice.start_us
        lo, hi = sr.slice.start_us + width // 4, sr.slice.end_us - width // 4
        late = []
        for attempt in range(self.ATTEMPTS):
            no_route0 = self.drops(dp.DropCause.NO_ROUTE)
            now = (time.time_ns() - self.t0_wall) // 1000
            k = max(first_cycle, -(-(now - lo) // period))   # the next time `lo` comes
            target = self.t0_wall + (k * period + lo) * 1000
            while time.time_ns() < target:
                time.sleep(0.0005)
            expect, no_route = [], 0
            for dst in (1, 2, 3):
                for dscp, tclass in ((0, R.TCLASS_BULK), (46, R.TCLASS_LOW_LATENCY)):
                    f = self.host_frame(f"10.0.{dst}.1", dscp=dscp, tag=tag)
                    tu.send_packet(self, H0, f)
                    hop = sr.hops.get((0, dst, tclass))
                    if hop is None:
                        no_route += 1
                        continue
                    self.assertIsNotNone(sr.slice.live[hop.rotor], "the routes use a dark rotor")
                    mark = R.TCLASS_BULK_TRANSIT if hop.vlb else tclass
                    expect.append((self.with_fabric(f, dst, 0, 1, mark), UP[hop.rotor]))
            off = (time.time_ns() - self.t0_wall) // 1000 - k * period
            if off > hi:
                late.append((off - lo) // 1000)
                time.sleep(0.2)
                self.dataplane.flush()
                continue
            for f, port in expect:
                tu.verify_packet(self, f, port)
            tu.verify_no_other_packets(self)
            self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - no_route0, no_route,
                             f"slice {sr.index}: frames dropped as no route")
            return
        self.fail(f"slice {sr.index}: every attempt sent its frames too late (ms after aiming: {late})")


class TorHopLimit(TorTest):
    """A frame that has already taken hop_limit hops is dropped and counted."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        before = self.drops(dp.DropCause.HOP_LIMIT)
        f = self.with_fabric(self.host_frame("10.0.2.1"), 2, 3, 4, R.TCLASS_LOW_LATENCY)
        tu.send_packet(self, UP[0], f)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.HOP_LIMIT) - before, 1)


class TorDestinationStripsFabric(TorTest):
    """At the destination rack the fabric header is removed and the host gets the original frame."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        inner = self.host_frame("10.0.0.2", src_ip="10.0.3.1")
        tu.send_packet(self, UP[1], self.with_fabric(inner, 0, 3, 2, R.TCLASS_LOW_LATENCY))
        tu.verify_packet(self, inner, H1)
        tu.verify_no_other_packets(self)


class TorBadHeaderCounted(TorTest):
    """Frames the ToR cannot route (not IPv4, truncated) are dropped under 'bad header'."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        before = self.drops(dp.DropCause.BAD_HEADER)
        tu.send_packet(self, H0, bytes(Ether(type=0x88B5) / Raw(b"x" * 40)))
        tu.send_packet(self, H0, bytes(Ether(type=0x0800)) + b"\x45\x00")
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.BAD_HEADER) - before, 2)


class TorUnknownDestinationCounted(TorTest):
    """An address outside every rack prefix is dropped as no route."""

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        before = self.drops(dp.DropCause.NO_ROUTE)
        tu.send_packet(self, H0, self.host_frame("192.0.2.1"))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.NO_ROUTE) - before, 1)


class TorClockPortProbeReflected(TorTest):
    """The ToR reflects clock-port time probes like the rotor (shared ClockProbe controls)."""

    needs = ("clock_port",)

    def runTest(self):
        t1, (seq, t2, t3), t4 = self.clock_port_probe(0x60000042)
        self.assertEqual(seq, 0x60000042)
        self.assertGreaterEqual(t3, t2)
        tu.verify_no_other_packets(self)


# ---------------------------------------------------------------------------
# Full-size frames and link MTUs (docs/dataplane.md, "Link MTU")
# ---------------------------------------------------------------------------

FULL = TP.HOST_MTU + 14  # a full-size host frame: 1500-byte IP packet + Ethernet


class TorLinksHaveTopologyMtus(TorTest):
    """The ptf veths have the MTUs the topology gives the ToR's links (what Mininet sets in
    ``make run``): uplinks the fabric MTU, host ports the host MTU."""

    def runTest(self):
        for port, mtu in sorted(self.topo.tor_link_mtus(self.topo.racks[0]).items()):
            self.assertEqual(self.port_iface_mtu(port), mtu, f"port {port}")


class TorFullSizeFrameCrossesUplink(TorTest):
    """A full-size host frame (1500-byte IP) leaves on the uplink with the fabric header: 8 bytes
    longer than the host link's MTU allows, within the fabric link's; both classes."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 1, R.TCLASS_BULK) in sr.hops
                             and not sr.hops[(0, 1, R.TCLASS_BULK)].vlb
                             and (0, 1, R.TCLASS_LOW_LATENCY) in sr.hops)
        self.set_slice(k)
        for dscp, tclass in ((0, R.TCLASS_BULK), (46, R.TCLASS_LOW_LATENCY)):
            f = self.sized_frame(FULL, dscp=dscp)
            tu.send_packet(self, H0, f)
            out = self.with_fabric(f, 1, 0, 1, tclass)
            self.assertEqual(len(out), FULL + dp.FABRIC_HEADER_BYTES)
            hop = self.routes[k].hops[(0, 1, tclass)]
            tu.verify_packet(self, out, UP[hop.rotor])
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.MTU), 0)


class TorFullSizeFrameDeliveredToHost(TorTest):
    """A full-size frame arriving from the fabric leaves on the host port without the fabric
    header: exactly the host link's MTU."""

    def runTest(self):
        self.install_tor()
        self.set_slice(0)
        inner = self.sized_frame(FULL, dst_ip="10.0.0.2", src_ip="10.0.1.1")
        tu.send_packet(self, UP[0], self.with_fabric(inner, 0, 1, 1, R.TCLASS_BULK))
        tu.verify_packet(self, inner, H1)
        tu.verify_no_other_packets(self)


class TorOversizeFrameDroppedAndCounted(TorTest):
    """A frame longer than its egress link's MTU is dropped and counted under 'mtu', never lost
    silently; the limit counts the fabric header the ToR adds (exactly at the limit passes)."""

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 1, R.TCLASS_BULK) in sr.hops
                             and not sr.hops[(0, 1, R.TCLASS_BULK)].vlb)
        port = UP[self.routes[k].hops[(0, 1, R.TCLASS_BULK)].rotor]
        self.set_slice(k)
        f = self.sized_frame(FULL)
        wire = FULL + dp.FABRIC_HEADER_BYTES
        before = self.drops(dp.DropCause.MTU)
        # A link one byte too small for the frame with its fabric header.
        self.sw.write([~e for e in C.port_mtu_entries({port: wire - 14 - 1}, dp.TOR_T_PORT_MTU,
                                                      dp.TOR_A_MTU_LIMIT)])
        tu.send_packet(self, H0, f)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.MTU) - before, 1)
        # Exactly large enough.
        self.sw.write([~e for e in C.port_mtu_entries({port: wire - 14}, dp.TOR_T_PORT_MTU, dp.TOR_A_MTU_LIMIT)])
        tu.send_packet(self, H0, f)
        tu.verify_packet(self, self.with_fabric(f, 1, 0, 1, R.TCLASS_BULK), port)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.MTU) - before, 1)


# ---------------------------------------------------------------------------
# The ToR's egress re-check (docs/dataplane.md)
# ---------------------------------------------------------------------------


class TorStaleUplinkFrameDroppedAndCounted(TorTest):
    """A frame whose slice ended while it sat in the ToR's uplink queue is dropped and counted as
    stale: the circuit its route was chosen for is dark or another one now."""

    needs = ("signal", "queue_rate")

    def runTest(self):
        self.install_tor()
        k = self.slice_where(lambda sr: (0, 1, R.TCLASS_BULK) in sr.hops and not sr.hops[(0, 1, R.TCLASS_BULK)].vlb)
        port = UP[self.routes[k].hops[(0, 1, R.TCLASS_BULK)].rotor]
        self.set_slice(k)
        n = 6
        before = self.drops(dp.DropCause.STALE)
        tx0 = self.sw.counter(dp.C_TX, port)[0]
        self.set_queue_rate(5, port)  # the uplink drains 5 frames/s
        try:
            for t in range(n):
                tu.send_packet(self, H0, self.host_frame("10.0.1.1", tag=t))
            time.sleep(0.1)
            self.set_slot(k + len(self.routes), k)  # the same slice one cycle later: a new slot
            self.wait_all_left(n, before, port, tx0)
        finally:
            self.set_queue_rate(100000, port)
        self.assertGreaterEqual(self.drops(dp.DropCause.STALE) - before, n - 2, "held frames are stale")
        self.dataplane.flush()


class TorLocalDeliveryNeverRechecked(TorTest):
    """Frames to a host of the same rack are never dropped by the re-check, even when the slice
    changes while they are queued: a host link is not a circuit."""

    needs = ("queue_rate",)

    def runTest(self):
        self.install_tor()
        self.set_slice(1)
        n = 4
        before = self.drops(dp.DropCause.STALE)
        tx0 = self.sw.counter(dp.C_TX, H1)[0]
        self.set_queue_rate(5, H1)
        try:
            for t in range(n):
                tu.send_packet(self, H0, self.host_frame("10.0.0.2", tag=t))
            time.sleep(0.1)
            self.set_slice(0)
            deadline = time.time() + 15
            while self.sw.counter(dp.C_TX, H1)[0] - tx0 < n and time.time() < deadline:
                time.sleep(0.1)
        finally:
            self.set_queue_rate(100000, H1)
        self.assertEqual(self.sw.counter(dp.C_TX, H1)[0] - tx0, n)
        self.assertEqual(self.drops(dp.DropCause.STALE) - before, 0)
        self.dataplane.flush()
