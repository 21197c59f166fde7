"""Measured activity split by traffic class: a ToR counts its low-latency frames apart
(``slot_rx_ll_counter``, ``slot_tx_ll_counter``), the recorder writes them (activity.json version 2)
and the reader (energy/measured.py) keeps a slot's day awake only for them: bulk is placed back to
back from the day's start and the predictive policy sleeps after it.  Hand-computed cases on the
four-rack fabric of test_energy_measured (one rotor, 3 matchings, 1 ms slots, 100 us nights; no
rate recorded: 1 Gb/s, so 1000 bytes are 8 us).  One interval of 67 cycles (the recorder's read
period): counts of 67 frames are one frame per cycle."""

from __future__ import annotations

import json

import pytest

from p4rotor import p4 as dp
from p4rotor.energy import measured as MS
from p4rotor.energy.account import busy
from p4rotor.energy.model import load
from p4rotor.energy.states import predictive
from test_energy_measured import DATA, fabric, record

CYCLES = 67          # the recorder's cycles per read on this fabric (3 ms cycle, reads >= 0.2 s apart)
CYCLE_US = 3000
ONE = (CYCLES, CYCLES * 1000)   # one 1000-byte frame per cycle


def names():
    _, topo, _ = fabric()
    rot = topo.rotors[0]
    tor = topo.racks[0].tor
    return rot.name, tor.name, topo.racks[0].hosts[0], tor.uplinks[rot.name], rot.ports[0]


def first_cycle(act, key):
    """The port's busy intervals of the first cycle, flat: [a0, b0, a1, b1, ...]."""
    return [t for iv in busy(act, act.ports[key]) if iv[0] < CYCLE_US for t in iv]


def test_the_recorder_reads_a_tors_low_latency_counters_and_not_the_rotors(tmp_path):
    rotor, tor, host, up, _ = names()
    cum = {tor: {(dp.C_SLOT_TX, 1, up): ONE, (dp.C_SLOT_TX_LL, 1, up): (1, 1000)}}
    doc = json.loads(record(tmp_path, [{}, cum]).read_text())
    assert doc["version"] == 2
    assert doc["switches"][tor]["low_latency"] is True and doc["switches"][rotor]["low_latency"] is False
    assert doc["intervals"][0]["switches"] == {tor: {"tx": {f"{up}:1": list(ONE)}, "tx_ll": {f"{up}:1": [1, 1000]}}}


def test_bulk_only_low_latency_only_and_mixed_slots_of_a_tor_uplink(tmp_path):
    """Slice 1 (slot 0's day) bulk only, slice 3 (slot 1) low-latency only, slice 5 (slot 2) half
    and half: busy 8 us from the day's start, then the whole days of slots 1 and 2."""
    rotor, tor, host, up, _ = names()
    cum = {tor: {(dp.C_SLOT_TX, 1, up): ONE,
                 (dp.C_SLOT_TX, 3, up): ONE, (dp.C_SLOT_TX_LL, 3, up): ONE,
                 (dp.C_SLOT_TX, 5, up): (2 * CYCLES, 2 * CYCLES * 1000), (dp.C_SLOT_TX_LL, 5, up): ONE}}
    act = MS.from_run(record(tmp_path, [{}, cum]).parent)
    key = (f"tor0~{rotor}", 0)
    p = act.ports[key]
    assert p.bins[0] == pytest.approx([1, 1000, 0]) and p.bins[1] == pytest.approx([1, 1000, 1000])
    assert p.bins[2] == pytest.approx([2, 2000, 1000])
    assert first_cycle(act, key) == pytest.approx([100, 108, 1100, 2000, 2100, 3000])
    # Predictive on the link (its other direction idle): per cycle the link sleeps in L1 through
    # the night before slot 0 (100 us, less L1's 23 us of entry and exit), the rest of slot 0's
    # day after the bulk and slot 1's night (1100 - 108 = 992 us), and slot 2's night (100 us).
    cls = load().classes["tor-uplink"]
    out = predictive([busy(act, act.ports[key]), []], [cls, load().classes["rotor-port"]], act.horizon_us)
    assert act.horizon_us == CYCLES * CYCLE_US
    assert out[0].time_us["L1"] == pytest.approx(CYCLES * (77 + 969 + 77))
    assert "L0s" not in out[0].time_us
    assert act.notes["classes"].startswith("low-latency counted by the ToRs")


