"""Measured activity: the controller's recorder (control/activity_recorder.py) turns the
switches' per-slot counters into activity.json, and ``p4rotor energy`` reads it (energy/measured.py)
instead of a reconstruction, saying so.  The sleep plan's parsing and entries.  No switch: the
counters are a fake switch's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import finsy as fy
import pytest

from fuzz_cli import check, _guard  # noqa: F401 (fixture, found by name)
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.control import ControllerError, check_p4info, sleep_entries
from p4rotor.control.activity_recorder import ActivityRecorder, rotor_ports, tor_ports
from p4rotor.control.sleep_plan import read_sleep_plan, schedule_plan
from p4rotor.control.nikss import ebpf_contract
from p4rotor.energy import measured as MS
from p4rotor.energy import model as M
from p4rotor.energy.cli import evaluate
from p4rotor.energy.report import summary_line
from p4rotor.schedule import routes as R
from p4rotor.schedule import topology as TP

DATA = Path(__file__).parent / "data"


class FakeSwitch:
    """A switch whose per-slot counters are what the test sets: {(counter, cell): (pk, bytes)}."""

    def __init__(self, name: str):
        self.name, self.cells = name, {}

    async def read(self, entities):
        for e in entities:
            pk, by = self.cells.get((str(e.counter_id), e.index), (0, 0))
            yield fy.P4CounterEntry(e.counter_id, index=e.index, data=fy.P4CounterData(packet_count=pk, byte_count=by))


def fabric():
    """Four racks, one rotor (3 matchings, 1 ms slots, 100 us nights): rotor r0 and ToR of rack 0."""
    s = S.generate_rotornet(4, 1, 1000, 100)
    topo = TP.generate(s, "inline", hosts_per_rack=1)
    rs, rack = topo.rotors[0], topo.racks[0]
    routes = R.compute(s)
    views = {rs.name: rotor_ports(s, rs.name, rs.ports),
             rack.tor.name: tor_ports(s, rack.id, {h.name: h.port for h in rack.hosts}, dict(rack.tor.uplinks),
                                      [(sr.slice.start_us, sr.slice.end_us) for sr in routes])}
    return s, topo, views


class FakeNikssSwitch(FakeSwitch):
    """The eBPF switch's way: the cells as numbers (NikssDriver.read_cells), no entities."""

    async def read(self, entities):
        raise AssertionError("the recorder reads an eBPF switch's cells without entities")
        yield

    async def read_cells(self, counter, cells):
        return {c: self.cells[(counter, c)] for c in cells if (counter, c) in self.cells}


def record(tmp_path: Path, rounds, kind=FakeSwitch) -> Path:
    """Run the recorder's read/add/interval over ``rounds`` (each {switch: {(counter, slot, port): (pk, by)}},
    cumulative) and return the file."""
    s, topo, views = fabric()
    path = tmp_path / "activity.json"
    rec = ActivityRecorder(None, path, views)
    sws = {n: kind(n) for n in views}
    for i, cum in enumerate(rounds):
        moves = {}
        for name, sw in sws.items():
            sw.cells = {(c, dp.energy_cell(slot, port)): v for (c, slot, port), v in cum.get(name, {}).items()}
            m = rec.add(name, asyncio.run(rec.read(sw)))
            if m:
                moves[name] = m
        if i:
            rec.interval(moves, i * rec.every_s)
    return path


def test_recorder_writes_what_moved_per_slot_and_port(tmp_path):
    s, topo, views = fabric()
    rotor, tor = topo.rotors[0].name, topo.racks[0].tor.name
    p = topo.rotors[0].ports[1]            # the rotor's port to rack 1
    base = {rotor: {(dp.C_SLOT_TX, 2, p): (5, 500)}}          # before the run: the base, not recorded
    later = {rotor: {(dp.C_SLOT_TX, 2, p): (8, 800), (dp.C_SLOT_RX, 0, p): (1, 64)}}
    doc = json.loads(record(tmp_path, [base, later]).read_text())
    assert doc["version"] == 2 and doc["source"].startswith("measured")
    assert doc["switches"][rotor]["ports"][str(p)]["tx"] == {"link": f"tor1~{rotor}", "channel": 1,
                                                             "class": "rotor-port", "rotor": 0}
    assert doc["switches"][tor]["kind"] == "tor"
    assert doc["intervals"] == [{"t_s": round(doc["read_every_s"], 6),
                                 "switches": {rotor: {"tx": {f"{p}:2": [3, 300]}, "rx": {f"{p}:0": [1, 64]}}}}]
    (tmp_path / "raw").mkdir()
    assert json.loads(record(tmp_path / "raw", [base, later], FakeNikssSwitch).read_text()) == doc
    # Reads at least MIN_READ_S apart, whole cycles: a 3 ms cycle is read every 67 cycles.
    assert doc["cycles_per_read"] * 3000 >= 200_000 and doc["read_every_s"] == doc["cycles_per_read"] * 0.003


