"""``p4rotor experiment fct``: one flow list on Opera, RotorNet and the packet switch, each mode
divided by the same flows alone (experiments/fct/__init__.py says how).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from ... import schedule as S
from ...fabric.agents import start_agents
from ...schedule import routes as R
from ...schedule import topology as TP
from ...workload import cdf as C
from ...workload import flowlist
from ...workload.generate import generate, topology_hosts
from ...workload.hotspot import check as check_zipf
from ...workload.ideal import FABRIC, PACKET_SWITCH, REPLAY_SAMPLE, held_out_warning
from ...workload.paths import PathKeys, by_path
from ...workload.plane import HEADROOM, access_bps as access_of, agent_duty, pair_shares, rotorlb_alone, stability_judge, stability_plane
from ...workload.scale import for_emulation
from ..runner import launch, say
from . import budget
from .activity import cut_activity
from .denominators import (calibration_machine, cutoff_of, fingerprint, judged,
                            measure_calibration, measured, read_calibration, replay_alone, write_calibration)
from .hosts import shape_hosts
from .mode import run_mode
from .options import (EPSILON_US, MODES, WARM_MAX_LOAD, parse_modes, replayed, share_choice, switch_cpu_choice,
                      warm_choice)
from .packet_switch import packet_switch_topology, run_packet_switch
from .report import report, say_curve

REAL_ACCESS_BPS = 10e9            # the real system the sizes are scaled to


def fct(build: Path, out: Path, workload: str = "websearch", load: float = 0.1, flows: int = 2000,
        cutoff: float | None = None, seed: int = 1, dilation: float = 100.0, rate: float = 100.0,
        guard_us: float = 10000.0, quick: bool = False, baseline: bool = True,
        flow_list: str | None = None, hosts_per_rack: int = 2, modes: str | None = None,
        epsilon_us: float = EPSILON_US, share_circuits: str | bool | None = "auto", idle_poll: bool = True,
        switch_cpus: str | None = "none", warm_switches: str | None = "auto", target: str = "bmv2",
        datapath: str = "python", calibration: str | None = None, calibrate_only: bool = False,
        replay: int = REPLAY_SAMPLE, cutoff_real: float | None = None, record_activity: bool = False,
        zipf: float | None = None, wall_budget_min: float | None = None) -> dict:
    """``baseline``: also run the flow list on one packet switch (every flow over TCP);
    ``flow_list``: replay this file (a ``flows.json`` an earlier run wrote, or any list naming
    this fabric's hosts, sizes in emulated bytes) instead of generating one; ``hosts_per_rack``:
    hosts in each of the 8 racks (default 2, as the issue's fabric), every one with its own agent;
    ``modes``: which of opera, rotornet and packet-switch to run ("a,b"; default all three);
    ``epsilon_us``: low-latency routes keep off a rotor this long (schedule time) before its night;
    ``share_circuits``: a rack's agents share its circuits (host/share.py) instead of a plane per
    host, and stability is judged against RotorLB on racks that share ("on"/True, "off"/False, or
    "auto", the default: on at a load of at most ``SHARE_MAX_LOAD``); ``idle_poll``: idle CPUs
    poll while the fabric is up (fabric/cpu.py; False: they halt);
    ``switch_cpus``: the switches run on these CPUs only, the hosts' processes keep the rest
    ("auto": the upper half of this machine's CPUs, fabric/cpu.py; or a list such as "1");
    "none" (the default): anywhere.  Pinned, every FCT is shorter but the one-packet floor falls
    further than the typical flow, so low-load slowdowns rise (docs/notes/switch-cpus.md); ``warm_switches``: every this many ms a probe through each switch's
    clock port keeps it warm (fabric/warm.py; "on": every 2 ms; "off": never; "auto", the
    default: on at a load of at most ``WARM_MAX_LOAD``, where the fabric is mostly idle and the
    agents lose nothing to it, off above, where the traffic keeps the switches warm and the
    warmer's frames cost the agents CPU: docs/notes/cold-switches.md); ``datapath``: the agents'
    per-frame work in Python or in the compiled rlbd ("c"; fast_agent.py); ``calibration``: a
    calibration.json measured earlier on this fabric (``calibrate_only``: measure one into ``out``
    and stop); without one the run calibrates its idle fabric first; ``replay``: this many of the
    run's flows (a random sample, ``seed``) replayed one at a time after each mode's run, for the
    slowdown against each flow alone (workload/ideal.py); ``cutoff_real``: the class cutoff in
    real-system bytes (Opera's 15 MB), scaled by the run's factor (instead of ``cutoff``);
    ``record_activity``: the controller records the switches' per-slot counters and each fabric
    mode's flows are cut out of them into ``activity-MODE.json`` (what ``p4rotor energy`` then
    reads as that mode's measured activity: docs/energy.md); ``zipf``: destination racks by Zipf
    weights of this exponent (workload/hotspot.py; None: uniform), recorded in fct.json; with
    ``flow_list`` it must be what the list records (None: take the list's); ``wall_budget_min``:
    the run's wall time, minutes: a generated list gets as many of ``flows`` as fit it (budget.py);
    a given list is run whole, with a warning if it will not fit."""
    chosen = parse_modes(modes)
    zipf = check_zipf(zipf)
    if type(replay) is not int or not 0 <= replay <= 100_000:
        raise C.WorkloadError(f"--replay must be a whole number of flows in 0..100000, got {replay!r}")
    if datapath not in ("python", "c"):
        raise C.WorkloadError(f"--datapath must be 'python' or 'c', got {datapath!r}")
    baseline = baseline and "packet-switch" in chosen
    if type(hosts_per_rack) is not int or not 1 <= hosts_per_rack <= 8:
        raise C.WorkloadError(f"--hosts-per-rack must be an integer in 1..8, got {hosts_per_rack!r}")
    if quick:
        flows = min(flows, 150)
    if not 20 <= rate <= 100_000:
        raise C.WorkloadError(f"--rate {rate:g}: agent frames per second per circuit must be in [20, 100000]")
    if not 0 <= epsilon_us <= 500:  # a night's worth at most: past it no slice keeps a route
        raise C.WorkloadError(f"--epsilon-us {epsilon_us:g}: must be in [0, 500] (schedule us)")
    pin = switch_cpu_choice(switch_cpus)
    warm_choice(warm_switches, None)  # a bad value stops here; "auto" is decided by the flow list's load
    share_choice(share_circuits, None)
    if not 0 <= guard_us < dilation * 450:  # half of the day (900 us) dilated
        raise C.WorkloadError(f"--guard-us {guard_us:g}: must leave part of the day (0 <= guard < {dilation * 450:g})")
    sizes = C.shipped(workload) if workload in C.SHIPPED else C.load(workload)
    sched = S.generate_opera(8, 4, 1000, 100)
    ds = S.dilate(sched, dilation)
    # The agents send on every live circuit at once (K x rate frames/s); a quarter more leaves the
    # low-latency class room on the shaped host link (without it, 10% of agent frames queued past
    # their window and were dropped as stale, and TCP's SYNs waited for 1 s timeouts).
    # With several hosts per rack every host's agent sends ``rate`` on each circuit (a RotorLB
    # plane per host index, fabric/agents.py), so a host's access rate, and the load it offers,
    # are the same whatever the hosts per rack.  Measured at 2 hosts per rack: sharing ``rate``
    # between the agents (rate / 2 each) left an agent 2 frames per circuit window where one
    # host had 5 (the window's share of a frame is lost each time), its queues still held
    # frames after the drain, and 6-7 of 150 flows did not finish; at the one-host access rate
    # with shared agents, 8-16.
    access_bps = access_of(len(sched.rotors), rate)
    scaling = for_emulation(access_bps, dilation, sched.hyperperiod_us, REAL_ACCESS_BPS)
    default_cutoff = access_bps / 8 * ds.hyperperiod_us / 1e6
    # The flow list first: bad input (a load, a CDF, a cutoff) stops here, before any switch starts.
    if cutoff is not None and not cutoff >= 0:
        raise C.WorkloadError(f"--cutoff must be >= 0 bytes (or inf), got {cutoff:g}")
    if cutoff_real is not None:
        # Opera's cutoff is in the real system's bytes (15 MB, [McGuinness21 §2.6]): scaled as the sizes are.
        if cutoff is not None:
            raise C.WorkloadError("--cutoff and --cutoff-real: give one (emulated or real-system bytes)")
        if not (math.isfinite(cutoff_real) and cutoff_real >= 0):
            raise C.WorkloadError(f"--cutoff-real must be >= 0 real-system bytes, got {cutoff_real:g}")
        cutoff = cutoff_real * scaling.factor
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=hosts_per_rack)
    hosts = topology_hosts(topo)
    if wall_budget_min is not None and not (isinstance(wall_budget_min, (int, float))
                                            and 1 <= wall_budget_min <= 7 * 24 * 60):
        raise C.WorkloadError(f"--wall-budget must be in [1, 10080] minutes, got {wall_budget_min!r}")

    def draw(n: int):
        return generate(hosts, sizes, access_bps=access_bps, load=load, seed=seed, flows=n, scaling=scaling,
                        name=workload, zipf=zipf)

    wl = replayed(flow_list, hosts, scaling.factor, zipf) if flow_list is not None else draw(flows)
    if wall_budget_min is not None and not calibrate_only:
        n_modes = len([m for m in MODES if m in chosen]) + (1 if baseline else 0)
        calibrated, budget_s = calibration is not None, wall_budget_min * 60

        def arrivals_s() -> float:  # the list's arrivals, wall seconds (one mode's run of them)
            return float(wl.meta.get("duration_s") or 0.0)

        est = budget.estimate_s(arrivals_s(), n_modes, replay, calibrated)
        if flow_list is None:
            fits = budget.fit(len(wl.flows), arrivals_s(), n_modes, replay, calibrated, budget_s)
            if fits < len(wl.flows):
                say(f"[experiment] fct: --wall-budget {wall_budget_min:g} min: {len(wl.flows)} flows would take "
                    f"~{est / 60:.0f} min ({arrivals_s() / 60:.0f} min of arrivals a mode, {n_modes} mode(s)); "
                    f"running {fits}")
                wl = draw(fits)
                est = budget.estimate_s(arrivals_s(), n_modes, replay, calibrated)
        say(f"[experiment] fct: {len(wl.flows)} flows, ~{est / 60:.0f} min expected of the "
            f"{wall_budget_min:g} min budget" + ("" if est <= budget_s else ": WARNING: the given list will not fit"))
    fp = fingerprint(FABRIC, target, topo, hosts_per_rack, dilation, epsilon_us, access_bps)
    fp_ps = fingerprint(PACKET_SWITCH, target, packet_switch_topology(topo, dilation), hosts_per_rack, dilation,
                        epsilon_us, access_bps)
    cals: dict = {}
    cal_machine = None
    if calibration is not None:  # read and checked before anything is written or started
        if any(m in chosen for m in MODES):
            cals[FABRIC] = read_calibration(calibration, FABRIC, fp)
        if baseline:
            cals[PACKET_SWITCH] = read_calibration(calibration, PACKET_SWITCH, fp_ps)
        cal_machine = calibration_machine(calibration, FABRIC if FABRIC in cals else PACKET_SWITCH)
        if cal_machine["same_boot"] is not True:
            say(f"[experiment] fct: WARNING: --calibration {calibration} was measured on "
                + ("another boot or machine" if cal_machine["same_boot"] is False else "a machine it does not record")
                + ": the idle fabric's speed differs between them (a one-packet base by 16 %), so slowdowns "
                "below 1 may be the calibration's; measure one here with --calibrate-only")
        for c in cals.values():
            warn = held_out_warning(c, f"--calibration {calibration}")
            if warn:
                say(f"[experiment] fct: {warn}")
    out.mkdir(parents=True, exist_ok=True)
    if not calibrate_only:  # a calibration runs no flow list: none is written beside it
        flowlist.write(out / "flows.json", wl.flows, wl.meta)
    warm = warm_choice(warm_switches, wl.meta.get("load"))
    if target == "ebpf" and warm_switches in (None, "auto"):
        warm = None  # nothing to keep warm: no switch process, no clock port
        say("[experiment] fct: eBPF switches (no warmer: nothing sleeps between frames)")
    elif warm_switches in (None, "auto"):
        say(f"[experiment] fct: switches kept warm (--warm-switches auto, load {wl.meta.get('load')})" if warm else
            f"[experiment] fct: switches not kept warm (--warm-switches auto: load above {WARM_MAX_LOAD:g} or unknown)")
    fabric_modes = [m for m in MODES if m in chosen]
    asked, share_circuits = share_circuits, share_choice(share_circuits, wl.meta.get("load"))
    if fabric_modes:
        how = "a rack's hosts share its circuits" if share_circuits else "a RotorLB plane per host"
        why = f"auto, load {wl.meta.get('load')}" if asked in (None, "auto") else asked
        say(f"[experiment] fct: {how} (--share-circuits {why})")
    runs, polled, replays, windows = {}, None, {}, {}
    if fabric_modes:
        # The switches under SCHED_RR: 16 agents and 16 TCP senders otherwise delay them by
        # milliseconds per hop, and frames miss their circuits (fabric/switch.py).
        recorded = (out / "run" / "activity.json").resolve() if record_activity else None
        emu, topo = launch(sched, dilation, hosts_per_rack, build, out / "run", epsilon_us=epsilon_us,
                           realtime=True, idle_poll=idle_poll, switch_cpus=pin, warm_ms=warm, target=target,
                           controller_args=("--activity", str(recorded)) if recorded else ())
        polled = emu.polling  # idle CPUs poll (fabric/cpu.py): recorded beside the results
        clock = R.PathClock(ds, R.compute(ds, epsilon_us=epsilon_us * dilation))
        racks = {h.name: k.id for k in topo.racks for h in k.hosts}
        key_of = PathKeys(clock, emu.t0_ns, racks)
        try:
            shape_hosts(emu, topo, access_bps)
            if FABRIC not in cals:
                # On the idle fabric, with the run's machinery running: idle agents (no flows).  On
                # a quiet machine the same one-packet flows took longer than in a loaded run: the
                # idle vCPUs wake slowly.
                per_rack = max(len(k.hosts) for k in topo.racks)
                idle = start_agents(emu, topo, ds, out / "alone-agents", rate=rate * per_rack, guard_us=guard_us,
                                    flows={}, realtime=True, datapath=datapath)
                try:
                    t0 = time.monotonic()
                    cals[FABRIC] = measure_calibration(emu, topo, out, key_of, access_bps, fp,
                                                       period_ns=ds.hyperperiod_us * 1000)
                    write_calibration(out, FABRIC, cals[FABRIC], measured(t0))
                finally:
                    idle.kill()
            say_curve("alone", cals[FABRIC].curve, access_bps)
            for mode in ([] if calibrate_only else fabric_modes):
                c = cutoff_of(MODES[mode], cutoff, default_cutoff)
                runs[mode] = run_mode(emu, topo, ds, wl, c, out / mode, rate, guard_us, pace_bps=access_bps,
                                      shared=share_circuits, datapath=datapath)
                windows[mode] = runs[mode]["window_unix"]
                replays[mode] = replay_alone(run_mode, emu, topo, ds, wl, c, out / f"{mode}-alone", rate, guard_us,
                                             access_bps, cals[FABRIC], None, replay, seed, shared=share_circuits,
                                             datapath=datapath)
            warmed = emu.stop_warmer()  # what it sent and got back, over every fabric mode
            for r in runs.values():
                r["warm"] = warmed
        finally:
            emu.stop()
        if recorded:
            for mode, name in cut_activity(recorded, out, windows).items():
                runs[mode]["activity"] = name
        for mode, r in runs.items():
            r["done"] = judged(r["done"], cals[FABRIC], key_of.of, replays[mode]["alone"])
            r["by_path"] = by_path(r["done"], cals[FABRIC])
            r["replay"] = replays[mode]["info"]
    if baseline:
        ps = run_packet_switch(build, topo, dilation, wl, out, access_bps, rate, guard_us, idle_poll,
                               switch_cpus=pin, warm_ms=warm, factor=scaling.factor, cal=cals.get(PACKET_SWITCH),
                               fp=fp_ps, calibrate_only=calibrate_only, replay=replay, seed=seed, target=target)
        cals[PACKET_SWITCH] = ps["calibration"]
        if not calibrate_only:
            runs["packet-switch"] = ps["run"]
        polled = polled if fabric_modes else ps.get("idle_poll")
    if calibrate_only:
        say(f"[experiment] fct: calibration written to {out / 'calibration.json'} "
            f"({', '.join(sorted(cals))}); use it with --calibration")
        return {"calibration": {k: v.to_json() for k, v in cals.items()},
                "verdict": f"fct calibration of {', '.join(sorted(cals))} written to {out / 'calibration.json'}"}
    # Issue #14's bound on bulk at low load: bytes at the agents' rate (the access rate less the
    # headroom) while a host may send (the day less the agents' guard at both ends), plus
    # matchings + 1 slots of waiting for a circuit (a rotor's cycle of matchings, one more slot).
    bound = {"bulk_bps": access_bps / HEADROOM, "duty": agent_duty(ds, rate, guard_us),
             "wait_s": (len(sched.rotors[0].matchings) + 1) * ds.slot_us / 1e6}
    # ... and the same bound at what RotorLB can give the flow's rack pair (the model): the share
    # of the K uplinks its relays can drain (workload/bound.py: bulk_bound_check).
    share = pair_shares(sched, wl.flows, {h.name: k.id for k in topo.racks for h in k.hosts})
    # ... and each bulk flow against RotorLB alone: what the model gives the same flow in an
    # empty fabric (rotorlb/model.py: alone_slots), as the agents run it and with the rack's hosts
    # sharing its circuits.
    bound["model"] = rotorlb_alone(*stability_plane(dilation, hosts_per_rack, rate, guard_us), hosts_per_rack)
    bound["slot_s"] = ds.slot_us / 1e6
    # ... and apart for the flows alone at their racks (no other bulk flow from their source
    # rack or to their destination rack at the same time): the bound is one flow's, alone.
    bound["rack_of"] = {h.name: k.id for k in topo.racks for h in k.hosts}
    return report(runs, wl, access_bps, scaling.factor, default_cutoff, dilation, out, hosts_per_rack,
                   bound, epsilon_us=epsilon_us, calibrations=cals, calibration_file=calibration, share=share,
                   judge=stability_judge(sched, dilation, hosts_per_rack, rate, guard_us, share_circuits),
                   agent_rate=rate, guard_us=guard_us, shared=share_circuits, idle_poll=polled,
                   switch_cpus=pin, warm_ms=warm, target=target, datapath=datapath, calibration_machine=cal_machine)

