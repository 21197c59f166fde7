"""The live CorrOpt monitor (issue #17, [Zhuo19 §3.4]): per-link loss estimated from the rotors'
counters, decisions made once, the masked schedule written as diffs (ToRs first, no clear), and
the whole loop against in-process fake P4Runtime switches of an 8-rack Opera fabric."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import finsy as fy
import pytest

from fake_p4rt import FakeSwitch, wait_for
from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.control.loss_monitor import LossMonitor
from p4rotor.schedule import topology as TP
from p4rotor.control.fabric_roles import fabric_roles
from p4rotor.control import fast_checker as M
from p4rotor.schedule import routes as R

DATA = Path(__file__).parent / "data"
ROTOR_SCHEMA = fy.P4Schema(DATA / "rotor.p4info.txtpb")
TOR_SCHEMA = fy.P4Schema(DATA / "tor.p4info.txtpb")
OPERA = S.generate_opera(8, 4, 1000, 100)
TOPO = TP.generate(OPERA, "schedule.json", hosts_per_rack=1)
PORTS = {r.name: r.ports for r in TOPO.rotors}


def port_of(rotor: str, rack: int) -> int:
    return PORTS[rotor][rack]


# ------------------------------------------------------------------ estimates (pure)

def test_a_direction_is_estimated_once_min_frames_crossed_it():
    mon = LossMonitor(OPERA, PORTS, 0.02, min_frames=1000)
    p = port_of("rotor1", 5)
    assert mon.observe("rotor1", "in", {p: (600, 0)}) == []      # 600 frames: not yet
    [e] = mon.observe("rotor1", "in", {p: (1500, 100)})            # 1000 more: 900 + 100 lost
    assert (e.rack, e.direction, e.frames, e.lost) == (5, "in", 1600, 100)   # the window: both readings
    assert e.rate == pytest.approx(100 / 1600)
    assert mon.rates() == {("rotor1", 5): pytest.approx(100 / 1600)}
    [e] = mon.observe("rotor1", "in", {p: (2400, 200)})            # a new window: 900 + 100 lost
    assert (e.frames, e.rate) == (1000, pytest.approx(0.1))


def test_the_link_rate_is_its_worse_direction_and_other_ports_are_ignored():
    mon = LossMonitor(OPERA, PORTS, 0.02, min_frames=10)
    p = port_of("rotor0", 2)
    mon.observe("rotor0", "in", {p: (99, 1), 254: (1000, 1000)})  # 254: the clock port, no rack
    mon.observe("rotor0", "out", {p: (80, 20)})
    assert mon.rates() == {("rotor0", 2): pytest.approx(0.2)}


def test_a_restarted_switch_counts_from_zero_again():
    mon = LossMonitor(OPERA, PORTS, 0.02, min_frames=100)
    p = port_of("rotor2", 1)
    mon.observe("rotor2", "out", {p: (5000, 0)})                  # first reading: 5000 frames, 0 lost
    mon.observe("rotor2", "out", {p: (50, 50)})                   # restarted: 100 new frames, half lost
    assert mon.estimates[("rotor2", 1, "out")].rate == pytest.approx(0.5)


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(M.MonitorError, match="threshold"):
        LossMonitor(OPERA, PORTS, 1.5)
    with pytest.raises(M.MonitorError, match="min_frames"):
        LossMonitor(OPERA, PORTS, 0.1, min_frames=0)


# ------------------------------------------------------------------ decisions (pure)

_TOTALS: dict = {}


def feed(mon: LossMonitor, rotor: str, rack: int, rate: float, n: int = 1000) -> None:
    """n more frames into the link, a share ``rate`` lost: the counters' totals grow."""
    lost = round(rate * n)
    c, l = _TOTALS.get((id(mon), rotor, rack), (0, 0))
    _TOTALS[(id(mon), rotor, rack)] = c, l = c + n - lost, l + lost
    mon.observe(rotor, "in", {port_of(rotor, rack): (c, l)})


