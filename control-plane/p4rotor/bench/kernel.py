"""One rotor on BMv2 and on eBPF, side by side: frames/s delivered and the switch's CPU per frame.

The same rotor program's logic (p4src/v1model/rotor.p4 on ``simple_switch_grpc``; p4src/psa/rotor.p4
compiled by p4c-ebpf, loaded by NIKSS), the same entities (one matching, clock mode, a 60 s slot:
port 1 <-> port 2), the same sender (``blast``: a Python AF_PACKET loop, one process) and the same
count of what left (the receiving veth's rx_packets).  The switch's CPU: BMv2's process CPU
time over the run; eBPF's programs' own run time (kernel.bpf_stats_enabled, fabric/bpf_stats.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from .. import control as C
from .. import p4 as dp
from .. import schedule as S
from ..control.nikss import NikssSwitch, cli_runner
from ..control.target import EBPF
from ..fabric import bpf_stats
from ..fabric.nikss import EbpfSwitch, ebpf_bench, pass_xdp, with_private_bpffs
from ..fabric.switch import Netns, ptf_bench, signals_held

SIZES = (64, 1500)

# Sends COUNT copies of FRAME (hex) as fast as one Python process can; prints the seconds taken.
_BLAST = ("import socket,sys,time\n"
          "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0))\n"
          "s.setsockopt(socket.SOL_SOCKET,socket.SO_SNDBUF,1<<22)\n"
          "f=bytes.fromhex(sys.argv[3]);send=s.send;n=int(sys.argv[2]);t=time.perf_counter()\n"
          "for _ in range(n):\n"
          " while True:\n"
          "  try:send(f);break\n"
          "  except BlockingIOError:time.sleep(0.0001)\n"
          "print(time.perf_counter()-t)\n")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def schedule() -> S.Schedule:
    return S.from_json({"version": 1, "racks": 4, "slot_us": 60_000_000, "reconfig_us": 0,
                        "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})


def rotor_frame(size: int) -> bytes:
    """A ``size``-byte frame a rotor carries as it is (it parses nothing)."""
    return bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes(size - 14)


def blast(ns: str, iface: str, count: int, frame: bytes) -> float:
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", _BLAST, iface, str(count), frame.hex()],
                       capture_output=True, text=True, check=True, timeout=600)
    return float(r.stdout.strip())


def rx_packets(ns: str, iface: str) -> int:
    r = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{iface}/statistics/rx_packets"],
                       capture_output=True, text=True, check=True)
    return int(r.stdout)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/PID/stat)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _measure(ns: str, tx: str, rx: str, count: int, frame: bytes, cpu) -> dict:
    """Blast, wait until nothing more arrives, and report what left and the switch's CPU."""
    rx0, cpu0 = rx_packets(ns, rx), cpu()
    secs = blast(ns, tx, count, frame)
    last, got = -1, rx_packets(ns, rx) - rx0
    while got != last:
        time.sleep(0.5)
        last, got = got, rx_packets(ns, rx) - rx0
    cpu_s = cpu() - cpu0
    return {"size": len(frame), "offered": count, "send_s": secs, "delivered": got, "delivered_pps": got / secs,
            "offered_pps": count / secs, "switch_cpu_s": cpu_s,
            "cpu_ns_per_frame": cpu_s * 1e9 / got if got else None}


def run_bmv2(build: Path, count: int, size: int) -> dict:
    with ptf_bench(1) as (ns, sws, far):
        cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.inside", "throughput", "--program", "rotor",
                             "--count", "0", "--mode", "clock", "--grpc-port", str(sws[0].grpc_port),
                             "--p4info", str(build / "rotor.p4info.txtpb"), "--p4blob", str(build / "rotor.json")]
        subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)  # installs the entities
        pid = sws[0].proc.pid
        res = _measure(ns.name, far[(0, 1)], far[(0, 2)], count, rotor_frame(size), lambda: process_cpu_s(pid))
    res["target"] = "bmv2"
    return res


