"""Clock skew and the periodic re-sync (issue #17) against the in-process fake P4Runtime server.

The fake switch answers time probes with its own clock (``boot_us``): a test makes that clock
jump by moving ``boot_us``, and the controller's probes see it as they would a real switch's.
An injected skew (a fault plan's ``clock-skew``) is the controller's: it rewrites the slot
config with offset + skew and sees the jumped clock in its own probes (control/skew.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import sys
from pathlib import Path

import finsy as fy
import pytest
from finsy.proto import p4r

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.control.status import read_status
from p4rotor.schedule import topology as TP
from fake_p4rt import FakeSwitch, wait_for

DATA = Path(__file__).parent / "data"
P4INFO = DATA / "rotor.p4info.txtpb"
SCHEMA = fy.P4Schema(P4INFO)
T = C.TOFINO
MASK32 = (1 << 32) - 1


@pytest.fixture
def blob(tmp_path):
    p = tmp_path / "rotor.json"
    p.write_text("{}")  # the fake server takes any pipeline
    return p


def make_ctl(fake, blob, **kw):
    s = S.generate_rotornet(4, 1, 20_000, 2_000)  # 20 ms slots, 3 matchings: a 60 ms cycle
    kw.setdefault("on_event", lambda m: None)
    return C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode="clock",
                             p4info=P4INFO, p4blob=blob, lead_s=0.2, **kw)


def configs(fake) -> list[dict]:
    """Every slot config written, in order, as its action's arguments (not the clear's reset)."""
    ents = [fy.P4TableEntry.decode(u.entity, SCHEMA) for u in fake.updates_for(dp.T_CONFIG)]
    return [e.action.args for e in ents if e.action is not None]


def signed48(v: int) -> int:
    return v - (1 << 48) if v >> 47 else v


def events(trace: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, trace.read_text().splitlines()) if r.get("event") == kind]


# ------------------------------------------------------------------ pure parts

def test_skew_at_and_changes():
    sk = [C.ClockSkew("tor0", 200, 1000, 3000), C.ClockSkew("tor0", -50, 2000), C.ClockSkew("rotor0", 7, 0)]
    assert [C.skew_at(sk, "tor0", t) for t in (0, 999, 1000, 1999, 2000, 2999, 3000, 10**9)] == \
        [0, 0, 200, 200, 150, 150, -50, -50]
    assert C.skew_at(sk, "rotor0", 0) == 7 and C.skew_at(sk, "tor1", 5000) == 0
    assert C.skew_changes(sk, "tor0") == [1000, 2000, 3000]
    with pytest.raises(C.ControllerError, match="bad window"):
        C.ClockSkew("tor0", 5, 100, 100)


def test_resync_check_rewrites_only_above_the_bound_and_the_uncertainty():
    def est(off, rtt=100.0):
        return C.OffsetEstimate(offset_us=off, rtt_us=rtt, probes=16)

    c = C.ResyncCheck(1000, est(700), 100)
    assert c.error_us == 300 and c.rewrite            # installed 300 us ahead of the fresh estimate
    assert C.ResyncCheck(1000, est(1300), 100).error_us == -300
    assert not C.ResyncCheck(1000, est(950), 100).rewrite              # within the bound
    assert not C.ResyncCheck(1000, est(700, rtt=1000), 100).rewrite    # within the estimate's +/- 500
    assert not C.ResyncCheck(1000, est(900), 100).rewrite              # exactly the bound: kept


def test_tofino_rewrite_starts_the_cycle_running_now():
    """TNA's cycle register: an install starts it at cycle 0's end; a rewrite mid-run (now_us) at
    the end of the cycle running then, epoch-aligned, so nothing has to catch up."""
    from p4rotor.control.target import clock_start_entities

    cfg = C.slot_config_entry(dp.MODE_CLOCK, 3, 60_000, 2_000, offset_us=-5_000, epoch_us=1_000_000,
                              generation=6, target=T)
    a = cfg.action.args
    base = a["epoch_us"] - a["offset"]

    def cell(now_us=None):
        (r,) = clock_start_entities(T, [cfg], now_us=now_us)
        assert r.index == 0  # generation 6: cell 0
        return r.data

    assert cell() == (base + a["cycle"]) & MASK32
    assert cell(999_000) == (base + a["cycle"]) & MASK32            # before the epoch: cycle 0
    now = 1_000_000 + 2.5 * 60_000                                    # half way through cycle 2
    assert cell(now) == (base + 3 * a["cycle"]) & MASK32
    assert clock_start_entities(C.BMV2, [cfg], now_us=now) == []     # v1model restarts its clock itself


# ------------------------------------------------------------------ checked before anything starts

@pytest.mark.parametrize("kw,msg", [
    (dict(resync=C.ResyncOptions(every=-1)), "bad re-sync period"),
    (dict(resync=C.ResyncOptions(every=float("nan"))), "bad re-sync period"),
    (dict(resync=C.ResyncOptions(every=1, bound_us=0)), "bad re-sync bound"),
    (dict(mode="signal", resync=C.ResyncOptions(every=1)), "clock-mode option"),
    (dict(mode="signal", faults=C.InjectedFaults(skews=[C.ClockSkew("rotor0", 100, 0)])), "clock mode only"),
    (dict(faults=C.InjectedFaults(skews=[C.ClockSkew("rotor9", 100, 0)])), "not a switch this controller drives"),
])
def test_bad_values_refused_before_anything_starts(blob, tmp_path, kw, msg):
    status = tmp_path / "status.json"
    kw.setdefault("mode", "clock")
    with pytest.raises(C.ControllerError, match=msg):
        C.RotorController(S.generate_rotornet(4, 1, 20_000, 2_000), [C.SwitchSpec("rotor0", "127.0.0.1", 1)],
                          p4info=P4INFO, p4blob=blob, status_file=status, **kw)
    assert not status.exists(), "nothing written"


# ------------------------------------------------------------------ against the fake

def test_injected_skew_rewrites_the_config_alone_at_its_time_and_restores_it(blob, tmp_path):
    trace, status = tmp_path / "trace.jsonl", tmp_path / "status.json"
    mid: dict = {}

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, faults=C.InjectedFaults(skews=[C.ClockSkew("rotor0", 5_000, 200_000, 500_000)]), trace=trace,
                       status_file=status)

        async def after_ready(c):
            mid["writes"] = len(fake.writes)
            await wait_for(lambda: read_status(status)["switches"]["rotor0"]["injected_skew_us"], timeout=3)
            mid["status"] = read_status(status)["switches"]["rotor0"]

        try:
            await ctl.run(duration=0.8, after_ready=after_ready)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = asyncio.run(main())
    rt = ctl.runtimes["rotor0"]
    o = rt.offset.offset_us
    assert fake.pipelines == 1
    after = fake.writes[mid["writes"]:]
    # No clear, nothing else rewritten: two MODIFYs of the slot config's default action.
    assert all(u.type == p4r.Update.MODIFY and u.entity.table_entry.table_id == SCHEMA.tables[dp.T_CONFIG].id
               for u in after) and len(after) == 2
    install, on, off = configs(fake)
    assert [signed48(c["offset"]) for c in (install, on, off)] == [o, o + 5_000, o]
    assert install["epoch_us"] == on["epoch_us"] == off["epoch_us"], "same epoch: the slot goes on"
    assert [on["gen"], off["gen"]] == [install["gen"] + 1, install["gen"] + 2]
    assert mid["status"]["injected_skew_us"] == 5_000 and mid["status"]["config_offset_us"] == o + 5_000
    assert mid["status"]["offset_us"] == o
    assert rt.injected_skew_us == 0 and rt.config_offset_us == o
    # At their schedule times (from slot 0), not before; within 100 ms on a loaded machine.
    ev = events(trace, "clock-skew")
    assert [(e["at_us"] >= t, e["injected_skew_us"]) for e, t in zip(ev, (200_000, 500_000))] == \
        [(True, 5_000), (True, 0)]
    for e, t in zip(ev, (200_000, 500_000)):
        assert 0 <= e["t_ns"] - ctl.tb.wall_ns(ctl.t0_common_us + t) < 100e6
    assert read_status(status)["switches"]["rotor0"]["injected_skew_us"] == 0


def test_resync_rewrites_a_clock_that_jumped_past_the_bound(blob, tmp_path):
    trace, status = tmp_path / "trace.jsonl", tmp_path / "status.json"
    first: dict = {}
    said: list[str] = []

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, resync=C.ResyncOptions(every=0.15, bound_us=10_000), trace=trace, status_file=status,
                       on_event=said.append)

        async def after_ready(c):
            first["offset"] = c.runtimes["rotor0"].offset.offset_us
            first["writes"] = len(fake.writes)
            fake.boot_us += 100_000  # the switch's clock jumps 100 ms ahead

        try:
            await ctl.run(duration=0.9, after_ready=after_ready)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = asyncio.run(main())
    rt = ctl.runtimes["rotor0"]
    o = first["offset"]
    assert rt.resyncs == 1
    after = fake.writes[first["writes"]:]
    assert len(after) == 1 and after[0].type == p4r.Update.MODIFY
    install, fixed = configs(fake)
    assert abs(signed48(fixed["offset"]) - (o - 100_000)) < 10_000
    assert fixed["epoch_us"] == install["epoch_us"] and fixed["gen"] == install["gen"] + 1
    assert rt.offset.offset_us == rt.config_offset_us == signed48(fixed["offset"])
    checks = events(trace, "resync")
    assert len(checks) >= 3 and [c["rewritten"] for c in checks].count(True) == 1
    hit = next(c for c in checks if c["rewritten"])
    assert abs(hit["error_us"] - 100_000) < 10_000 and hit["bound_us"] == 10_000 and hit["offset_us"] == o
    assert all(abs(c["error_us"]) < 10_000 for c in checks[checks.index(hit) + 1:])
    sw = read_status(status)["switches"]["rotor0"]
    assert sw["resyncs"] == 1 and abs(sw["last_resync_error_us"]) < 10_000 and sw["last_resync_check_ns"] > 0
    assert sum("re-sync:" in m for m in said) == 1, "one event line per rewrite"


def test_resync_leaves_an_offset_within_the_bound(blob, tmp_path):
    trace = tmp_path / "trace.jsonl"

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, resync=C.ResyncOptions(every=0.1, bound_us=10_000), trace=trace)
        try:
            await ctl.run(duration=0.6)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = asyncio.run(main())
    checks = events(trace, "resync")
    assert len(checks) >= 3 and not any(c["rewritten"] for c in checks)
    assert ctl.runtimes["rotor0"].resyncs == 0 and len(configs(fake)) == 1
    assert ctl.trace.records == sum(1 for r in map(json.loads, trace.read_text().splitlines()) if "slot" in r), \
        "clock events are not counted as slot changes"


def test_resync_corrects_an_injected_skew_and_the_jump_back(blob, tmp_path):
    """The injected skew is a jumped clock to the re-sync too: it finds the error and rewrites the
    raw offset; when the fault ends the clock jumps back and the corrected offset is off the
    other way, until the next check."""
    trace = tmp_path / "trace.jsonl"

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, faults=C.InjectedFaults(skews=[C.ClockSkew("rotor0", 50_000, 150_000, 600_000)]),
                       resync=C.ResyncOptions(every=0.2, bound_us=10_000), trace=trace)
        try:
            await ctl.run(duration=1.2)
        finally:
            await fake.stop()
        return fake, ctl

    fake, ctl = asyncio.run(main())
    rt = ctl.runtimes["rotor0"]
    install = configs(fake)[0]
    o = signed48(install["offset"])
    fixes = [c for c in events(trace, "resync") if c["rewritten"]]
    assert rt.resyncs == 2 and [round(c["error_us"], -4) for c in fixes] == [50_000, -50_000]
    offsets = [signed48(c["offset"]) - o for c in configs(fake)]
    # install, skew on (+50 ms), re-sync (back to ~0), skew over (-50 ms), re-sync (~0)
    assert [round(x, -4) for x in offsets] == [0, 50_000, 0, -50_000, 0]
    assert rt.injected_skew_us == 0 and abs(rt.config_offset_us - o) < 10_000
    assert len({c["epoch_us"] for c in configs(fake)}) == 1


def test_tofino_skew_starts_the_new_generations_cycle_register(tmp_path):
    """On TNA each rewrite writes the new generation's cycle cell (the end of the cycle running
    now) before the config that uses it."""
    from test_target import tofino_p4info

    out = tmp_path / "build" / "tofino" / "rotor"
    (out / "pipe").mkdir(parents=True)
    (out / "pipe" / "tofino.bin").write_bytes(b"\x00")
    (out / "pipe" / "context.json").write_text('{"program_name": "rotor"}')
    p4info = tofino_p4info(tmp_path)
    schema = fy.P4Schema(p4info)

    async def main():
        fake = await FakeSwitch(p4info, boot_us=5_000_000_000, tick_ns=1).start()
        ctl = C.RotorController(S.generate_rotornet(4, 1, 20_000, 2_000),
                                [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode="clock", target=T,
                                p4info=p4info, p4blob=out, lead_s=0.2, on_event=lambda m: None,
                                faults=C.InjectedFaults(skews=[C.ClockSkew("rotor0", 3_000, 200_000)]))
        try:
            await ctl.run(duration=0.6)
        finally:
            await fake.stop()
        return fake

    fake = asyncio.run(main())
    writes = [u for k, u in fake.log if k == "write"]
    kinds = [(u.entity.WhichOneof("entity"), u.entity.table_entry.table_id == schema.tables[dp.T_CONFIG].id)
             for u in writes]
    assert kinds[-2:] == [("register_entry", False), ("table_entry", True)]
    reg = fy.P4RegisterEntry.decode(writes[-2].entity, schema)
    a = fy.P4TableEntry.decode(writes[-1].entity, schema).action.args
    assert reg.index == a["gen"] & 1
    cycles, rem = divmod((reg.data - (a["epoch_us"] - a["offset"])) & MASK32, a["cycle"])
    assert rem == 0 and cycles >= 3, "the cycle running at t0 + 200 ms (60 ms cycles), not cycle 0"


# ------------------------------------------------------------------ the CLI

@pytest.fixture
def topo_file(tmp_path):
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    (tmp_path / "s.json").write_text(s.dumps())
    t = TP.generate(s, "s.json", hosts_per_rack=1)
    (tmp_path / "t.json").write_text(t.dumps())
    return tmp_path / "t.json"


def plan(tmp_path, *faults) -> str:
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"version": 1, "faults": list(faults)}))
    return str(p)


SKEW = {"kind": "clock-skew", "start_us": 100_000, "switch": "tor1", "offset_us": 200}


@pytest.mark.parametrize("args,msg", [
    (["--resync-every", "-1"], "bad re-sync period"),
    (["--resync-every", "1", "--resync-bound-us", "0"], "bad re-sync bound"),
    (["--mode", "signal", "--resync-every", "1"], "clock-mode option"),
    (["--faults", "PLAN:nope"], "'nope' is not in the topology"),
    (["--mode", "signal", "--faults", "PLAN:tor1"], "clock mode only"),
    (["--schedule", "SCHED", "--switch", "rotor0=127.0.0.1:1", "--faults", "PLAN:tor1"], "needs --topology"),
])
def test_cli_bad_flags_exit_2_in_one_line_with_nothing_started(tmp_path, topo_file, args, msg):
    status = tmp_path / "status.json"
    fixed = []
    for x in args:
        if x.startswith("PLAN:"):
            x = plan(tmp_path, dict(SKEW, switch=x[5:]))
        fixed.append(str(tmp_path / "s.json") if x == "SCHED" else x)
    where = [] if "--schedule" in fixed else ["--topology", str(topo_file)]
    mode = [] if "--mode" in fixed else ["--mode", "clock"]
    r = subprocess.run([sys.executable, "-m", "p4rotor.cli", "control", *where, *mode, *fixed,
                        "--build-dir", str(tmp_path / "build"), "--status-file", str(status)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not status.exists()


def test_cli_acts_on_clock_skew_and_loss_only_and_says_so(tmp_path, topo_file):
    from p4rotor.control.cli import _plan_faults

    topo = TP.load(topo_file)
    p = plan(tmp_path, SKEW, dict(SKEW, switch="tor2", end_us=300_000),
             {"kind": "link-down", "start_us": 0, "switch": "tor0", "port": 1},
             {"kind": "controller-crash", "start_us": 5},
             {"kind": "loss", "start_us": 10, "end_us": 20, "rotor": "rotor0", "port": 1, "direction": "out",
              "rate": 0.05})
    said: list[str] = []
    skews, losses, drifts = _plan_faults(p, topo, {"rotor0", "tor1"}, said.append)
    assert skews == [C.ClockSkew("tor1", 200, 100_000)]
    assert losses == [C.LossFault("rotor0", C.LinkLoss(1, "out", 0.05, None), 10, 20)]
    assert said == ["--faults: controller-crash, link-down faults are applied by the harness, not the controller: "
                    "ignored here",
                    "--faults: clock skew/drift on tor2 ignored: not driven by this controller (--only)"]


def test_loss_fault_entries_are_written_at_start_and_removed_at_end(blob, tmp_path):
    """A plan's loss on a rotor port: its loss_out entry inserted at start_us, deleted at end_us
    (schedule time from slot 0); nothing else rewritten, no clear."""
    trace = tmp_path / "trace.jsonl"

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=3_000_000).start()
        ctl = make_ctl(fake, blob, faults=C.InjectedFaults(losses=[C.LossFault("rotor0", C.LinkLoss(2, "out", 0.1), 200_000, 500_000)]),
                       trace=trace)
        mid: dict = {}

        async def after_ready(c):
            mid["writes"] = len(fake.writes)

        try:
            await ctl.run(duration=0.8, after_ready=after_ready)
        finally:
            await fake.stop()
        return fake, ctl, mid

    fake, ctl, mid = asyncio.run(main())
    loss = fake.updates_for(dp.T_LOSS_OUT)
    assert [u.type for u in loss] == [p4r.Update.INSERT, p4r.Update.DELETE]
    e = fy.P4TableEntry.decode(loss[0].entity, SCHEMA)
    assert list(e.action.args.values()) == [round(0.1 * 2**32)]
    ev = events(trace, "loss")
    assert [len(x["losses"]) for x in ev] == [0, 1, 0]  # at install (none yet), start, end
    for x, t in zip(ev[1:], (200_000, 500_000)):
        assert x["at_us"] >= t and 0 <= x["t_ns"] - ctl.tb.wall_ns(ctl.t0_common_us + t) < 100e6


def test_loss_on_a_switch_not_driven_is_refused(blob):
    with pytest.raises(C.ControllerError, match="loss on 'nope': not a switch this controller drives"):
        C.RotorController(S.generate_rotornet(4, 1, 20_000, 2_000), [C.SwitchSpec("rotor0", "127.0.0.1", 1)],
                          mode="clock", p4info=P4INFO, p4blob=blob,
                          faults=C.InjectedFaults(losses=[C.LossFault("nope", C.LinkLoss(2, "out", 0.1), 0)]))


def test_a_clock_mode_trace_is_written_in_batches_of_passed_boundaries_and_whole_at_the_stop(blob, tmp_path,
                                                                                                monkeypatch):
    """Clock mode traces the schedule's boundaries: written once passed, a batch at a time (one
    wake-up per batch, not per boundary), every boundary up to the stop and none after it."""
    from p4rotor.control import rotator

    monkeypatch.setattr(rotator, "TRACE_BATCH_US", 45_000)  # 20 ms slots + 2 ms nights: ~4 a batch
    trace = tmp_path / "trace.jsonl"
    writes = []

    async def main():
        fake = await FakeSwitch(P4INFO, boot_us=7_000_000).start()
        ctl = make_ctl(fake, blob, trace=trace)
        real = ctl.trace.write_many
        ctl.trace.write_many = lambda recs: (writes.append((time.time_ns(), [r["t_ns"] for r in recs])), real(recs))
        try:
            await ctl.run(duration=0.8)
        finally:
            await fake.stop()
        return time.time_ns()

    stopped = asyncio.run(main())
    slots = [r for r in map(json.loads, trace.read_text().splitlines()) if "slot" in r]
    t = [r["t_ns"] for r in slots]
    assert len(slots) >= 20 and t == sorted(t) and t[-1] <= stopped
    # Consecutive boundaries: a day (18 ms of the 20 ms slot) then its night (2 ms), none missing.
    gaps = {round((b - a) / 1e6) for a, b in zip(t, t[1:])}
    assert gaps <= {2, 18}, gaps
    # Each write came after the boundaries it holds; most held several.
    assert all(w >= max(ts) - 1_000_000 for w, ts in writes if ts)
    assert sum(len(ts) for _, ts in writes) == len(slots) and len([ts for _, ts in writes if ts]) < len(slots) / 2
