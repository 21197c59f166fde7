"""Adoption (clock mode): the comparison of what a switch holds with what this controller would
write, the epoch's conversion into this run's common time, and a restarted controller adopting
against the fake P4Runtime server (which holds what was written).  No switch needed; the
real-switch version is test_adopt_bmv2.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from fake_p4rt import FakeSwitch

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


def test_tor_entities_read_back_compare_equal_and_other_routes_differ():
    """The ToR: LPM and exact IPv4 keys, the rack config default; routes of another epsilon differ."""
    from p4rotor.schedule import topology as TP
    from p4rotor.schedule import routes as R

    schema = fy.P4Schema(DATA / "tor.p4info.txtpb")
    s = S.generate_opera(8, 4, 1000, 100)
    topo = TP.generate(s, "schedule.json", hosts_per_rack=2)
    rack = topo.racks[0]

    def tor(eps=0.0, **kw):
        return C.tor_entities(topo, rack, R.compute(s, epsilon_us=eps), dp.MODE_CLOCK, epsilon_us=eps, **kw)

    held = [fy.P4TableEntry.decode(e.encode(schema), schema) for e in tor(offset_us=-7, epoch_us=99, generation=3)]
    cmp = C.compare_installed(schema, tor(), held)
    assert cmp.same and cmp.clock["gen"] == 3 and cmp.clock["epoch_us"] == 99
    cmp = C.compare_installed(schema, tor(eps=50.0), held)
    assert not cmp.same and cmp.reason.startswith("route: "), cmp.reason


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


# ------------------------------------------------------------------ against the fake switch

def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def blob(tmp_path):
    p = tmp_path / "rotor.json"
    p.write_text("{}")
    return p


def make_ctl(port, blob, sched=None, events=None, **kw):
    return C.RotorController(sched or sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", port)], mode="clock",
                             p4info=P4INFO, p4blob=blob, lead_s=0.2,
                             on_event=(events.append if events is not None else (lambda m: None)), **kw)


def test_restarted_controller_adopts_and_writes_nothing(blob, tmp_path):
    from p4rotor.control.status import read_status

    events: list[str] = []

    async def main():
        fake = await FakeSwitch(P4INFO).start()
        try:
            a = make_ctl(fake.port, blob)
            await a.run(duration=0.3)
            written = len(fake.writes)
            await asyncio.sleep(0.2)
            b = make_ctl(fake.port, blob, events=events, status_file=tmp_path / "b.json")
            await b.run(duration=0.3)
        finally:
            await fake.stop()
        return fake, a, b, written

    fake, a, b, written = run(main())
    assert written > 0 and len(fake.writes) == written, "B wrote nothing, not even a delete"
    assert fake.pipelines == 1, "the pipeline was not pushed again"
    rb = b.runtimes["rotor0"]
    assert rb.adopted and rb.writes == 0 and rb.clears == 0
    assert rb.generation == a.runtimes["rotor0"].generation
    # The same slot 0 in wall time, through both runs' offsets (the fake's probes: within ~1 ms).
    assert abs(b.tb.wall_ns(b.t0_common_us) - a.tb.wall_ns(a.t0_common_us)) < 2_000_000
    assert rb.t0_common_us == b.t0_common_us
    st = read_status(tmp_path / "b.json")
    sw = st["switches"]["rotor0"]
    assert st["adopted"] == 1 and sw["adopted"] and sw["writes"] == 0
    assert sw["installed_epoch_us"] == a.t0_common_us and sw["epoch_us"] == b.t0_common_us
    assert st["t0_ns"] == b.tb.wall_ns(b.t0_common_us)
    assert any("adopted" in e for e in events), events


def test_no_adopt_and_another_schedule_clear_and_write(blob, tmp_path):
    events: list[str] = []

    async def main():
        fake = await FakeSwitch(P4INFO).start()
        try:
            await make_ctl(fake.port, blob).run(duration=0.2)
            n0 = installs(fake)
            forced = make_ctl(fake.port, blob, events=events, adopt=False)
            await forced.run(duration=0.2)
            n1 = installs(fake)
            other = make_ctl(fake.port, blob, sched=sched4(30_000), events=events)
            await other.run(duration=0.2)
            n2 = installs(fake)
        finally:
            await fake.stop()
        return forced, other, (n0, n1, n2)

    forced, other, (n0, n1, n2) = run(main())
    assert n1 - n0 == 16 and n2 - n1 == 16
    assert not forced.runtimes["rotor0"].adopted and forced.runtimes["rotor0"].clears == 1
    assert not other.runtimes["rotor0"].adopted
    why = [e for e in events if "not adopted" in e]
    assert why.pop(0) == "rotor0: not adopted (--no-adopt): clearing and writing"
    assert why == ["rotor0: not adopted (clock_phase: all 3 entries missing, 3 not ours; config: cycle 60000 "
                   "installed, 90000 wanted): clearing and writing"], events


def test_rewrite_never_reuses_the_installed_generation(blob, monkeypatch):
    """A rewrite whose new generation happens to equal the one installed would leave the
    pipeline's clock registers (kept per generation) running the old epoch: it takes the next."""
    async def main():
        fake = await FakeSwitch(P4INFO).start()
        try:
            a = make_ctl(fake.port, blob)
            await a.run(duration=0.2)
            gen = a.runtimes["rotor0"].generation
            b = make_ctl(fake.port, blob, sched=sched4(30_000))
            b.runtimes["rotor0"].generation = gen - 1  # _ready adds one: would be gen again
            await b.run(duration=0.2)
        finally:
            await fake.stop()
        return gen, b

    gen, b = run(main())
    assert b.runtimes["rotor0"].generation == (gen + 1) & 0xFFFF