def run_ebpf(build: Path, count: int, size: int) -> dict:
    eb = build / "ebpf"
    with ebpf_bench(eb / "rotor.o", eb / "xdp_pass.o") as (ns, sw, far):
        ctl = NikssSwitch("rotor", sw.pipeline, eb / "rotor.p4info.txtpb", sw.ports, runner=cli_runner(ns.name))
        s = schedule()
        ctl.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=0, target=EBPF))

        def cpu() -> float:
            return sum(p.run_time_ns for p in bpf_stats.prog_stats(sw.pipeline)) / 1e9

        with bpf_stats.stats_enabled():
            res = _measure(ns.name, far[1], far[2], count, rotor_frame(size), cpu)
        res["drops"] = {dp.DropCause(c).name: n for c, n in ctl.drops().items()}
        res["map_memlock_bytes"] = bpf_stats.map_memlock(sw.pipeline)
    res["target"] = "ebpf"
    return res


def run_kernel(build: Path, quick: bool = False) -> dict:
    """Both targets, each path and frame size, one after the other in one run; ratios eBPF / BMv2.
    Paths: one rotor (port to port), and ToR -> rotor -> ToR (host to host, IPv4)."""
    count = 100_000 if quick else 300_000
    rows = []
    paths = {"rotor": {"bmv2": run_bmv2, "ebpf": run_ebpf},
             "tor-rotor-tor": {"bmv2": run_chain_bmv2, "ebpf": run_chain_ebpf}}
    for path, fns in paths.items():
        for size in SIZES:
            pair = {}
            for target, fn in fns.items():
                _say(f"[bench] kernel: {path} on {target}, {count} frames of {size} B from one sender")
                try:
                    pair[target] = fn(build, count, size)
                except (subprocess.SubprocessError, OSError, RuntimeError) as ex:
                    pair[target] = {"error": str(ex)[:300]}
                    _say(f"[bench]   error: {pair[target]['error']}")
                    continue
                r = pair[target]
                _say(f"[bench]   offered {r['offered_pps']:.0f}/s, delivered {r['delivered']} "
                     f"({r['delivered_pps']:.0f}/s); switch CPU {r['cpu_ns_per_frame'] or float('nan'):.0f} ns "
                     f"per delivered frame")
            b, e = pair.get("bmv2", {}), pair.get("ebpf", {})
            row = {"path": path, "size": size, **pair}
            if b.get("delivered_pps") and e.get("delivered_pps"):
                row["pps_ratio"] = e["delivered_pps"] / b["delivered_pps"]
            if b.get("cpu_ns_per_frame") and e.get("cpu_ns_per_frame"):
                row["cpu_ratio"] = b["cpu_ns_per_frame"] / e["cpu_ns_per_frame"]
            rows.append(row)
    fidelity = []
    for d, skew in [(d, 0) for d in DILATIONS] + [(CONTROL_DILATION, CONTROL_SKEW_US)]:
        _say(f"[bench] kernel: fidelity on eBPF at dilation {d} (slot {100 * d} us, night {10 * d} us)"
             + (f", control run: the switch's epoch {skew} us late" if skew else ""))
        try:
            r = run_fidelity(build, d, skew_us=skew)
        except (subprocess.SubprocessError, OSError, RuntimeError, ValueError) as ex:
            r = {"dilation": d, "error": str(ex)[:300]}
            _say(f"[bench]   error: {r['error']}")
        else:
            be = r["boundary_error_us"]
            pe = r["pipeline_error_us"]
            _say(f"[bench]   {r['sent']} frames: boundary error p50/p99/max {be['p50']}/{be['p99']}/{be['max']} us "
                 f"by send time, in the pipeline {pe['p50']}/{pe['p99']}/{pe['max']} us ({pe['unexplained']} "
                 f"unexplained by their transit, p50/p99 {r['transit_us']['p50']}/{r['transit_us']['p99']} us) "
                 f"({r['misjudged']} frames misjudged by their send time, {r['other_matching']} on the other "
                 f"matching's port); reconfig loss {r['reconfig_loss']:.4f}, sent in a night {r['offered_bound']:.4f} "
                 f"(night / slot {r['loss_bound']:.4f})")
        fidelity.append(r)
    return {"rows": rows, "count": count, "fidelity": fidelity}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m p4rotor.bench.kernel")
    p.add_argument("what", nargs="?", default="run", choices=["run", "install-bmv2-chain"])
    p.add_argument("--build-dir", default="build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--output")
    p.add_argument("--grpc", help="install-bmv2-chain: NAME=DEVICE:PORT,... (inside the chain's namespace)")
    a = p.parse_args(argv)
    if a.what == "install-bmv2-chain":
        grpc = {}
        for item in a.grpc.split(","):
            name, _, rest = item.partition("=")
            dev, _, port = rest.partition(":")
            grpc[name] = (int(dev), int(port))
        _install_bmv2_chain(Path(a.build_dir), grpc)
        return 0
    res = run_kernel(Path(a.build_dir), a.quick)
    text = json.dumps(res, indent=1)
    if a.output:
        Path(a.output).write_text(text + "\n")
    print(text)
    return 0



