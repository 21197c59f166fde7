"""Adoption (clock mode): the comparison of what a switch holds with what this controller would
write, and the epoch's conversion into this run's common time.  No switch needed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import finsy as fy

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S

DATA = Path(__file__).parent / "data"
P4INFO = DATA / "rotor.p4info.txtpb"
SCHEMA = fy.P4Schema(P4INFO)


def sched4(slot_us: int = 20_000):
    return S.generate_rotornet(4, 1, slot_us, 2_000)


def ents(s=None, mode=dp.MODE_CLOCK, offset_us=-1234, epoch_us=1_000_000, generation=7, **kw):
    s = s or sched4()
    return C.rotor_entities(s, s.rotors[0], C.default_port_map(4), mode, offset_us=offset_us,
                            epoch_us=epoch_us, generation=generation, **kw)


def table(e) -> str:
    return SCHEMA.tables[e.table_id].name


def installs(fake) -> int:
    """Entities the fake was given (not delete_all's deletes and default resets)."""
    return sum(1 for u in fake.writes if u.type != u.DELETE and u.entity.table_entry.HasField("action"))


def as_read(updates):
    """What a Read returns for what was written: each entity encoded and decoded (no update type)."""
    return [fy.P4TableEntry.decode(e.encode(SCHEMA), SCHEMA) for e in updates]


# ------------------------------------------------------------------ the comparison (pure)

def test_same_entries_other_run_fields_adopt():
    want = ents(offset_us=-99, epoch_us=5, generation=1)
    have = as_read(ents(offset_us=-1234, epoch_us=1_000_000, generation=7))
    cmp = C.compare_installed(SCHEMA, want, have)
    assert cmp.same and cmp.reason == ""
    assert cmp.entries == len(want) == 16
    # The installed run fields, for the controller to take over (target units: us on BMv2).
    assert cmp.clock["epoch_us"] == 1_000_000 and cmp.clock["gen"] == 7
    assert cmp.clock["offset"] == (-1234) & C.TS_MASK and cmp.clock["mode"] == dp.MODE_CLOCK


def test_one_differing_entry_is_named():
    have = as_read(ents())
    circuit = [e for e in have if table(e) == dp.T_CIRCUIT]
    circuit[0] = dataclasses.replace(circuit[0], action=fy.P4TableAction(dp.A_CONNECT, port=9))
    have = [e for e in have if table(e) != dp.T_CIRCUIT] + circuit
    cmp = C.compare_installed(SCHEMA, ents(), have)
    assert not cmp.same
    assert cmp.reason == "circuit: 1 of 12 entries differ"


def test_missing_and_extra_entries():
    have = as_read(ents())
    phases = [e for e in have if table(e) == dp.T_CLOCK_PHASE]
    have.remove(phases[1])
    have.append(fy.P4TableEntry(dp.T_LOSS_IN, match=fy.P4TableMatch(port=1),
                                action=fy.P4TableAction(dp.A_LOSSY, threshold_=5), priority=1))
    cmp = C.compare_installed(SCHEMA, ents(), have)
    assert not cmp.same
    assert "clock_phase: 1 missing" in cmp.reason and "loss_in: 1 not ours" in cmp.reason, cmp.reason


def test_empty_switch_says_everything_is_missing():
    cmp = C.compare_installed(SCHEMA, ents(), [])
    assert not cmp.same and cmp.clock is None
    assert cmp.reason == ("circuit: all 12 entries missing; clock_phase: all 3 entries missing; "
                          "config: no default action read")
    unconfigured = fy.P4TableEntry(dp.T_CONFIG, is_default_action=True,
                                   action=fy.P4TableAction("RotorIngress.slot_state.unconfigured"))
    cmp = C.compare_installed(SCHEMA, ents(), [unconfigured])
    assert "config: unconfigured installed, configure wanted" in cmp.reason


def test_other_mode_is_not_adopted():
    have = as_read(ents(mode=dp.MODE_SIGNAL))  # a signal-mode run: no phase table, mode 1
    cmp = C.compare_installed(SCHEMA, ents(), have)
    assert not cmp.same
    assert cmp.reason == "clock_phase: all 3 entries missing; config: mode signal installed, clock wanted"


def test_other_cycle_is_not_adopted():
    # Another slot length: other phase ranges and another cycle in the config.
    have = as_read(ents(s=sched4(30_000)))
    cmp = C.compare_installed(SCHEMA, ents(), have)
    assert not cmp.same
    assert cmp.reason == ("clock_phase: all 3 entries missing, 3 not ours; "
                          "config: cycle 90000 installed, 60000 wanted"), cmp.reason


def test_other_egress_guard_is_not_adopted():
    cmp = C.compare_installed(SCHEMA, ents(), as_read(ents(egress_guard_us=100)))
    assert not cmp.same and cmp.reason == "clock_phase: 3 of 3 entries differ"


# ------------------------------------------------------------------ the epoch (pure)

def test_adopt_clock_converts_the_epoch_into_our_common_time():
    # Installed by run A: epoch 500000 us of A's time, A's offset -645395 (local + offset = A's time).
    # We measure -4826995: our time = local - 4826995, so A's slot 0 is at
    # 500000 + 645395 - 4826995 = -3681600 us of ours (3.7 s before we started).
    got = C.adopt_clock(C.BMV2, 500_000, (-645_395) & C.TS_MASK, -4_826_995, now_us=200_000)
    assert got == C.AdoptedClock(installed_epoch_us=500_000, installed_offset_us=-645_395, epoch_us=-3_681_600)


def test_adopt_clock_wraps_at_the_target_width():
    # Tofino: 32-bit times of 1024 ns.  An epoch that wrapped past 2^32 units stays near now.
    t = C.TOFINO
    epoch_units = (1 << 32) - 10  # A's epoch, just before the wrap
    offset_units = 20  # A's offset
    ours_us = 30 * 1.024  # ours: 30 units
    got = C.adopt_clock(t, epoch_units, offset_units, ours_us, now_us=1_000)
    # epoch - offset + ours = -10 - 20 + 30 = 0 units (mod 2^32): our time 0
    assert got.epoch_us == 0 and got.installed_epoch_us == -10 * 1.024 and got.installed_offset_us == 20 * 1.024