def test_energy_reads_the_measured_activity_and_keeps_every_byte(tmp_path):
    s, topo, views = fabric()
    rotor, tor, host = topo.rotors[0].name, topo.racks[0].tor.name, topo.racks[0].hosts[0]
    p = topo.rotors[0].ports[1]
    up = topo.racks[0].tor.uplinks[rotor]
    cum = {rotor: {(dp.C_SLOT_TX, 1, p): (30, 30_000), (dp.C_SLOT_RX, 1, topo.rotors[0].ports[0]): (30, 30_000)},
           tor: {(dp.C_SLOT_TX, 1, up): (30, 30_000), (dp.C_SLOT_RX, 0, host.port): (20, 20_000),
                 (dp.C_SLOT_RX, 0, up): (7, 7000)}}
    run = record(tmp_path, [{}, cum]).parent
    act = MS.from_run(run)
    total = {k: sum(b[1] for b in port.bins.values()) for k, port in act.ports.items()}
    assert total[(f"tor1~{rotor}", 1)] == pytest.approx(30_000)         # the rotor's transmitter
    assert total[(f"tor0~{rotor}", 0)] == pytest.approx(30_000)         # the uplink, measured at the ToR
    assert total[(f"{host.name}~tor0", 0)] == pytest.approx(20_000)     # the host, from its ToR's rx
    assert total[(f"tor0~{rotor}", 1)] == 0                             # rx of a measured transmitter: not twice
    assert act.source.startswith("measured")
    rows = evaluate([run], M.load())
    assert [(r["mode"], r["activity"]) for r in rows] == [("measured", "measured")]
    pol = rows[0]["policies"]
    assert pol["always-on"]["saving"] == 0 and pol["predictive"]["delay"]["frames_delayed"] == 0


def test_the_command_says_measured_and_a_bad_activity_is_one_line(tmp_path):
    (tmp_path / "r").mkdir()
    run = record(tmp_path / "r", [{}, {}]).parent
    check(["energy", str(run)], refused=False)
    assert "; measured activity;" in summary_line(evaluate([run], M.load())[0])
    (run / "activity.json").write_text(json.dumps({"version": 9}))
    _, err = check(["energy", str(run)], refused=True)
    assert "version 9" in err


def test_sleep_plan_entries_and_bad_plans(tmp_path):
    ents = sleep_entries("rotor", {2: {"out": [1, 0], "in": [1]}})
    assert [(e.table_id, dict(e.match)["slot"]) for e in ents] == [
        ("RotorEgress.port_sleep.sleep_in", 1), ("RotorEgress.port_sleep.sleep_out", 0),
        ("RotorEgress.port_sleep.sleep_out", 1)]
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"tor0": {"3": [0, 2]}}))
    assert read_sleep_plan(str(f)) == {"tor0": {3: {"in": [0, 2], "out": [0, 2]}}}
    for bad in ([], {"tor0": {"x": [1]}}, {"tor0": {"3": {"up": [1]}}}, {"tor0": {"3": [-1]}}, {"tor0": {"3": [True]}}):
        f.write_text(json.dumps(bad))
        with pytest.raises(ControllerError, match="--port-sleep"):
            read_sleep_plan(str(f))


@pytest.mark.parametrize("program,kind", [("rotor", "Rotor"), ("tor", "Tor")])
def test_p4info_fixtures_hold_the_energy_entities(program, kind):
    check_p4info(DATA / f"{program}.p4info.txtpb", dp.energy_contract(kind), dp.SLOT_COUNTERS)
    check_p4info(DATA / f"ebpf-{program}.p4info.txtpb", ebpf_contract(dp.energy_contract(kind)), ())


