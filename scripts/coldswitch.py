"""How long one BMv2 takes to forward a frame, by how long it was left alone (docs/notes/cold-switches.md).  A diagnostic, not a test: one ``simple_switch`` with a two-port program
(compiled here with p4c-bm2-ss), veth pairs in the root namespace, one frame every GAP ms in a
shuffled order, the residence from one packet socket's kernel stamps on the switch's two
interfaces.  Needs root, p4c and BMv2; nothing else should run.

    sudo .venv/bin/python scripts/coldswitch.py [--gaps 1,30,100] [--frames 20] [--poll]
         [--rr] [--cpus 1] [--warm-ms 2] [--warm-drop]

``--poll``: idle CPUs poll meanwhile (fabric/cpu.py); ``--rr``: the switch under SCHED_RR;
``--cpus``: the switch on these CPUs; ``--warm-ms``: a frame through a third port every that
many ms, sent back out of it (``--warm-drop``: dropped at ingress instead).  Prints one JSON
line: per gap, the frames measured and the median and p90 residence (us).
"""

from __future__ import annotations

import argparse
import json
import random
import select
import socket
import statistics as st
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct h_t { eth_t eth; }
struct m_t {}
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(h.eth); transition accept; } }
control N(inout h_t h, inout m_t m) { apply {} }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) {
    action fwd(bit<9> port) { s.egress_spec = port; }
    action drop() { mark_to_drop(s); }
    table t { key = { s.ingress_port : exact; } actions = { fwd; drop; }
              const default_action = drop();
              const entries = { 1 : fwd(2); 2 : fwd(1); 3 : fwd(3); } }
    apply { t.apply(); }
}
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control D(packet_out p, in h_t h) { apply { p.emit(h.eth); } }
V1Switch(P(), N(), I(), E(), N(), D()) main;
"""
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4
PROBE_TYPE = b"\x88\xb5"
PREFIX = "cold"


def _veths() -> None:
    for p in "abcd":
        subprocess.run(["ip", "link", "del", f"{PREFIX}{p}0"], capture_output=True)
        subprocess.run(["ip", "link", "add", f"{PREFIX}{p}0", "type", "veth", "peer", "name", f"{PREFIX}{p}1"],
                       check=True)
        for i in "01":
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{PREFIX}{p}{i}.disable_ipv6=1"], check=False)
            subprocess.run(["ip", "link", "set", f"{PREFIX}{p}{i}", "up"], check=True)


def _warm(iface: str, period_s: float) -> subprocess.Popen:
    code = ("import socket,time,sys\n"
            f"s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,0); s.bind(({iface!r},0))\n"
            "f=b'\\x06'*6+b'\\x08'*6+b'\\x88\\xb6'+bytes(50); n=time.monotonic()\n"
            f"while True:\n s.send(f); n+={period_s}; time.sleep(max(0,n-time.monotonic()))\n")
    return subprocess.Popen([sys.executable, "-c", code])


def measure(gaps_ms: list[float], frames: int) -> dict:
    cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    cap.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    cap.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((f"{PREFIX}a0", 0))
    plan = [g for g in gaps_ms for _ in range(frames)]
    random.Random(1).shuffle(plan)
    seen: dict[int, dict[str, float]] = {}

    def drain(until: float) -> None:
        while (left := until - time.monotonic()) > 0:
            if not select.select([cap], [], [], left)[0]:
                continue
            data, anc, _, addr = cap.recvmsg(2048, 64)
            if data[12:14] != PROBE_TYPE:
                continue
            seq = struct.unpack("!I", data[14:18])[0]
            for _, kind, val in anc:
                if kind == SO_TIMESTAMPNS:
                    s, ns = struct.unpack("qq", val[:16])
                    seen.setdefault(seq, {})[addr[0] + ("out" if addr[2] == PACKET_OUTGOING else "in")] = s * 1e9 + ns

    drain(time.monotonic() + 0.2)
    for i, gap in enumerate(plan):
        drain(time.monotonic() + gap / 1000)
        tx.send(b"\x02" * 6 + b"\x04" * 6 + PROBE_TYPE + struct.pack("!I", i) + bytes(46))
    drain(time.monotonic() + 0.3)
    per: dict[float, list[float]] = {}
    for i, gap in enumerate(plan):
        r = seen.get(i, {})
        if f"{PREFIX}a1in" in r and f"{PREFIX}b1out" in r:
            per.setdefault(gap, []).append((r[f"{PREFIX}b1out"] - r[f"{PREFIX}a1in"]) / 1000)
    return {f"{g:g}": {"frames": len(v), "median_us": round(st.median(v), 1),
                       "p90_us": round(sorted(v)[9 * len(v) // 10], 1)} if v else {"frames": 0}
            for g in gaps_ms for v in [per.get(g, [])]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gaps", default="0.5,1,2,5,10,30,100", help="ms between two frames (default 0.5,...,100)")
    ap.add_argument("--frames", type=int, default=20, help="frames per gap (default 20)")
    ap.add_argument("--poll", action="store_true", help="idle CPUs poll (PM QoS) while it runs")
    ap.add_argument("--rr", action="store_true", help="the switch under SCHED_RR")
    ap.add_argument("--cpus", help="the switch on these CPUs (taskset)")
    ap.add_argument("--warm-ms", type=float, help="a frame through port 3 every this many ms")
    ap.add_argument("--warm-drop", action="store_true", help="... into port 4, dropped at ingress")
    a = ap.parse_args(argv)
    gaps = [float(g) for g in a.gaps.split(",")]
    from p4rotor.fabric.cpu import IdlePoll

    with tempfile.TemporaryDirectory() as d:
        src, js = Path(d) / "two_ports.p4", Path(d) / "two_ports.json"
        src.write_text(PROGRAM)
        subprocess.run(["p4c-bm2-ss", "-o", str(js), str(src)], check=True)
        _veths()
        cmd = (["taskset", "-c", a.cpus] if a.cpus else []) + (["chrt", "--rr", "1"] if a.rr else [])
        cmd += ["simple_switch", *(f"-i{n}@{PREFIX}{p}1" for n, p in zip((1, 2, 3, 4), "abcd")),
                "--thrift-port", "9199", str(js)]
        sw = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        warm = None
        poll = IdlePoll()
        try:
            time.sleep(1.5)
            if a.poll and not poll.hold():
                print(f"cannot poll: {poll.why_not}", file=sys.stderr)
                return 2
            if a.warm_ms:
                warm = _warm(f"{PREFIX}{'d' if a.warm_drop else 'c'}0", a.warm_ms / 1000)
            time.sleep(0.2)
            res = measure(gaps, a.frames)
        finally:
            poll.release()
            for p in (warm, sw):
                if p is not None:
                    p.terminate()
                    p.wait(5)
            for p in "abcd":
                subprocess.run(["ip", "link", "del", f"{PREFIX}{p}0"], capture_output=True)
    print(json.dumps({"poll": a.poll, "rr": a.rr, "cpus": a.cpus, "warm_ms": a.warm_ms,
                      "warm_drop": a.warm_drop, "residence_by_gap_ms": res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
