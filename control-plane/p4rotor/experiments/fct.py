"""Flow completion times on the Opera fabric: Opera's two classes vs RotorNet (all bulk).

Method: seed 001 §5.4 (pHost) — Poisson arrivals at a load, slowdown = FCT / FCT alone, mean and
p99 per size bucket.  Opera's split (seed 000 §2.6): a flow below the cutoff (default: one
cycle's bytes at the access rate) goes over the low-latency class with the kernel's TCP (DSCP 46,
host/flows.py); a flow at or above it is bulk for the RotorLB agents (host/agent.py, direct or
two-hop).  ``cutoff 0`` puts every flow on RotorLB: RotorNet.

The default Opera fabric (8 racks x 2 hosts, 4 rotors; ``hosts_per_rack``), an agent in every host, every host's
sending shaped to the access rate (``HEADROOM x rotors x agent rate x agent frame``: an agent
sends on every live circuit at once), agent frames first (:func:`_shape_hosts`).  Flow sizes are scaled so size / cycle capacity is the real system's
(10 Gb/s, workload/scale.py).  One flow list (``flows.json``, replayable) runs once per mode.
"""

from __future__ import annotations

import bisect
import dataclasses
import ipaddress
import json
import math
import sys
import time
from pathlib import Path

from .. import schedule as S
from ..schedule import routes as R
from ..schedule import topology as TP
from ..fabric.agents import account, cycle_start_ns, start_agents
from ..fabric.switch import HOST_RT_PRIORITY, HarnessError, priority_prefix, realtime_allowed, stop_process_group
from ..host import wire
from ..host.flows import CLOSE_WAIT_S, arrival_ns
from ..workload import cdf as C
from ..workload import fct as F
from ..stats import percentile
from ..workload import flowlist
from ..workload import stability as ST
from ..workload.generate import generate, topology_hosts
from ..workload.scale import MSS, for_emulation
from .runner import launch, pyplot, say

FRAME = 1400                      # agent frame (UDP payload), as the RotorLB experiment
REAL_ACCESS_BPS = 10e9            # the real system the sizes are scaled to
MODES = {"opera": None, "rotornet": 0}
ALL_MODES = (*MODES, "packet-switch")


def parse_modes(text: str | None) -> tuple[str, ...]:
    """``--modes opera,packet-switch``: the runs to make, each once (one-line error otherwise)."""
    if text is None:
        return ALL_MODES
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    for m in modes:
        if m not in ALL_MODES:
            raise C.WorkloadError(f"--modes: unknown mode {m!r} (one or more of {', '.join(ALL_MODES)})")
    if not modes or len(set(modes)) != len(modes):
        raise C.WorkloadError(f"--modes {text!r}: name each of {', '.join(ALL_MODES)} at most once, at least one")
    return modes
EARLY_END_CYCLES = 5  # cycles the agents run on once every flow is whole (acknowledgements, the empty queues)
HEADROOM = 1.25  # cutoff: None = one cycle's bytes at the access rate
# Low-latency routes keep off a rotor this long (schedule us) before its night: 15 ms wall at
# dilation 100, what a frame may take through BMv2's queues on 2 cores before its circuit goes
# dark (at 50 us, 3-7 of 1 608 low-latency flows per 2000-flow run lost a frame: rotor NIGHT, ToR
# STALE; at 100, with the switches' clocks synchronised through their clock ports, 1).  At the
# default 8 x 4 any epsilon up to 150 gives the same paths (1.625 hops on average over the
# hyperperiod, diameter 2-3, never fewer than 3 live rotors); 175 leaves a slice disconnected.
EPSILON_US = 150.0


