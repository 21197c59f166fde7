"""Clock-port time probes: frame layout and the two-way offset bracket (no switch needed)."""

import struct

import pytest

from p4rotor.control import clockport as CP
from p4rotor import p4 as dp

REF = 1_000_000_000_000


def test_probe_frame_layout_and_parse():
    f = CP.probe_frame(0x12345678)
    assert len(f) == 60
    assert struct.unpack_from("!H", f, 12)[0] == dp.ETHERTYPE_CLOCK_PROBE == 0x88B7
    assert struct.unpack_from("!I", f, 14)[0] == 0x12345678
    assert f[0] & 0x02 and not f[0] & 0x01, "locally administered unicast destination"
    assert CP.parse_probe(CP.probe_frame(7, 1000, 1042)) == (7, 1000, 1042)
    assert CP.parse_probe(b"\0" * 60) is None


def probe(sent_common_us, d_in, residence, d_out, offset):
    """A probe sent at common time sent_common_us: in d_in, in the switch residence, back d_out."""
    t2 = sent_common_us + d_in - offset
    t3 = t2 + residence
    t4 = sent_common_us + d_in + residence + d_out
    return CP.Sample(REF + sent_common_us * 1000, t2, t3, REF + t4 * 1000)


def test_bracket_holds_the_true_offset_and_uses_the_floors():
    off = 5000
    samples = [probe(100 + 10_000 * i, d_in, 20, d_out, off)
               for i, (d_in, d_out) in enumerate([(3, 9), (40, 5), (7, 4), (120, 80), (4, 30)])]
    b = CP.bracket(samples, REF)
    assert b.low_us == pytest.approx(off - 3)     # smallest way in
    assert b.high_us == pytest.approx(off + 4)    # smallest way out
    assert b.low_us <= off <= b.high_us
    assert b.half_width_us == pytest.approx(3.5)
    assert b.offset_us in (off, off + 1)
    assert b.probes == 5
    # 4th best bounds: way in 40 us (37 from the floor), way out 30 us (26 from the floor)
    assert b.spread_us == pytest.approx(37)


def test_bracket_inconsistent_bounds_are_an_error():
    bad = [CP.Sample(REF + 100_000, 0, 10, REF + 50_000)]  # received before it was sent
    with pytest.raises(ValueError, match="disagree"):
        CP.bracket(bad, REF)


def test_bracket_truncated_stamps_never_give_an_empty_bracket():
    b = CP.bracket([probe(100, 0.4, 5, 0.3, 777)], REF)
    assert b.high_us - b.low_us >= 1 - 1e-9


def test_bracket_needs_samples():
    with pytest.raises(ValueError):
        CP.bracket([], 0)


def test_bad_interface_is_one_clear_error():
    with pytest.raises(CP.ClockPortError, match="no-such-if0"):
        CP.ClockPort("no-such-if0")
