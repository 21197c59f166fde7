"""The baseline: the same flow list, hosts and access rates on one ideal packet switch (issue
#14), every flow over TCP, with its own flows alone.
"""

from __future__ import annotations

import ipaddress
import math
from pathlib import Path

from ... import schedule as S
from ...schedule import topology as TP
from ...workload import fct as F
from ...workload.paths import OneSwitch, alone_samples, judge_by_path
from ..runner import say
from .calibrate import calibrate, measure_alone
from .hosts import shape_hosts
from .mode import run_mode


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


def run_packet_switch(build: Path, topo: TP.Topology, dilation: float, wl, out: Path, access_bps: float,
                   rate: float, guard_us: float, idle_poll: bool = True, switch_cpus: str | None = None,
                   warm_ms: float | None = None, factor: float = 1.0):
    """The same flow list, hosts and access rates on one switch, every flow over TCP: the
    packet-switch FCTs and their own "alone" FCTs, measured (issue #14).  ``factor``: the
    workload's scaling (real bytes per emulated byte), for the size buckets."""
    from ...fabric.mininet import Emulation

    pt = packet_switch_topology(topo, dilation)
    emu = Emulation(pt, build, out / "run-packet-switch", mode="clock", say=say, realtime=True,
                    idle_poll=idle_poll, switch_cpus=switch_cpus, warm_ms=warm_ms)
    try:
        emu.start()
        polled = emu.polling
        shape_hosts(emu, pt, access_bps)
        hosts = [h for h in pt.racks[0].hosts]
        alone = measure_alone(emu, pt, out / "alone-packet-switch", hosts=hosts, pace_bps=access_bps)
        calibration = calibrate(emu, pt, out / "calibrate-packet-switch", hosts=hosts, pace_bps=access_bps)
        r = run_mode(emu, pt, pt.schedule, wl, math.inf, out / "packet-switch", rate, guard_us, pace_bps=access_bps)
        r["warm"] = emu.stop_warmer()
    finally:
        emu.stop()
    tcp = [(d.flow.size, d.fct_s) for d in r["done"] if d.fct_s is not None]
    floor, curve, envelope = F.alone_envelope(min(alone.values()), calibration, tcp, access_bps)
    r["done"] = F.with_alone(r["done"], floor, curve)
    r["alone_envelope"] = envelope
    # One-packet flows as on the fabric: against the 5th percentile of the one-packet FCTs
    # through the switch (judge_by_path), so that the two are judged alike.
    racks = {h.name: k.id for k in pt.racks for h in k.hosts}  # the hosts measure_alone used (one rack)
    samples = alone_samples(out / "alone-packet-switch", racks, {h.ip: k.id for k in pt.racks for h in k.hosts})
    r["done"], judged = judge_by_path(r["done"], floor, samples, OneSwitch(), r["done"], access_bps,
                                      factor)
    r.update(judged)
    r["idle_poll"] = polled
    return r, alone, curve, envelope