def fct(build: Path, out: Path, workload: str = "websearch", load: float = 0.1, flows: int = 2000,
        cutoff: float | None = None, seed: int = 1, dilation: float = 100.0, rate: float = 100.0,
        guard_us: float = 10000.0, quick: bool = False, baseline: bool = True,
        flow_list: str | None = None, hosts_per_rack: int = 2, modes: str | None = None,
        epsilon_us: float = EPSILON_US, share_circuits: str | bool | None = "auto", idle_poll: bool = True,
        switch_cpus: str | None = "none", warm_switches: str | None = "auto") -> dict:
    """``baseline``: also run the flow list on one packet switch (every flow over TCP);
    ``flow_list``: replay this file (a ``flows.json`` an earlier run wrote, or any list naming
    this fabric's hosts, sizes in emulated bytes) instead of generating one; ``hosts_per_rack``:
    hosts in each of the 8 racks (default 2, as the issue's fabric), every one with its own agent;
    ``modes``: which of opera, rotornet and packet-switch to run ("a,b"; default all three);
    ``epsilon_us``: low-latency routes keep off a rotor this long (schedule time) before its night;
    ``share_circuits``: a rack's agents share its circuits (host/share.py) instead of a plane per
    host, and stability is judged against RotorLB on racks that share ("on"/True, "off"/False, or
    "auto", the default: on at a load of at most ``SHARE_MAX_LOAD``); ``idle_poll``: idle CPUs
    poll while the fabric is up (fabric/cpu.py; False: they halt, as before 2026-11-25);
    ``switch_cpus``: the switches run on these CPUs only, the hosts' processes keep the rest
    ("auto": the upper half of this machine's CPUs, fabric/cpu.py; or a list such as "1");
    "none" (the default): anywhere.  Pinned, every FCT is shorter but the one-packet floor falls
    further than the typical flow, so low-load slowdowns rise (docs/experiments.md, "Switches
    on their own CPU"); ``warm_switches``: every this many ms a probe through each switch's
    clock port keeps it warm (fabric/warm.py; "on": every 2 ms; "off": never; "auto", the
    default: on at a load of at most ``WARM_MAX_LOAD``, where the fabric is mostly idle and the
    agents lose nothing to it, off above, where the traffic keeps the switches warm and the
    warmer's frames cost the agents CPU: docs/experiments.md, "Warm switches")."""
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
    if warm_switches in (None, "auto"):
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
                           realtime=True, idle_poll=idle_poll, switch_cpus=pin, warm_ms=warm)
        polled = emu.polling  # idle CPUs poll (fabric/cpu.py): recorded beside the results
        try:
            _shape_hosts(emu, topo, access_bps)
            # Alone, but with the run's machinery running: idle agents (no flows).  On a quiet
            # machine the same one-packet flows took longer than in the loaded run (min 5.4 ms
            # for a pair whose run flows took 3.5: slowdowns of 0.46): the idle vCPUs wake slowly.
            per_rack = max(len(k.hosts) for k in topo.racks)
            idle = start_agents(emu, topo, ds, out / "alone-agents", rate=rate * per_rack, guard_us=guard_us, flows={},
                                realtime=True)
            try:
                alone = _alone(emu, topo, out / "alone", period_ns=ds.hyperperiod_us * 1000, pace_bps=access_bps)
                calibration = _calibrate(emu, topo, out / "calibrate", period_ns=ds.hyperperiod_us * 1000,
                                         pace_bps=access_bps)
            finally:
                idle.kill()
            vals = sorted(alone.values())
            sp = json.loads((out / "alone" / "spread.json").read_text())
            say(f"[experiment] fct: a one-packet flow alone takes {vals[0] * 1e3:.1f} ms at the fastest "
                f"(the fastest per rack pair: {vals[0] * 1e3:.1f}-{vals[-1] * 1e3:.1f} ms, {len(vals)} pairs; "
                f"the median of {sp['samples']}: {sp['median_s'] * 1e3:.1f} ms, their mean "
                f"{sp['mean_over_min']:.2f}x the fastest)")
            _say_curve("alone", F.AloneCurve.from_samples([(z, t - vals[0]) for z, t in calibration], access_bps),
                       access_bps)
            for mode in fabric_modes:
                cut = MODES[mode]
                c = (cutoff if cutoff is not None else default_cutoff) if cut is None else cut
                runs[mode] = _run(emu, topo, ds, wl, c, out / mode, rate, guard_us, pace_bps=access_bps,
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
            r["done"] = _with_alone(r["done"], floor, curve)
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
        runs["packet-switch"], alone_ps, curve_ps, env_ps = _packet_switch(build, topo, dilation, wl, out,
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
    # of the K uplinks its relays can drain (workload/fct.py: bulk_bound_check).
    share = pair_shares(sched, wl.flows, {h.name: k.id for k in topo.racks for h in k.hosts})
    # ... and each bulk flow against RotorLB alone: what the model gives the same flow in an
    # empty fabric (rotorlb/model.py: alone_slots), as the agents run it and with the rack's hosts
    # sharing its circuits.
    bound["model"] = rotorlb_alone(*stability_plane(dilation, hosts_per_rack, rate, guard_us), hosts_per_rack)
    bound["slot_s"] = ds.slot_us / 1e6
    # ... and apart for the flows alone at their racks (no other bulk flow from their source
    # rack or to their destination rack at the same time): the bound is one flow's, alone.
    bound["rack_of"] = {h.name: k.id for k in topo.racks for h in k.hosts}
    return _report(runs, wl, access_bps, scaling.factor, default_cutoff, dilation, out, alone, hosts_per_rack,
                   bound, epsilon_us=epsilon_us, curve=curve, envelope=envelope, share=share,
                   judge=stability_judge(sched, dilation, hosts_per_rack, rate, guard_us, share_circuits),
                   agent_rate=rate, guard_us=guard_us, shared=share_circuits, idle_poll=polled,
                   switch_cpus=pin, warm_ms=warm)


# --warm-switches auto warms at or below this load.  Measured side by side (docs/experiments.md,
# "Warm switches"): Data Mining 1 %, first 400 flows: low-latency mean slowdown 2.04 -> 1.90, bulk
# unchanged; Web Search 10 %: short flows 1.94 -> 1.85 but bulk 16-24 % slower.
WARM_MAX_LOAD = 0.05


# --share-circuits auto shares at or below this load.  Measured (docs/experiments.md, "Hosts share
# their rack's circuits by default at 1 %"): Web Search 1 %, every bulk flow alone in the fabric
# within issue #14's bound shared (236 of 236; a plane per host 33 of 146), bulk FCT median 0.63x
# the bound against 1.09x; Web Search 5 %, side by side: bulk FCT median the same (2.27 / 2.25 s),
# mean 6 % longer shared, 150 agent frames resent against 11; at 10 % the shared agents fall
# behind RotorLB (docs/rotorlb.md, "Hosts sharing their rack's circuits").
SHARE_MAX_LOAD = 0.01


def share_choice(choice: str | bool | None, load: float | None) -> bool:
    """``--share-circuits``: "on"/True, "off"/False, or "auto" (or None) -> on at a known ``load``
    of at most SHARE_MAX_LOAD.  A WorkloadError (exit 2) names a bad one."""
    if isinstance(choice, bool):
        return choice
    if choice is None or choice == "auto":
        return load is not None and load <= SHARE_MAX_LOAD
    if choice in ("on", "off"):
        return choice == "on"
    raise C.WorkloadError(f"--share-circuits {choice!r}: must be 'on', 'off' or 'auto'")


def warm_choice(text: str | None, load: float | None) -> float | None:
    """``--warm-switches``: "off" -> None, "on" -> the warmer's default period, "auto" (or None)
    -> "on" at a known ``load`` of at most WARM_MAX_LOAD, else "off"; or a period in ms
    (fabric/warm.py: 0.1-1000).  A WorkloadError (exit 2) names a bad one."""
    from ..fabric.warm import DEFAULT_PERIOD_MS, WarmError, check_period

    if text is None or text == "auto":
        text = "on" if load is not None and load <= WARM_MAX_LOAD else "off"
    if text == "off":
        return None
    if text == "on":
        return DEFAULT_PERIOD_MS
    try:
        return check_period(text)
    except WarmError as ex:
        raise C.WorkloadError(f"--warm-switches: {ex} (or 'auto', 'on', 'off')") from None


def switch_cpu_choice(text: str | None) -> str | None:
    """``--switch-cpus``: "auto" -> the upper half of this machine's CPUs (None on one CPU),
    "none" (or None) -> None (anywhere), else a checked CPU list; a WorkloadError (exit 2) names
    a bad one."""
    from ..fabric.cpu import cpu_list, default_switch_cpus

    if text == "auto":
        return default_switch_cpus()
    if text is None or text == "none":
        return None
    try:
        return cpu_list(text)
    except ValueError as ex:
        raise C.WorkloadError(f"--switch-cpus: {ex}") from None


def stability_plane(dilation: float, hosts_per_rack: int, rate: float = 100.0,
                    guard_us: float = 10000.0) -> tuple[S.Schedule, ST.Plane]:
    """The experiment's fabric as the RotorLB model sees it (workload/stability.py): the default
    Opera schedule; the agents of the n-th host of each rack are plane n; a slot unit is the
    frames one agent window carries (``agent_duty``)."""
    from ..host.agent import WINDOW_SLACK

    sched = S.generate_opera(8, 4, 1000, 100)
    ds = S.dilate(sched, dilation)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=hosts_per_rack)
    where = {h.name: (k.id, n) for k in topo.racks for n, h in enumerate(k.hosts)}
    frames = max(1, int(rate * (ds.day_us - 2 * guard_us) / 1e6 * (1 - WINDOW_SLACK)))
    return sched, ST.Plane(where=where, payload=FRAME - wire.DATA_HEADER, frames_per_unit=frames,
                           slot_s=ds.slot_us / 1e6)


def stability_judge(sched: S.Schedule, dilation: float, hosts_per_rack: int, rate: float, guard_us: float,
                    shared: bool = False):
    """``judge(flows, cutoff, pending, arrivals_s)``: a mode's stability (workload/stability.py).
    The slack on the model's queue: one cycle of every agent's every circuit (frames the agents'
    protocol holds a slot or two longer than the model: offers, a relay's second hop).
    ``shared``: the racks' hosts share their circuits (the model's plane is the rack's)."""
    s, plane = stability_plane(dilation, hosts_per_rack, rate, guard_us)
    from ..rotorlb.model import cycle_slots

    slack = hosts_per_rack * s.racks * len(s.rotors) * cycle_slots(s) * plane.unit_bytes
    plane = plane.rack_shared() if shared else plane

    def judge(flows, cutoff: float, pending, arrivals_s: float) -> dict:
        return ST.judge(pending, s, flows, cutoff, plane, arrivals_s, slack)

    return judge


def rejudge(run: Path, rate: float = 100.0, guard_us: float = 10000.0) -> dict:
    """The stability of an earlier run, judged again from its ``fct.json`` and ``flows.json``
    (``p4rotor workload stability``): the fct.json with every fabric mode's ``stable`` and
    ``stability`` replaced (not written)."""
    r = json.loads((run / "fct.json").read_text())
    flows = flowlist.read(str(run / "flows.json"))[0]
    sched = S.generate_opera(8, 4, 1000, 100)
    args = (r.get("dilation", 100.0), r.get("hosts_per_rack", 1), r.get("agent_rate", rate),
            r.get("guard_us", guard_us))
    judge = stability_judge(sched, *args, r.get("shared_circuits", False))
    for mode, m in r["modes"].items():
        if m.get("pending_bytes") is None or m.get("arrivals_s") is None:
            continue
        st = judge(flows, m["cutoff_bytes"], [tuple(x) for x in m["pending_bytes"]], m["arrivals_s"])
        m["stable"], m["stability"] = st["stable"], st
    _rejudge_bulk(r, flows, *stability_plane(*args), args[1], r.get("shared_circuits", False))
    return r


def repath(run: Path) -> dict:
    """An earlier run's low-latency class judged again, each one-packet flow against the 5th
    percentile of the one-packet FCTs on its own path (:func:`judge_by_path`), from the run's
    files: its fct.json (the floor and size curve it divided by), flows.json, and per mode the
    senders' and receivers' logs of the one-packet flows alone and of its run -- Opera's
    (``alone/``, ``opera/``, with the fabric's schedule and epoch in ``run/``) and the packet
    switch's (``alone-packet-switch/``, ``packet-switch/``; one path; when it ran without a
    fabric mode).  Returns the fct.json
    with those modes' low-latency summaries, ``alone_by_path``, ``low_latency_within_spread``,
    ``low_latency_vs_fastest`` and ``low_latency_vs_floor`` replaced (not written).  A
    WorkloadError (one line) names a file the run lacks."""
    r = json.loads((run / "fct.json").read_text())
    modes = r.get("modes", {})
    need = {"opera": [run / "alone", run / "opera", run / "run" / "schedule.json", run / "run" / "status.json"],
            "packet-switch": [run / "alone-packet-switch", run / "packet-switch"]}
    # The packet switch's own floor and size curve are the run's only when it ran alone: beside a
    # fabric, fct.json keeps the fabric's (the switch's were used in the run and not kept).
    have = [m for m in need if m in modes and (m == "opera" or not {"opera", "rotornet"} & set(modes))]
    missing = next((p for m in have for p in [run / "flows.json"] + need[m] if not p.exists()), None)
    if not have or missing is not None or not r.get("alone_curve"):
        raise C.WorkloadError(f"{run}: {'no ' + str(missing.relative_to(run)) if missing else 'no Opera or packet-switch run with a size curve'}"
                              " (an fct run's directory, with its logs, from 2026-11-22 on)")
    flows, meta = flowlist.read(str(run / "flows.json"))
    racks = {h: v["rack"] for h, v in meta["hosts"].items()}
    ip_rack = {v["ip"]: v["rack"] for v in meta["hosts"].values()}
    floor = r["alone_one_packet_s"]["floor"]
    # The size curve as fct.json keeps it, rounded to the us: half a us lower, so that the flow
    # that set a point (its slowdown 1 in the run) is not put a hair below it.
    curve = F.AloneCurve(tuple((int(a), max(0.0, b - 0.5e-6)) for a, b in r["alone_curve"]["points"]),
                         r["alone_curve"]["tail_mbps"] * 1e6)
    factor = r.get("scaling_factor", 1.0)
    access = r["access_mbps"] * 1e6
    for mode in have:
        m = modes[mode]
        if mode == "opera":
            ds = S.load(run / "run" / "schedule.json")
            clock = R.PathClock(ds, R.compute(ds, epsilon_us=(r.get("epsilon_us") or 0.0) * r.get("dilation", 100.0)))
            key_of = PathKeys(clock, json.loads((run / "run" / "status.json").read_text())["t0_ns"], racks)
            logs, alone = run / "opera", run / "alone"
        else:
            key_of, logs, alone = OneSwitch(), run / "packet-switch", run / "alone-packet-switch"
        ll = _logged_low_latency(flows, m, logs, floor, curve)
        ll, judged = judge_by_path(ll, floor, alone_samples(alone, racks, ip_rack), key_of, ll, access, factor)
        m["classes"]["low-latency"] = F.summarize(ll, access, factor).get("low-latency", {})
        m.update(judged)
    return r


def _logged_low_latency(flows, m: dict, logs: Path, floor: float, curve: F.AloneCurve) -> list:
    """A mode's low-latency flows from its senders' and receivers' logs, each with the floor and
    its size's extra as its alone (what the run divided by)."""
    cls = {x[0]: x[1] for x in m["per_flow"]}
    issued, arrived, retrans, dsack = {}, {}, {}, {}
    for f in logs.glob("[rt]x-*.jsonl"):
        for line in f.read_text().splitlines():
            x = json.loads(line)
            if f.name.startswith("tx-"):
                issued[x["id"]] = x["issued_ns"]
                if x.get("dsack") is not None:
                    dsack[x["id"]] = x["dsack"]
            else:
                arrived[x["id"]] = arrival_ns(x)
            if x.get("retrans") is not None:
                retrans[x["id"]] = retrans.get(x["id"], 0) + x["retrans"]
    return [F.Done(f, "low-latency", issued.get(f.id, 0), arrived.get(f.id) if f.id in issued else None, floor,
                   curve.extra_s(f.size), retrans.get(f.id), dsack.get(f.id))
            for f in flows if cls.get(f.id) == "low-latency"]


def _rejudge_bulk(r: dict, flows, sched: S.Schedule, plane: ST.Plane, hosts_per_rack: int,
                  shared: bool = False) -> None:
    """Every mode's ``bulk_bound`` again from its ``per_flow`` FCTs, with the pair's capacity and
    RotorLB alone (:func:`rotorlb_alone`) beside the issue's bound, at the bound's own rate,
    duty and wait as the run recorded them."""
    by_id = {f.id: f for f in flows}
    alone = rotorlb_alone(sched, plane, hosts_per_rack)
    share = pair_shares(sched, flows, {h: rk for h, (rk, _) in plane.where.items()})
    for m in r["modes"].values():
        bb = m.get("bulk_bound")
        if not bb or not m.get("per_flow"):
            continue
        done = [F.Done(by_id[fid], cls, 0, None if fct is None else round(fct * 1e9))
                for fid, cls, _, fct, *_ in m["per_flow"]]
        m["bulk_bound"] = F.bulk_bound_check(done, bb["bulk_mbps"] * 1e6, bb["duty"], bb["wait_s"], share=share,
                                             model=alone, slot_s=plane.slot_s, shared=shared,
                                             rack_of={h: rk for h, (rk, _) in plane.where.items()})


def capacity_of(flow_list: str, hosts_per_rack: int = 2, dilation: float = 100.0, rate: float = 100.0,
                guard_us: float = 10000.0, rack_shared: bool = False) -> dict[str, dict]:
    """Before a run: is this flow list within RotorLB's capacity on the default fabric, for
    Opera (the default cutoff) and RotorNet (cutoff 0)?  The model alone (workload/stability.py,
    question 1), in seconds rather than the run's hours.  ``rack_shared``: the same question for
    racks whose hosts share their circuits (:meth:`ST.Plane.rack_shared`) instead of a plane per
    host."""
    flows = flowlist.read(flow_list)[0]
    s, plane = stability_plane(dilation, hosts_per_rack, rate, guard_us)
    for f in flows:
        for end in (f.src, f.dst):
            if end not in plane.where:
                raise C.WorkloadError(f"{flow_list}: flow {f.id}: host {end!r} is not in the default fabric with "
                                      f"{hosts_per_rack} hosts per rack (--hosts-per-rack?)")
    access_bps = HEADROOM * len(s.rotors) * rate * (FRAME + 42) * 8
    cutoff = access_bps / 8 * S.dilate(s, dilation).hyperperiod_us / 1e6
    plane = plane.rack_shared() if rack_shared else plane
    return {mode: dict(ST.capacity(s, flows, cut, plane), cutoff_bytes=cut)
            for mode, cut in (("opera", cutoff), ("rotornet", 0.0))}


def rotorlb_alone(sched: S.Schedule, plane: ST.Plane, hosts_per_rack: int):
    """``alone(flow) -> (s, s, s)``: a bulk flow's FCT alone in RotorLB's model (rotorlb/model.py:
    ``alone_slots``, the mean over a cycle's slots it can arrive in), in wall seconds: as the
    agents run the fabric (one plane per host: a circuit carries one unit, the flow is queued at
    once), and with the rack's circuits shared by its hosts (a circuit carries ``hosts_per_rack``
    units; the host's link feeds the rack's queue at its bulk rate, one unit per rotor a slot:
    docs/experiments.md, "The bulk bound"); third, the issue's bound on the agents' own frames
    (their header counted: a unit per rotor a slot, plus matchings + 1 slots).  Memoised per
    (rack pair, frames)."""
    from ..rotorlb.model import alone_slots

    k = len(sched.rotors)
    wait = len(sched.rotors[0].matchings) + 1
    memo: dict[tuple[int, int, int], tuple[float, float, float]] = {}

    def alone(flow) -> tuple[float, float, float]:
        key = (plane.where[flow.src][0], plane.where[flow.dst][0], plane.frames(flow.size))
        if key not in memo:
            sr, dr, frames = key
            units = frames / plane.frames_per_unit
            memo[key] = (alone_slots(sched, sr, dr, units) * plane.slot_s,
                         alone_slots(sched, sr, dr, units, capacity=hosts_per_rack, feed=k) * plane.slot_s,
                         (units / k + wait) * plane.slot_s)
        return memo[key]

    return alone


def pair_shares(sched: S.Schedule, flows, rack: dict[str, int]) -> dict[int, float]:
    """Per flow: the share of the K uplinks RotorLB's model delivers for its rack pair alone and
    saturated (rotorlb/model.py; seed 000 §2.5.4).  ``rack``: host name -> rack."""
    from ..rotorlb.model import evaluate

    k = len(sched.rotors)
    cap: dict[tuple[int, int], float] = {}
    out = {}
    for f in flows:
        pair = (rack[f.src], rack[f.dst])
        if pair not in cap:
            cap[pair] = float(evaluate(sched, [pair]).rotorlb.delivered_per_slot) / k
        out[f.id] = min(1.0, cap[pair])
    return out


def drain_after_arrivals(bulk_sizes: list[int], span_s: float, cycle_s: float, circuit_Bps: float,
                         racks: int, tcp_sizes: list[int] = (), access_Bps: float = 0.0) -> float:
    """How long a run waits after its last arrival for its flows: every bulk byte at a quarter of
    the access rate (total bulk over one circuit's bytes/s per rack, twice), but no longer than the
    arrivals lasted or the largest bulk flow takes on one circuit, whichever is longer; and ten
    cycles.  A stable run's flows are whole long before, and it ends then (``EARLY_END_CYCLES``).
    An unstable run's backlog would take the whole first term (25 min per mode for 2000 Data
    Mining flows); it is judged on its arrivals, and what has not finished is counted unfinished.
    And at least twice the largest TCP flow's time at ``access_Bps`` (a 56 MB Data Mining flow
    takes 78 s: the packet switch's drain of 10 cycles cut the last one short)."""
    tcp = 2 * max(tcp_sizes) / access_Bps if tcp_sizes and access_Bps > 0 else 0.0
    if not bulk_sizes:
        return 10 * cycle_s + tcp + 5
    backlog = 2 * sum(bulk_sizes) / circuit_Bps / max(1, racks)
    return 10 * cycle_s + max(tcp, min(backlog, max(span_s, max(bulk_sizes) / circuit_Bps))) + 5


def _bulk_whole(received: dict[str, int], frames_of: dict[int, int]) -> int:
    """How many bulk flows have all their frames at the destination: ``received`` counts frames
    per ``"origin:flow"`` (:meth:`Agents.received`; flow ids are the run's, unique)."""
    got: dict[int, int] = {}
    for key, n in received.items():
        fid = int(key.split(":")[1])
        got[fid] = got.get(fid, 0) + n
    return sum(1 for fid, n in frames_of.items() if got.get(fid, 0) >= n)


class PathKeys:
    """A TCP flow's path class: "F-B", the rack hops of the low-latency path there (SYN, data)
    and back (SYN-ACK) in the slice where it began (``t_ns``, wall; ``t0_ns``: the schedule's
    slot 0), None if either has no path then."""

    def __init__(self, clock: R.PathClock, t0_ns: int, racks: dict[str, int]):
        self.clock, self.t0_ns, self.racks = clock, t0_ns, racks

    def __call__(self, src: int, dst: int, t_ns: int) -> str | None:
        t_us = (t_ns - self.t0_ns) / 1000
        there, back = self.clock.hops(t_us, src, dst), self.clock.hops(t_us, dst, src)
        return None if there is None or back is None else f"{there}-{back}"

    def of(self, d: F.Done) -> str | None:
        return self(self.racks[d.flow.src], self.racks[d.flow.dst], d.start_ns)


class OneSwitch:
    """:class:`PathKeys` for the packet switch: every flow crosses its one switch, one path."""

    KEY = "switch"

    def __call__(self, src: int, dst: int, t_ns: int) -> str:
        return self.KEY

    def of(self, d: F.Done) -> str:
        return self.KEY


def alone_samples(d: Path, rack_of_host: dict[str, int], rack_of_ip: dict[str, int]) -> list[tuple[int, int, int, float]]:
    """``_alone``'s one-packet flows, from its files in ``d`` (what each host sent, when it began
    each, when each arrived): (source rack, destination rack, issued ns, FCT s) per flow."""
    sent: dict[int, tuple[str, str]] = {}
    for f in d.glob("flows-*.json"):
        for fl in json.loads(f.read_text()):
            sent[fl["id"]] = (f.name[len("flows-"):-len(".json")], fl["dst"])
    issued: dict[int, int] = {}
    for f in d.glob("tx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            issued[r["id"]] = r["issued_ns"]
    out = []
    for f in d.glob("rx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["id"] in sent and r["id"] in issued:
                src, dst = sent[r["id"]]
                out.append((rack_of_host[src], rack_of_ip[dst], issued[r["id"]], (arrival_ns(r) - issued[r["id"]]) / 1e9))
    return out


def one_packet(d: F.Done) -> bool:
    """A low-latency flow of one segment's payload: its alone FCT is the floor (by path), no size curve."""
    return d.cls == "low-latency" and d.flow.size <= MSS


def alone_by_path(done: list, floor_s: float, samples, key_of: PathKeys) -> tuple[dict[str, float], dict[str, dict]]:
    """Per path class (:class:`PathKeys`), what it adds to the one-packet floor: the 5th
    percentile (:func:`F.path_alone`) of the one-packet flows of that class, alone (``samples``:
    :func:`alone_samples`) or in the run (``done``'s finished one-packet flows) -- at low load
    most run flows meet an idle path, and the run's thousands steady the calibration's hundreds.
    Returns the offsets and, per class, the offset, the fastest flow's (``fastest_offset_s``,
    :func:`F.path_offsets`: the strict alone, shown beside) and how many flows of each kind it
    is taken over.  Only one-packet flows: a larger flow's alone comes from the size curve,
    itself the fastest of every path (flows met a shorter path mid-flow), which judges it as
    before."""
    res, fcts = [], {}
    for a, b, t, fct in samples:
        k = key_of(a, b, t)
        res.append((k, fct - floor_s))
        fcts.setdefault(k, ([], []))[0].append(fct)
    for d in done:
        if one_packet(d) and d.fct_s is not None:
            k = key_of.of(d)
            res.append((k, d.fct_s - floor_s))
            fcts.setdefault(k, ([], []))[1].append(d.fct_s)
    offsets, fastest = F.path_alone(res), F.path_offsets(res)
    return offsets, {k: {"offset_s": v, "percentile": F.ALONE_PERCENTILE, "fastest_offset_s": fastest[k],
                         "alone_s": round(floor_s + v, 7), "fastest_s": round(floor_s + fastest[k], 7),
                         "alone_samples": len(fcts[k][0]), "run_flows": len(fcts[k][1]),
                         # The two spreads, for paths_plot and a reader: FCT s at these percentiles.
                         "alone_fct_s": _quantiles(fcts[k][0]), "run_fct_s": _quantiles(fcts[k][1])}
                     for k, v in offsets.items()}


QUANTILES = (0, 5, 10, 25, 50, 75, 90, 95, 99, 100)


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    return {f"p{q}": round(percentile(xs, q), 7) for q in QUANTILES} if xs else None


def judge_by_path(done: list, floor_s: float, samples, key_of: PathKeys, pooled: list,
                  access_bps: float, factor: float) -> tuple[list, dict]:
    """The low-latency class's one-packet flows judged against their own path's alone
    (:func:`alone_by_path` over ``pooled``, every mode's flows): ``done`` with those flows'
    alone set, and what fct.json keeps of it -- ``alone_by_path``, ``low_latency_within_spread``
    (flows faster than their path's alone: their own alone, slowdown 1), and the class's mean
    slowdown the two stricter ways, shown beside: against the fastest flow on its own path
    (``low_latency_vs_fastest``) and on any path (``low_latency_vs_floor``)."""
    offsets, by_path = alone_by_path(pooled, floor_s, samples, key_of)

    def mean(ds: list) -> float | None:
        return F.class_mean(F.summarize(ds, access_bps, factor).get("low-latency", {}))

    fastest = {k: v["fastest_offset_s"] for k, v in by_path.items()}
    strict, _ = F.with_path_alone(done, floor_s, fastest, key_of.of, one_packet)
    judged, within = F.with_path_alone(done, floor_s, offsets, key_of.of, one_packet)
    return judged, {"alone_by_path": by_path, "low_latency_within_spread": within,
                    "low_latency_vs_fastest": mean(strict), "low_latency_vs_floor": mean(done)}


def _with_alone(done: list, floor_s: float, curve: F.AloneCurve) -> list:
    """Every flow's alone FCT: the floor plus what its size adds (the envelope's curve)."""
    return [dataclasses.replace(d, alone_s=floor_s, extra_s=curve.extra_s(d.flow.size)) for d in done]


def _say_curve(what: str, curve: F.AloneCurve, access_bps: float) -> None:
    say(f"[experiment] fct: {what}, a flow's size adds " + ", ".join(
        f"{round(s / SEGMENT)}: {e * 1e3:.1f} ms" for s, e in curve.points[:40]) + f" (segments: time), then "
        f"{curve.tail_bps / 1e6:.2f} Mb/s ({access_bps / 1e6:.2f} configured)")


def agent_duty(ds: S.Schedule, rate: float, guard_us: float) -> float:
    """The share of a slot an agent sends in: the whole frames one window carries (the day less
    the guard at both ends, less the agent's WINDOW_SLACK: host/agent.py's capacity) at ``rate``,
    over the slot's time at that rate.  At the defaults 5 frames of a 100 ms slot at 100/s: 0.5,
    where the day less the guards alone would say 0.7."""
    from ..host.agent import WINDOW_SLACK

    window_s = (ds.day_us - 2 * guard_us) / 1e6
    return max(0, int(rate * window_s * (1 - WINDOW_SLACK))) / (rate * ds.slot_us / 1e6)


def replayed(path: str, hosts, factor: float):
    """The flow list in ``path`` as this run's workload: every flow between two hosts of this
    fabric in different racks (one-line error otherwise).  Sizes are taken as they are (emulated
    bytes); a list scaled for another access rate or dilation (its meta says) is refused, since
    its size buckets would not be the real system's."""
    from ..workload.generate import Workload

    fl, meta = flowlist.read(path)
    rack = {h.name: h.rack for h in hosts}
    for f in fl:
        for end in (f.src, f.dst):
            if end not in rack:
                raise C.WorkloadError(f"{path}: flow {f.id}: host {end!r} is not in this fabric "
                                      f"({', '.join(sorted(rack))})")
        if rack[f.src] == rack[f.dst]:
            raise C.WorkloadError(f"{path}: flow {f.id}: {f.src} and {f.dst} are in the same rack (inter-rack flows only)")
    theirs = (meta.get("scaling") or {}).get("factor")
    if theirs is not None and not math.isclose(theirs, factor, rel_tol=1e-6):
        raise C.WorkloadError(f"{path}: sizes scaled by {theirs:g}, this run scales by {factor:g} "
                              "(another access rate or dilation): its size buckets would be wrong")
    meta = dict(meta, replayed_from=str(path))
    meta.setdefault("workload", Path(path).name)
    meta.setdefault("load", None)
    return Workload(fl, meta)


def packet_switch_topology(topo: TP.Topology, dilation: float) -> TP.Topology:
    """The ideal packet switch of the baseline (issue #14): ONE ToR (the same P4 program) with
    every host of ``topo`` on it -- same names, addresses, MACs, so the same flow list replays --
    forwarding by destination address, never through a rotor.  The ToR program needs a fabric
    to exist, so a second rack (one unused host) and one rotor complete the topology; no flow
    touches them."""
    every = [h for k in topo.racks for h in k.hosts]
    hosts = tuple(TP.Host(h.name, h.ip, h.mac, 11 + i) for i, h in enumerate(every))
    sched = S.dilate(S.generate_rotornet(2, 1, 1000, 100), dilation)
    nets = [ipaddress.ip_network(h.ip + "/32") for h in hosts]
    prefix = ipaddress.ip_network(f"{hosts[0].ip}/{_common_prefix(nets)}", strict=False)
    spare = next(n for n in ipaddress.ip_network("10.255.0.0/16").subnets(new_prefix=24) if not n.overlaps(prefix))
    rot = TP.RotorSwitch("rotor0", 1, 50101, {0: 1, 1: 2})
    racks = [TP.Rack(0, str(prefix), TP.Tor("tor0", 101, 50201, {"rotor0": 1}), hosts),
             TP.Rack(1, str(spare), TP.Tor("tor1", 102, 50202, {"rotor0": 1}),
                     (TP.Host("hps", str(next(spare.hosts())), "02:00:0a:ff:00:01", 11),))]
    t = TP.Topology(sched, "schedule.json", [rot], racks, host_mtu=topo.host_mtu, fabric_mtu=topo.fabric_mtu)
    TP.validate(t)
    return t


def _common_prefix(nets) -> int:
    first = int(nets[0].network_address)
    plen = 32
    for n in nets[1:]:
        while (int(n.network_address) >> (32 - plen)) != (first >> (32 - plen)):
            plen -= 1
    return plen


def _packet_switch(build: Path, topo: TP.Topology, dilation: float, wl, out: Path, access_bps: float,
                   rate: float, guard_us: float, idle_poll: bool = True, switch_cpus: str | None = None,
                   warm_ms: float | None = None, factor: float = 1.0):
    """The same flow list, hosts and access rates on one switch, every flow over TCP: the
    packet-switch FCTs and their own "alone" FCTs, measured (issue #14).  ``factor``: the
    workload's scaling (real bytes per emulated byte), for the size buckets."""
    from ..fabric.mininet import Emulation

    pt = packet_switch_topology(topo, dilation)
    emu = Emulation(pt, build, out / "run-packet-switch", mode="clock", say=say, realtime=True,
                    idle_poll=idle_poll, switch_cpus=switch_cpus, warm_ms=warm_ms)
    try:
        emu.start()
        polled = emu.polling
        _shape_hosts(emu, pt, access_bps)
        hosts = [h for h in pt.racks[0].hosts]
        alone = _alone(emu, pt, out / "alone-packet-switch", hosts=hosts, pace_bps=access_bps)
        calibration = _calibrate(emu, pt, out / "calibrate-packet-switch", hosts=hosts, pace_bps=access_bps)
        r = _run(emu, pt, pt.schedule, wl, math.inf, out / "packet-switch", rate, guard_us, pace_bps=access_bps)
        r["warm"] = emu.stop_warmer()
    finally:
        emu.stop()
    tcp = [(d.flow.size, d.fct_s) for d in r["done"] if d.fct_s is not None]
    floor, curve, envelope = F.alone_envelope(min(alone.values()), calibration, tcp, access_bps)
    r["done"] = _with_alone(r["done"], floor, curve)
    r["alone_envelope"] = envelope
    # One-packet flows as on the fabric: against the 5th percentile of the one-packet FCTs
    # through the switch (judge_by_path), so that the two are judged alike.
    racks = {h.name: k.id for k in pt.racks for h in k.hosts}  # the hosts _alone used (one rack)
    samples = alone_samples(out / "alone-packet-switch", racks, {h.ip: k.id for k in pt.racks for h in k.hosts})
    r["done"], judged = judge_by_path(r["done"], floor, samples, OneSwitch(), r["done"], access_bps,
                                      factor)
    r.update(judged)
    r["idle_poll"] = polled
    return r, alone, curve, envelope


def _start_flows(emu, plan: dict[str, list], out: Path, end_ns: int, pace_bps: float = 0.0) -> list:
    """One short-flow process (host/flows.py) per host: its flows, its receive and send logs.
    ``pace_bps``: no TCP flow sends faster than this (the access rate: a NIC's pace).  Without it,
    BBR's start-up sent at up to 2.9x its first estimate, which the fast veth made far above the
    shaped rate: a 1 MB transfer held 210 KB in its host's htb (a SYN behind it waited 90-105 ms);
    at the access rate it holds 2 frames, the SYN waits 9-11 ms and the transfer takes as long
    (1.448 s both: docs/experiments.md, fix 13).
    Under SCHED_RR below the switches (``FLOWS_RT_PRIORITY``): an application answers at once on
    real hosts, here it waited for the 16 agents' time slices (a one-packet flow's median FCT
    was 2.5x its alone, most of it the senders' and receivers' Python waking up)."""
    procs = []
    for h, fl in plan.items():
        (out / f"flows-{h}.json").write_text(json.dumps(fl))
        procs.append(emu.popen(h, priority_prefix(True, FLOWS_RT_PRIORITY, 0) + [sys.executable, "-m", "p4rotor.host.flows", "--flows", str(out / f"flows-{h}.json"),
                                   "--rx-log", str(out / f"rx-{h}.jsonl"), "--tx-log", str(out / f"tx-{h}.jsonl"),
                                   "--end-ns", str(end_ns), "--pace-bps", str(pace_bps)], stdout=None, stderr=None))
    return procs


def _shape_hosts(emu, topo, access_bps: float) -> None:
    """Every host sends at most ``access_bps`` (htb on its link to the ToR, one frame per packet),
    the agents' frames (DSCP 8, paced, below 1/HEADROOM of the rate) first: a frame that waits
    behind a TCP burst misses its circuit's window and is dropped as stale (12% of them did in one
    FIFO).  Opera's ToRs give the two classes separate queues the same way (seed 000 §2.6).
    fabric/shaping.py says why a packet must be one frame; the script is kept in the run directory."""
    from ..fabric.shaping import link_commands, shaper_batch
    from ..p4 import DSCP_DIRECT_ONLY

    for k in topo.racks:
        for h in k.hosts:
            node = emu.host(h.name)
            dev = node.defaultIntf().name
            script = emu.run_dir / f"shaper-{h.name}.tc"
            script.write_text(shaper_batch(dev, access_bps, access_bps / HEADROOM, DSCP_DIRECT_ONLY << 2))
            for cmd in link_commands(dev) + [f"tc -batch {script}"]:
                err = node.cmd(cmd + " 2>&1 >/dev/null").strip()
                if err:
                    raise HarnessError(f"{h.name}: {cmd}: {err.splitlines()[0]}")


ALONE_ROUNDS = 16   # one-packet flows per rack pair alone, each in another phase of the hyperperiod


def alone_round_ns(pairs: int, gap_ns: int, rounds: int, period_ns: int | None) -> int:
    """How far apart the "alone" rounds start: ``pairs`` flows ``gap_ns`` apart, rounded up to
    whole hyperperiods and 1/rounds of one more, so that round r meets each pair r/rounds of a
    hyperperiod later in the schedule (no period: back to back)."""
    round_ns = pairs * gap_ns
    if period_ns:
        round_ns = -(-round_ns // period_ns) * period_ns + period_ns // rounds
    return round_ns


def phase_gap_ns(min_gap_ns: int, period_ns: int | None, phases: int = 16) -> int:
    """At least ``min_gap_ns``, a whole odd number of ``period_ns / phases``: flows that far apart
    start in every one of the ``phases`` (a power of 2) phases of the period before one repeats."""
    if not period_ns:
        return min_gap_ns
    unit = period_ns // phases
    k = -(-min_gap_ns // unit)
    return (k + 1 - k % 2) * unit


def _alone(emu, topo, out: Path, rounds: int = ALONE_ROUNDS, gap_ns: int = 30_000_000,
           hosts: list | None = None, period_ns: int | None = None,
           pace_bps: float = 0.0) -> dict[tuple[str, str], float]:
    """The FCT of a one-packet flow alone on the fabric (low-latency class), per ordered host pair:
    one flow at a time, every pair ``rounds`` times; the fastest.  The fastest of them all (the
    floor: a direct circuit's latency without queueing, which every pair has in some slice) is
    the one-packet "alone" FCT a flow's slowdown divides by (seed 001 §5.4: the flow alone in
    the network).  Not each pair's own fastest: a pair's samples spread 3.9-31 ms with the CPU's
    moments, the run's flows come from the same spread, and 1 in 9 of them beat the fastest of
    8 (slowdowns of 0.73); the floor is the fastest of 16 x 56 samples.  (Since 2026-11-26 a
    one-packet flow's alone is the fastest on the path it met, from these samples grouped by path
    class and the run's own flows: :func:`alone_by_path`.)

    ``period_ns`` (the dilated hyperperiod): round r starts r/rounds of a hyperperiod later in
    the schedule than round 0 did, so a pair's samples fall in ``rounds`` different phases of it.
    Before, a round lasted 56 pairs x 100 ms = 28 hyperperiods (200 ms) exactly, every sample of a pair met
    the same slice, and a pair measured on its 3-hop slice made flows on its direct slice
    look 3x faster than alone (slowdowns of 0.34)."""
    out.mkdir(parents=True, exist_ok=True)
    everyone = hosts if hosts is not None else [h for k in topo.racks for h in k.hosts]
    # A path depends on the rack pair, not on which of a rack's hosts: one host per rack measures
    # (the first), and every host pair gets its rack pair's value (16 hosts would take 4x longer).
    hosts = list({_rack_of(h): h for h in reversed(everyone)}.values())
    now = time.time_ns() + 1_500_000_000
    plan: dict[str, list] = {h.name: [] for h in hosts}
    pair: dict[int, tuple[str, str]] = {}
    i = 0
    pairs = sum(1 for a in hosts for b in hosts if _rack_of(a) != _rack_of(b))
    round_ns = alone_round_ns(pairs, gap_ns, rounds, period_ns)
    t = now
    for r in range(rounds):
        t = now + r * round_ns
        for src in hosts:
            for dst in hosts:
                if _rack_of(src) == _rack_of(dst):
                    continue  # same rack: not a fabric flow
                plan[src.name].append({"id": i, "dst": dst.ip, "size": 1, "start_ns": t})
                pair[i] = (src.name, dst.name)
                t += gap_ns
                i += 1
    end = t + 4 * gap_ns
    procs = []
    try:
        procs += _start_flows(emu, plan, out, end, pace_bps)
        for p in procs:
            p.wait(timeout=(end - time.time_ns()) / 1e9 + 30)
    finally:
        for p in procs:
            stop_process_group(p)
    starts = issued_starts({f["id"]: f["start_ns"] for fl in plan.values() for f in fl}, out, plan)
    best: dict[tuple[str, str], float] = {}
    every: list[float] = []
    for h in plan:
        f = out / f"rx-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            fct = (arrival_ns(r) - starts[r["id"]]) / 1e9
            key = pair[r["id"]]
            best[key] = min(best.get(key, fct), fct)
            every.append(fct)
    if not best:
        raise HarnessError("no one-packet flow completed alone: the low-latency class does not carry TCP")
    # The emulator's own spread: what one-packet flows alone take, beside the fastest of them.
    # A flow alone scores this mean / floor as its slowdown against the floor.
    (out / "spread.json").write_text(json.dumps(alone_spread(every)))
    # A pair whose every probe met a loss (a 1 s SYN timeout) was not measured alone: it gets the
    # median of the pairs instead (paths are 1-3 hops, within a few ms of each other).
    med = sorted(best.values())[len(best) // 2]
    best = {k: (v if v <= 3 * med else med) for k, v in best.items()}
    rep = {_rack_of(h): h.name for h in hosts}
    return {(a.name, b.name): best[(rep[_rack_of(a)], rep[_rack_of(b)])]
            for a in everyone for b in everyone
            if _rack_of(a) != _rack_of(b) and (rep[_rack_of(a)], rep[_rack_of(b)]) in best}


def alone_spread(fcts: list[float]) -> dict:
    """One-packet flows alone (FCT s each): how many, the fastest, median and mean, and the mean
    over the fastest -- the slowdown a flow alone scores, on average, against the floor."""
    if not fcts:
        return {"samples": 0}
    xs = sorted(fcts)
    mean = sum(xs) / len(xs)
    return {"samples": len(xs), "min_s": xs[0], "median_s": percentile(xs, 50), "mean_s": mean,
            "p90_s": percentile(xs, 90), "mean_over_min": mean / xs[0]}


FLOWS_RT_PRIORITY = HOST_RT_PRIORITY  # the TCP senders and receivers: below the switches
# Flow sizes (in TCP segments) measured alone: dense enough that the line between two is near
# the truth (with 3 and 5 only, a 4-frame flow's alone was 3.9 ms over the floor where 2.1 was
# measured), and whole segments: the kernel's segment carries SEGMENT bytes (the MSS less
# TCP's 12-byte timestamp option), and htb lets 5 of them through as a burst where a sixth
# waits 8 ms -- "5 x 1460 bytes" was 6 segments, slow, and made 5-segment flows "beat" it.
# Every count to 12 (htb's staircase steps at 5 and 10), then about 20 % apart: between two
# calibrated sizes a flow's alone is the smaller one's (the step below), never a line above it.
CALIBRATION_PACKETS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 17, 20, 24, 28, 34, 40, 48, 56, 68, 80)
SEGMENT = MSS - 12


def _calibrate(emu, topo, out: Path, rounds: int = 2, gap_ns: int = 300_000_000, hosts: list | None = None,
               period_ns: int | None = None, pace_bps: float = 0.0) -> list[tuple[int, float]]:
    """Flows of a few sizes alone, (size, FCT s) each: what a flow's size adds to the one-packet
    alone FCT (:class:`F.AloneCurve`, :func:`F.alone_envelope`):
    htb is not a wire (it let a flow's first frames through as a burst, and released TCP at
    6.5-9.8 Mb/s where 5.77 was configured), so flows beat an alone FCT computed at the
    configured rate.  One host per rack sends flows of ``CALIBRATION_PACKETS`` frames to the
    next rack, one at a time.  Flows of one
    size start in 16 phases of the hyperperiod ``period_ns`` (:func:`phase_gap_ns`): 300 ms
    apart at a 200 ms hyperperiod they met two phases only, maybe both on 3-hop paths."""
    out.mkdir(parents=True, exist_ok=True)
    everyone = hosts if hosts is not None else [h for k in topo.racks for h in k.hosts]
    firsts = list({_rack_of(h): h for h in reversed(everyone)}.values())
    gap_ns = phase_gap_ns(gap_ns, period_ns)
    now = time.time_ns() + 1_500_000_000
    plan: dict[str, list] = {h.name: [] for h in firsts}
    meta: dict[int, tuple[str, str, int]] = {}
    t, i = now, 0
    for _ in range(rounds):
        for n in CALIBRATION_PACKETS:
            for j, src in enumerate(firsts):
                dst = firsts[(j + 1) % len(firsts)]
                plan[src.name].append({"id": i, "dst": dst.ip, "size": n * SEGMENT, "start_ns": t})
                meta[i] = (src.name, dst.name, n * SEGMENT)
                t += gap_ns
                i += 1
    end = t + 4 * gap_ns
    procs = _start_flows(emu, plan, out, end, pace_bps)
    try:
        for p in procs:
            p.wait(timeout=(end - time.time_ns()) / 1e9 + 30)
    finally:
        for p in procs:
            stop_process_group(p)
    starts = issued_starts({f["id"]: f["start_ns"] for fl in plan.values() for f in fl}, out, plan)
    samples = []
    for h in plan:
        f = out / f"rx-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            size = meta[r["id"]][2]
            samples.append((size, (arrival_ns(r) - starts[r["id"]]) / 1e9))
    return samples


def issued_starts(planned: dict[int, int], out: Path, hosts) -> dict[int, int]:
    """Each low-latency flow's start: when its sender really began it (``issued_ns`` in the
    sender's tx log), never before its planned start.  A Python timer on a loaded 2-core machine
    fires milliseconds late (7.6 ms median with 16 agents beside it): that lag is the
    emulator's, not the fabric's, so the FCT counts from the issue (the lag is reported)."""
    got = dict(planned)
    for h in hosts:
        f = out / f"tx-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            if r.get("issued_ns") and r["id"] in got:
                got[r["id"]] = max(got[r["id"]], r["issued_ns"])
    return got


def start_lag(planned: dict[int, int], issued: dict[int, int]) -> dict:
    """How late the senders began their flows: median, p99 and max, in ms."""
    lags = sorted((issued[i] - t) / 1e6 for i, t in planned.items() if i in issued)
    if not lags:
        return {}
    return {"p50_ms": round(percentile(lags, 50), 3), "p99_ms": round(percentile(lags, 99), 3),
            "max_ms": round(lags[-1], 3), "flows": len(lags)}


def _rack_of(h) -> str:
    """A host's rack by its address (10.0.R.N): also on the packet switch, where every host hangs
    off one ToR but keeps its address."""
    return h.ip.rsplit(".", 1)[0]


def _run(emu, topo, ds: S.Schedule, wl, cutoff: float, out: Path, rate: float, guard_us: float,
         pace_bps: float = 0.0, shared: bool = False) -> dict:
    """One mode's run of the flow list: its flows' records (alone not yet known: the caller sets it
    from every run's flows, :func:`_with_alone`), pending bytes, the agents' accounting."""
    out.mkdir(parents=True, exist_ok=True)
    payload = FRAME - wire.DATA_HEADER
    ip_rack = {h.ip: k.id for k in topo.racks for h in k.hosts}
    name_ip = {h.name: h.ip for k in topo.racks for h in k.hosts}
    # Every host runs an agent; the agents of the n-th host of each rack form one RotorLB plane
    # (fabric/agents.py), so a bulk flow of host n goes to the n-th agent of the destination rack.
    index = {h.name: n for k in topo.racks for n, h in enumerate(k.hosts)}
    span_s = max(f.start for f in wl.flows)
    # The flow list's time 0 is no earlier than the agents' first window: they open none before
    # every one of them listens (start_lead_s), and the senders start up beside them.  Before
    # 2026-11-26 time 0 was 4 s away and the agents' first window ~9 s: the bulk flows of the
    # first 5 s waited for it (Web Search 1 %: flow 2 held 3.8 s, 3.7x the bound, in every run).
    agents_start = None
    if any(f.size >= cutoff for f in wl.flows):
        agents_start = cycle_start_ns(emu, ds, sum(len(k.hosts) for k in topo.racks) + len(name_ip))
    base = max(time.time_ns() + 4_000_000_000, agents_start or 0)
    cycle_s = ds.hyperperiod_us / 1e6
    drain_s = drain_after_arrivals([f.size for f in wl.flows if f.size >= cutoff], span_s, cycle_s,
                                   rate * payload, len(topo.racks),
                                   tcp_sizes=[f.size for f in wl.flows if f.size < cutoff], access_Bps=pace_bps / 8)
    end = base + int((span_s + drain_s) * 1e9)
    ll: dict[str, list] = {h: [] for h in name_ip}
    bulk: dict[tuple[int, int], list] = {}
    cls = {}
    for f in wl.flows:
        start_ns = base + int(f.start * 1e9)
        if f.size < cutoff:
            ll[f.src].append({"id": f.id, "dst": name_ip[f.dst], "size": f.size, "start_ns": start_ns})
            cls[f.id] = "low-latency"
        else:
            src_rack = ip_rack[name_ip[f.src]]
            bulk.setdefault((src_rack, index[f.src]), []).append(
                {"flow": f.id, "dst": ip_rack[name_ip[f.dst]], "frames": max(1, math.ceil(f.size / payload)),
                 "start_ns": start_ns})
            cls[f.id] = "bulk"
    say(f"[experiment] fct: {out.name}: {sum(map(len, ll.values()))} low-latency flows (TCP), "
        f"{sum(map(len, bulk.values()))} bulk (RotorLB), cutoff {cutoff:.0f} B; "
        f"arrivals over {span_s:.0f} s, up to {span_s + drain_s:.0f} s")
    procs = []
    agents = None
    drops_before, kernel_before = emu.drops(), emu.kernel_drops()
    try:
        procs += _start_flows(emu, ll, out, end, pace_bps)
        # An agent resends what its destination has not acknowledged three cycles after it left
        # (a relay waits up to a cycle): a bulk flow completes despite a lost frame.
        if bulk:  # the packet switch carries every flow over TCP: no agents there
            # start_agents shares ``rate`` among a rack's hosts; here each host's agent gets all of it.
            per_rack = max(len(k.hosts) for k in topo.racks)
            agents = start_agents(emu, topo, ds, out / "agents", rate=rate * per_rack, guard_us=guard_us,
                                  flows=bulk, stop_ns=end, end_ns=end, retransmit_us=3 * ds.hyperperiod_us,
                                  shared=shared, start_ns=agents_start, realtime=True)
        n_ll = sum(map(len, ll.values()))
        frames_of = {fl["flow"]: fl["frames"] for fls in bulk.values() for fl in fls}
        whole_at = None  # wall s (from base) at which every flow was whole
        while time.time_ns() < end:
            done = sum(len((out / f"rx-{h}.jsonl").read_text().splitlines())
                       for h in ll if (out / f"rx-{h}.jsonl").exists())
            bulk_done = _bulk_whole(agents.received(), frames_of) if agents is not None else 0
            t = (time.time_ns() - base) / 1e9
            say(f"[experiment] fct: {out.name}: {max(0.0, t):.0f}/{span_s + drain_s:.0f} s, "
                f"low-latency done {done}/{n_ll}" + (f", bulk done {bulk_done}/{len(frames_of)}" if bulk else ""))
            if done == n_ll and bulk_done == len(frames_of) and t > span_s:
                # Every flow is whole: the drain's worst case need not be waited out.  The agents
                # keep running for EARLY_END_CYCLES so the last frames' acknowledgements arrive
                # (no copy is queued again) and the pending curve shows the empty queues; and at
                # least CLOSE_WAIT_S so the last TCP senders write their records.
                if not bulk:
                    break
                if whole_at is None:
                    whole_at = t
                    end = min(end, time.time_ns() + int(max(EARLY_END_CYCLES * cycle_s, CLOSE_WAIT_S + 1) * 1e9))
            time.sleep(min(10.0, max(0.5, (end - time.time_ns()) / 1e9)))
        if agents is None:
            results = []
        elif whole_at is not None:  # told to end before their --end-ns: SIGTERM, each writes its summary
            results = agents.stop()
            say(f"[experiment] fct: {out.name}: every flow whole at {whole_at:.0f} s, "
                f"{span_s + drain_s - whole_at:.0f} s before the drain's end: agents stopped")
        else:
            results = agents.wait(timeout=60)
        time.sleep(1.5)  # the controller publishes the switches' counters every second
        drops = drop_delta(drops_before, emu.drops())
        kernel = {k: n - kernel_before.get(k, 0) for k, n in emu.kernel_drops().items() if n - kernel_before.get(k, 0)}
        drops["kernel"] = kernel  # frames the kernel dropped on the fabric's links (not a switch's cause)
    finally:
        for p in procs:
            stop_process_group(p)
        if agents is not None:
            agents.kill()
    done_ns: dict[int, int] = {}
    retrans: dict[int, int] = {}  # TCP segments sent again, both ends of a flow (host/flows.py)
    dsack: dict[int, int] = {}    # ... of which the receiver reported duplicates
    wakeups: list[float] = []     # ms from a flow's last byte in to its receiver reading it
    for h in ll:
        for side in ("rx", "tx"):
            f = out / f"{side}-{h}.jsonl"
            for line in (f.read_text().splitlines() if f.exists() else []):
                r = json.loads(line)
                if side == "rx":
                    done_ns[r["id"]] = arrival_ns(r)
                    if r.get("rx_ns") is not None:
                        wakeups.append((r["done_ns"] - r["rx_ns"]) / 1e6)
                if r.get("retrans") is not None:
                    retrans[r["id"]] = retrans.get(r["id"], 0) + r["retrans"]
                if r.get("dsack") is not None:
                    dsack[r["id"]] = dsack.get(r["id"], 0) + r["dsack"]
    frames = {fl["flow"]: fl["frames"] for fls in bulk.values() for fl in fls}
    dead = agents.dead if agents is not None else []
    done_ns.update(finished_bulk(results, [agents.progress_of(d["host"]) for d in dead], frames))
    pending: dict[int, float] = {}
    for r in results:
        for t_ns, local, relay in r.get("pending", []):
            b = int((t_ns - base) / (ds.slot_us * 1000))
            pending[b] = pending.get(b, 0) + (local + relay) * payload
    planned = {f.id: base + int(f.start * 1e9) for f in wl.flows}
    starts = dict(planned)
    starts.update(issued_starts({f.id: planned[f.id] for f in wl.flows if cls[f.id] == "low-latency"}, out, ll))
    done = [F.Done(f, cls[f.id], starts[f.id], done_ns.get(f.id), retrans=retrans.get(f.id),
                   dsack=dsack.get(f.id)) for f in wl.flows]
    # Every frame an agent accepted is delivered exactly once (copies a retransmission made are
    # dropped as duplicates) or counted here as not delivered (``agent_frames_lost``, a name kept
    # for the results before; ``agent_frames_held`` says how many of them were still queued).
    # (Still held at the end counts as not delivered; a dead agent's own frames are its loss.)
    for d in dead:  # its frames count as lost: say so, never silently
        say(f"[experiment] fct: {out.name}: WARNING: the agent in {d['host']} wrote no summary "
            f"(exit {d['exit']}{': ' + d['log'] if d['log'] else ''}); the flows its last progress file "
            "shows whole count as finished, the rest as unfinished, and the frames it held as lost")
    if wakeups:
        w = receiver_wakeup(wakeups)
        say(f"[experiment] fct: {out.name}: a TCP flow's FCT ends when its last byte reached the receiving "
            f"host; the receiver read it {w['p50_ms']:.2f} ms later (median; p90 {w['p90_ms']:.2f} ms), not counted")
    acc = account(results, dead)
    lost = acc["accepted"] - acc["delivered"]
    return {"done": done, "pending": sorted((b * ds.slot_us / 1e6, v) for b, v in pending.items()),
            "bulk_paths": bulk_paths(results, {i: planned[i] for i in frames if i in planned}, frames),
            "arrivals_s": span_s, "cutoff": cutoff, "agent_frames_lost": lost,
            # ... of which still queued when the agents stopped (a run cut off at the drain's end;
            # a copy queued for a resend counts here too), not lost on the way:
            "agent_frames_held": acc["held"],
            "dead_agents": dead, "switch_drops": drops,
            "retransmitted": sum(r.get("retransmitted", 0) for r in results),
            "duplicates": sum(r.get("duplicates", 0) for r in results),
            "start_lag": start_lag({i: planned[i] for i in planned if cls[i] == "low-latency"}, starts),
            "receiver_wakeup": receiver_wakeup(wakeups), "agents_priority": agents_priority(results),
            "agents_loops": agents_loops(results)}


def agents_priority(summaries: list[dict]) -> dict | None:
    """How long the agents held SCHED_RR (host/priority.py: while they held bulk), all together,
    and the kernel's refusals; None for summaries from before it."""
    ps = [s["priority"] for s in summaries if s.get("priority")]
    if not ps:
        return None
    return {"agents": len(ps), "rt_priority": max((p["rt_priority"] or 0) for p in ps) or None,
            "always": any(p["always"] for p in ps), "raised": sum(p["raised"] for p in ps),
            "busy_s": round(sum(p["busy_s"] for p in ps), 3),
            "errors": sorted({p["error"] for p in ps if p.get("error")})}


def finished_bulk(summaries: list[dict], dead: list[dict], frames: dict[int, int]) -> dict[int, int]:
    """Bulk flow -> when its last frame reached an agent that had all ``frames[flow]`` of it: from
    the agents' summaries (``flows_rx``), and for an agent that died before its summary
    (``dead``: :meth:`Agents.progress_of` each), from its last progress file, at most a second
    old (a file with counts only, from before 2026-11-26, says no time: not taken)."""
    out: dict[int, int] = {}
    for rx in [s.get("flows_rx", {}) for s in summaries] + dead:
        for key, (count, last) in rx.items():
            fid = int(key.split(":")[1])
            if fid in frames and count >= frames[fid] and last is not None:
                out[fid] = last
    return out


def bulk_paths(summaries: list[dict], start_ns: dict[int, int], frames: dict[int, int]) -> dict[int, dict]:
    """How each bulk flow went, from the agents' summaries (host/agent.py: ``flows_tx`` at its
    sender, ``flows_rx_via`` at its receiver), times in s after the flow's start (``start_ns``):
    when its first and last own frames left (``first_sent_s``, ``last_sent_s``), frames sent (a
    resent copy counted again), ``resent``, ``returned`` unsent from a window that closed,
    ``relayed`` of those that arrived and the most slots one waited at its relay
    (``worst_relay_slots``), when the first arrived (``first_rx_s``), second copies the receiver
    dropped (``duplicates``) and so the frames the fabric lost (``lost``: resent less
    duplicates; summaries from before 2026-11-27 have neither), the longest stall of its sender's
    loop and of any agent's while it ran (``sender_stall_ms``, ``worst_stall_ms``; from the agents'
    pending samples, :func:`loop_stalls`).  What an FCT run keeps of the
    flows above the bulk bound, so a slow flow is explained from ``fct.json`` alone; summaries from
    before 2026-11-26 have none of it ({})."""
    out: dict[int, dict] = {}
    for sm in summaries:
        for key, (first, last, sent, resent, returned) in sm.get("flows_tx", {}).items():
            fid = int(key)
            if fid in frames and fid in start_ns:
                out.setdefault(fid, {}).update(
                    first_sent_s=round((first - start_ns[fid]) / 1e9, 6), last_sent_s=round((last - start_ns[fid]) / 1e9, 6),
                    sent=sent, resent=resent, returned=returned)
        for key, (relayed, worst, first_rx, *dup) in sm.get("flows_rx_via", {}).items():
            fid = int(key.split(":")[1])
            if fid in frames and fid in start_ns:
                out.setdefault(fid, {}).update(frames=frames[fid], relayed=relayed, worst_relay_slots=worst,
                                               first_rx_s=round((first_rx - start_ns[fid]) / 1e9, 6),
                                               **({"duplicates": dup[0]} if dup else {}))
    for p in out.values():  # resent frames that arrived once: their first copy was lost
        if "resent" in p and "duplicates" in p:
            p["lost"] = max(0, p["resent"] - p["duplicates"])
    # How long the agents' loops stood still while the flow ran (from its start to its last frame
    # in): its sender's longest stall and the fabric's (any agent's), in ms.  A frame waits a
    # cycle for a window its agent's loop slept through (2026-11-27: RotorNet's lone flow 1441).
    stalls = [loop_stalls(sm) for sm in summaries]
    senders = {int(k): i for i, sm in enumerate(summaries) for k in sm.get("flows_tx", {})}
    ends = {int(k.split(":")[1]): v[1] for sm in summaries for k, v in sm.get("flows_rx", {}).items()}
    for fid, p in out.items():
        s, e = start_ns[fid], ends.get(fid)
        if e is None or not any(stalls):
            continue
        during = [_stalled(st, s, e) for st in stalls]
        if fid in senders:
            p["sender_stall_ms"] = round(during[senders[fid]], 1)
        p["worst_stall_ms"] = round(max(during), 1)
    return out


STALL_MIN_MS = 20.0  # a sample this much late or more is a stall worth keeping


def _stalled(stalls: list[tuple[int, float]], s: int, e: int) -> float:
    """The longest of ``stalls`` (as :func:`loop_stalls` gives them, in time order) that overlaps
    ``[s, e]`` ns, in ms; 0 for none."""
    worst = 0.0
    for t, late in stalls[bisect.bisect_right(stalls, (s, math.inf)):]:
        if t - late * 1e6 >= e and t - 60e9 > e:  # no stall lasts a minute: past e for good
            break
        if t - late * 1e6 < e:
            worst = max(worst, late)
    return worst


def loop_stalls(summary: dict) -> list[tuple[int, float]]:
    """When an agent's loop stood still, from its pending curve (host/agent.py samples it once a
    slot): each sample that came ``STALL_MIN_MS`` or more after the period, as (ns it came, ms
    late).  The period is the samples' median gap (a slot)."""
    ts = [x[0] for x in summary.get("pending", [])]
    if len(ts) < 3:
        return []
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    period = gaps[len(gaps) // 2]
    return [(b, (b - a - period) / 1e6) for a, b in zip(ts, ts[1:]) if b - a - period >= STALL_MIN_MS * 1e6]


def agents_loops(summaries: list[dict]) -> dict | None:
    """The agents' loops, all together: stalls of 50 ms or more and the worst (host/agent.py
    ``loop_stalls``), the garbage collector's full collections and their worst pause, and the most
    circuit windows one agent had open at once; None for summaries from before 2026-11-27."""
    ls = [s for s in summaries if s.get("loop_stalls")]
    if not ls:
        return None
    full = [s["gc"].get("2", {}) for s in ls if s.get("gc")]
    return {"agents": len(ls), "stalls_over_50ms": sum(s["loop_stalls"]["over_50ms"] for s in ls),
            "worst_stall_ms": max(s["loop_stalls"]["worst_ms"] for s in ls),
            "full_collections": sum(g.get("collections", 0) for g in full),
            "worst_full_collection_ms": max((g.get("worst_ms", 0.0) for g in full), default=0.0),
            "windows_open_max": max(s.get("windows_open_max", 0) for s in ls)}


def receiver_wakeup(ms: list[float]) -> dict:
    """How long after a low-latency flow's last byte reached its host the receiving process read
    it (host/flows.py: ``done_ns - rx_ns``): the emulator's wait for a CPU, which the FCT no
    longer counts (it ends at ``rx_ns``); reported, as ``start_lag`` is at the other end."""
    if not ms:
        return {"flows": 0}
    ms = sorted(ms)
    return {"p50_ms": round(percentile(ms, 50), 3), "p90_ms": round(percentile(ms, 90), 3),
            "mean_ms": round(sum(ms) / len(ms), 3), "max_ms": round(ms[-1], 3), "flows": len(ms)}


def drop_delta(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict:
    """What the switches dropped between two readings of their counters: ``total`` by cause, and
    ``by_switch`` (causes that moved only)."""
    by_switch = {}
    for sw, causes in after.items():
        moved = {c: n - before.get(sw, {}).get(c, 0) for c, n in causes.items()
                 if n - before.get(sw, {}).get(c, 0)}
        if moved:
            by_switch[sw] = moved
    total: dict[str, int] = {}
    for moved in by_switch.values():
        for c, n in moved.items():
            total[c] = total.get(c, 0) + n
    return {"total": total, "by_switch": by_switch}


def _report(runs: dict, wl, access_bps: float, factor: float, default_cutoff: float, dilation: float,
            out: Path, alone: dict[tuple[str, str], float], hosts_per_rack: int = 1,
            bound: dict | None = None, epsilon_us: float | None = None,
            curve: F.AloneCurve | None = None, envelope: dict | None = None,
            share: dict[int, float] | None = None, judge=None, agent_rate: float | None = None,
            guard_us: float | None = None, shared: bool = False, idle_poll: bool | None = None,
            switch_cpus: str | None = None, warm_ms: float | None = None) -> dict:
    """``idle_poll``: whether the fabric's idle CPUs polled (fabric/cpu.py; None: not run);
    ``switch_cpus``: the CPUs the switches ran on (None: anywhere); ``warm_ms``: the warmer's
    period (fabric/warm.py; None: none).
    ``curve``: what a flow's size adds to its alone FCT, measured (``_calibrate``) and lowered by
    the run's own flows (``envelope``: :func:`F.alone_envelope`'s account of it); ``judge``: a
    mode's stability (:func:`stability_judge`)."""
    res = {"workload": wl.meta["workload"], "load": wl.meta["load"], "flows": len(wl.flows),
           "replayed_from": wl.meta.get("replayed_from"), "hosts_per_rack": hosts_per_rack,
           "access_mbps": access_bps / 1e6, "alone_curve": curve.to_json() if curve else None, "dilation": dilation,
           "agent_rate": agent_rate, "guard_us": guard_us, "shared_circuits": shared,
           "epsilon_us": epsilon_us, "scaling_factor": factor,
           "alone_one_packet_s": {"floor": envelope["floor_s"] if envelope else min(alone.values()),
                                  "floor_alone": min(alone.values()),
                                  "per_pair_fastest_max": max(alone.values()),
                                  "pairs": len(alone), "rounds": ALONE_ROUNDS},
           "alone_envelope": envelope,
           "default_cutoff_bytes": default_cutoff, "switches_realtime": realtime_allowed(),
           "cpu_idle_poll": idle_poll, "switch_cpus": switch_cpus, "warm_ms": warm_ms, "modes": {},
           # The emulator's own spread (one-packet flows alone; _alone): the slowdown a flow alone
           # scores on average against the floor, per emulation.
           "alone_spread": {name: json.loads((out / d / "spread.json").read_text())
                            for name, d in (("fabric", "alone"), ("packet-switch", "alone-packet-switch"))
                            if (out / d / "spread.json").exists()}}
    lines = []
    for mode, r in runs.items():
        # Within RotorLB's capacity, and the fabric's queue no longer than the model's
        # (workload/stability.py).  The trend over the arrivals alone could not tell a heavy
        # tail from an overload: Data Mining 10 % drained every flow and still "climbed".
        arrivals_s = r.get("arrivals_s", math.inf)
        if judge is not None and r["cutoff"] != math.inf:
            say(f"[experiment] fct: {mode}: stability against RotorLB's model (the flows 6 times; "
                "~1 min for 2000 Data Mining flows)")
            st = judge(wl.flows, r["cutoff"], r["pending"], arrivals_s)
        else:  # the packet switch: every flow over TCP, no agent queues
            tr = ST.trend([(t, b) for t, b in r["pending"] if t <= arrivals_s])
            st = {"stable": True, "why": "no bulk flows: nothing queued at the agents", "trend": tr,
                  **{k: tr.get(k) for k in ("mean_bytes", "slope_bytes_per_s", "rise_bytes")}}
        summ = F.summarize(r["done"], access_bps, factor)
        unfinished = sum(1 for d in r["done"] if d.done_ns is None)
        res["modes"][mode] = {"cutoff_bytes": r["cutoff"], "stable": st["stable"], "stability": st,
                              "arrivals_s": r.get("arrivals_s"),
                              "unfinished": unfinished, "agent_frames_lost": r["agent_frames_lost"],
                              "agent_frames_held": r.get("agent_frames_held"),
                              "duplicates": r["duplicates"], "retransmitted": r["retransmitted"], "classes": summ,
                              "pending_bytes": r["pending"], "per_flow": F.per_flow(r["done"], factor),
                              "start_lag": r.get("start_lag", {}), "receiver_wakeup": r.get("receiver_wakeup", {}),
                              "alone_by_path": r.get("alone_by_path"),
                              "low_latency_vs_floor": r.get("low_latency_vs_floor"),
                              "low_latency_vs_fastest": r.get("low_latency_vs_fastest"),
                              "low_latency_within_spread": r.get("low_latency_within_spread"),
                              "switch_drops": r.get("switch_drops"),
                              "warm": r.get("warm"), "dead_agents": r.get("dead_agents", []),
                              "agents_priority": r.get("agents_priority"),
                              "agents_loops": r.get("agents_loops"),
                              "alone_envelope": {k: v for k, v in (r.get("alone_envelope") or {}).items()
                                                 if k != "alone_only_curve"}}
        if bound and any(d.cls == "bulk" for d in r["done"]):
            res["modes"][mode]["bulk_bound"] = F.bulk_bound_check(r["done"], **bound, share=share, shared=shared)
            res["modes"][mode]["bulk_bound"]["above"] = F.above_bound(r["done"], r.get("bulk_paths", {}), **bound)
        if not st["stable"]:
            lines.append(f"{mode}: unstable ({st['why']}); unfinished {unfinished}")
            continue
        parts = []
        for cls, per in summ.items():
            for b, v in per.items():
                if v["slowdown_mean"] is not None:
                    parts.append(f"{cls} {b}: slowdown mean {v['slowdown_mean']:.1f} p99 {v['slowdown_p99']:.1f} "
                                 f"({v['flows']} flows)")
        bb = res["modes"][mode].get("bulk_bound")
        if bb and bb["flows"]:
            pc = bb.get("pair_capacity")
            parts.append(f"bulk within the low-load bound {bb['within']}/{bb['flows']} (worst {bb['worst_ratio']:.2f}x)"
                         + (f", at the pair's RotorLB capacity {pc['within']}/{bb['flows']} "
                            f"(median {pc['median_ratio']:.2f}x)" if pc else "") + F.rack_alone_numbers(bb))
        ll = summ.get("low-latency", {})
        if any("retransmitted" in v for v in ll.values()):
            parts.append(f"low-latency segments lost {sum(v.get('segments_lost', 0) for v in ll.values())} "
                         f"(resent {sum(v.get('retransmitted', 0) for v in ll.values())}, reported as duplicates "
                         f"{sum(v.get('duplicates_reported', 0) for v in ll.values())}; "
                         f"{sum(v.get('flows_timing_out', 0) for v in ll.values())} flows waited for a timeout)")
        sd = r.get("switch_drops") or {}
        if sd.get("total") is not None:
            parts.append("switch drops " + (", ".join(f"{c} {n}" for c, n in sorted(sd["total"].items()))
                                            or "none"))
        dead = r.get("dead_agents") or []
        lines.append(f"{mode}: " + "; ".join(parts) + f"; unfinished {unfinished}"
                     + (f" (agents without a summary: {', '.join(d['host'] for d in dead)})" if dead else ""))
    (out / "fct.json").write_text(json.dumps(res, indent=1, default=str))
    bulk_plot(res, out / "bulk.png")
    paths_plot(res, out / "paths.png")
    _plots(runs, access_bps, out, models={m: v["stability"]["tracking"]["model_curve"]
                                          for m, v in res["modes"].items() if "tracking" in v["stability"]})
    load = "?" if wl.meta["load"] is None else f"{wl.meta['load']:g}"
    res["verdict"] = (f"fct {wl.meta['workload']} load {load}, {len(wl.flows)} flows: "
                      + " | ".join(lines))
    return res


def bulk_plot(r: dict, path: Path) -> bool:
    """Every bulk flow's FCT over issue #14's low-load bound against its size, per fabric mode,
    beside RotorLB alone in the model as the fabric runs (a plane per host) and with the rack's
    hosts sharing its circuits (``bulk_bound.rotorlb_alone.per_flow``).  False: nothing to draw."""
    modes = {mode: m["bulk_bound"]["rotorlb_alone"]["per_flow"] for mode, m in r.get("modes", {}).items()
             if m.get("bulk_bound", {}).get("rotorlb_alone", {}).get("per_flow")}
    if not modes:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 4.5), squeeze=False)
    for ax, (mode, pts) in zip(axes[0], sorted(modes.items())):
        pts = sorted(pts, key=lambda p: p[1])
        size = [p[1] for p in pts]
        ax.scatter(size, [p[2] / p[5] for p in pts], s=8, alpha=0.6, label="measured")
        ax.plot(size, [p[3] / p[5] for p in pts], ".", ms=3, color="tab:orange",
                label="RotorLB alone (model): a plane per host")
        ax.plot(size, [p[4] / p[5] for p in pts], ".", ms=3, color="tab:green",
                label="RotorLB alone (model): hosts share the rack's circuits")
        ax.axhline(1, color="grey", linestyle=":", label="the bound")
        ax.set(xscale="log", yscale="log", xlabel="flow size (emulated bytes)", ylabel="FCT / bound",
               title=f"{mode}: bulk flows against the low-load bound ({r.get('workload')} {r.get('load')})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def paths_plot(r: dict, path: Path) -> bool:
    """Each mode's one-packet low-latency flows by the path they met (``alone_by_path``: Opera's
    rack hops there and back, the packet switch's one switch): the spread of their FCTs alone
    and in the run (percentiles), with the alone each was judged against (the pooled 5th
    percentile) and the fastest beside it.  False: nothing to draw (no path classes, or runs
    judged before the spreads were kept)."""
    modes = {mode: {k: v for k, v in m["alone_by_path"].items() if "alone_s" in v}
             for mode, m in r.get("modes", {}).items() if m.get("alone_by_path")}
    modes = {mode: by for mode, by in modes.items() if by}
    if not modes:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(modes), figsize=(8 * len(modes), 4.5), squeeze=False)
    for ax, (mode, by) in zip(axes[0], sorted(modes.items())):
        m = r["modes"][mode]
        for i, (k, v) in enumerate(sorted(by.items())):
            color = f"C{i}"
            for what, style in (("alone_fct_s", "--"), ("run_fct_s", "-")):
                q = v.get(what)
                if q:
                    ax.plot([q[f"p{p}"] * 1e3 for p in QUANTILES], QUANTILES, style, color=color, marker=".",
                            label=f"{k}: {'alone' if what == 'alone_fct_s' else 'in the run'} "
                                  f"({v['alone_samples' if what == 'alone_fct_s' else 'run_flows']})")
            ax.axvline(v["alone_s"] * 1e3, color=color, linewidth=2, alpha=0.5)
            ax.axvline(v["fastest_s"] * 1e3, color=color, linewidth=1, linestyle=":")
        mean = F.class_mean(m.get("classes", {}).get("low-latency", {}))
        ax.set(xlabel="one-packet FCT (ms)", ylabel="percentile", xscale="log",
               title=f"{mode}: one-packet flows by path; thick = the alone judged against "
                     f"(p{next(iter(by.values()))['percentile']:g}), dotted = the fastest\n"
                     f"{r.get('workload')} {r.get('load')}; low-latency mean slowdown "
                     f"{'-' if mean is None else f'{mean:.2f}'} (against the fastest: "
                     f"{m.get('low_latency_vs_fastest') or float('nan'):.2f})")
        ax.title.set_fontsize(9)
        lo, hi = ax.get_xlim()
        ticks = [t for t in (0.5, 0.7, 1, 1.5, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 100) if lo <= t <= hi]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plots(runs: dict, access_bps: float, out: Path, models: dict | None = None) -> None:
    """``models``: per mode, the RotorLB model's pending bytes for the same flows (dashed)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for mode, r in runs.items():
        fin = [d for d in r["done"] if d.fct_s is not None]
        axes[0].scatter([d.flow.size for d in fin], [d.slowdown(access_bps) for d in fin],
                        s=6, alpha=0.6, label=mode)
        for cls in ("low-latency", "bulk"):
            xs = sorted(d.fct_s for d in fin if d.cls == cls)
            if xs:
                axes[1].plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{mode} {cls}")
        if r["pending"]:
            line, = axes[2].plot([t for t, _ in r["pending"]], [b / 1e3 for _, b in r["pending"]], label=mode)
            model = (models or {}).get(mode)
            if model:
                axes[2].plot([t for t, _ in model], [b / 1e3 for _, b in model], linestyle="--",
                             color=line.get_color(), alpha=0.7, label=f"{mode}: RotorLB model")
    axes[0].set(xlabel="flow size (emulated bytes)", ylabel="slowdown", title="slowdown vs size")
    axes[1].set(xlabel="FCT (wall s)", ylabel="CDF", title="FCT per class")
    finished = any(d.fct_s for r in runs.values() for d in r["done"])
    if finished:
        axes[0].set(xscale="log", yscale="log")
        axes[1].set(xscale="log")
    else:  # a log axis of nothing is an error in matplotlib: say so on the plot instead
        for ax in axes[:2]:
            ax.text(0.5, 0.5, "no flow finished", ha="center", va="center", transform=ax.transAxes)
    arrivals = max((r.get("arrivals_s") or 0 for r in runs.values()), default=0)
    if arrivals:  # stability is judged left of it: the drain after the last arrival always falls
        axes[2].axvline(arrivals, color="grey", linestyle=":", label="last arrival")
    axes[2].set(xlabel="time from first arrival (wall s)", ylabel="pending KB (agents)", title="bytes pending")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fct.png", dpi=110)
    plt.close(fig)
