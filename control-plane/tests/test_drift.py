"""Clock drift (a fault plan's ``clock-drift``): a rate error the controller emulates by
rewriting the switch's slot-config offset every period with what the drift has gained
(control/skew.py ``ClockDrift``), validated like the other kinds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from finsy.proto import p4r

from p4rotor import control as C
from p4rotor.control import fault_plan as FP
from p4rotor.control.status import read_status
from p4rotor.schedule import topology as TP
from fake_p4rt import FakeSwitch
from test_resync import P4INFO, SCHEMA, blob, configs, events, make_ctl, signed48, topo_file  # noqa: F401
from p4rotor import p4 as dp


def test_drift_gains_at_its_rate_and_keeps_what_it_gained():
    d = [C.ClockDrift("tor0", 50, 1_000_000, 3_000_000), C.ClockDrift("tor0", -10, 2_000_000)]
    assert [C.drift_at(d, "tor0", t) for t in (0, 1_000_000, 2_000_000, 3_000_000, 5_000_000)] == \
        [0, 0, 50, 100 - 10, 100 - 30]
    assert C.drift_at(d, "tor1", 5_000_000) == 0
    import itertools
    assert list(itertools.islice(C.drift_changes([C.ClockDrift("tor0", 5, 0, 250_000)], "tor0"), 9)) == \
        [0, 100_000, 200_000, 250_000]
    open_ended = C.drift_changes([C.ClockDrift("tor0", 5, 0), C.ClockDrift("tor0", 1, 50_000, period_us=50_000)], "tor0")
    assert list(itertools.islice(open_ended, 5)) == [0, 50_000, 100_000, 150_000, 200_000]
    with pytest.raises(C.ControllerError, match="bad window"):
        C.ClockDrift("tor0", 5, 100, 100)


@pytest.mark.parametrize("fault,msg", [
    ({"ppm": 0}, "ppm must be a non-zero number"),
    ({"ppm": 2e5}, "ppm must be a non-zero number"),
    ({"ppm": "50"}, "ppm must be a non-zero number"),
    ({"ppm": True}, "ppm must be a non-zero number"),
    ({"ppm": 5, "offset_us": 3}, "unexpected field(s) offset_us"),
    ({"ppm": 5, "switch": "nope"}, "'nope' is not in the topology"),
    ({"ppm": 5, "end_us": 10}, "must be after start_us"),
])
def test_bad_drift_is_one_line(topo_file, fault, msg):
    topo = TP.load(topo_file)
    f = dict({"kind": "clock-drift", "start_us": 100, "switch": "tor1"}, **fault)
    with pytest.raises(FP.FaultPlanError) as ex:
        FP.from_json({"version": 1, "faults": [f]}, topo)
    assert msg in str(ex.value) and "\n" not in str(ex.value)


def test_drift_parses(topo_file):
    plan = FP.from_json({"version": 1, "faults": [{"kind": "clock-drift", "start_us": 0, "switch": "tor1",
                                                   "ppm": -20.5}]}, TP.load(topo_file))
    assert plan.faults[0].ppm == -20.5 and plan.to_json()["faults"][0]["ppm"] == -20.5


def test_cli_bad_drift_exits_2_with_nothing_started(tmp_path, topo_file):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"version": 1, "faults": [{"kind": "clock-drift", "start_us": 0, "switch": "tor1",
                                                        "ppm": 0}]}))
    status = tmp_path / "status.json"
    r = subprocess.run([sys.executable, "-m", "p4rotor.cli", "control", "--topology", str(topo_file), "--mode", "clock",
                        "--faults", str(p), "--build-dir", str(tmp_path / "build"), "--status-file", str(status)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "ppm" in r.stderr, r.stderr
    assert not status.exists()


def test_drift_rewrites_the_offset_every_period_and_keeps_it_after_its_end(blob, tmp_path):
    trace, status = tmp_path / "trace.jsonl", tmp_path / "status.json"
    drift = C.ClockDrift("rotor0", 50_000, 100_000, 400_000, period_us=50_000)  # 2.5 ms gained per period

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, faults=C.InjectedFaults(drifts=[drift]), trace=trace, status_file=status)
        try:
            await ctl.run(duration=0.7)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = asyncio.run(main())
    o = ctl.runtimes["rotor0"].offset.offset_us
    offs = [signed48(c["offset"]) - o for c in configs(fake)]
    # Each rewrite carries what the drift gained by the time it was applied (the schedule time it
    # ran at, a few ms after its period's on a loaded machine), and what it gained stays.
    assert offs[0] == 0 and offs[-1] == 15000 and offs == sorted(offs) and len(offs) >= 7, offs
    ev = events(trace, "clock-skew")
    assert all(e["injected_skew_us"] == C.drift_at([drift], "rotor0", e["at_us"]) for e in ev)
    assert [e["injected_skew_us"] for e in ev] == offs[1:]
    gens = [c["gen"] for c in configs(fake)]
    assert gens == list(range(gens[0], gens[0] + len(gens))), "a new generation each, never a clear"
    assert all(u.type == p4r.Update.MODIFY for u in fake.updates_for(dp.T_CONFIG)[1:])
    assert read_status(status)["switches"]["rotor0"]["injected_skew_us"] == 15000


def test_the_drift_plan_validates_against_the_faults_experiments_topology():
    from p4rotor import schedule as S
    from p4rotor.experiments.faults import default_plan_path

    topo = TP.generate(S.dilate(S.generate_opera(8, 4, 1000, 100), 100), "schedule.json", hosts_per_rack=1)
    [d] = FP.load(default_plan_path().parent / "drift.json", topo).faults
    assert (d.kind, d.switch, d.ppm) == ("clock-drift", "tor2", 2000.0)
