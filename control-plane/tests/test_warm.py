"""fabric/warm.py: the warmer's period, its errors, and what it sends (a veth pair; root)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from p4rotor import p4 as dp
from p4rotor.control import clockport as CP
from p4rotor.fabric import warm as W


def test_period_is_checked():
    assert W.check_period("2") == 2.0 and W.check_period("0.1") == 0.1 and W.check_period("1000") == 1000
    for bad, msg in (("0", "out of range"), ("0.05", "out of range"), ("1e4", "out of range"),
                     ("nan", "out of range"), ("inf", "out of range"), ("-1", "out of range"),
                     ("two", "not a number")):
        with pytest.raises(W.WarmError, match=msg):
            W.check_period(bad)


def test_warm_probes_are_outside_the_controllers_sequence_numbers():
    """The controller collects only its own probes' sequence numbers: the warmer's never match."""
    seq, _, _ = CP.parse_probe(CP.probe_frame(W.WARM_SEQ))
    assert seq == W.WARM_SEQ
    controller = [(0x60000000, 0x70000000), (0x70000000, 0x80000000)]  # control/prober.py: clock port, PacketOut
    assert all(not lo <= seq < hi for lo, hi in controller)


def test_bad_interface_or_period_is_one_line_and_exit_2(capsys):
    assert W.main(["--period-ms", "2", "no-such-if0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-if0" in err
    assert W.main(["--period-ms", "0", "lo"]) == 2
    assert "out of range" in capsys.readouterr().err


def _root_skip():
    if os.geteuid() != 0:
        return "SKIPPED: needs root (veth pairs and packet sockets)"
    if subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        return "SKIPPED: needs iproute2 (ip)"
    return None


@pytest.mark.skipif(_root_skip() is not None, reason=_root_skip() or "")
def test_sends_clock_probes_evenly_and_counts_on_sigterm(tmp_path):
    """Two veth pairs: the warmer on one end of each sends clock probes at its period, spread
    over the period, and on SIGTERM writes what it sent (and what came back: nothing here)."""
    tag = uuid.uuid4().hex[:4]
    pairs = [(f"w{tag}a{i}", f"w{tag}b{i}") for i in range(2)]
    try:
        for a, b in pairs:
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
            for end in (a, b):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False)
                subprocess.run(["ip", "link", "set", end, "up"], check=True)
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        cap.bind((pairs[0][1], 0))
        cap.settimeout(2)
        summary = tmp_path / "warm.json"
        proc = subprocess.Popen([sys.executable, "-m", "p4rotor.fabric.warm", "--period-ms", "10",
                                 "--summary", str(summary), pairs[0][0], pairs[1][0]])
        first = cap.recv(2048)
        assert CP.parse_probe(first) == (W.WARM_SEQ, 0, 0)
        assert first[12:14] == dp.ETHERTYPE_CLOCK_PROBE.to_bytes(2, "big")
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        s = json.loads(summary.read_text())
        sent = [s["interfaces"][a]["sent"] for a, _ in pairs]
        # 1 s at 10 ms: ~100 each (the start and a loaded machine take some)
        assert all(60 <= n <= 110 for n in sent), s
        assert abs(sent[0] - sent[1]) <= 1, "one interface after the other, in turn"
        assert all(s["interfaces"][a]["received"] == 0 and s["interfaces"][a]["send_errors"] == 0
                   for a, _ in pairs), "nothing reflects them here"
        assert s["period_ms"] == 10.0
    finally:
        for a, _ in pairs:
            subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)
