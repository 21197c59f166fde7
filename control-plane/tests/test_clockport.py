"""Clock-port time probes: frame layout and the one-way offset estimate (no switch needed)."""

import struct

import pytest

from p4rotor import clockport as CP
from p4rotor import dataplane as dp


def test_probe_frame_layout():
    f = CP.probe_frame(0x12345678)
    assert len(f) == 60
    assert struct.unpack_from("!H", f, 12)[0] == dp.ETHERTYPE_CLOCK_PROBE == 0x88B7
    assert struct.unpack_from("!I", f, 14)[0] == 0x12345678
    assert f[0] & 0x02 and not f[0] & 0x01, "locally administered unicast destination"


def test_one_way_offset_takes_smallest_delay():
    # True offset 5000 us (common = local + 5000); probes delayed 3, 40, 7, 120 us on the way in.
    ref = 1_000_000_000_000
    true_off = 5000
    samples = []
    for i, d in enumerate((3, 40, 7, 120)):
        sent_common = 100 + i * 10_000
        sent_ns = ref + sent_common * 1000
        local = sent_common + d - true_off
        samples.append((sent_ns, local))
    off, jitter, n = CP.one_way_offset(samples, ref)
    assert n == 4
    assert off == true_off - 3  # short by the smallest delay only
    assert jitter == pytest.approx((4 + 37) / 2)  # median distance from the best: (4, 37) of (0, 4, 37, 117)


def test_one_way_offset_needs_samples():
    with pytest.raises(ValueError):
        CP.one_way_offset([], 0)


def test_sender_bad_interface_is_one_clear_error():
    with pytest.raises(CP.ClockPortError, match="no-such-if0"):
        CP.ClockPortSender("no-such-if0")
