"""Where a one-packet low-latency flow's time goes, hop by hop (docs/notes/switch-cpus.md).  A diagnostic, not a test: it starts the fct experiment's fabric (Opera, 8 racks
x 2 hosts, dilation 100, idle agents as in its "alone" rounds), sends one-packet TCP flows between
the 56 rack pairs (one host per rack) ``--gaps`` ms apart, and captures them: on each measuring
host's link (tcpdump in its namespace) and on every switch port (one ``tcpdump -i any`` in the
root namespace, TCP and fabric frames).

    sudo .venv/bin/python scripts/hops.py run OUT [--gaps 30,300] [--rounds 1] [--switch-cpus 1] [--warm-switches on]
    .venv/bin/python scripts/hops.py report OUT

``report`` prints, per gap, the medians of: the sender's stack (its timer to the SYN on its
link), the SYN's trip, the receiver's kernel (SYN in, SYN-ACK out), the SYN-ACK's trip, the
sender's Python (SYN-ACK in, data out), the data's trip, the receiver's Python (last data in,
its log line); then each switch's residence time (a frame in on one port, out on another) by how
long that switch had been idle before it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics as st
import struct
import subprocess
import sys
import time
from pathlib import Path


def run(out: Path, gaps_ms: list[float], rounds: int, switch_cpus: str | None,
        warm_switches: str | None = None) -> None:
    from p4rotor import schedule as S
    from p4rotor.experiments.fct.hosts import shape_hosts, start_flows
    from p4rotor.experiments.fct.options import EPSILON_US, switch_cpu_choice, warm_choice
    from p4rotor.experiments.runner import launch
    from p4rotor.fabric.agents import start_agents
    from p4rotor.workload.plane import FRAME, HEADROOM

    out.mkdir(parents=True, exist_ok=True)
    sched = S.generate_opera(8, 4, 1000, 100)
    ds = S.dilate(sched, 100.0)
    access_bps = HEADROOM * len(sched.rotors) * 100.0 * (FRAME + 42) * 8
    pin = switch_cpu_choice(switch_cpus)
    warm = warm_choice(warm_switches or "off", None)
    # As the fct experiment: low-latency routes keep off a rotor EPSILON_US before its night (with
    # none, a slow first frame met the night and the ToR dropped it as STALE: a 1 s SYN timeout).
    emu, topo = launch(sched, 100.0, 2, Path("build").resolve(), out / "run", epsilon_us=EPSILON_US,
                       realtime=True, idle_poll=True, switch_cpus=pin, warm_ms=warm)
    try:
        shape_hosts(emu, topo, access_bps)
        hosts = [k.hosts[0] for k in topo.racks]
        idle = start_agents(emu, topo, ds, out / "agents", rate=200.0, guard_us=10000.0, flows={})
        (out / "links.txt").write_text(subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout)
        dumps = [emu.popen(h.name, ["tcpdump", "-i", emu.host(h.name).defaultIntf().name, "-n", "-s", "96",
                                    "--time-stamp-precision=nano", "-w", str(out / f"{h.name}.pcap"), "tcp"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in hosts]
        dumps.append(subprocess.Popen(["tcpdump", "-i", "any", "-y", "LINUX_SLL2", "-n", "-s", "80",
                                       "--time-stamp-precision=nano", "-w", str(out / "root.pcap"),
                                       "tcp or ether proto 0x88b6"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(2)
        try:
            for gap in gaps_ms:
                gap_ns = int(gap * 1e6)
                plan = {h.name: [] for h in hosts}
                i, t = int(gap * 1000), time.time_ns() + 1_500_000_000
                for _ in range(rounds):
                    for a in hosts:
                        for b in hosts:
                            if a is not b:
                                plan[a.name].append({"id": i, "dst": b.ip, "size": 1460, "start_ns": t})
                                t += gap_ns
                                i += 1
                sub = out / f"gap{gap:g}"
                sub.mkdir(exist_ok=True)
                procs = start_flows(emu, plan, sub, t + 4 * gap_ns, access_bps)
                for p in procs:
                    p.wait(timeout=(t - time.time_ns()) / 1e9 + 60)
                print(f"gap {gap:g} ms: {sum(map(len, plan.values()))} flows", flush=True)
        finally:
            time.sleep(1)
            for p in dumps:
                p.terminate()
            idle.kill()
    finally:
        emu.stop()


def _pcap(path: Path, cooked: bool = False) -> list[tuple]:
    """(ns, interface index or None, packet type, src, dst, sport, dport, flags, payload) per TCP
    frame; fabric frames (ethertype 0x88b6) unwrapped; ``cooked``: Linux cooked v2 (``-i any``)."""
    b = path.read_bytes()
    off, rows = 24, []
    while off + 16 <= len(b):
        s, ns, incl, _ = struct.unpack("<IIII", b[off:off + 16])
        d = b[off + 16:off + 16 + incl]
        off += 16 + incl
        if cooked:
            proto, _, ifi, _, ptype, _ = struct.unpack(">HHiHBB", d[:12])
            ip = d[20:]
        else:
            proto, ifi, ptype, ip = struct.unpack(">H", d[12:14])[0], None, None, d[14:]
        if proto == 0x88B6:
            if struct.unpack(">H", ip[6:8])[0] != 0x0800:
                continue
            ip = ip[8:]
        elif proto != 0x0800:
            continue
        ihl = (ip[0] & 15) * 4
        tot = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:]
        if ip[9] != 6 or len(tcp) < 14:
            rows.append((s * 10**9 + ns, ifi, ptype, None, None, None, None, None, None))
            continue
        sp, dp = struct.unpack(">HH", tcp[:4])
        rows.append((s * 10**9 + ns, ifi, ptype, ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20])),
                     sp, dp, tcp[13], tot - ihl - (tcp[12] >> 4) * 4))
    return rows


def _stats(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    return f"  {name:16s} min {xs[0]:7.3f}  p50 {st.median(xs):7.3f}  p90 {xs[9 * len(xs) // 10]:7.3f} ms"


def report(out: Path) -> None:
    host = {f.stem: _pcap(f) for f in out.glob("h*.pcap")}
    for gd in sorted(out.glob("gap*"), key=lambda p: float(p.name[3:])):
        tx, rx, plan = {}, {}, {}
        for f in gd.glob("tx-*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                tx[r["id"]] = (f.stem[3:], r)
        for f in gd.glob("rx-*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                rx[r["id"]] = (f.stem[3:], r)
        for f in gd.glob("flows-*.json"):
            plan.update({fl["id"]: fl for fl in json.loads(f.read_text())})
        parts: dict[str, list[float]] = {}
        for fid, (s, t) in tx.items():
            if fid not in rx or t.get("error"):
                continue
            d, r = rx[fid]
            syn = next((p for p in host[s] if p[7] is not None and p[7] & 0x12 == 0x02
                        and p[4] == plan[fid]["dst"] and p[0] >= t["issued_ns"]), None)
            if syn is None:
                continue
            fwd = (syn[3], syn[5])

            def first(h, cond):
                return next((p[0] for p in host[h] if p[0] >= syn[0] and p[7] is not None and cond(p)), None)

            syn_in = first(d, lambda p: (p[3], p[5]) == fwd and p[7] & 0x12 == 0x02)
            sa_out = first(d, lambda p: (p[4], p[6]) == fwd and p[7] & 0x12 == 0x12)
            sa_in = first(s, lambda p: (p[4], p[6]) == fwd and p[7] & 0x12 == 0x12)
            data_out = first(s, lambda p: (p[3], p[5]) == fwd and p[8] > 0)
            data_in = [p[0] for p in host[d] if p[0] >= syn[0] and p[7] is not None and (p[3], p[5]) == fwd
                       and p[8] > 0][:3]
            if None in (syn_in, sa_out, sa_in, data_out) or not data_in:
                continue
            for k, v in (("sender's stack", syn[0] - t["issued_ns"]), ("SYN trip", syn_in - syn[0]),
                         ("receiver kernel", sa_out - syn_in), ("SYN-ACK trip", sa_in - sa_out),
                         ("sender's Python", data_out - sa_in), ("data trip", data_in[0] - data_out),
                         ("receiver Python", r["done_ns"] - max(data_in)),
                         # the experiment's FCT ends at the kernel's stamp (host/flows.py: rx_ns);
                         # older logs have only done_ns, the receiver's read
                         ("FCT", (r.get("rx_ns") or r["done_ns"]) - t["issued_ns"]),
                         ("FCT to the receiver's read", r["done_ns"] - t["issued_ns"])):
                parts.setdefault(k, []).append(v / 1e6)
        print(f"{gd.name[3:]} ms apart: {len(parts.get('FCT', []))} flows")
        for k, xs in parts.items():
            print(_stats(k, xs))
    root = out / "root.pcap"
    if not root.exists():
        return
    names = {}
    for line in (out / "links.txt").read_text().splitlines():
        m = re.match(r"(\d+): ([^:@]+)", line)
        if m:
            names[int(m.group(1))] = m.group(2)
    frames = sorted(_pcap(root, cooked=True))
    seen: dict[str, list[int]] = {}  # switch -> arrival times of every frame (TCP or not)
    for p in frames:
        if p[2] != 4:
            seen.setdefault(names.get(p[1], "?").split("-")[0], []).append(p[0])
    import bisect

    arrived, rows = {}, []
    for p in frames:
        if p[3] is None:
            continue
        sw = names.get(p[1], "?").split("-")[0]
        key = (p[3], p[4], p[5], p[6], p[7], sw)
        if p[2] != 4:
            arrived[key] = p[0]
        elif key in arrived:
            t_in = arrived.pop(key)
            lst = seen[sw]
            j = bisect.bisect_left(lst, t_in) - 1
            idle_ms = (t_in - lst[j]) / 1e6 if j >= 0 else float("inf")
            kind = "SYN" if p[7] & 0x12 == 0x02 else "SYN-ACK" if p[7] & 0x12 == 0x12 else "other TCP"
            rows.append((kind, idle_ms, (p[0] - t_in) / 1e3))
    print("a switch's residence (a frame in, the same frame out) by how long the switch had been idle:")
    for kind in ("SYN", "SYN-ACK", "other TCP"):
        for lo, hi in ((0, 0.5), (0.5, 2), (2, 5), (5, 10), (10, 30), (30, float("inf"))):
            v = [r[2] for r in rows if r[0] == kind and lo <= r[1] < hi]
            if v:
                print(f"  {kind:9s} idle {lo:g}-{hi:g} ms: {len(v):5d} frames, median {st.median(v):5.0f} us")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--gaps", default="30,300", help="ms between two flows, per pass (default 30,300)")
    r.add_argument("--rounds", type=int, default=1, help="flows per rack pair per gap (default 1)")
    r.add_argument("--switch-cpus", default="none", help="as fct's --switch-cpus (default none)")
    r.add_argument("--warm-switches", default="off", help="as fct's --warm-switches (default off)")
    p = sub.add_parser("report")
    p.add_argument("out")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        try:
            gaps = [float(g) for g in a.gaps.split(",")]
        except ValueError:
            ap.error(f"--gaps {a.gaps!r}: comma-separated ms")
        if not gaps or min(gaps) <= 0 or not 1 <= a.rounds <= 16:
            ap.error("--gaps must be > 0 ms and --rounds in 1..16")
        run(Path(a.out), gaps, a.rounds, a.switch_cpus, a.warm_switches)
    else:
        report(Path(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
