"""Integration: a host link shaped as the fct experiment shapes it (fabric/shaping.py), between two
network namespaces (root, ip, tc, ethtool; skips loudly otherwise).

A long TCP transfer through the shaper must queue one-frame packets:
TCP on Linux 6.x builds GSO super-packets whatever the device's features, and htb sent each as
one unit (a long flow's queue held ~35 KB packets, 142 KB in all), so a short flow behind it
waited for all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from p4rotor.fabric.shaping import link_commands, qdisc_drops, shaper_batch


def _skip_reason():
    miss = [t for t in ("ip", "tc", "ethtool") if not shutil.which(t)]
    if os.geteuid() != 0:
        miss.append("root (network namespaces)")
    return ("SKIPPED: host shaping needs: " + ", ".join(miss)) if miss else None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")

ACCESS_BPS = 5_768_000  # the fct experiment's access rate at its defaults


def _sh(*cmd: str, ns: str | None = None) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    return subprocess.run(full, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def shaped_pair():
    a, b = f"shp{os.getpid()}a", f"shp{os.getpid()}b"
    try:
        _sh("ip", "netns", "add", a)
        _sh("ip", "netns", "add", b)
        _sh("ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "vb", "netns", b)
        for ns, dev, ip in ((a, "va", "10.77.0.1/24"), (b, "vb", "10.77.0.2/24")):
            _sh("ip", "addr", "add", ip, "dev", dev, ns=ns)
            _sh("ip", "link", "set", dev, "up", ns=ns)
        for cmd in link_commands("va"):
            _sh("sh", "-c", cmd, ns=a)
        subprocess.run(["ip", "netns", "exec", a, "tc", "-batch", "-"], check=True, text=True, capture_output=True,
                       input=shaper_batch("va", ACCESS_BPS, ACCESS_BPS / 1.25, 0x20))
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_a_long_flow_queues_a_few_one_frame_packets(shaped_pair):
    a, b = shaped_pair
    sink = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c",
                             "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                             "s.bind(('0.0.0.0',9988));s.listen(1);c,_=s.accept()\nwhile c.recv(65536): pass"])
    sender = None
    try:
        time.sleep(0.5)
        sender = subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c",
                                   "import socket\ns=socket.create_connection(('10.77.0.2',9988))\n"
                                   "s.sendall(bytes(2_000_000))"])
        samples = []
        deadline = time.monotonic() + 2.0
        time.sleep(0.5)
        while time.monotonic() < deadline:
            root = [q for q in json.loads(_sh("tc", "-s", "-j", "qdisc", "show", "dev", "va", ns=a)) if q.get("root")][0]
            if root["qlen"]:
                samples.append((root["backlog"], root["qlen"]))
            time.sleep(0.05)
        assert samples, "the shaper never held a packet: is the transfer running?"
        # One frame per packet (Ethernet header + 1500).  (How many TCP keeps queued is its
        # congestion control's business: BBR's start-up overshoots, then it holds a few.)
        assert max(b / n for b, n in samples) <= 1514, samples
        assert qdisc_drops(_sh("tc", "-s", "-j", "qdisc", "show", "dev", "va", ns=a)) == 0
    finally:
        for p in (sender, sink):
            if p is not None:
                p.kill()
                p.wait()


def test_a_flow_paced_at_the_access_rate_keeps_the_queue_short_and_the_rate(shaped_pair):
    """The fct experiment paces every TCP flow at the access rate (host/flows.py --pace-bps): BBR's
    start-up then cannot fill the host's queue (unpaced, a 1 MB transfer held ~210 KB there), and
    the transfer is no slower for it."""
    a, b = shaped_pair
    size = 1_000_000
    sink = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c",
                             "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                             f"s.bind(('0.0.0.0',9988));s.listen(1);c,_=s.accept();n=0\n"
                             f"while n<{size}: n+=len(c.recv(65536))\nc.send(b'x')"])
    sender = None
    try:
        time.sleep(0.5)
        sender = subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c",
                                   "import socket,time\nfrom p4rotor.host.flows import SO_MAX_PACING_RATE\n"
                                   f"s=socket.socket();s.setsockopt(socket.SOL_SOCKET,SO_MAX_PACING_RATE,{ACCESS_BPS // 8})\n"
                                   "s.connect(('10.77.0.2',9988));t=time.time()\n"
                                   f"s.sendall(bytes({size}));s.recv(1);print(time.time()-t)"],
                                  stdout=subprocess.PIPE, text=True)
        most = 0
        while sender.poll() is None:
            root = [q for q in json.loads(_sh("tc", "-s", "-j", "qdisc", "show", "dev", "va", ns=a)) if q.get("root")][0]
            most = max(most, root["backlog"])
            time.sleep(0.02)
        took = float(sender.stdout.read())
        assert most <= 4 * 1514, f"the shaper held {most} B behind a paced flow"
        ideal = size * 1514 / 1448 * 8 / ACCESS_BPS  # whole frames at the shaped rate
        assert took <= 1.1 * ideal, (took, ideal)
    finally:
        for p in (sender, sink):
            if p is not None:
                p.kill()
                p.wait()