def test_energy_cell_matches_the_p4():
    assert dp.energy_cell(0, 1) == 1 and dp.energy_cell(3, 2) == (3 << dp.ENERGY_PORT_BITS) | 2
    assert dp.energy_cell(dp.ENERGY_SLOTS + 1, 5) == dp.energy_cell(1, 5)
    assert dp.ENERGY_CELLS == dp.ENERGY_SLOTS << dp.ENERGY_PORT_BITS


def test_measured_times_in_schedule_time_and_the_run_link_rate(tmp_path):
    """A run.json's dilation divides the recorded (wall) schedule back; its link_mbps is the rate."""
    run = record(tmp_path, [{}, {}]).parent
    doc = json.loads((run / "activity.json").read_text())
    doc["schedule"]["slot_us"] *= 100
    doc["schedule"]["reconfig_us"] *= 100
    (run / "activity.json").write_text(json.dumps(doc))
    (run / "run.json").write_text(json.dumps({"dilation": 100, "link_mbps": 1000}))
    act = MS.from_run(run)
    assert act.schedule.slot_us == 1000 and act.schedule.reconfig_us == 100
    assert act.rate_bps["rotor-port"] == 1e9 and act.notes["rate"] == "run.json: link_mbps"
    assert act.horizon_us == pytest.approx(len(doc["intervals"]) * doc["read_every_s"] * 1e6 / 100)


def test_a_role_with_a_sleep_plan_inserts_it_before_its_config():
    from p4rotor.control import BMV2, is_slot_config
    from p4rotor.control.fabric_roles import fabric_roles
    from p4rotor.control.roles import with_sleep

    s, topo, _ = fabric()
    role = next(r for r in fabric_roles(topo, DATA) if r.kind == "tor")
    ents = with_sleep(role, {3: {"out": [1]}}).entities(dp.MODE_CLOCK, 0, 0, 1, BMV2)
    assert is_slot_config(ents[-1]) and len(ents) == len(role.entities(dp.MODE_CLOCK, 0, 0, 1, BMV2)) + 1
    sleep = ents[-2]
    assert sleep.table_id == "TorEgress.port_sleep.sleep_out" and sleep.encode_update(fy.P4Schema(DATA / "tor.p4info.txtpb"))


def test_the_schedule_plan_sleeps_only_where_nothing_can_go():
    """RotorNet 4 x 1: the ToR's one uplink sleeps in the night slices; Opera 8 x 4: each uplink
    in the slices no route of its ToR leaves through it, and a rotor port never (every matching
    connects every rack)."""
    s, topo, _ = fabric()
    (rotor,) = s.rotors
    assert schedule_plan(topo, R.compute(s)) == {k.tor.name: {k.tor.uplinks[rotor.name]: {"out": [0, 2, 4]}}
                                                 for k in topo.racks}
    s = S.generate_opera(8, 4, 1000, 100)
    topo = TP.generate(s, "inline", hosts_per_rack=1)
    routes = R.compute(s, epsilon_us=50)
    plan = schedule_plan(topo, routes)
    assert set(plan) == {k.tor.name for k in topo.racks}
    for rack in topo.racks:
        for name, port in rack.tor.uplinks.items():
            r = [x.name for x in s.rotors].index(name)
            asleep = plan[rack.tor.name][port]["out"]
            assert asleep and all(hop.rotor != r for sl in asleep for key, hop in routes[sl].hops.items()
                                  if key[0] == rack.id)


def _timed(doc: dict, t0_unix: float, ends: list[float]) -> dict:
    """``doc`` (a recorder's file) with its first read at ``t0_unix`` and one interval ending at
    each of ``ends`` (seconds after it), each moving one frame of 100 bytes on one cell."""
    out = dict(doc, t0_unix=t0_unix)
    rotor = next(n for n, v in doc["switches"].items() if v["kind"] == "rotor")
    port = next(iter(doc["switches"][rotor]["ports"]))
    out["intervals"] = [{"t_s": t, "switches": {rotor: {"tx": {f"{port}:0": [1, 100]}}}} for t in ends]
    return out