def test_decisions_are_made_once_and_build_on_the_links_already_off():
    mon = LossMonitor(OPERA, PORTS, 0.02, min_frames=1000)
    feed(mon, "rotor0", 3, 0.001)                                  # below the threshold
    assert mon.decide() == []
    feed(mon, "rotor0", 3, 0.1)
    [d] = mon.decide()
    assert (d.action, d.link) == ("disable", ("rotor0", 3)) and mon.disabled == [("rotor0", 3)]
    feed(mon, "rotor0", 3, 0.1)
    assert mon.decide() == [], "a decided link is not decided again"
    # Rack 3 on the three other rotors too: the monitor decides them with rotor0's link already
    # off, exactly as the offline checker decides all four at once in rate order.
    for k, rate in ((1, 0.09), (2, 0.08), (3, 0.07)):
        feed(mon, f"rotor{k}", 3, rate)
    live = mon.decide()
    offline = M.decide(OPERA, {(f"rotor{k}", 3): 0.1 - k / 100 for k in range(4)}, 0.02)
    assert [(d.link, d.action) for d in [mon.decisions[0]] + live] == [(d.link, d.action) for d in offline]
    assert any(d.action == "keep" for d in live), "rack 3 cannot lose every rotor"
    assert all(S.analyse(mon.masked()).connected)


def test_decide_with_links_already_disabled_equals_deciding_together():
    rates = {("rotor0", 1): 0.3, ("rotor2", 6): 0.2, ("rotor1", 1): 0.1, ("rotor3", 1): 0.05}
    together = M.decide(OPERA, rates, 0.01)
    first = together[0]
    rest = M.decide(OPERA, {k: v for k, v in rates.items() if k != first.link}, 0.01, disabled=[first.link])
    assert [(d.link, d.action) for d in together[1:]] == [(d.link, d.action) for d in rest]


# ------------------------------------------------------------------ diffs (pure)

def as_held(schema, ents):
    """What a switch holding ``ents`` answers to a read: canonical (key -> value)."""
    from p4rotor.control.entities import _canonical

    return dict(_canonical(e, schema) for e in ents if isinstance(e, fy.P4TableEntry))


def kind(u, schema) -> str:
    from finsy.proto import p4r

    return {p4r.Update.INSERT: "insert", p4r.Update.MODIFY: "modify",
            p4r.Update.DELETE: "delete"}[u.encode_update(schema).type]


def apply(schema, held: dict, ups) -> dict:
    from p4rotor.control.entities import _canonical

    held = dict(held)
    for u in ups:
        k, v = _canonical(u, schema)
        t = kind(u, schema)
        if t == "delete":
            assert k in held, "deletes only what is held"
            del held[k]
        elif t == "insert":
            assert k not in held, "inserts only what is new"
            held[k] = v
        else:
            assert k in held or k[1], "modifies only what is held"
            held[k] = v
    return held


def roles_for(sched):
    topo = dataclasses.replace(TOPO, schedule=sched)
    return {r.spec.name: r for r in fabric_roles(topo, Path("build"))}


def test_the_diff_turns_every_switch_into_the_masked_one_and_touches_nothing_else():
    masked = M.masked_schedule(OPERA, [("rotor1", 5)])
    old, new = roles_for(OPERA), roles_for(masked)
    args = (dp.MODE_CLOCK, -7, 1234, 9, C.BMV2)
    for name in old:
        schema = ROTOR_SCHEMA if old[name].kind == "rotor" else TOR_SCHEMA
        o, n = old[name].entities(*args), new[name].entities(*args)
        ups = C.diff_entities(schema, o, n)
        assert apply(schema, as_held(schema, o), ups) == as_held(schema, n)
        tables = {schema.tables[u.table_id].name for u in ups}
        if name == "rotor1":
            # Only rack 5's circuits and their peers', all deleted.
            assert tables == {dp.T_CIRCUIT} and ups
            assert all(kind(u, schema) == "delete" for u in ups)
            p5 = port_of("rotor1", 5)
            for u in ups:
                m = u.match_dict(schema)
                out = int(dict(u.action.args)["port"])
                assert int(m["in_port"], 0) == p5 or out == p5
        elif old[name].kind == "rotor":
            assert ups == [], f"{name} has no circuit of the masked link"
        else:
            assert tables <= {dp.T_ROUTE}, f"{name}: {tables}"
    # Some ToR's routes changed: rack 5's and its peers' at least.
    assert C.diff_entities(TOR_SCHEMA, old["tor5"].entities(*args), new["tor5"].entities(*args))