def test_signal_mode_never_reads_or_adopts(blob):
    async def main():
        fake = await FakeSwitch(P4INFO).start()
        try:
            await make_ctl(fake.port, blob).run(duration=0.2)
            n0 = installs(fake)
            sig = C.RotorController(sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode="signal",
                                    p4info=P4INFO, p4blob=blob, lead_s=0.2, on_event=lambda m: None)
            await sig.run(duration=0.2)
        finally:
            await fake.stop()
        return sig, installs(fake) - n0

    sig, written = run(main())
    assert not sig.installer.adopt and written == 13 and sig.runtimes["rotor0"].clears == 1


def test_two_switches_adopt_one_clock(blob):
    """A fabric: every switch proposes, the first adoptable one gives t0, the others adopt when
    their clock agrees with it; a switch rewritten meanwhile (restarted) gets that t0."""
    async def main():
        f0, f1 = await FakeSwitch(P4INFO).start(), await FakeSwitch(P4INFO).start()
        specs = [C.SwitchSpec("rotor0", "127.0.0.1", f0.port), C.SwitchSpec("rotor1", "127.0.0.1", f1.port)]
        s = S.generate_rotornet(4, 2, 20_000, 2_000)
        try:
            a = C.RotorController(s, specs, mode="clock", p4info=P4INFO, p4blob=blob, lead_s=0.2,
                                  on_event=lambda m: None)
            await a.run(duration=0.2)
            f1.tables.clear()  # rotor1 restarted meanwhile: empty
            b = C.RotorController(s, specs, mode="clock", p4info=P4INFO, p4blob=blob, lead_s=0.2,
                                  on_event=lambda m: None)
            await b.run(duration=0.2)
        finally:
            await f0.stop()
            await f1.stop()
        return a, b, f1

    a, b, f1 = run(main())
    r0, r1 = b.runtimes["rotor0"], b.runtimes["rotor1"]
    assert r0.adopted and not r1.adopted and r1.clears == 1
    assert abs(b.tb.wall_ns(b.t0_common_us) - a.tb.wall_ns(a.t0_common_us)) < 2_000_000
    # rotor1 was rewritten on the adopted t0 (its own offset added), not on a fresh one.
    cfg = [u for u in f1.updates_for(dp.T_CONFIG)][-1].entity.table_entry.action.action
    epoch = int.from_bytes([p for p in cfg.params if p.param_id == 4][0].value, "big")
    assert epoch == (b.t0_common_us + b.runtimes["rotor1"].role.epoch_offset_us) & C.TS_MASK