# -- fidelity in the kernel ------------------------------------------------------------------

_STAMP_BLAST = ("import random,socket,struct,sys,time\n"
                "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0))\n"
                "s.setsockopt(socket.SOL_SOCKET,socket.SO_SNDBUF,1<<22)\n"
                "h=bytes(12)+b'\\x88\\xb5';pad=bytes(40);now=time.clock_gettime_ns;M=time.CLOCK_MONOTONIC;n=0\n"
                "end=now(M)+int(float(sys.argv[2])*1e9);ep,sl,ni,gap=map(int,sys.argv[3:7]);dark=0;nxt=now(M);rnd=lambda:random.uniform(0.5,1.5)\n"
                "while True:\n"
                " t=now(M)\n"
                " if t>end:break\n"
                " if t<nxt:continue\n"
                " nxt=t+int(gap*rnd())\n"
                " try:s.send(h+struct.pack('!Q',t)+pad);n+=1;dark+=(t-ep)%sl<ni\n"
                " except BlockingIOError:pass\n"
                "print(n,dark)\n")
_STAMP_RECV = ("import socket,struct,sys,time,json\n"
               "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x88B5))\n"
               "s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<26);s.bind((sys.argv[1],0))\n"
               "s.settimeout(0.2);print('ready',flush=True);end=time.monotonic()+float(sys.argv[2]);got=[]\n"
               "while time.monotonic()<end:\n"
               " try:f=s.recv(128)\n except socket.timeout:continue\n"
               " got.append(struct.unpack('!QQ',f[14:30]))\n"
               "print(json.dumps(got))\n")
DILATIONS = (1, 3, 10, 30, 100)
# The control run: a switch whose boundaries are this late must show an in-pipeline error.
CONTROL_DILATION, CONTROL_SKEW_US = 10, 8
# The fidelity sender's pace: well below what one rotor forwards, so that no queue builds in the
# veth before the switch (a blast measures the queue, not the pipeline's boundary); 0: a blast.
FIDELITY_FPS = 20_000


def _stamp(netns: str, iface: str, obj: Path, hook: str) -> None:
    """tc_stamp.o on ``iface`` (namespace ``netns``), loaded with a private bpffs as
    fabric/nikss.attach_xdp_pass: at ``egress`` section ``tc`` (bytes 14..21), at ``ingress pref 1``
    section ``tc_rx`` (bytes 22..29)."""
    sec = "tc" if hook == "egress" else "tc_rx"
    with_private_bpffs(f"/var/run/netns/{netns}", 'tc qdisc add dev "$0" clsact && '
                       f'exec tc filter add dev "$0" {hook} bpf da obj "$1" sec {sec}', iface, str(obj))


def stamp_on_egress(netns: str, iface: str, obj: Path) -> None:
    """Each bench frame carries the kernel clock of its departure from ``iface``."""
    _stamp(netns, iface, obj, "egress")


def stamp_on_ingress(netns: str, iface: str, obj: Path) -> None:
    """Each bench frame also carries the kernel clock of its arrival at ``iface`` (a receiver's veth)."""
    _stamp(netns, iface, obj, "ingress pref 1")


def bracket_error_ns(sent: int, arrived: int, day_start: int, day_end: int, cycle: int) -> int:
    """How far the bracket [sent, arrived] (the pipeline took the frame in somewhere inside it) lies
    from the nearest of the days [day_start + k * cycle, day_end + k * cycle) it was switched in:
    0 when some moment of the bracket explains the switch's decision, else the distance the
    pipeline's own slot boundary must have been off by, at least."""
    k = (sent - day_start) // cycle
    best = None
    for j in (k - 1, k, k + 1):
        lo, hi = day_start + j * cycle, day_end + j * cycle
        gap = max(0, lo - arrived, sent - (hi - 1))
        best = gap if best is None else min(best, gap)
    return best


