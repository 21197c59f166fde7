"""Integration: a 4-rack, 2-rotor emulation in Mininet (root, Mininet, BMv2; skips loudly otherwise).

Rotor a pairs racks 0-1 and 2-3, rotor b pairs 0-2 and 1-3 (staggered half a slot).  Bulk
traffic from rack 0 to rack 1 has exactly one path: a's direct circuit (no 2-hop path exists
while a is dark).  So every ping that gets through must have crossed while the controller's
trace shows a in its day; and after stop nothing of the fabric is left on the machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.schedule import topology as TP
from p4rotor.fabric.switch import missing_tools

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build"))


def _skip_reason():
    miss = missing_tools()
    if not shutil.which("mnexec"):
        miss.append("mininet (mnexec)")
    for p in ("rotor", "tor", "oneswitch"):
        if not (BUILD / f"{p}.json").exists():
            miss.append(f"build/{p}.json (make build; needs p4c)")
    return ("SKIPPED: emulation needs: " + ", ".join(miss)) if miss else None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def sched() -> S.Schedule:
    return S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": 400_000, "reconfig_us": 100_000,
                        "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                   {"name": "b", "offset_us": 200_000, "matchings": [[2, 3, 0, 1]]}]})


def test_host_reaches_other_rack_only_through_its_circuit(tmp_path):
    from p4rotor.fabric.mininet import Emulation, leftovers

    topo = TP.generate(sched(), "schedule.json", hosts_per_rack=1)
    # --quiet: the controller logs nothing; start-up reads only its status file (control/status.py)
    emu = Emulation(topo, BUILD, tmp_path / "run", mode="clock", say=lambda m: None, controller_args=("--quiet",))
    pids = []
    try:
        emu.start()
        pids = [sw.proc.pid for sw in emu.switches] + [emu.controller.pid]
        h0 = emu.host("h0x0")
        h0.cmd("iperf3 -s -D -p 5977")  # a daemon in a host must not outlive the emulation
        out = h0.cmd("ping -D -n -i 0.02 -c 150 -W 1 10.0.1.1")
    finally:
        emu.stop()
    replies = [(float(m.group(1)), float(m.group(2)))
               for m in re.finditer(r"\[(\d+\.\d+)\].*icmp_seq=\d+ .*time=([\d.]+) ms", out)]
    assert replies, f"no ping reply at all:\n{out}"
    assert len(replies) < 150, "some pings must be lost while rotor a is dark"
    trace = [json.loads(x) for x in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    a_events = sorted((t["t_ns"] / 1e9, t["night"]) for t in trace if t["switch"] == "a")
    assert a_events, "trace has rotor a's slot changes"

    def a_dark_at(t: float) -> bool | None:
        prev = [n for (ts, n) in a_events if ts <= t]
        if not prev:
            return None
        # within 15 ms of a boundary: too close to call on a shared machine
        if min(abs(ts - t) for ts, _ in a_events) < 0.015:
            return None
        return prev[-1]

    judged = 0
    for recv, rtt_ms in replies:
        sent = recv - rtt_ms / 1000
        for t in (sent, recv):
            d = a_dark_at(t)
            if d is not None:
                judged += 1
                assert d is False, f"a ping crossed at {t:.3f} while rotor a was dark"
    assert judged >= len(replies)
    # Nothing left: processes, interfaces, listeners.
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert leftovers(topo) == []
    daemons = [p for p in Path("/proc").iterdir() if p.name.isdigit() and (p / "cmdline").exists()
               and b"5977" in (p / "cmdline").read_bytes()]
    assert not daemons, "a host's daemon survived the emulation"


def test_rotorlb_quick_on_the_fabric(tmp_path):
    """`p4rotor experiment rotorlb --quick`: host agents on 8 racks (RotorNet) give one heavy pair
    ~7x one-hop and uniform traffic 1x, as the model does; no frame delivered twice; iperf3 runs
    over the agents' TUN interfaces; every frame an agent accepted is delivered or still held,
    and a frame a switch dropped would be counted by cause (the start gate ended the uncounted loss)."""
    from p4rotor.experiments import rotorlb

    res = rotorlb.rotorlb(BUILD, tmp_path / "rotorlb", quick=True)
    by = {s["density"]: s for s in res["summary"]}
    assert by[1]["mean"] >= 6.65 * 0.97, by[1]
    assert abs(by[56]["mean"] - 1.0) <= 0.05, by[56]
    assert res["duplicates"] <= res["retransmitted"], "a copy exists only if a frame was resent"
    assert res["lost"] == 0, "lost frames are resent (ACKs over the direct circuit)"
    for row in res["rows"]:
        for mode in ("rotorlb", "one_hop"):
            r = row[mode]
            assert r["udp_no_ports"] == 0, "an agent sent before its peer listened"
    assert res["iperf3"].get("goodput_mbps", 0) > 0, res["iperf3"]
    assert res["iperf3"]["agent_frames_accepted"] == (res["iperf3"]["agent_frames_delivered"]
                                                       + res["iperf3"]["agent_frames_held"])
    print(f"\n{res['verdict']}")


def test_racks_with_any_prefix_plan_reach_each_other(tmp_path):
    """Racks on 10.<rack+1>.0.0/16 (not the generated 10.0.<rack>.0/24): hosts get their rack's
    prefix and reach every other rack (start-up itself waits for a probe per rack pair)."""
    from p4rotor.fabric.mininet import Emulation

    t = TP.generate(sched(), "schedule.json", hosts_per_rack=1)
    racks = []
    for k in t.racks:
        h = k.hosts[0]
        racks.append(TP.Rack(k.id, f"10.{k.id + 1}.0.0/16", k.tor, (TP.Host(h.name, f"10.{k.id + 1}.0.1", h.mac, h.port),)))
    topo = TP.Topology(t.schedule, "schedule.json", t.rotors, racks)
    TP.validate(topo)
    emu = Emulation(topo, BUILD, tmp_path / "run", mode="clock", say=lambda m: None)
    try:
        emu.start()
        out = emu.host("h0x0").cmd("ip -o -4 addr show dev h0x0-eth0")
        assert "10.1.0.1/16" in out, out
    finally:
        emu.stop()


def test_one_switch_fabric_carries_opera_low_latency_without_loss(tmp_path):
    """The one-switch fabric (docs/one-switch.md): the default Opera fabric's 8 ToRs and 4 rotors
    on ONE BMv2; low-latency probes from every host to every other rack across reconfigurations
    all arrive (its multi-hop paths cross every circuit in one instant: nothing to go stale)."""
    from p4rotor.experiments.low_latency import low_latency

    res = low_latency(BUILD, tmp_path / "ll", duration=3.0, fabric="one-switch")
    assert res["sent"] > 1000 and res["reconfigurations"] > 100
    assert res["lost"] == 0, res["verdict"]
    st = json.loads((tmp_path / "ll" / "run" / "status.json").read_text())
    assert list(st["switches"]) == ["fabric"] and st["switches"]["fabric"]["kind"] == "one-switch"
    print("\n" + res["verdict"])


def test_fct_small_run_accounts_for_every_flow(tmp_path):
    """p4rotor experiment fct end to end on 30 flows: Opera, RotorNet and the packet-switch baseline
    run one flow list, every flow is finished or counted unfinished, no agent frame is delivered
    twice, the plots are written.  With the switches kept warm (fabric/warm.py): every switch
    reflected the warmer's probes, in both emulations (the fabric and the packet switch's)."""
    from p4rotor.experiments.fct.run import fct

    res = fct(BUILD, tmp_path / "fct", flows=30, load=0.1, warm_switches="on", replay=10)
    assert res["warm_ms"] == 2.0
    for mode, m in res["modes"].items():
        w = m["warm"]
        assert w and len(w["interfaces"]) == (3 if mode == "packet-switch" else 12), (mode, w)
        for ifc, c in w["interfaces"].items():
            # received: every frame back on that interface (the controller's own probes too)
            assert c["sent"] > 100 and c["received"] >= 0.95 * c["sent"], (mode, ifc, c)
    assert set(res["modes"]) == {"opera", "rotornet", "packet-switch"}
    ps = res["modes"]["packet-switch"]
    assert not ps["classes"].get("bulk"), "the packet switch carries every flow over TCP"
    for mode, m in res["modes"].items():
        counted = sum(b["flows"] for per in m["classes"].values() for b in per.values())
        assert counted == 30, (mode, m["classes"])
        unfinished = sum(b["unfinished"] for per in m["classes"].values() for b in per.values())
        assert unfinished == m["unfinished"]
        assert m["duplicates"] <= m["retransmitted"], "a copy exists only if a frame was resent"
    ll = res["modes"]["opera"]["classes"].get("low-latency", {})
    assert sum(b["flows"] - b["unfinished"] for b in ll.values()) > 0, "some TCP flow finished"
    assert all("retransmitted" in b for b in ll.values()), "every TCP flow's retransmissions are logged"
    # Every slowdown divides by the calibration of the idle fabric (workload/ideal.py), measured
    # before the flows ran, and by a sample of the flows replayed alone; below 1 is counted.
    assert set(res["calibration"]) == {"fabric", "packet-switch"}
    assert sum(res["calibration"]["fabric"]["samples"].values()) > 100
    for mode, m in res["modes"].items():
        assert m["replay"]["sampled"] > 0 and m["replay"]["alone"] > 0, (mode, m["replay"])
        for b in m["classes"].get("low-latency", {}).values():
            assert "slowdown_below_1_share" in b, (mode, b)
    # Stability is judged against RotorLB's model (workload/stability.py): RotorNet's every flow
    # is bulk; the packet switch has no agent queues.
    st = res["modes"]["rotornet"]["stability"]
    assert {"capacity", "tracking", "why"} <= set(st) and st["tracking"]["model_curve"], st.get("why")
    assert "no bulk flows" in ps["stability"]["why"]
    assert (tmp_path / "fct" / "fct.png").exists() and (tmp_path / "fct" / "flows.json").exists()
    print("\n" + res["verdict"])


def test_faults_switch_and_controller_crash_are_survived(tmp_path):
    """`p4rotor experiment faults` with a rotor killed and restarted, then the controller killed
    and restarted: the rotor is re-installed and probes flow again; the new controller adopts
    every switch; no frame leaves a rotor on a wrong or dark circuit (from the capture)."""
    from p4rotor.experiments import faults

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "faults": [
        {"kind": "switch-crash", "start_us": 10000, "switch": "rotor1", "restart_after_us": 5000},
        {"kind": "controller-crash", "start_us": 30000, "restart_after_us": 5000}]}))
    res = faults.faults(BUILD, tmp_path / "faults", plan=str(plan))
    # The experiment's goal is 0 (results/faults: 0 of 13 295); on a machine
    # busy with the rest of the suite a handful left a rotor late by the capture's clock (9 of
    # 4661 once, 10-110 ms: BMv2's transmit stalled after the egress check).  Reported, and
    # bounded here rather than zero; a wrong port would be a logic error: none.
    frames = sum(c["frames"] for c in res["rotor_checks"].values())
    assert res["frames_on_wrong_or_dark_circuits"] <= 0.005 * frames, res["rotor_checks"]
    assert all(c["wrong_port"] == 0 for c in res["rotor_checks"].values()), res["rotor_checks"]
    assert all(c["frames"] > 500 for c in res["rotor_checks"].values()), res["rotor_checks"]
    assert not res["injector_errors"]
    crash, ctl = res["faults"]
    assert {e["what"] for e in crash["events"]} == {"killed", "restarted", "listening", "reinstalled"}
    assert crash["recovered_after_end_s"] is not None
    assert all(res["adopted"].values()), res["adopted"]
    assert ctl["drops"].get("NOT_STARTED", 0) == 0
    print(f"\n{res['verdict']}")



# ---------------------------------------------------------------------------
# Full-size frames on the default Opera fabric (8 racks x 1 host, 4 rotors, dilation 100)
# ---------------------------------------------------------------------------
# Last in the file: the module-scoped fabric lives until the module ends, and the tests above
# start fabrics of their own on the same switch names and gRPC ports.

DILATION = 100
EPSILON_US = 50  # emulated: low-latency routes avoid a rotor that goes dark within this of the slice end
FULL_UDP = 1472  # UDP payload of a 1500-byte IP packet


@pytest.fixture(scope="module")
def opera_fabric(tmp_path_factory):
    from p4rotor.fabric.mininet import Emulation
    from p4rotor.schedule import dilate

    sched = dilate(S.generate_opera(8, 4, 1000, 100), DILATION)
    topo = TP.generate(sched, "schedule.json", hosts_per_rack=1)
    run_dir = tmp_path_factory.mktemp("opera") / "run"
    emu = Emulation(topo, BUILD, run_dir, mode="clock", epsilon_us=EPSILON_US * DILATION, say=lambda m: None)
    try:
        emu.start()  # returns once one probe per rack pair has crossed the fabric
        yield emu, topo, run_dir
    finally:
        emu.stop()


def _drops(run_dir) -> dict[str, int]:
    """Drops by cause, summed over every switch, as the controller last published them."""
    from p4rotor.control.status import read_status

    total: dict[str, int] = {}
    for sw in (read_status(run_dir / "status.json") or {}).get("switches", {}).values():
        for cause, n in sw.get("drops", {}).items():
            total[cause] = total.get(cause, 0) + n
        total["unaccounted"] = total.get("unaccounted", 0) + sw.get("unaccounted", 0)
    return total


def _judge(topo, logs, t0_ns: int, tclass: int, lead_us: float, tail_us: float):
    """(judged, delivered, lost) full-size probes: a probe is judged when sent in a slice whose
    routes have a path for its class, at least ``lead_us`` after the slice starts (the ToR's clock
    may trail) and ``tail_us`` before it ends (time to cross up to 3 BMv2 hops on 2 busy cores)."""
    from p4rotor.schedule import routes as R

    s = topo.schedule
    routes = R.compute(s, epsilon_us=EPSILON_US * DILATION)
    ips = [k.hosts[0].ip for k in topo.racks]
    got = {(r["src"], r["seq"]) for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]}
    judged = delivered = 0
    lost = []
    for src, k in enumerate(topo.racks):
        for rec in logs[f"{k.hosts[0].name}.tx"]:
            t = ((rec["tx"] - t0_ns) / 1000) % s.hyperperiod_us
            sr = next(x for x in routes if x.slice.start_us <= t < x.slice.end_us)
            if t - sr.slice.start_us < lead_us or sr.slice.end_us - t < tail_us:
                continue
            if (src, ips.index(rec["dst"]), tclass) not in sr.hops:
                continue
            judged += 1
            if (src, rec["seq"]) in got:
                delivered += 1
            else:
                lost.append((src, rec["dst"], rec["seq"], round(t)))
    return judged, delivered, lost


@pytest.mark.parametrize("dscp,tclass", [(46, 1), (0, 0)], ids=["low-latency", "bulk"])
def test_full_size_frames_cross_every_rack_pair(opera_fabric, tmp_path, dscp, tclass):
    """1500-byte IP packets between every rack pair, both classes: those sent while their class has
    a path (low latency: always, on Opera) arrive across reconfigurations; none is too big for a
    link, and the rare one a loaded machine delays past its slice is counted by a timing cause."""
    from p4rotor.experiments.runner import run_probes

    emu, topo, run_dir = opera_fabric
    ips = [k.hosts[0].ip for k in topo.racks]
    before = _drops(run_dir)
    logs = run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": 70,
                                                "dscp": dscp, "size": FULL_UDP}, 4.0, tmp_path)
    for k in topo.racks:
        assert all(r["len"] == FULL_UDP for r in logs[f"{k.hosts[0].name}.rx"])
    judged, delivered, lost = _judge(topo, logs, emu.t0_ns, tclass, lead_us=1000, tail_us=8000)
    pairs = {(s, d) for s, d, _, _ in lost}
    # 8 x 70 probes/s for 4 s, and bulk has a path in about a sixth of the time: ~370 judged
    # (for 3 s it was 269-300 against this floor, and a busy machine sent fewer).
    assert judged > 8 * 7 * 5, f"too few probes judged ({judged})"
    time.sleep(1.5)  # the controller publishes counters every second
    after = _drops(run_dir)
    counted = {c: after.get(c, 0) - before.get(c, 0) for c in after if after.get(c, 0) != before.get(c, 0)}
    why = (f"{len(lost)} of {judged} full-size probes lost while their class had a path "
           f"(pairs {sorted(pairs)[:10]}): first {lost[:5]}; switch drops meanwhile {counted}")
    # What #18 fixed: no frame is too big for a fabric link.
    assert counted.get("MTU", 0) == 0, why
    # On 2 busy cores a BMv2 hop can stall past a slice end: such a frame is dropped by the
    # timing checks (dark rotor, stale slot) and counted -- never silently, and rarely.
    timing = sum(counted.get(c, 0) for c in ("NIGHT", "STALE", "DARK_UPLINK"))
    assert len(lost) <= timing, why
    assert len(lost) <= 0.05 * judged, why


def test_every_switch_is_synchronised_through_its_clock_port(opera_fabric):
    """Each switch's clock offset is proven on the data path (its clock port, wired by the
    harness), not estimated from PacketOut round trips (+/- 200-700 us here): a ToR and a rotor
    that disagree by that much put low-latency frames onto a circuit still dark."""
    from p4rotor.control.status import read_status
    from p4rotor.fabric.mininet import clock_iface_names

    emu, topo, run_dir = opera_fabric
    switches = read_status(run_dir / "status.json")["switches"]
    assert set(switches) == {name for name, _, _ in topo.switches()}
    for name, sw in switches.items():
        assert sw["offset_method"] == "clock-port", (name, sw["offset"])
        # The controller's target is 15 us; a busy machine may end its 4 rounds a little wider.
        assert sw["offset_uncertainty_us"] <= 100, (name, sw["offset"])
        assert os.path.exists(f"/sys/class/net/{clock_iface_names(name)[1]}")


def test_tcp_over_low_latency_class_completes(opera_fabric):
    """iperf3 (TCP, DSCP 46) between two racks: it completes and moves bytes in every interval."""
    emu, topo, run_dir = opera_fabric
    src, dst = topo.racks[0].hosts[0], topo.racks[5].hosts[0]
    server = emu.popen(dst.name, ["iperf3", "-s", "-1", "-J"])
    try:
        time.sleep(0.5)
        out = emu.host(src.name).cmd(f"iperf3 -c {dst.ip} -t 5 -S 0xb8 -J")
    finally:
        server.wait(20)
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    per_interval = [iv["sum"]["bytes"] for iv in res["intervals"]]
    assert len(per_interval) >= 5 and all(b > 0 for b in per_interval), per_interval
    goodput = res["end"]["sum_received"]["bits_per_second"]
    assert goodput > 0
    (run_dir / "iperf3-ll.json").write_text(out)
    print(f"\niperf3 -S 0xb8 rack 0 -> rack 5: {goodput / 1e6:.1f} Mbit/s received, "
          f"{res['end']['sum_sent'].get('retransmits')} retransmits")


def test_a_killed_agent_is_reported_and_its_loss_counted(opera_fabric, tmp_path):
    """Issue #13: a host agent killed mid-run does not end the run; it is reported (host, exit
    status) and the frames its death cost the others -- sent to it, relayed through it -- are
    counted as lost, while the survivors' frames stay exactly-once."""
    import signal

    from p4rotor.fabric.agents import account, cycle_start_ns, start_agents

    emu, topo, _ = opera_fabric
    ds = topo.schedule
    H = ds.hyperperiod_us * 1000
    c0 = cycle_start_ns(emu, ds, len(topo.racks))
    stop, end = c0 + 5 * H, c0 + 8 * H
    # Rack 0 sends to 1 (relayed through others, rack 3 among them) and to 3 (dies mid-run).
    flows = {(0, 0): [{"flow": 1, "dst": 1, "frames": -1}, {"flow": 3, "dst": 3, "frames": -1}]}
    agents = start_agents(emu, topo, ds, tmp_path, rate=200, guard_us=20_000, flows=flows, stop_ns=stop,
                          end_ns=end, measure=(c0, stop), host_index=0, start_ns=c0)
    try:
        victim, proc = agents.procs[3]
        time.sleep(max(0.0, (c0 + 2 * H - time.time_ns()) / 1e9))
        proc.send_signal(signal.SIGKILL)
        summaries = agents.wait((end - time.time_ns()) / 1e9 + 20)
    finally:
        agents.kill()
    assert [d["host"] for d in agents.dead] == [victim] and agents.dead[0]["exit"] == -signal.SIGKILL
    assert len(summaries) == len(topo.racks) - 1
    a = account(summaries, agents.dead)
    assert a["dead_agents"] == [victim]
    assert sum(s["duplicates"] for s in summaries) == 0
    assert a["lost"] > 0, a            # frames for rack 3 after its death, at least
    assert a["delivered"] > 0 and a["lost"] < a["accepted"], a
    print(f"\nkilled {victim}: {a}")
