"""A fabric's eBPF switches at scale: launch time and memory, no traffic (``p4rotor bench --only
kernel-scale``).  The sizes BMv2 cannot hold as one process per switch: RotorNet 128 x 4 and
Opera 108 x 6 as multi-switch fabrics (a ToR per rack, a rotor per rotor)."""

from __future__ import annotations

import time
from pathlib import Path

from ..fabric import bpf_stats
from ..fabric.nikss import EbpfSwitch, pass_xdp
from ..fabric.switch import Netns, signals_held

SIZES = ((128, 4), (108, 6))


def run_launch(build: Path, racks: int, rotors: int) -> dict:
    """A fabric's switches as eBPF pipelines, ports attached, no entries: ``racks`` ToRs (one host
    port and an uplink per rotor each) and ``rotors`` rotors (a port per rack), in one namespace.
    Launch time: veths, loads and port attachment; memory: the kernel's charge for the pipelines'
    maps (their tables are preallocated, so entries would not add to it) and for their programs."""
    eb = build / "ebpf"
    ns = Netns()
    switches: list[EbpfSwitch] = []
    t0 = time.perf_counter()
    try:
        tor_ports: dict[int, dict[int, str]] = {k: {} for k in range(racks)}
        rotor_ports: dict[int, dict[int, str]] = {j: {} for j in range(rotors)}
        for k in range(racks):
            ns.veth(f"k{k}h", f"h{k}")
            pass_xdp(ns.name, f"h{k}", eb / "xdp_pass.o")
            tor_ports[k][11] = f"k{k}h"
            for j in range(rotors):
                ns.veth(f"k{k}u{j}", f"r{j}p{k}")
                tor_ports[k][1 + j] = f"k{k}u{j}"
                rotor_ports[j][k + 1] = f"r{j}p{k}"
        t_veths = time.perf_counter() - t0
        for j in range(rotors):
            switches.append(EbpfSwitch(f"rotor{j}", ns.name, eb / "rotor.o", rotor_ports[j]).start())
        for k in range(racks):
            switches.append(EbpfSwitch(f"tor{k}", ns.name, eb / "tor.o", tor_ports[k]).start())
        t_all = time.perf_counter() - t0
        maps = sum(bpf_stats.map_memlock(sw.pipeline) for sw in switches)
        progs = sum(int(bpf_stats.fdinfo(p).get("memlock", 0)) for sw in switches
                    for p in bpf_stats.pipeline_dir(sw.pipeline).iterdir() if p.is_file())
    finally:
        t1 = time.perf_counter()
        with signals_held():
            for sw in switches:
                sw.close()
            ns.close()
        t_down = time.perf_counter() - t1
    return {"racks": racks, "rotors": rotors, "pipelines": racks + rotors,
            "ports": racks * (1 + rotors) + rotors * racks, "veths_s": t_veths, "launch_s": t_all,
            "teardown_s": t_down, "map_memlock_mib": maps / 2**20, "prog_memlock_mib": progs / 2**20}