def run_fidelity(build: Path, dilation: int, seconds: float = 1.0, rate_fps: float = FIDELITY_FPS,
                 skew_us: int = 0) -> dict:
    """Two matchings (port 1 to 2, then to 3), slot 100 x dilation us with a night of a tenth, one
    sender stamping each frame with the kernel clock, as fast as it can.  Every frame is judged
    by its send time: a frame that left on the other matching's port, or that was sent in a night
    and delivered, is misjudged by its send-to-ingress delay at most; its distance to the nearest
    day of the matching that switched it is the boundary error by send time.  A second stamp as
    the frame reaches its receiver brackets the moment the pipeline took it in: the bracket's
    distance to that day is the error in the pipeline (0 when the bracket explains the decision).  Reconfiguration loss: NIGHT drops of the frames the pipeline took in
    after the epoch, against the share of frames sent in a night (a uniform sender's night / slot).
    ``skew_us``: the switch is given an epoch this much later than the one it is judged by (a
    pipeline whose boundaries are late by that much): the control run that shows the in-pipeline
    error can see an error."""
    eb = build / "ebpf"
    slot_us, night_us = 100 * dilation, 10 * dilation
    s = S.from_json({"version": 1, "racks": 4, "slot_us": slot_us, "reconfig_us": night_us,
                     "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1]]}]})
    with ebpf_bench(eb / "rotor.o", eb / "xdp_pass.o") as (ns, sw, far):
        stamp_on_egress(ns.name, far[1], eb / "tc_stamp.o")
        for p in (2, 3):
            stamp_on_ingress(ns.name, far[p], eb / "tc_stamp.o")
        ctl = NikssSwitch("rotor", sw.pipeline, eb / "rotor.p4info.txtpb", sw.ports, runner=cli_runner(ns.name))
        epoch_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        ctl.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=epoch_us + skew_us,
                                   target=EBPF))
        rx = {}
        for p in (2, 3):
            rx[p] = subprocess.Popen(["ip", "netns", "exec", ns.name, sys.executable, "-c", _STAMP_RECV, far[p],
                                      str(seconds + 3)], stdout=subprocess.PIPE, text=True)
            if rx[p].stdout.readline().strip() != "ready":
                raise RuntimeError("receiver did not start")
        out = subprocess.run(["ip", "netns", "exec", ns.name, sys.executable, "-c", _STAMP_BLAST, far[1],
                              str(seconds), str(epoch_us * 1000), str(slot_us * 1000), str(night_us * 1000),
                              str(int(1e9 / rate_fps) if rate_fps else 0)],
                             capture_output=True, text=True, check=True).stdout.split()
        sent, sent_dark = int(out[0]), int(out[1])
        got = {p: json.loads(r.communicate(timeout=seconds + 30)[0]) for p, r in rx.items()}
        drops = ctl.drops()
        txc = ctl.counter("RotorEgress.tx_port_counter")
    slot, night = slot_us * 1000, night_us * 1000
    epoch, cycle = epoch_us * 1000, 2 * slot
    errors, wrong_port, in_pipeline, transit = [], 0, [], []
    for port, want in ((2, 0), (3, 1)):
        for ts, arrived in got[port]:
            transit.append(arrived - ts)
            phase = (ts - epoch) % cycle
            m, into = phase // slot, phase % slot
            if m == want and into >= night:
                continue
            wrong_port += m != want             # sent in the other matching's slot (else in its night)
            day = (epoch + want * slot + night, epoch + (want + 1) * slot)
            errors.append(bracket_error_ns(ts, ts, *day, cycle))
            in_pipeline.append(bracket_error_ns(ts, arrived, *day, cycle))
    delivered = sum(len(v) for v in got.values())
    counted = sum(n for n, _ in txc.values())
    taken = sent - drops.get(dp.DropCause.NOT_STARTED, 0)
    errors.sort()
    in_pipeline.sort()
    transit.sort()

    def q(f: float, xs: list[int] | None = None) -> float | None:
        xs = errors if xs is None else xs
        return xs[min(len(xs) - 1, int(f * len(xs)))] / 1000 if xs else None

    loss = drops.get(dp.DropCause.NIGHT, 0) / taken if taken else None
    # The sender is not uniform in time (it runs faster while the rotor drops than while it
    # delivers, which wakes the receivers): the bound is the share of frames it sent in a night.
    return {"dilation": dilation, "slot_us": slot_us, "night_us": night_us, "skew_us": skew_us, "sent": sent,
            "sent_in_night": sent_dark, "offered_bound": sent_dark / sent if sent else None,
            "delivered": delivered, "captured_all": delivered == counted,
            "misjudged": len(errors), "other_matching": wrong_port,
            "boundary_error_us": {"p50": q(0.5), "p99": q(0.99), "max": errors[-1] / 1000 if errors else None},
            "pipeline_error_us": {"p50": q(0.5, in_pipeline), "p99": q(0.99, in_pipeline),
                                  "max": in_pipeline[-1] / 1000 if in_pipeline else None,
                                  "unexplained": sum(1 for e in in_pipeline if e > 0)},
            "transit_us": {"p50": q(0.5, transit), "p99": q(0.99, transit)},
            "reconfig_loss": loss, "loss_bound": night / slot,
            "drops": {dp.DropCause(c).name: n for c, n in drops.items()}}