def test_no_route_uses_a_masked_circuit():
    masked = M.masked_schedule(OPERA, [("rotor1", 5)])
    for sr in R.compute(masked):
        for (src, dst, tclass), hop in sr.hops.items():
            assert not (hop.rotor == 1 and 5 in (src, hop.next_rack)), (sr.index, src, dst, tclass, hop)


# ------------------------------------------------------------------ the running controller

@pytest.fixture
def build(tmp_path):
    """A build directory as the controller reads it: the committed P4Infos, a stand-in pipeline
    (the fake server takes any)."""
    d = tmp_path / "build"
    d.mkdir()
    for prog in ("rotor", "tor"):
        (d / f"{prog}.p4info.txtpb").write_text((DATA / f"{prog}.p4info.txtpb").read_text())
        (d / f"{prog}.json").write_text("{}")
    return d


def test_the_running_monitor_turns_off_a_lossy_link_by_diffs(build, tmp_path):
    """12 fake switches (4 rotors, 8 ToRs): rotor1's port of rack 5 loses 10% of 2000 frames;
    the monitor disables that link and writes the masked schedule as diffs: the fakes then hold
    exactly what a controller of the masked schedule would install, with no delete-all."""
    status = tmp_path / "status.json"
    trace = tmp_path / "trace.jsonl"
    events: list[str] = []

    async def main():
        fakes = {}
        topo = TOPO
        for r in topo.rotors:
            fakes[r.name] = await FakeSwitch(DATA / "rotor.p4info.txtpb").start()
        for k in topo.racks:
            fakes[k.tor.name] = await FakeSwitch(DATA / "tor.p4info.txtpb").start()
        topo = dataclasses.replace(
            topo, rotors=[dataclasses.replace(r, grpc_port=fakes[r.name].port) for r in topo.rotors],
            racks=[dataclasses.replace(k, tor=dataclasses.replace(k.tor, grpc_port=fakes[k.tor.name].port))
                   for k in topo.racks])

        def replan(s):
            return fabric_roles(dataclasses.replace(topo, schedule=s), build)

        roles = fabric_roles(topo, build)
        mon = LossMonitor(topo.schedule, PORTS, 0.02, min_frames=1000)
        ctl = C.Controller(roles, mode="clock", lead_s=0.2, corropt=C.CorrOptOptions(mon, replan, every=0.1),
                           status_file=status, trace=trace, on_event=events.append)
        p5 = port_of("rotor1", 5)
        fakes["rotor1"].counters = {dp.C_LINK_IN: {p5: 1800}, dp.C_LINK_IN_LOSS: {p5: 200},
                                    dp.C_LINK_OUT: {p5: 2000}, dp.C_LINK_OUT_LOSS: {p5: 0}}
        for name in ("rotor0", "rotor2"):
            p = port_of(name, 5)
            fakes[name].counters = {dp.C_LINK_IN: {p: 2000}, dp.C_LINK_OUT: {p: 1990}, dp.C_LINK_OUT_LOSS: {p: 10}}
        async def until_applied(ctl):
            # The run lasts until the monitor's masked schedule is written (a fixed duration raced
            # it on a loaded machine: the run ended between the ToRs' writes and the rotors').
            deadline = time.monotonic() + 60
            while not any("applied_ns" in d for d in ctl.status.data.get("corropt", {}).get("decisions", [])):
                assert time.monotonic() < deadline, "the monitor never applied a decision in 60 s"
                await asyncio.sleep(0.05)

        try:
            await ctl.run(duration=0.5, after_ready=until_applied)
        finally:
            for f in fakes.values():
                await f.stop()
        return fakes, ctl, replan

    fakes, ctl, replan = asyncio.run(main())
    mon = ctl.loss_monitor
    assert mon.disabled == [("rotor1", 5)]
    assert [d.action for d in mon.decisions] == ["disable"], "rotor0/2's 0.5% stay below the threshold"
    masked = replan(M.masked_schedule(OPERA, [("rotor1", 5)]))
    for role in masked:
        fake = fakes[role.spec.name]
        schema = ROTOR_SCHEMA if role.kind == "rotor" else TOR_SCHEMA
        rt = ctl.runtimes[role.spec.name]
        want = role.entities(dp.MODE_CLOCK, 0, 0, rt.generation, C.BMV2)
        have = [fy.P4TableEntry.decode_entry(e, schema) for e in fake.tables.values()]
        cmp = C.compare_installed(schema, want, have)
        assert cmp.same, f"{role.spec.name}: {cmp.reason}"
        assert rt.clears == 1, "installed once, never cleared again"
    st = json.loads(status.read_text())["corropt"]
    [dec] = st["decisions"]
    assert (dec["rotor"], dec["rack"], dec["port"], dec["action"]) == ("rotor1", 5, port_of("rotor1", 5), "disable")
    assert dec["rate"] == pytest.approx(0.1) and dec["writes"] > 0 and dec["applied_ns"] >= dec["t_ns"]
    assert "every slice keeps its connectivity" in dec["reason"]
    assert st["disabled"] == ["rotor1:5"] and st["rates"]["rotor1:5"]["in"][0] == pytest.approx(0.1)
    recs = [json.loads(x) for x in trace.read_text().splitlines()]
    assert [r["rotor"] for r in recs if r.get("event") == "corropt"] == ["rotor1"]
    assert any("CorrOpt monitor: disable rotor1 rack 5" in e for e in events)


