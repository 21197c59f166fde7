"""Loss on the rotor's links, counted: injected optical loss per link direction and the MTU
check.  One behaviour per class; every frame sent is accounted for."""

from __future__ import annotations

import ptf.testutils as tu

from p4rotor import control as C
from p4rotor import p4 as dp
from rotor_base import PORTS, FourRackTest, RotorTest, four_rack_rotornet, joining

SIGNAL = dp.MODE_SIGNAL


class FullSizeFrameCrossesCircuit(RotorTest):
    """A full-size host frame with its fabric header (1522 bytes) crosses a circuit whose links
    have the topology's fabric MTU; one byte over a port's limit is dropped and counted 'mtu'."""

    needs = ("rotor_mtu",)

    def runTest(self):
        from p4rotor.schedule import topology as TP

        s = four_rack_rotornet()
        r = s.rotors[0]
        m = joining(r, 0, 1)
        wire = TP.HOST_MTU + 14 + dp.FABRIC_HEADER_BYTES
        self.install(s, r, SIGNAL, link_mtus={PORTS[0]: TP.FABRIC_MTU, PORTS[1]: TP.FABRIC_MTU})
        self.set_slot(1, m)
        f = self.sized_frame(wire)
        tu.send_packet(self, PORTS[0], f)
        tu.verify_packet(self, f, PORTS[1])
        tu.verify_no_other_packets(self)
        before = self.drops(dp.DropCause.MTU)
        self.sw.write([~e for e in C.port_mtu_entries({PORTS[1]: wire - 14 - 1})])
        tu.send_packet(self, PORTS[0], f)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.MTU) - before, 1)


class OpticalLossNearItsRateAndCounted(FourRackTest):
    """Injected loss on one link direction (out of port 2, rate 0.2): the frames lost are counted
    as 'optical loss' (never as reconfiguration loss), their share is the rate within 4 sigma, and
    nothing else is lost; a lossless link next to it loses nothing.  Every frame sent is
    accounted for: sent by the switch or dropped by a cause.  The frames go in bursts of
    ``BURST``, each waited out, so the test measures the loss tables, not how deep BMv2's queues
    are: a burst of 1 500 frames at once lost ~1 % of them in BMv2's traffic manager, which no
    counter sees."""

    N, BURST = 1500, 50

    def runTest(self):
        m = self.matching_joining(0, 1)
        self.sw.write([+e for e in C.loss_entries([C.LinkLoss(PORTS[1], "out", 0.2)])])
        self.set_slot(1, m)
        ledger = self.frame_ledger(PORTS[0], PORTS[1])
        n, burst = self.N, self.BURST
        for start in range(0, n, burst):
            for i in range(start, min(n, start + burst)):
                tu.send_packet(self, PORTS[0], self.frame(PORTS[0], i))
            led = ledger.wait(min(n, start + burst))
            self.assertEqual(led["accounted"], led["sent"], f"frames not accounted for: {led}")
        self.dataplane.flush()
        lost = led["drops"].get(dp.DropCause.OPTICAL_LOSS.name, 0)
        self.assertEqual(lost + led["tx"], n, led)
        sigma = (n * 0.2 * 0.8) ** 0.5
        self.assertLess(abs(lost - 0.2 * n), 4 * sigma, f"{lost} of {n} lost")
        others = {c: k for c, k in led["drops"].items() if c != dp.DropCause.OPTICAL_LOSS.name}
        self.assertEqual(others, {}, others)
        # The other direction of the same circuit (into port 2, out of port 1) is lossless.
        tu.send_packet(self, PORTS[1], self.frame(PORTS[1], 7))
        tu.verify_packet(self, self.frame(PORTS[1], 7), PORTS[0])


class OpticalLossCountedPerLinkDirection(FourRackTest):
    """The CorrOpt monitor's input: loss out of port 2 at rate 1 and none elsewhere.  Frames from
    port 1 to port 2 count as crossed on port 1's input and lost on port 2's output; frames the
    other way cross port 2's input and port 1's output.  Nothing else moves."""

    def runTest(self):
        m = self.matching_joining(0, 1)
        self.sw.write([+e for e in C.loss_entries([C.LinkLoss(PORTS[1], "out", 1.0)])])
        self.set_slot(1, m)
        names = (dp.C_LINK_IN, dp.C_LINK_IN_LOSS, dp.C_LINK_OUT, dp.C_LINK_OUT_LOSS)
        before = {(c, p): self.sw.counter(c, p)[0] for c in names for p in PORTS}
        for i in range(5):
            tu.send_packet(self, PORTS[0], self.frame(PORTS[0], i))
        tu.verify_no_other_packets(self)
        for i in range(3):
            f = self.frame(PORTS[1], 10 + i)
            tu.send_packet(self, PORTS[1], f)
            tu.verify_packet(self, f, PORTS[0])
        moved = {k: self.sw.counter(*k)[0] - v for k, v in before.items()}
        want = {(dp.C_LINK_IN, PORTS[0]): 5, (dp.C_LINK_OUT_LOSS, PORTS[1]): 5,
                (dp.C_LINK_IN, PORTS[1]): 3, (dp.C_LINK_OUT, PORTS[0]): 3}
        self.assertEqual({k: v for k, v in moved.items() if v}, want)


class OpticalLossInOneMatchingOnly(FourRackTest):
    """Loss into port 1 at rate 1, only while matching m is live: every frame lost then, none in
    the next matching."""

    def runTest(self):
        r = self.rotor
        self.sw.write([+e for e in C.loss_entries([C.LinkLoss(PORTS[0], "in", 1.0, matching=0)])])
        before = self.drops(dp.DropCause.OPTICAL_LOSS)
        self.set_slot(0, 0)
        for i in range(10):
            tu.send_packet(self, PORTS[0], self.frame(PORTS[0], i))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drops(dp.DropCause.OPTICAL_LOSS) - before, 10)
        self.set_slot(1, 1)
        f = self.frame(PORTS[0], 99)
        tu.send_packet(self, PORTS[0], f)
        tu.verify_packet(self, f, PORTS[r.matchings[1][0]])
        tu.verify_no_other_packets(self)