def test_a_window_is_the_reads_around_it_counted_from_the_read_before_it(tmp_path):
    """An fct mode's run is cut out of the whole emulation's file: from the last read at or before
    its start to the first after its end, times from that read; nothing outside, nothing lost."""
    from p4rotor.control.activity_recorder import window

    doc = _timed(json.loads(record(tmp_path, [{}, {}]).read_text()), 1000.0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    part = window(doc, 1002.5, 1004.2)      # 2.5 s to 4.2 s after the first read
    assert [iv["t_s"] for iv in part["intervals"]] == [1.0, 2.0, 3.0]     # the reads at 3, 4, 5, from 2
    assert part["t0_unix"] == 1002.0 and part["window"] == {"asked_unix": [1002.5, 1004.2],
                                                            "asked_s": [0.5, 2.2], "read_s": [0.0, 3.0]}
    assert part["switches"] == doc["switches"] and part["schedule"] == doc["schedule"]
    assert [iv["t_s"] for iv in window(doc, 1000.0, 1001.0)["intervals"]] == [1.0, 2.0]
    # a window past the last read keeps what there is; one before the first read or with none in it fails
    assert [iv["t_s"] for iv in window(doc, 1005.5, 1009.0)["intervals"]] == [1.0]
    for a, b in ((1006.5, 1008.0), (1003.0, 1002.0)):
        with pytest.raises(ValueError, match="no read"):
            window(doc, a, b)
    with pytest.raises(ValueError, match="t0_unix"):
        window(dict(doc, t0_unix=None), 1002.5, 1004.2)


def test_an_fct_run_reads_each_modes_measured_activity_and_reconstructs_the_rest(tmp_path):
    from fuzz_cli import energy_fct_doc, energy_flows_doc
    from p4rotor.control.activity_recorder import window
    from p4rotor.experiments.fct.activity import cut_activity

    run = tmp_path / "run"
    (run / "run").mkdir(parents=True)
    fct = dict(energy_fct_doc(), dilation=1.0, access_mbps=10.0)
    (run / "fct.json").write_text(json.dumps(fct))
    (run / "flows.json").write_text(json.dumps(energy_flows_doc()))
    doc = _timed(json.loads(record(tmp_path, [{}, {}]).read_text()), 1000.0, [1.0, 2.0, 3.0, 4.0])
    whole = run / "run" / "activity.json"
    whole.write_text(json.dumps(doc))
    # opera ran 0.5-1.5 s after the first read; rotornet after the last read: not covered
    assert cut_activity(whole, run, {"opera": (1000.5, 1001.5), "rotornet": (1010.0, 1011.0)}) == {
        "opera": "activity-opera.json"}
    assert json.loads((run / "activity-opera.json").read_text()) == window(doc, 1000.5, 1001.5)
    rows = evaluate([run], M.load())
    assert [(r["mode"], r["activity"]) for r in rows] == [("opera", "measured"), ("rotornet", "reconstructed")]
    act = MS.from_run(run, "opera")
    assert sum(b[1] for p in act.ports.values() for b in p.bins.values()) == pytest.approx(200)   # 2 reads' bytes
    assert act.rate_bps["host-link"] == 10e6 and act.notes["rate"] == "fct.json: access_mbps"
    assert act.notes["window"]["read_s"] == [0.0, 2.0]
    assert [r["activity"] for r in evaluate([run], M.load(), reconstructed=True)] == ["reconstructed"] * 2
    (run / "activity-opera.json").write_text(json.dumps({"version": 9}))
    _, err = check(["energy", str(run)], refused=True)
    assert "activity-opera.json: version 9" in err


def test_recorder_appends_in_place_and_the_file_is_whole_after_each_read(tmp_path):
    """Each read appends one interval over the closing brackets: after every one the file is the
    whole document (header once, every interval in order), and its size grows by the interval only."""
    from p4rotor.control.activity_recorder import load

    s, topo, views = fabric()
    path = tmp_path / "activity.json"
    rec = ActivityRecorder(None, path, views)
    rec.write()
    sizes = []
    for i in range(50):
        rec.interval({"r": {"tx": {f"1:{i % 3}": [i, 100 * i]}}}, 0.2 * (i + 1))
        doc = json.loads(path.read_text())
        assert [iv["t_s"] for iv in doc["intervals"]] == [round(0.2 * (j + 1), 6) for j in range(i + 1)]
        sizes.append(path.stat().st_size)
    assert doc["switches"] == {n: v.doc() for n, v in views.items()} and doc["version"] == 2
    assert max(b - a for a, b in zip(sizes, sizes[1:])) < 100  # one interval's bytes, not the file again
    # a reader that catches an append halfway reads again; a file that stays torn is an error
    whole = path.read_text()
    path.write_text(whole[:-10])
    with pytest.raises(ValueError):
        load(path, tries=2)
    path.write_text(whole)
    assert load(path) == doc