# ------------------------------------------------------------------ the CLI

@pytest.mark.parametrize("args,msg", [
    (["--corropt-threshold", "1.5"], "must be a loss rate in (0, 1), got '1.5'"),
    (["--corropt-threshold", "nan"], "must be a loss rate in (0, 1)"),
    (["--corropt-threshold", "abc"], "must be a loss rate in (0, 1), got 'abc'"),
    (["--corropt-threshold", "0.1", "--corropt-every", "0"], "--corropt-every must be > 0"),
    (["--corropt-threshold", "0.1", "--corropt-min-frames", "0"], "--corropt-min-frames must be >= 1"),
    (["SCHEDULE", "--corropt-threshold", "0.1"], "needs --topology"),
])
def test_cli_bad_monitor_flags_exit_2_in_one_line_with_nothing_started(tmp_path, args, msg):
    import subprocess
    import sys

    (tmp_path / "schedule.json").write_text(OPERA.dumps())
    (tmp_path / "t.json").write_text(TOPO.dumps())
    status = tmp_path / "status.json"
    where = (["--schedule", str(tmp_path / "schedule.json"), "--switch", "rotor0=127.0.0.1:1"]
             if args[0] == "SCHEDULE" else ["--topology", str(tmp_path / "t.json")])
    r = subprocess.run([sys.executable, "-m", "p4rotor.cli", "control", *where, "--mode", "clock",
                        *[a for a in args if a != "SCHEDULE"], "--build-dir", str(tmp_path / "build"),
                        "--status-file", str(status)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not status.exists()


def test_experiment_faults_refuses_a_bad_threshold_before_starting(tmp_path):
    from p4rotor.experiments.faults import faults
    from p4rotor.control.fault_plan import FaultPlanError

    with pytest.raises(FaultPlanError, match="--corropt-threshold 1.5"):
        faults(tmp_path / "build", tmp_path / "out", corropt_threshold=1.5)
    assert not (tmp_path / "out").exists()
