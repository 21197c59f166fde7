"""The baseline: the same flow list, hosts and access rates on one ideal packet switch (issue
#14), every flow over TCP, with its own flows alone.
"""

from __future__ import annotations

import ipaddress
import math
import time
from pathlib import Path

from ... import schedule as S
from ...schedule import topology as TP
from ...workload.ideal import PACKET_SWITCH
from ...workload.paths import OneSwitch, by_path
from ..runner import say
from .denominators import judged, measure_calibration, measured, replay_alone, write_calibration
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
                   warm_ms: float | None = None, factor: float = 1.0, cal=None, fp: dict | None = None,
                   calibrate_only: bool = False, replay: int = 0, seed: int = 1, target: str = "bmv2") -> dict:
    """The same flow list, hosts and access rates on one switch, every flow over TCP (issue #14),
    divided by the packet switch's own calibration (``cal``, or measured here on the idle switch
    first) and a replayed sample of the flows alone.  ``factor``: the workload's scaling (real
    bytes per emulated byte), for the size buckets; ``target``: the switch's (as the fabric's).  Returns ``run`` (run_mode's, judged),
    ``calibration`` and ``idle_poll``."""
    from ...fabric.mininet import Emulation

    pt = packet_switch_topology(topo, dilation)
    emu = Emulation(pt, build, out / "run-packet-switch", mode="clock", say=say, realtime=True,
                    idle_poll=idle_poll, switch_cpus=switch_cpus, warm_ms=warm_ms, target=target)
    key_of = OneSwitch()
    r = None
    try:
        emu.start()
        polled = emu.polling
        shape_hosts(emu, pt, access_bps)
        hosts = [h for h in pt.racks[0].hosts]
        if cal is None:
            t0 = time.monotonic()
            cal = measure_calibration(emu, pt, out, key_of, access_bps, fp, period_ns=None, hosts=hosts,
                                      tag="-packet-switch")
            write_calibration(out, PACKET_SWITCH, cal, measured(t0))
        if not calibrate_only:
            r = run_mode(emu, pt, pt.schedule, wl, math.inf, out / "packet-switch", rate, guard_us, pace_bps=access_bps)
            rep = replay_alone(run_mode, emu, pt, pt.schedule, wl, math.inf, out / "packet-switch-alone", rate,
                               guard_us, access_bps, cal, key_of, replay, seed)
            r["warm"] = emu.stop_warmer()
    finally:
        emu.stop()
    if r is not None:
        r["done"] = judged(r["done"], cal, key_of.of, rep["alone"])
        r["by_path"] = by_path(r["done"], cal)
        r["replay"] = rep["info"]
        r["idle_poll"] = polled
    return {"run": r, "calibration": cal, "idle_poll": polled}
