"""Faults on the default Opera fabric (issue #17): injected, survived, measured.

8 racks x 1 host, 4 rotors, Opera, dilation 100.  Low-latency probes (DSCP 46) run from every host
to every other rack for the whole run; the harness applies the plan's process and link faults at
their times (``faults/inject.py``) and the controller its ``loss`` and ``clock-skew`` entries
(``p4rotor control --faults``).  A capture of every rotor interface (one ``tcpdump -i any``)
checks afterwards that no frame left a rotor on a circuit its schedule did not have live at that
moment (wrong or dark circuit: must be 0).  Per fault: probes lost in its window, switch drops by
cause, recovery (a restarted switch: listening, re-installed, first probe through it again).

With ``traffic`` ("bulk" or "bulk,tcp") RotorLB agents move bulk, and an iperf3 connection crosses
through them, while the plan is applied (faults_load.py: a killed agent restarted by the
harness, what each fault cost the bulk and the connection, the PASS bounds).

With ``corropt_threshold`` the controller runs the live CorrOpt monitor (``p4rotor control
--corropt-threshold``): the plan's lossy links are measured from the rotors' counters and turned
off while every slice stays connected; the report checks each decision against the configured
rates and the schedule's slices (``corropt_report``).

Plan times are emulated us from the start of the probes (``origin``).  With controller faults
(loss, clock-skew) the experiment fixes it at slot 0 + ``ORIGIN_AFTER_T0_S`` wall, so the
controller, started before, can be given the same plan shifted to its own origin (slot 0).
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

from .. import p4 as dp
from .. import schedule as S
from .frame_check import check_frames
from ..schedule import topology as TP
from ..fabric.switch import HarnessError, stop_process_group
from ..control import fault_plan as FP
from ..faults.capture import interface_names, read_rotor_frames
from ..faults.inject import HARNESS_KINDS, Injector
from ..plotting import pyplot, save
from .faults_load import RECOVERY_S as LOAD_RECOVERY_S, Load, load_report, load_table, parse_traffic
from .runner import launch, run_probes, say

ORIGIN_AFTER_T0_S = 40.0   # wall s from slot 0 to the probes' start: the fabric is up by then (~5 s here)
PROBE_START_S = 8.0        # wall s for the probe processes to start and listen
RECOVERY_S = 4.0           # probes keep running this long after the last fault
BIN_S = 0.1
RESTART_CYCLES = 1.0  # a restarted switch re-installed within this many cycles of its restart (PASS bound)
# The CorrOpt monitor: a link direction's rate from this many frames (at rate 0.1: +/- 0.024, one
# sigma), read every half second: at the default 50 probes/s per host a lossy link gets 150 in
# ~8 s.  Faster probes overload this 2-core machine's 12 BMv2 switches: at 80 and 200 probes/s
# per host, 18 of 52 683 and 418 of 81 628 rotor frames were captured 2-64 ms after their day
# ended, in bursts (a switch's transmit thread stalled after the egress check), and at 200
# 2051 frames were dropped STALE.
CORROPT_MIN_FRAMES = 150
CORROPT_EVERY_S = 0.5


def default_plan_path(traffic: frozenset = frozenset()) -> Path:
    return Path(__file__).resolve().parents[3] / "topologies" / "faults" / ("load.json" if traffic else "default.json")


def faults(build: Path, out: Path, plan: str | None = None, dilation: float = 100.0, probe_rate: float = 50.0,
           resync_every: float = 0.0, corropt_threshold: float | None = None, target: str = "bmv2",
           traffic: str | None = None) -> dict:
    """``plan``: a fault plan file (default topologies/faults/default.json; with ``traffic``,
    topologies/faults/load.json), times and clock skews in emulated us; ``probe_rate``: probes/s per host;
    ``traffic``: "bulk" or "bulk,tcp" (faults_load.py): RotorLB agents move bulk (and an iperf3
    connection crosses through them) while the faults are applied; None: probes only;
    ``resync_every``: the controller re-measures every switch's clock this often (wall s; 0:
    never) and corrects an error above its bound; ``corropt_threshold``: run the live CorrOpt
    monitor with this loss threshold."""
    if not (resync_every >= 0 and resync_every < 1e6):
        raise FP.FaultPlanError(f"--resync-every {resync_every}: seconds >= 0")
    if corropt_threshold is not None and not 0 < corropt_threshold < 1:
        raise FP.FaultPlanError(f"--corropt-threshold {corropt_threshold}: a loss rate in (0, 1)")
    tl = parse_traffic(traffic)
    sched = S.generate_opera(8, 4, 1000, 100)
    ds = S.dilate(sched, dilation)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=1)
    path = Path(plan) if plan else default_plan_path(tl)
    fp = FP.load(path, topo)  # FaultPlanError: one line, exit 2, nothing started
    if not fp.faults:
        raise FP.FaultPlanError(f"{path}: no faults")
    if "bulk" not in tl and any(f.kind == "agent-kill" for f in fp.faults):
        raise FP.FaultPlanError(f"{path}: agent-kill faults need agents: --traffic bulk or bulk,tcp")
    last_us = max(max(f.end_us or 0, f.start_us + (f.restart_after_us or 0)) for f in fp.faults)
    duration = last_us * dilation / 1e6 + (LOAD_RECOVERY_S if tl else RECOVERY_S)
    out.mkdir(parents=True, exist_ok=True)
    ctrl = [f for f in fp.faults if f.kind not in HARNESS_KINDS]
    controller_args: tuple[str, ...] = ()
    if resync_every:
        controller_args += ("--resync-every", str(resync_every))
    if corropt_threshold is not None:
        controller_args += ("--corropt-threshold", str(corropt_threshold), "--corropt-every", str(CORROPT_EVERY_S),
                            "--corropt-min-frames", str(CORROPT_MIN_FRAMES))
    if ctrl:
        # The controller runs the dilated schedule: its plan is in wall us from its slot 0.
        shift_us = int(ORIGIN_AFTER_T0_S * 1e6)

        def wall_us(us: int) -> int:
            return int(us * dilation) + shift_us

        shifted = {"version": 1, "faults": [
            dict(f.to_json(), start_us=wall_us(f.start_us),
                 **({"end_us": wall_us(f.end_us)} if f.end_us is not None else {}),
                 **({"offset_us": int(f.offset_us * dilation)} if f.offset_us is not None else {})) for f in ctrl]}
        (out / "controller-plan.json").write_text(json.dumps(shifted, indent=1))
        controller_args += ("--faults", str(out / "controller-plan.json"))
    # Under load the switches run under SCHED_RR (as in the FCT experiment): 8 agents, their rlbd
    # and iperf3 otherwise delay them by milliseconds, and frames leave after their circuit's day
    # (8 of 60 295 rotor frames, up to 22 ms late, at SCHED_OTHER).  No idle CPU polls, and the
    # agents keep the default policy: with both (as the FCT experiment runs), one rlbd went 10 s
    # without answering its agent.
    emu, topo = launch(sched, dilation, 1, build, out / "run", epsilon_us=_epsilon(sched),
                       controller_args=controller_args, target=target, realtime=bool(tl), idle_poll=False)
    capture = load = load_data = None
    # The fabric's clock as first installed: a restarted controller adopts it, but re-measures
    # its own offsets, so the t0 it reports can differ by its estimate's error.
    t0_ns = emu.t0_ns
    try:
        if ctrl:  # the controller's faults are timed from its slot 0: the origin was fixed before
            origin = emu.t0_ns + int(ORIGIN_AFTER_T0_S * 1e9)
            if time.time_ns() > origin - PROBE_START_S * 1e9:
                raise HarnessError(f"the fabric took longer than {ORIGIN_AFTER_T0_S:.0f} s after slot 0 to forward")
        else:
            origin = time.time_ns() + int(PROBE_START_S * 1e9)
        inj = Injector(emu, fp, origin, dilation)
        if tl:
            kills = [f.host for f in fp.faults if f.kind == "agent-kill"]
            tcp_dst = next(k.id for k in topo.racks if k.hosts[0].name == kills[0]) if kills else 5
            load = Load(emu, topo, ds, out / "load", tl, inj.note_agent)
            load.start(origin, duration, tcp_dst)
            inj.supervisor = load.supervisor
            if time.time_ns() > origin - int(2e9):
                raise HarnessError("the agents took too long to start before the probes' start time")
        # eBPF: the switches forward by XDP redirect, which no packet capture sees; not checked.
        capture = _start_capture(out / "rotors.pcap") if target != "ebpf" else None
        drops_log: list = []
        stop = threading.Event()
        poll = threading.Thread(target=_poll_drops, args=(emu, drops_log, stop), daemon=True)
        poll.start()
        waiter = inj.run()
        ips = [k.hosts[0].ip for k in topo.racks]
        say(f"[experiment] faults: {len(fp.faults)} faults from {path}; probes for {duration:.0f} s from "
            f"{(origin - time.time_ns()) / 1e9:.0f} s from now")
        logs = run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": probe_rate,
                                                    "dscp": dp.DSCP_LOW_LATENCY}, duration, out / "probes",
                          start_at_ns=origin)
        waiter.join(30)
        if load is not None:
            load_data = load.finish()
        time.sleep(1.5)
        stop.set()
        poll.join(5)
        status = json.loads((emu.run_dir / "status.json").read_text())
        ifnames = interface_names() if capture is not None else {}  # by index: read while they exist
    finally:
        if load is not None and load_data is None:
            load.abort()
        if capture is not None:
            stop_process_group(capture)
        emu.stop()
    checks: dict | None = None
    if capture is not None:
        time.sleep(0.5)  # tcpdump's last buffer
        frames = read_rotor_frames(out / "rotors.pcap", ifnames, {r.name: dict(r.ports) for r in topo.rotors})
        checks = {}
    by_name = {x.name: x for x in ds.rotors}
    for i, r in enumerate(topo.rotors if checks is not None else ()):
        rx = frames.get(r.name, [])
        # 1 ms wall of tolerance: capture timestamps and the switch's clock offset (+/- ~0.3 ms)
        c = check_frames(rx, ds, by_name.get(r.name, ds.rotors[i]), dict(r.ports), t0_ns, tolerance_us=1000.0)
        checks[r.name] = {"frames": c.frames, "dark": c.stale, "wrong_port": c.wrong_port,
                          "worst_late_us_wall": c.worst_late_us}
    res = _report(fp, inj, logs, drops_log, checks, status, origin, dilation, ds, topo, out, corropt_threshold,
                  load_data)
    res["t0_ns"], res["t0_ns_at_end"], res["interfaces"] = t0_ns, emu.t0_ns, ifnames
    (out / "faults.json").write_text(json.dumps(res, indent=1))
    if "load" in res:
        (out / "table.md").write_text(load_table(res))
    return res


def _epsilon(sched: S.Schedule) -> float:
    """Low-latency routes keep half a slice of margin (as the low-latency experiment)."""
    return min(x.end_us - x.start_us for x in sched.slices()) * 0.5


def _start_capture(path: Path):
    import subprocess

    # Every interface of the root namespace (the switches'), link type SLL2 (it names the
    # interface and says in or out); 96 bytes are enough to recognise a frame.
    p = subprocess.Popen(["tcpdump", "-i", "any", "-y", "LINUX_SLL2", "-s", "96", "-w", str(path), "-U",
                          "--time-stamp-precision", "nano"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    time.sleep(1.0)
    if p.poll() is not None:
        raise HarnessError(f"tcpdump: {p.stderr.read().decode(errors='replace').strip()}")
    return p


def _poll_drops(emu, log: list, stop: threading.Event) -> None:
    while not stop.is_set():
        log.append((time.time_ns(), emu.drops()))
        stop.wait(0.5)


def drop_steps(log: list) -> list[tuple[int, dict[str, int]]]:
    """(t_ns, {cause: frames dropped since the previous reading}) from successive status readings.
    A switch missing from a reading (its controller restarting) is skipped; a counter that went
    down belongs to a restarted switch (a new process counts from 0): its new value is the step."""
    out, prev = [], {}
    for t, d in log:
        inc: dict[str, int] = {}
        for sw, causes in d.items():
            for c, n in causes.items():
                if c == "UNACCOUNTED":  # a difference of two counters read apart, not a count
                    continue
                p = prev.get((sw, c))
                k = n if p is None or n < p else n - p
                if p is not None and k > 0:
                    inc[c] = inc.get(c, 0) + k
                prev[(sw, c)] = n
        out.append((t, inc))
    return out


def corropt_report(st: dict, fp, topo: TP.Topology, threshold: float, origin_ns: int) -> dict:
    """The live monitor's decisions (the status file's ``corropt``) judged against the plan.

    The monitor decides as its estimates arrive, so the reference is the fast checker replayed in
    the monitor's own order: a link it disabled must have a configured rate above the threshold
    and keep every slice connected with the links disabled before it gone; a link it kept, above
    the threshold too, must split a slice with them gone; every lossy link above the threshold
    the probes crossed must be decided, and none at or below it.  The fast checker on the
    configured rates all at once (rate order) is reported beside it."""
    from ..faults.corropt import plan_rates
    from ..control import fast_checker as M

    sched = topo.schedule
    configured = plan_rates(fp, topo)
    decisions = st.get("decisions", [])
    problems = []
    disabled: list = []
    for d in decisions:
        link = (d["rotor"], d["rack"])
        rate = configured.get(link, 0.0)
        if rate <= threshold:
            problems.append(f"{d['rotor']} rack {d['rack']}: {d['action']} but configured {rate:g} <= {threshold:g}")
        [ref] = M.decide(sched, {link: 1.0}, threshold, disabled=disabled)
        if ref.action != d["action"]:
            problems.append(f"{d['rotor']} rack {d['rack']}: {d['action']}, the fast checker says {ref.action} "
                            f"({ref.reason()})")
        if d["action"] == "disable":
            disabled.append(link)
    measured = {tuple([k.split(":")[0], int(k.split(":")[1])]): v for k, v in st.get("rates", {}).items()}
    decided = {(d["rotor"], d["rack"]) for d in decisions}
    for link, rate in configured.items():
        if rate > threshold and link in measured and link not in decided:
            problems.append(f"{link[0]} rack {link[1]}: configured {rate:g}, measured, never decided")
    links = []
    for link, rate in sorted(configured.items()):
        m = measured.get(link, {})
        est = max((v[0] for v in m.values()), default=None)
        d = next((x for x in decisions if (x["rotor"], x["rack"]) == link), None)
        links.append({"rotor": link[0], "rack": link[1], "configured": rate,
                      "measured_at_decision": d["rate"] if d else None, "measured_last": est,
                      "frames": {k: v[1] for k, v in m.items()}, "action": d["action"] if d else None,
                      "decided_at_s": round((d["t_ns"] - origin_ns) / 1e9, 2) if d else None,
                      "reason": d["reason"] if d else None})
    offline = M.decide(sched, configured, threshold)
    return {"threshold": threshold, "links": links, "decisions": decisions, "disabled": st.get("disabled", []),
            "offline_rate_order": [{"rotor": d.rotor, "rack": d.rack, "action": d.action, "reason": d.reason()}
                                   for d in offline],
            "problems": problems, "ok": not problems and bool(decisions)}


def _report(fp, inj, logs, drops_log, checks, status, origin, dilation, ds, topo, out: Path,
            corropt_threshold: float | None = None, load_data: dict | None = None) -> dict:
    tx = [dict(r, src=i) for i, k in enumerate(topo.racks) for r in logs[f"{k.hosts[0].name}.tx"]]
    rx = [r for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]]
    got = {(r["src"], r["seq"]) for r in rx}
    n_bins = int((max((r["tx"] for r in tx), default=origin) - origin) / 1e9 / BIN_S) + 1
    sent_b, lost_b = [0] * n_bins, [0] * n_bins
    for r in tx:
        b = int((r["tx"] - origin) / 1e9 / BIN_S)
        if 0 <= b < n_bins:
            sent_b[b] += 1
            if (r["src"], r["seq"]) not in got:
                lost_b[b] += 1

    steps = drop_steps(drops_log)

    def drops_between(a_ns: int, b_ns: int) -> dict[str, int]:
        outd: dict[str, int] = {}
        for t, inc in steps:
            if a_ns <= t <= b_ns:
                for c, n in inc.items():
                    outd[c] = outd.get(c, 0) + n
        return outd

    H_s = ds.hyperperiod_us / 1e6
    per_fault = []
    for f in fp.faults:
        a = origin + int(f.start_us * dilation * 1000)
        end_us = f.end_us if f.end_us is not None else f.start_us + (f.restart_after_us or 0)
        b = origin + int(end_us * dilation * 1000)
        ev = [e for e in inj.events if e["kind"] == f.kind and e["target"] == (f.switch or f.host or "controller")]
        # A restarted controller's fault lasts until it runs and its slot 0 (a clock it did not
        # adopt starts ahead of it), not the plan's restart time.
        b = max([b] + [max(e["t_ns"], e.get("t0_ns") or 0) for e in ev if e["what"] == "restarted"
                       and f.kind == "controller-crash"])
        win = [r for r in tx if a <= r["tx"] < b + int(2 * H_s * 1e9)]
        lost = sum(1 for r in win if (r["src"], r["seq"]) not in got)
        # Recovery: the first 100 ms bin after the fault's end from which no probe was lost again.
        bb = max(0, int((b - origin) / 1e9 / BIN_S))
        rec = next((i for i in range(bb, n_bins) if all(lost_b[j] == 0 for j in range(i, min(n_bins, i + 10)))), None)
        row = {"fault": f.to_json(), "events": [dict(e, t_s=(e["t_ns"] - origin) / 1e9) for e in ev],
               "probes_in_window": len(win), "probes_lost": lost, "drops": drops_between(a, b + int(2 * H_s * 1e9)),
               "recovered_after_end_s": None if rec is None else round(max(0.0, rec * BIN_S - (b - origin) / 1e9), 3)}
        re = {e["what"]: e for e in ev}
        if f.kind == "controller-crash" and b > origin + int(end_us * dilation * 1000):
            row["window_end_s"] = round((b - origin) / 1e9, 3)
        if "reinstalled" in re:
            row["reinstalled_after_restart_ms"] = re["reinstalled"]["after_ms"]
            row["reinstalled_within_cycles"] = re["reinstalled"]["after_ms"] / 1000 / H_s
            if "load_ms" in re.get("restarted", {}):
                # eBPF: the pipeline's load and ports (the kernel's verifier most of it) are the
                # restart; the controller may re-install before the harness sees the load return.
                row["pipeline_load_ms"] = re["restarted"]["load_ms"]
            elif "listening" in re:
                # "Coming back": the switch's P4Runtime port listening again (BMv2's own start-up,
                # ~0.2 s here, is before it and not the controller's to shorten).
                after = re["reinstalled"]["after_ms"] - re["listening"]["after_ms"]
                row["reinstalled_after_listening_ms"] = after
                row["reinstalled_after_listening_cycles"] = after / 1000 / H_s
        per_fault.append(row)
    # None: not checked (no capture on eBPF), which passes nothing and fails nothing.
    dark = None if checks is None else sum(c["dark"] + c["wrong_port"] for c in checks.values())
    res = {"schedule": ds.to_json(), "dilation": dilation, "cycle_s_wall": H_s, "plan": fp.to_json(),
           "probes_sent": len(tx), "probes_received": len(got), "faults": per_fault, "rotor_checks": checks,
           "frames_on_wrong_or_dark_circuits": dark, "injector_errors": inj.errors,
           "adopted": {n: s.get("adopted") for n, s in status.get("switches", {}).items()},
           "resyncs": {n: s.get("resyncs") for n, s in status.get("switches", {}).items() if s.get("resyncs")}}
    corropt_ok = True
    if corropt_threshold is not None:
        res["corropt"] = cr = corropt_report(status.get("corropt", {}), fp, topo, corropt_threshold, origin)
        # Optical loss (switch drops) per second before the first decision and after the last one
        # was written, while the plan's loss lasts: what turning the links off bought.
        loss_end = origin + int(max((f.end_us or 0) for f in fp.faults if f.kind == "loss") * dilation * 1000)
        ds_ = [d for d in cr["decisions"] if d["action"] == "disable"]
        if ds_:
            first = min(d["t_ns"] for d in ds_)
            last = max(d.get("applied_ns", d["t_ns"]) for d in ds_) + int(1e9)
            before = sum(inc.get("OPTICAL_LOSS", 0) for t, inc in steps if origin <= t <= first)
            after = sum(inc.get("OPTICAL_LOSS", 0) for t, inc in steps if last <= t <= loss_end)
            cr["optical_loss_per_s_before"] = round(before / max(1e-9, (first - origin) / 1e9), 1)
            cr["optical_loss_per_s_after"] = round(after / max(1e-9, (loss_end - last) / 1e9), 1)
        corropt_ok = cr["ok"]
    load_ok = True
    if load_data is not None:
        res["load"] = lr = load_report(load_data, fp, inj, per_fault, origin, dilation, ds, ds.slot_us / 1e6, steps)
        load_ok = all(lr["checks"].values())
    (out / "faults.json").write_text(json.dumps(res, indent=1))
    _plot(res, sent_b, lost_b, drops_log, origin, out)
    parts = [f"{len(tx) - len(got)} of {len(tx)} probes lost",
             f"frames on a wrong or dark circuit: {dark} (goal 0)" if dark is not None else
             "frames on a wrong or dark circuit: not checked (eBPF switches forward by XDP redirect, which no "
             "packet capture sees)"]
    said: list[list] = []  # [text, count]: faults of one window (six lossy links) said once
    for row in per_fault:
        f = row["fault"]
        s = f"{f['kind']} {f.get('switch') or f.get('host') or ''}".strip()
        if "reinstalled_after_restart_ms" in row:
            s += (f": re-installed {row['reinstalled_after_restart_ms']:.0f} ms after restart "
                  f"({row['reinstalled_within_cycles']:.2f} cycles, bound {RESTART_CYCLES:g})")
            if "pipeline_load_ms" in row:
                s += f", its pipeline loaded with its ports in {row['pipeline_load_ms']:.0f} ms"
            if "reinstalled_after_listening_ms" in row:
                s += (f", {row['reinstalled_after_listening_ms']:.0f} ms after it listened again "
                      f"({row['reinstalled_after_listening_cycles']:.2f} cycles)")
        if "restarted_after_kill_ms" in row:
            s += (f": noticed {row['noticed_after_kill_ms']:.0f} ms after the kill, restarted after "
                  f"{row['restarted_after_kill_ms']:.0f} ms, its bulk delivered again {row.get('first_delivered_after_kill_s')} s "
                  f"after the kill, {row['bulk_frames_lost_to_it']} bulk frames lost on the pairs into it")
        if "tcp_bytes_lost" in row:
            s += f", bulk {row['bulk_frames_lost']} frames and TCP {row['tcp_bytes_lost']} bytes lost in its window"
        if "window_end_s" in row:
            s += f" (to {row['window_end_s']:.1f} s: the new controller running, its slot 0 reached)"
        s += f", {row['probes_lost']} probes lost, recovered {row['recovered_after_end_s']} s after its end"
        if said and said[-1][0] == s:
            said[-1][1] += 1
        else:
            said.append([s, 1])
    parts += [s if n == 1 else f"{n} x {s}" for s, n in said]
    if corropt_threshold is not None:
        cr = res["corropt"]
        n_off = sum(1 for d in cr["decisions"] if d["action"] == "disable")
        s = (f"CorrOpt monitor: {n_off} links off, {len(cr['decisions']) - n_off} kept for connectivity, "
             f"{len(cr['problems'])} decisions wrong")
        if "optical_loss_per_s_before" in cr:
            s += f"; optical loss {cr['optical_loss_per_s_before']}/s before, {cr['optical_loss_per_s_after']}/s after"
        parts.append(s)
    if load_data is not None:
        lr, b = res["load"], res["load"]["bulk"]
        parts.append(f"bulk: {b['made']} frames made, {b['delivered']} delivered, {b['held']} held, {b['lost']} lost "
                     f"({b['lost_to_killed']} to killed agents), {b['duplicates']} duplicated; TCP: "
                     f"{len(lr['tcp_runs'])} iperf3 runs, {sum(1 for r in lr['tcp_runs'] if r['error'])} reset")
        failed = [k for k, v in lr["checks"].items() if not v]
        if failed:
            parts.append("failing: " + ", ".join(failed))
    # A restarted switch is back (re-installed) within RESTART_CYCLES of its restart: on BMv2 its
    # own start-up is more than that (docs/faults.md), and the verdict says so.
    late = [r["fault"].get("switch") for r in per_fault
            if r["fault"]["kind"] == "switch-crash" and r["fault"].get("restart_after_us") is not None
            and r.get("reinstalled_within_cycles", math.inf) > RESTART_CYCLES]
    if late:
        parts.append(f"failing: {', '.join(late)} not re-installed within {RESTART_CYCLES:g} cycle of its restart")
    ok = not dark and not inj.errors and corropt_ok and load_ok and not late and \
        all(r["recovered_after_end_s"] is not None for r in per_fault)
    res["verdict"] = "faults: " + "; ".join(parts) + (f"; errors: {inj.errors}" if inj.errors else "") + \
        f" -> {'PASS' if ok else 'FAIL'}"
    return res


def _plot(res, sent_b, lost_b, drops_log, origin, out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    xs = [i * BIN_S for i in range(len(sent_b))]
    ax.plot(xs, [s - l for s, l in zip(sent_b, lost_b)], label="probes delivered / 100 ms")
    ax.plot(xs, lost_b, label="probes lost / 100 ms", color="red")
    colors = {"link-down": "tab:orange", "switch-crash": "tab:purple", "controller-crash": "tab:green",
              "host-pause": "tab:brown", "clock-skew": "tab:olive", "loss": "tab:gray", "clock-drift": "tab:cyan",
              "agent-kill": "tab:pink"}
    # One span per (kind, window): six links lossy at once are one shaded window, "loss (6)".
    spans: dict[tuple, list[dict]] = {}
    for row in res["faults"]:
        f = row["fault"]
        spans.setdefault((f["kind"], f["start_us"], f.get("end_us"), f.get("restart_after_us")), []).append(f)
    for (kind, start, end, restart), fs in spans.items():
        a = start * res["dilation"] / 1e6
        e = (end or start + (restart or 0)) * res["dilation"] / 1e6
        who = " ".join(sorted({f.get("switch") or f.get("host") or "" for f in fs})).strip()
        label = f"{kind} {who}".strip() if len(fs) == 1 else f"{kind} ({len(fs)} {'links' if kind == 'loss' else 'faults'})"
        ax.axvspan(a, max(e, a + 0.05), alpha=0.15, color=colors.get(kind, "k"), label=label)
    for i, d in enumerate(res.get("corropt", {}).get("decisions", [])):
        at = (d.get("applied_ns") or d["t_ns"]) - origin
        ax.axvline(at / 1e9, color="tab:red" if d["action"] == "disable" else "tab:blue", lw=0.8,
                   ls="-" if d["action"] == "disable" else ":")
        ax.annotate(f"{'off' if d['action'] == 'disable' else 'kept'} {d['rotor']}:{d['rack']}", (at / 1e9, 0),
                    xytext=(2, 10 + 12 * (i % 4)), textcoords="offset points", fontsize=7,
                    color="tab:red" if d["action"] == "disable" else "tab:blue")
    steps = [(t, inc) for t, inc in drop_steps(drops_log) if t >= origin]
    if steps:
        ax2 = ax.twinx()
        cum, ys = 0, []
        for _, inc in steps:
            cum += sum(inc.values())
            ys.append(cum)
        ax2.plot([(t - origin) / 1e9 for t, _ in steps], ys, "k--", label="switch drops (cumulative)")
        if "corropt" in res:
            cum, ys = 0, []
            for _, inc in steps:
                cum += inc.get("OPTICAL_LOSS", 0)
                ys.append(cum)
            ax2.plot([(t - origin) / 1e9 for t, _ in steps], ys, color="tab:gray", ls="--",
                     label="of which optical loss")
            ax2.legend(fontsize=7, loc="upper right")
        ax2.set_ylabel("switch drops since the probes' start")
    ax.set_xlabel("s (wall) from the probes' start")
    ax.set_ylabel("probes")
    dark = res["frames_on_wrong_or_dark_circuits"]
    ax.set_title(f"faults: {dark} frames on a wrong or dark circuit" if dark is not None else
                 "faults (eBPF: which circuit each frame crossed is not captured)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    save(fig, out / "faults.png", dpi=110)
