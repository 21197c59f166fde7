"""``p4rotor experiment fct``: one flow list on Opera, RotorNet and the packet switch, each mode
divided by the same flows alone (experiments/fct/__init__.py says how).
"""

from __future__ import annotations

import json
from pathlib import Path

from ... import schedule as S
from ...fabric.agents import start_agents
from ...schedule import routes as R
from ...schedule import topology as TP
from ...workload import cdf as C
from ...workload import fct as F
from ...workload import flowlist
from ...workload.generate import generate, topology_hosts
from ...workload.paths import PathKeys, alone_samples, judge_by_path
from ...workload.plane import FRAME, HEADROOM, agent_duty, pair_shares, rotorlb_alone, stability_judge, stability_plane
from ...workload.scale import for_emulation
from ..runner import launch, say
from .calibrate import calibrate, measure_alone
from .hosts import shape_hosts
from .mode import run_mode
from .options import (EPSILON_US, MODES, WARM_MAX_LOAD, parse_modes, replayed, share_choice, switch_cpu_choice,
                      warm_choice)
from .packet_switch import run_packet_switch
from .report import report, say_curve

REAL_ACCESS_BPS = 10e9            # the real system the sizes are scaled to


def fct(build: Path, out: Path, workload: str = "websearch", load: float = 0.1, flows: int = 2000,
        cutoff: float | None = None, seed: int = 1, dilation: float = 100.0, rate: float = 100.0,
        guard_us: float = 10000.0, quick: bool = False, baseline: bool = True,
        flow_list: str | None = None, hosts_per_rack: int = 2, modes: str | None = None,
        epsilon_us: float = EPSILON_US, share_circuits: str | bool | None = "auto", idle_poll: bool = True,
        switch_cpus: str | None = "none", warm_switches: str | None = "auto", target: str = "bmv2") -> dict:
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
    warmer's frames cost the agents CPU: docs/notes/cold-switches.md)."""
    chosen = parse_modes(modes)
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
    access_bps = HEADROOM * len(sched.rotors) * rate * (FRAME + 42) * 8
    scaling = for_emulation(access_bps, dilation, sched.hyperperiod_us, REAL_ACCESS_BPS)
    default_cutoff = access_bps / 8 * ds.hyperperiod_us / 1e6
    # The flow list first: bad input (a load, a CDF, a cutoff) stops here, before any switch starts.
    if cutoff is not None and not cutoff >= 0:
        raise C.WorkloadError(f"--cutoff must be >= 0 bytes (or inf), got {cutoff:g}")
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=hosts_per_rack)
    hosts = topology_hosts(topo)
    if flow_list is not None:
        wl = replayed(flow_list, hosts, scaling.factor)
    else:
        wl = generate(hosts, sizes, access_bps=access_bps, load=load, seed=seed, flows=flows, scaling=scaling,
                      name=workload)
    out.mkdir(parents=True, exist_ok=True)
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
    runs, alone, curve, envelope, polled = {}, None, None, None, None
    if fabric_modes:
        # The switches under SCHED_RR: 16 agents and 16 TCP senders otherwise delay them by
        # milliseconds per hop, and frames miss their circuits (fabric/switch.py).
        emu, topo = launch(sched, dilation, hosts_per_rack, build, out / "run", epsilon_us=epsilon_us,
                           realtime=True, idle_poll=idle_poll, switch_cpus=pin, warm_ms=warm, target=target)
        polled = emu.polling  # idle CPUs poll (fabric/cpu.py): recorded beside the results
        try:
            shape_hosts(emu, topo, access_bps)
            # Alone, but with the run's machinery running: idle agents (no flows).  On a quiet
            # machine the same one-packet flows took longer than in the loaded run (min 5.4 ms
            # for a pair whose run flows took 3.5: slowdowns of 0.46): the idle vCPUs wake slowly.
            per_rack = max(len(k.hosts) for k in topo.racks)
            idle = start_agents(emu, topo, ds, out / "alone-agents", rate=rate * per_rack, guard_us=guard_us, flows={},
                                realtime=True)
            try:
                alone = measure_alone(emu, topo, out / "alone", period_ns=ds.hyperperiod_us * 1000, pace_bps=access_bps)
                calibration = calibrate(emu, topo, out / "calibrate", period_ns=ds.hyperperiod_us * 1000,
                                         pace_bps=access_bps)
            finally:
                idle.kill()
            vals = sorted(alone.values())
            sp = json.loads((out / "alone" / "spread.json").read_text())
            say(f"[experiment] fct: a one-packet flow alone takes {vals[0] * 1e3:.1f} ms at the fastest "
                f"(the fastest per rack pair: {vals[0] * 1e3:.1f}-{vals[-1] * 1e3:.1f} ms, {len(vals)} pairs; "
                f"the median of {sp['samples']}: {sp['median_s'] * 1e3:.1f} ms, their mean "
                f"{sp['mean_over_min']:.2f}x the fastest)")
            say_curve("alone", F.AloneCurve.from_samples([(z, t - vals[0]) for z, t in calibration], access_bps),
                       access_bps)
            for mode in fabric_modes:
                cut = MODES[mode]
                c = (cutoff if cutoff is not None else default_cutoff) if cut is None else cut
                runs[mode] = run_mode(emu, topo, ds, wl, c, out / mode, rate, guard_us, pace_bps=access_bps,
                                  shared=share_circuits)
            warmed = emu.stop_warmer()  # what it sent and got back, over every fabric mode
            for r in runs.values():
                r["warm"] = warmed
            t0_ns = emu.t0_ns  # the schedule's slot 0 in wall time: which path a flow met when
        finally:
            emu.stop()
        # Alone = the lower envelope of every FCT the fabric gave a TCP flow, alone or in a run
        # (workload/fct.py: alone_envelope); every fabric mode divides by the same one.
        tcp = [(d.flow.size, d.fct_s) for r in runs.values() for d in r["done"]
               if d.cls == "low-latency" and d.fct_s is not None]
        floor, curve, envelope = F.alone_envelope(min(alone.values()), calibration, tcp, access_bps)
        for r in runs.values():
            r["done"] = F.with_alone(r["done"], floor, curve)
            r["alone_envelope"] = envelope
        # ... and by path: a flow alone rides the low-latency path of the slice it starts in
        # (1-3 rack hops at 8 x 4), and a 3-hop flow alone is not as fast as a direct one.
        clock = R.PathClock(ds, R.compute(ds, epsilon_us=epsilon_us * dilation))
        racks = {h.name: k.id for k in topo.racks for h in k.hosts}
        key_of = PathKeys(clock, t0_ns, racks)
        samples = alone_samples(out / "alone", racks, {h.ip: k.id for k in topo.racks for h in k.hosts})
        pooled = [d for r in runs.values() for d in r["done"]]
        for r in runs.values():
            r["done"], judged = judge_by_path(r["done"], floor, samples, key_of, pooled, access_bps, scaling.factor)
            r.update(judged)
        by_path = next(iter(runs.values()))["alone_by_path"] if runs else {}
        if by_path:
            say("[experiment] fct: alone by path (rack hops there-back at the flow's start): " + ", ".join(
                f"{k}: floor +{v['offset_s'] * 1e3:.2f} ms (p{v['percentile']:g}; fastest +"
                f"{v['fastest_offset_s'] * 1e3:.2f}; {v['alone_samples']} alone, {v['run_flows']} run flows)"
                for k, v in sorted(by_path.items())))
        if envelope["run_flows_lowered"]:
            say(f"[experiment] fct: the run's own flows lowered {envelope['run_flows_lowered']} flows' alone "
                f"(by {envelope['most_lowered_by']:.2f}x at most; floor {floor * 1e3:.2f} ms, set by the "
                f"{envelope['floor_set_by']})")
    if baseline:
        runs["packet-switch"], alone_ps, curve_ps, env_ps = run_packet_switch(build, topo, dilation, wl, out,
                                                                           access_bps, rate, guard_us, idle_poll,
                                                                           switch_cpus=pin, warm_ms=warm,
                                                                           factor=scaling.factor)
        polled = polled if fabric_modes else runs["packet-switch"].get("idle_poll")
        curve = curve or curve_ps
        envelope = envelope or env_ps
        say(f"[experiment] fct: packet switch: a one-packet flow alone takes "
            f"{min(alone_ps.values()) * 1e3:.1f}-{max(alone_ps.values()) * 1e3:.1f} ms")
        alone = alone if alone is not None else alone_ps
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
    return report(runs, wl, access_bps, scaling.factor, default_cutoff, dilation, out, alone, hosts_per_rack,
                   bound, epsilon_us=epsilon_us, curve=curve, envelope=envelope, share=share,
                   judge=stability_judge(sched, dilation, hosts_per_rack, rate, guard_us, share_circuits),
                   agent_rate=rate, guard_us=guard_us, shared=share_circuits, idle_poll=polled,
                   switch_cpus=pin, warm_ms=warm)
