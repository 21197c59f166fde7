"""Controller logic against an in-process fake P4Runtime server: no switch needed.

The P4Info fixture in data/ is the compiled rotor program's; test_p4_contract.py keeps it in
step with build/ when a build exists.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor.control import roles as control_roles
from p4rotor.control.acks import ack_delays_us, timed_margins_us
from p4rotor import p4 as dp
from p4rotor import schedule as S
from fake_p4rt import FakeSwitch, wait_for

DATA = Path(__file__).parent / "data"
P4INFO = DATA / "rotor.p4info.txtpb"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def blob(tmp_path):
    p = tmp_path / "rotor.json"
    p.write_text("{}")  # the fake server takes any pipeline
    return p


def sched4():
    return S.generate_rotornet(4, 1, 20_000, 2_000)


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------ pure parts

def test_rotor_entities_shape():
    s = S.generate_opera(8, 4, 1000, 100)
    r = s.rotors[3]
    ents = C.rotor_entities(s, r, C.default_port_map(8), dp.MODE_CLOCK, offset_us=-5, epoch_us=123)
    circuits = [e for e in ents if e.table_id == dp.T_CIRCUIT]
    phases = [e for e in ents if e.table_id == dp.T_CLOCK_PHASE]
    n_circuits = sum(1 for m in r.matchings for j in m if j is not None)
    assert len(circuits) == n_circuits
    assert len(phases) == len(r.matchings)
    cfg = ents[-1]
    assert cfg.table_id == dp.T_CONFIG and cfg.is_default_action
    assert cfg.action.args["mode"] == dp.MODE_CLOCK
    assert cfg.action.args["offset"] == (-5) & C.TS_MASK  # two's complement in 48 bits
    assert cfg.action.args["cycle"] == s.cycle_us(r)
    # phase ranges tile the cycle exactly
    spans = sorted(e.match["phase"] for e in phases)
    assert spans[0][0] == 0 and spans[-1][1] == s.cycle_us(r) - 1
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("slot", [256, 65536, 1000])
def test_phase_entries_never_look_like_dont_care(slot):
    s = S.generate_rotornet(4, 1, slot, 0)
    ents = C.clock_phase_entries(s, s.rotors[0])
    for e in ents:
        lo, hi = e.match["phase"]
        assert not (lo == 0 and (hi + 1) & hi == 0 and hi > 0), (lo, hi)
    covered = sorted(e.match["phase"] for e in ents)
    assert covered[0][0] == 0 and covered[-1][1] == 3 * slot - 1
    assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:]))


def test_rotor_entities_missing_port():
    s = sched4()
    with pytest.raises(C.ControllerError, match="no port for racks"):
        C.rotor_entities(s, s.rotors[0], {0: 1, 1: 2}, dp.MODE_SIGNAL)


def test_switch_spec_parse():
    assert C.SwitchSpec.parse("rotor0=127.0.0.1:50051@3") == C.SwitchSpec("rotor0", "127.0.0.1", 50051, 3)
    assert C.SwitchSpec.parse("r=host:1").device_id == 1
    for bad in ("rotor0", "r=host", "r=host:0", "r=host:70000", "r=:1", "r=host:1@x"):
        with pytest.raises(C.ControllerError, match="bad --switch"):
            C.SwitchSpec.parse(bad)


def test_estimate_offset_picks_tightest_probe():
    tb = C.Timebase(ref_ns=1_000_000_000)
    samples = [(2_000_000_000, 2_010_000_000, 500), (3_000_000_000, 3_000_200_000, 1_000_600)]
    est = C.estimate_offset(samples, tb)
    assert est.rtt_us == 200
    # middle of best probe: 3_000_100_000 ns -> 2_000_100 us common; local 1_000_600
    assert est.offset_us == 2_000_100 - 1_000_600
    with pytest.raises(C.ControllerError):
        C.estimate_offset([], tb)


def test_wall_minus_monotonic_takes_the_tightest_bracket(monkeypatch):
    """A preempted pair of reads (the second bracket, 5 us wide) is not the one kept."""
    from p4rotor.control import timebase as TB

    mono = iter([1_000, 1_100, 2_000, 7_000, 9_000, 9_040])
    wall = iter([50_000, 60_000, 70_000])
    monkeypatch.setattr(TB.time, "monotonic_ns", lambda: next(mono))
    monkeypatch.setattr(TB.time, "time_ns", lambda: next(wall))
    assert TB.wall_minus_monotonic_ns(samples=3) == 70_000 - 9_020


def test_boundary_times():
    s = sched4()
    r = s.rotors[0]
    it = C.boundary_times(s, r, 1000, 0)
    got = [next(it) for _ in range(4)]
    assert got == [(1000, 0, 0, True), (3000, 0, 0, False), (21000, 1, 1, True), (23000, 1, 1, False)]
    it = C.boundary_times(s, r, 1000, 45_000)  # starts at the current slot (k=2)
    assert next(it)[1] == 2


def test_check_p4info_ok_and_mismatch(tmp_path):
    C.check_p4info(P4INFO)
    bad = tmp_path / "bad.p4info.txtpb"
    bad.write_text(P4INFO.read_text().replace('"RotorIngress.circuit.circuit"', '"RotorIngress.circuit.other"'))
    with pytest.raises(C.ControllerError, match="P4Info mismatch.*table RotorIngress.circuit.circuit missing"):
        C.check_p4info(bad)
    with pytest.raises(C.ControllerError, match="not found"):
        C.check_p4info(tmp_path / "nope.txtpb")
    junk = tmp_path / "junk.txtpb"
    junk.write_text("tables { this is not text proto")
    with pytest.raises(C.ControllerError, match="unreadable"):
        C.check_p4info(junk)


# ------------------------------------------------------------ against the fake

def make_ctl(fake, blob, mode="signal", trace=None, **kw):
    s = sched4()
    return C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode=mode,
                             p4info=P4INFO, p4blob=blob, trace=trace, lead_s=0.2, **kw)


def test_signal_mode_installs_then_rotates(blob, tmp_path):
    async def main():
        fake = await FakeSwitch(P4INFO).start()
        trace = tmp_path / "trace.jsonl"
        ctl = make_ctl(fake, blob, trace=trace)
        try:
            await ctl.run(duration=0.6)
        finally:
            await fake.stop()
        return fake, trace

    fake, trace = run(main())
    assert fake.pipelines == 1
    circuits = fake.updates_for(dp.T_CIRCUIT)
    assert len(circuits) == 12  # 3 matchings x 4 racks
    cfg = fake.updates_for(dp.T_CONFIG)
    assert len(cfg) >= 1 and fake.writes[-1] == cfg[-1], "config written last"
    sets = [v for _, v in fake.packet_outs if v["opcode"] == dp.OP_SET_SLOT]
    assert len(sets) >= 20, "slots rotated (20 ms slots for ~0.4 s)"
    slots = [v["slot"] for v in sets]
    assert slots == sorted(slots)
    assert all(v["index"] == v["slot"] % 3 for v in sets)
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert {"t_ns", "switch", "slot", "night"} <= set(lines[0])
    assert [l["night"] for l in lines[:4]] == [True, False, True, False]
    # sent close to schedule (generous: shared CI machine)
    # Sent on schedule, not drifting: the median change leaves within 20 ms of its time.  One
    # change can be late by a scheduler stall on a loaded 2-core machine (96 ms seen); how late
    # they are is a measurement, in `make bench`.
    late = sorted(l["t_ns"] - l["scheduled_ns"] for l in lines)
    assert late[len(late) // 2] < 20e6, late


def test_clock_mode_measures_offset_and_installs_once(blob):
    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_654_321).start()
        ctl = make_ctl(fake, blob, mode="clock")
        try:
            await ctl.run(duration=0.3)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = run(main())
    assert fake.started_us
    probes = [v for _, v in fake.packet_outs if v["opcode"] == dp.OP_TIME_PROBE]
    assert len(probes) == 16
    assert not [v for _, v in fake.packet_outs if v["opcode"] == dp.OP_SET_SLOT], "clock mode sends no slots"
    est = ctl.runtimes["rotor0"].offset
    # local = wall - started + boot; local + offset = common = wall - ref
    #   =>  offset = started - boot - ref   (within half the probe round trip)
    expect = fake.started_us - 7_654_321 - ctl.tb.ref_ns // 1000
    assert abs(est.offset_us - expect) <= est.rtt_us / 2 + 1000
    assert len(fake.updates_for(dp.T_CLOCK_PHASE)) == 3


def test_write_failure_is_one_typed_error(blob):
    async def main():
        fake = await FakeSwitch(P4INFO, fail_updates={3, 5}).start()
        ctl = make_ctl(fake, blob)
        try:
            with pytest.raises(C.ControllerError) as ei:
                await ctl.run(duration=2)
        finally:
            await fake.stop()
        return ei.value

    err = run(main())
    assert "write failed" in str(err)
    assert [f.split(":")[0] for f in err.failures] == ["#3", "#5"]


def test_unreachable_switch(blob):
    async def main():
        ctl = C.RotorController(sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="signal",
                                p4info=P4INFO, p4blob=blob)
        t = time.monotonic()
        with pytest.raises(C.ControllerError, match="unreachable.*rotor0 \\(127.0.0.1:1\\)"):
            await ctl.run(duration=5, connect_timeout=1.0)
        return time.monotonic() - t

    assert run(main()) < 4


def test_lower_election_id_refused(blob):
    async def main():
        fake = await FakeSwitch(P4INFO, primary_election_id=50).start()
        ctl = make_ctl(fake, blob, election_id=10)
        try:
            with pytest.raises(C.ControllerError, match="another controller is primary"):
                await ctl.run(duration=2)
        finally:
            await fake.stop()
        return fake

    fake = run(main())
    assert not fake.writes


def test_switch_restart_reinstalls_everything(blob):
    async def main():
        fake = await FakeSwitch(P4INFO, addr="127.0.0.1:0").start()
        port = fake.port
        ctl = make_ctl(fake, blob)
        task = asyncio.create_task(ctl.run(duration=40))
        await wait_for(lambda: fake.updates_for(dp.T_CONFIG))
        # finsy waits 10 s before reconnecting to a switch that failed within 2 s: stay past that.
        await asyncio.sleep(2.2)
        await fake.stop()  # the switch goes away ...
        await asyncio.sleep(0.3)
        fake2 = await FakeSwitch(P4INFO, addr=f"127.0.0.1:{port}").start()  # ... and comes back empty
        await wait_for(lambda: fake2.updates_for(dp.T_CONFIG), timeout=30)
        await wait_for(lambda: any(v["opcode"] == dp.OP_SET_SLOT for _, v in fake2.packet_outs), timeout=5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await fake2.stop()
        return fake2

    fake2 = run(main())
    assert fake2.pipelines == 1
    assert len(fake2.updates_for(dp.T_CIRCUIT)) == 12


def test_unknown_rotor_name(blob):
    with pytest.raises(C.ControllerError, match="no rotor named 'nope'"):
        C.RotorController(sched4(), [C.SwitchSpec("nope", "h", 1)], mode="signal", p4info=P4INFO, p4blob=blob)


def test_missing_pipeline(tmp_path):
    with pytest.raises(C.ControllerError, match="make build"):
        C.RotorController(sched4(), [C.SwitchSpec("rotor0", "h", 1)], mode="signal", p4info=P4INFO,
                          p4blob=tmp_path / "none.json")


def test_egress_guard_closes_day_early_and_is_checked():
    s = S.generate_rotornet(4, 1, 1000, 100)
    ents = C.clock_phase_entries(s, s.rotors[0], egress_guard_us=150)
    ends = sorted({e.action.args["slot_end"] for e in ents})
    assert ends == [850, 1850, 2850]
    with pytest.raises(C.ControllerError, match="shorter than the day"):
        C.clock_phase_entries(s, s.rotors[0], egress_guard_us=900)


# ------------------------------------------------------------ timed slot changes

def test_timed_changes_merge_night_and_day():
    s = sched4()
    got = list(zip(range(3), C.timed_changes(C.boundary_times(s, s.rotors[0], 1000, 0))))
    assert [g for _, g in got] == [(1000, 0, 0, 2000), (21000, 1, 1, 2000), (41000, 2, 2, 2000)]
    # No night: one change per day start, night 0.
    assert list(C.timed_changes([(5, 0, 0, False), (9, 1, 1, False)])) == [(5, 0, 0, 0), (9, 1, 1, 0)]


def test_set_slot_packet_timed_and_immediate():
    p = C.set_slot_packet(7, 2, True, seq=3, ack=True)
    assert p.metadata["flags"] == dp.FLAG_NIGHT | dp.FLAG_ACK and p.metadata["at"] == 0
    t = C.set_slot_packet(7, 2, seq=3, at_us=123_456, night_us=100)
    assert t.metadata["flags"] == dp.FLAG_AT and t.metadata["at"] == 123_456 and t.metadata["night_us"] == 100
    with pytest.raises(C.ControllerError, match="bad timed slot change"):
        C.set_slot_packet(7, 2, at_us=5, night_us=-1)


def test_timed_option_checked(blob):
    with pytest.raises(C.ControllerError, match="signal-mode option"):
        C.RotorController(sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="clock", p4info=P4INFO,
                          p4blob=blob, signal=C.SignalOptions(timed=True))
    with pytest.raises(C.ControllerError, match="no signal lead"):
        C.RotorController(sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="signal", p4info=P4INFO,
                          p4blob=blob, signal=C.SignalOptions(timed=True, lead_us=100))


def test_signal_timed_sends_each_slot_one_slot_ahead(blob, tmp_path):
    """Each slot's change carries its start (and night) and leaves after the previous slot
    started, before its own start: never two pending at the switch, never late."""
    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=3_000_000).start()
        ctl = make_ctl(fake, blob, signal=C.SignalOptions(timed=True, ack_every=1))
        try:
            await ctl.run(duration=0.5)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = run(main())
    sets = [(t, v) for t, v in fake.packet_outs if v["opcode"] == dp.OP_SET_SLOT]
    assert len(sets) >= 10
    assert all(v["flags"] & dp.FLAG_AT and v["night_us"] == 2000 for _, v in sets)
    assert [v["slot"] for _, v in sets] == list(range(sets[0][1]["slot"], sets[0][1]["slot"] + len(sets)))
    rt = ctl.runtimes["rotor0"]
    off = rt.offset.offset_us
    for (t, v), (_, prev) in zip(sets[1:], sets):
        at_wall = ctl.tb.wall_ns(v["at"])
        prev_wall = ctl.tb.wall_ns(prev["at"])
        assert prev_wall < t < at_wall, "sent after the previous slot started, before its own"
    assert v["at"] - off != v["at"] or off == 0  # offset known (probed) for timed changes
    margins = timed_margins_us(ctl)
    assert margins and min(margins) > 0, "every acked change arrived before its start"
    assert max(ack_delays_us(ctl)) == 0.0, "applied at its start time"


def test_installs_are_paced(blob, monkeypatch):
    """At most install_concurrency switches clear-and-write at once; all still get installed."""
    live, peak = 0, 0
    real = C.write_batched

    async def tracking(sw, updates, batch=C.WRITE_BATCH):
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        try:
            await asyncio.sleep(0.05)  # an install that takes a while
            await real(sw, updates, batch)
        finally:
            live -= 1

    monkeypatch.setattr(control_roles, "write_batched", tracking)  # the name SwitchRuntime.write calls

    async def main():
        s = S.generate_rotornet(8, 4, 20_000, 2_000)
        fakes = [await FakeSwitch(P4INFO).start() for _ in s.rotors]
        specs = [C.SwitchSpec(r.name, "127.0.0.1", f.port, i + 1) for i, (r, f) in enumerate(zip(s.rotors, fakes))]
        ctl = C.RotorController(s, specs, mode="clock", p4info=P4INFO, p4blob=blob, lead_s=0.5,
                                probes=2, install_concurrency=2)
        try:
            await ctl.run(duration=0.1)
        finally:
            for f in fakes:
                await f.stop()
        return fakes, ctl

    fakes, ctl = run(main())
    assert peak == 2
    assert all(len(f.updates_for(dp.T_CONFIG)) >= 1 for f in fakes)
    assert all(rt.ready.is_set() for rt in ctl.runtimes.values())
    with pytest.raises(C.ControllerError, match="install concurrency"):
        C.RotorController(sched4(), [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="clock", p4info=P4INFO,
                          p4blob=blob, install_concurrency=0)


def test_status_file_tells_phase_installs_epoch_and_stop(blob, tmp_path):
    """The status file (what the launcher reads) says installing -> running with the epoch, then
    stopped, whatever the log says: here every log message is reworded."""
    from p4rotor.control.status import read_status

    status = tmp_path / "status.json"
    seen = []

    async def main():
        fake = await FakeSwitch(P4INFO).start()
        ctl = make_ctl(fake, blob, mode="clock", status_file=status,
                       on_event=lambda m: None)  # the log says nothing at all

        async def after_ready(c):
            seen.append(read_status(status))

        try:
            await ctl.run(duration=0.2, after_ready=after_ready)
        finally:
            await fake.stop()
        return ctl

    ctl = run(main())
    running = seen[0]
    assert running["phase"] == "running" and running["installed"] == running["total"] == 1
    assert running["t0_ns"] == ctl.tb.wall_ns(ctl.t0_common_us)
    sw = running["switches"]["rotor0"]
    assert sw["installed"] and sw["entities"] > 0 and "offset_us" in sw
    assert read_status(status)["phase"] == "stopped"


def test_status_file_says_failed_with_the_error(blob, tmp_path):
    """An unreachable switch: phase 'failed' and the one-line error, for the launcher to show."""
    from p4rotor.control.status import read_status

    status = tmp_path / "status.json"
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    ctl = C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", 1, 1)], mode="clock", p4info=P4INFO,
                            p4blob=blob, status_file=status)
    with pytest.raises(C.ControllerError):
        run(ctl.run(duration=1, connect_timeout=0.5))
    st = read_status(status)
    assert st["phase"] == "failed" and "unreachable" in st["error"] and "\n" not in st["error"]


def test_read_status_refuses_other_files(tmp_path):
    from p4rotor.control.status import read_status

    assert read_status(tmp_path / "none.json") is None
    (tmp_path / "x.json").write_text('{"phase": "dancing"}')
    with pytest.raises(ValueError, match="not a p4rotor controller status file"):
        read_status(tmp_path / "x.json")


def test_tor_route_until_is_slice_end_plus_epsilon_for_low_latency_and_day_end_for_a_circuit():
    """The ToR egress re-check keeps a low-latency frame to its slice, but a direct circuit's
    frame to its rotor's day: it stays live across slice changes other rotors make (checking it
    per slice dropped Opera bulk at every slice boundary)."""
    from p4rotor.control.tor import route_until_us
    from p4rotor.schedule import routes as R

    s = S.generate_opera(8, 4, 1000, 100)
    eps = 50
    checked = 0
    for sr in R.compute(s, epsilon_us=eps):
        for (src, dst, tclass), hop in sr.hops.items():
            until = route_until_us(s, sr, tclass, hop, eps)
            if tclass == dp.TCLASS_LOW_LATENCY:
                # the slice, plus the epsilon the routes were computed to leave, on a live circuit
                assert sr.slice.end_us <= until <= sr.slice.end_us + eps
                r = s.rotors[hop.rotor]
                assert all(not s.state_at(r, t % s.hyperperiod_us)[2] for t in range(sr.slice.start_us, until, 5))
                continue
            assert until >= sr.slice.end_us
            r = s.rotors[hop.rotor]
            # live (its matching unchanged) from the slice start to until; dark right after
            k0, m0, night0 = s.state_at(r, sr.slice.start_us)
            assert not night0
            for t in range(sr.slice.start_us, until, 25):
                k, m, night = s.state_at(r, t % s.hyperperiod_us)
                assert not night and m == m0, (sr.index, hop.rotor, t)
            assert s.state_at(r, until % s.hyperperiod_us)[2], "night starts at until"
            checked += 1
    assert checked > 100