# -- the 3-hop path: ToR -> rotor -> ToR -------------------------------------------------------

def chain_topology():
    from ..schedule import topology as TP

    s = S.from_json({"version": 1, "racks": 4, "slot_us": 60_000_000, "reconfig_us": 0,
                     "rotors": [{"name": "rotor0", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})
    return TP.generate(s, "schedule.json", hosts_per_rack=1)


def chain_wiring(ns: Netns, topo) -> dict[str, dict[int, str]]:
    """The chain's veths in ``ns``: rotor port k+1 to rack k's uplink (t<k>u), rack 0's and rack 1's
    host ports (t<k>h) to h0 and h1; returns {switch: {port: interface}}."""
    for k in topo.racks:
        ns.veth(f"r0p{k.id + 1}", f"t{k.id}u", mtu=topo.fabric_mtu)
    for k in topo.racks[:2]:
        ns.veth(f"t{k.id}h", f"h{k.id}", mtu=topo.host_mtu)
    wiring = {"rotor0": {k.id + 1: f"r0p{k.id + 1}" for k in topo.racks}}
    for k in topo.racks[:2]:
        wiring[k.tor.name] = {k.tor.uplinks["rotor0"]: f"t{k.id}u", k.hosts[0].port: f"t{k.id}h"}
    return wiring


@contextlib.contextmanager
def ebpf_chain(build: Path) -> Iterator[tuple[Netns, dict[str, NikssSwitch], dict[str, str]]]:
    """ToR 0 and ToR 1 (eBPF) joined by one rotor (eBPF) in one namespace, in clock mode with one
    matching (rack 0 <-> rack 1) for 60 s; yields (namespace, {switch: adapter}, {host: the
    interface it sends and receives on}).  Racks 2 and 3 have no ToR: their rotor ports end in
    plain interfaces."""
    from ..schedule import routes as R

    eb = build / "ebpf"
    topo = chain_topology()
    s = topo.schedule
    ns = Netns()
    switches: list[EbpfSwitch] = []
    try:
        wiring = chain_wiring(ns, topo)
        for far in ("h0", "h1", "t2u", "t3u"):
            pass_xdp(ns.name, far, eb / "xdp_pass.o")
        rotor = EbpfSwitch("rotor0", ns.name, eb / "rotor.o", wiring["rotor0"])
        switches.append(rotor.start())
        tors = []
        for k in topo.racks[:2]:
            tors.append(EbpfSwitch(k.tor.name, ns.name, eb / "tor.o", wiring[k.tor.name]))
            switches.append(tors[-1].start())
        ctl = {"rotor0": NikssSwitch("rotor0", rotor.pipeline, eb / "rotor.p4info.txtpb", rotor.ports,
                                     runner=cli_runner(ns.name))}
        ctl["rotor0"].write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=0,
                                             link_mtus=None, target=EBPF))
        routes = R.compute(s)
        for k, sw in zip(topo.racks[:2], tors):
            ctl[sw.name] = NikssSwitch(sw.name, sw.pipeline, eb / "tor.p4info.txtpb", sw.ports,
                                       runner=cli_runner(ns.name))
            ctl[sw.name].write(C.tor_entities(topo, k, routes, dp.MODE_CLOCK, epoch_us=0, target=EBPF))
        yield ns, ctl, {"h0": "h0", "h1": "h1"}
    finally:
        with signals_held():
            for sw in switches:
                sw.close()
            ns.close()