def test_the_same_counts_read_as_before_without_the_class(tmp_path):
    """A version 1 file (no class counted): every frame low-latency, every slot's whole day awake;
    the frames the reactive policies see are the same."""
    rotor, tor, host, up, _ = names()
    cum = {tor: {(dp.C_SLOT_TX, 1, up): ONE, (dp.C_SLOT_TX, 3, up): ONE, (dp.C_SLOT_TX_LL, 3, up): ONE}}
    path = record(tmp_path, [{}, cum])
    new = MS.from_run(path.parent)
    doc = json.loads(path.read_text())
    doc["version"] = 1
    for sw in doc["switches"].values():
        del sw["low_latency"]
    for iv in doc["intervals"]:
        for moves in iv["switches"].values():
            moves.pop("tx_ll", None)
            moves.pop("rx_ll", None)
    path.write_text(json.dumps(doc))
    old = MS.from_run(path.parent)
    key = (f"tor0~{rotor}", 0)
    assert first_cycle(old, key) == pytest.approx([100, 1000, 1100, 2000])
    assert first_cycle(new, key) == pytest.approx([100, 108, 1100, 2000])
    assert {k: b[:2] for k, b in old.ports[key].bins.items()} == {k: b[:2] for k, b in new.ports[key].bins.items()}
    assert old.notes["classes"].startswith("not counted")


def test_a_rotor_ports_class_is_read_at_its_receiving_tor(tmp_path):
    """The rotor's port to rack 0 sends in matching 0 (slot 0): its frames are the rotor's count,
    its low-latency bytes those tor0 counted coming in on the uplink in that slot's day (slice 1);
    tor0's total of them is not counted a second time."""
    rotor, tor, host, up, rport = names()
    frames = {(dp.C_SLOT_TX, 0, rport): ONE}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    key = (f"tor0~{rotor}", 1)
    bulk = MS.from_run(record(tmp_path / "a", [{}, {rotor: frames, tor: {(dp.C_SLOT_RX, 1, up): ONE}}]).parent)
    assert bulk.ports[key].bins[0] == pytest.approx([1, 1000, 0])
    assert first_cycle(bulk, key) == pytest.approx([100, 108])
    ll = MS.from_run(record(tmp_path / "b", [{}, {rotor: frames, tor: {(dp.C_SLOT_RX, 1, up): ONE,
                                                                      (dp.C_SLOT_RX_LL, 1, up): ONE}}]).parent)
    assert ll.ports[key].bins[0] == pytest.approx([1, 1000, 1000])
    assert first_cycle(ll, key) == pytest.approx([100, 1000])


def test_a_hosts_class_is_read_at_its_tor(tmp_path):
    """A host's transmitter, measured as its ToR's receive counter, with the ToR's class: a host
    link's window is the whole slot, so bulk is busy from the slot's start."""
    rotor, tor, host, up, _ = names()
    key = (f"{host.name}~tor0", 0)
    act = MS.from_run(record(tmp_path, [{}, {tor: {(dp.C_SLOT_RX, 1, host.port): ONE,
                                                   (dp.C_SLOT_RX, 3, host.port): ONE,
                                                   (dp.C_SLOT_RX_LL, 3, host.port): ONE}}]).parent)
    assert first_cycle(act, key) == pytest.approx([0, 8, 1000, 2000])


def test_the_tor_p4info_fixture_holds_the_low_latency_counters():
    from p4rotor.control import check_p4info

    check_p4info(DATA / "tor.p4info.txtpb", dp.energy_contract("Tor"), dp.SLOT_COUNTERS + dp.SLOT_LL_COUNTERS)
    with pytest.raises(Exception, match="slot_rx_ll_counter missing"):
        check_p4info(DATA / "rotor.p4info.txtpb", dp.energy_contract("Rotor"), dp.SLOT_LL_COUNTERS)
