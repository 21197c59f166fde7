"""One rotor on BMv2 and on eBPF, side by side: frames/s delivered and the switch's CPU per frame.

The same rotor program's logic (p4src/v1model/rotor.p4 on ``simple_switch_grpc``; p4src/psa/rotor.p4
compiled by p4c-ebpf, loaded by NIKSS), the same entities (one matching, clock mode, a 60 s slot:
port 1 <-> port 2), the same sender (``blast``: a Python AF_PACKET loop, one process) and the same
count of what left (the receiving veth's rx_packets).  The switch's CPU: BMv2's process CPU
time over the run; eBPF's programs' own run time (kernel.bpf_stats_enabled, fabric/bpf_stats.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .. import control as C
from .. import p4 as dp
from .. import schedule as S
from ..control.nikss import NikssSwitch, cli_runner
from ..control.target import EBPF
from ..fabric import bpf_stats
from ..fabric.nikss import ebpf_bench
from ..fabric.switch import ptf_bench

SIZES = (64, 1500)

# Sends COUNT frames of SIZE bytes as fast as one Python process can; prints the seconds taken.
_BLAST = ("import socket,sys,time\n"
          "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0))\n"
          "s.setsockopt(socket.SOL_SOCKET,socket.SO_SNDBUF,1<<22)\n"
          "f=bytes.fromhex('020000000002020000000001')+b'\\x88\\xb5'+bytes(int(sys.argv[3])-14)\n"
          "send=s.send;n=int(sys.argv[2]);t=time.perf_counter()\n"
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


def blast(ns: str, iface: str, count: int, size: int) -> float:
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", _BLAST, iface, str(count), str(size)],
                       capture_output=True, text=True, check=True, timeout=600)
    return float(r.stdout.strip())


def rx_packets(ns: str, iface: str) -> int:
    r = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{iface}/statistics/rx_packets"],
                       capture_output=True, text=True, check=True)
    return int(r.stdout)


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _measure(ns: str, tx: str, rx: str, count: int, size: int, cpu) -> dict:
    """Blast, wait until nothing more arrives, and report what left and the switch's CPU."""
    rx0, cpu0 = rx_packets(ns, rx), cpu()
    secs = blast(ns, tx, count, size)
    last, got = -1, rx_packets(ns, rx) - rx0
    while got != last:
        time.sleep(0.5)
        last, got = got, rx_packets(ns, rx) - rx0
    cpu_s = cpu() - cpu0
    return {"size": size, "offered": count, "send_s": secs, "delivered": got, "delivered_pps": got / secs,
            "offered_pps": count / secs, "switch_cpu_s": cpu_s,
            "cpu_ns_per_frame": cpu_s * 1e9 / got if got else None}


def run_bmv2(build: Path, count: int, size: int) -> dict:
    with ptf_bench(1) as (ns, sws, far):
        cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.inside", "throughput", "--program", "rotor",
                             "--count", "0", "--mode", "clock", "--grpc-port", str(sws[0].grpc_port),
                             "--p4info", str(build / "rotor.p4info.txtpb"), "--p4blob", str(build / "rotor.json")]
        subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)  # installs the entities
        pid = sws[0].proc.pid
        res = _measure(ns.name, far[(0, 1)], far[(0, 2)], count, size, lambda: _cpu_s(pid))
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
            res = _measure(ns.name, far[1], far[2], count, size, cpu)
        res["drops"] = {dp.DropCause(c).name: n for c, n in ctl.drops().items()}
        res["map_memlock_bytes"] = bpf_stats.map_memlock(sw.pipeline)
    res["target"] = "ebpf"
    return res


def run_kernel(build: Path, quick: bool = False) -> dict:
    """Both targets at each frame size, alternating, in one run; ratios eBPF / BMv2."""
    count = 100_000 if quick else 300_000
    rows = []
    for size in SIZES:
        pair = {}
        for target, fn in (("bmv2", run_bmv2), ("ebpf", run_ebpf)):
            _say(f"[bench] kernel: one rotor on {target}, {count} frames of {size} B from one sender")
            try:
                pair[target] = fn(build, count, size)
            except (subprocess.SubprocessError, OSError, RuntimeError) as ex:
                pair[target] = {"error": str(ex)[:300]}
                _say(f"[bench]   error: {pair[target]['error']}")
                continue
            r = pair[target]
            _say(f"[bench]   offered {r['offered_pps']:.0f}/s, delivered {r['delivered']} ({r['delivered_pps']:.0f}/s); "
                 f"switch CPU {r['cpu_ns_per_frame'] or float('nan'):.0f} ns per frame")
        b, e = pair.get("bmv2", {}), pair.get("ebpf", {})
        row = {"size": size, **pair}
        if b.get("delivered_pps") and e.get("delivered_pps"):
            row["pps_ratio"] = e["delivered_pps"] / b["delivered_pps"]
        if b.get("cpu_ns_per_frame") and e.get("cpu_ns_per_frame"):
            row["cpu_ratio"] = b["cpu_ns_per_frame"] / e["cpu_ns_per_frame"]
        rows.append(row)
    return {"rows": rows, "count": count}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m p4rotor.bench.kernel")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--output")
    a = p.parse_args(argv)
    res = run_kernel(Path(a.build_dir), a.quick)
    text = json.dumps(res, indent=1)
    if a.output:
        Path(a.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