def ipv4_frame(size: int, src: str = "10.0.0.1", dst: str = "10.0.1.1") -> bytes:
    """An Ethernet + IPv4 + UDP frame of ``size`` bytes (checksums are not checked on the way)."""
    import ipaddress
    import struct

    ip_len = size - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0,
                     ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed)
    udp = struct.pack("!HHHH", 5000, 5001, ip_len - 20, 0)
    return bytes.fromhex("020000000101" "020000000001") + b"\x08\x00" + ip + udp + bytes(ip_len - 28)


def run_chain_ebpf(build: Path, count: int, size: int) -> dict:
    """Frames/s through ToR -> rotor -> ToR on eBPF, and the three switches' program time."""
    with ebpf_chain(build) as (ns, ctl, hosts):
        pipes = [c.pipeline for c in ctl.values()]

        def cpu() -> float:
            return sum(p.run_time_ns for pl in pipes for p in bpf_stats.prog_stats(pl)) / 1e9

        with bpf_stats.stats_enabled():
            res = _measure(ns.name, hosts["h0"], hosts["h1"], count, ipv4_frame(size), cpu)
        res["drops"] = {name: {dp.DropCause(c).name: n for c, n in sw.drops().items()} for name, sw in ctl.items()}
    res.update(target="ebpf", path="tor-rotor-tor")
    return res


def _install_bmv2_chain(build: Path, grpc: dict[str, tuple[int, int]]) -> None:
    """Inside the chain's namespace: write the chain's entities into BMv2 over P4Runtime
    ({switch: (device id, gRPC port)}), as the controller would, BMv2's units."""
    import asyncio

    import finsy as fy

    from ..schedule import routes as R

    topo = chain_topology()
    s = topo.schedule
    routes = R.compute(s)
    racks = {k.tor.name: k for k in topo.racks}

    async def main() -> None:
        for name, (dev, port) in grpc.items():
            prog = "rotor" if name.startswith("rotor") else "tor"
            sw = fy.Switch(name, f"127.0.0.1:{port}", fy.SwitchOptions(
                p4info=build / f"{prog}.p4info.txtpb", p4blob=build / f"{prog}.json", device_id=dev))
            async with sw:
                await sw.delete_all()
                ents = (C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=0)
                        if prog == "rotor" else
                        C.tor_entities(topo, racks[name], routes, dp.MODE_CLOCK, epoch_us=0))
                await C.write_batched(sw, ents)

    asyncio.run(main())


def run_chain_bmv2(build: Path, count: int, size: int) -> dict:
    """The same chain, the same sender and count on BMv2: three simple_switch_grpc processes."""
    from ..fabric.switch import SwitchProcess

    topo = chain_topology()
    ns = Netns()
    procs: list[SwitchProcess] = []
    try:
        wiring = chain_wiring(ns, topo)
        for dev, (name, ports) in enumerate(wiring.items(), start=1):
            procs.append(SwitchProcess(ns, ports, device_id=dev).start())
        grpc = ",".join(f"{name}={p.device_id}:{p.grpc_port}" for name, p in zip(wiring, procs))
        subprocess.run(ns.prefix() + [sys.executable, "-m", "p4rotor.bench.kernel", "install-bmv2-chain",
                                      "--build-dir", str(build), "--grpc", grpc],
                       capture_output=True, text=True, check=True, timeout=300)
        pids = [p.proc.pid for p in procs]
        res = _measure(ns.name, "h0", "h1", count, ipv4_frame(size), lambda: sum(process_cpu_s(pid) for pid in pids))
    finally:
        for p in procs:
            p.stop()
        ns.close()
    res.update(target="bmv2", path="tor-rotor-tor")
    return res


if __name__ == "__main__":
    sys.exit(main())
