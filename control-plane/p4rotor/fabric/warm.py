"""Keep every switch warm: a time probe through each switch's clock port every few ms.

A BMv2 switch that saw no frame for a while is slow to forward the next one.  Measured on one
switch alone (a trivial program, idle CPUs polling; docs/notes/cold-switches.md): a
frame crossed it in 45-50 us 1 ms after the one before, 116 us after 30 ms of quiet and 164-181 us
after 100 ms; on the fct fabric a SYN took 230-310 us per switch after 30 ms of quiet against
50-80 us for the frames right behind it.  Its code and tables are out of the caches of a VM whose
cores the host shares.  A hardware switch has no such state: at low load this made a flow's first
trip through the emulated fabric its slowest, by ~0.5-1.2 ms over 3-7 switches.

The warmer sends the clock port's own probe (control/clockport.py: the pipeline writes two
timestamps into it and sends it back out of the clock port), so every switch's receive,
ingress, egress and transmit threads handle a frame every ``period_ms`` with no change to the
programs, no drop and nothing on the fabric's links.  Its sequence numbers (``WARM_SEQ``) are
outside the controller's, whose collect() ignores them.  The switches count each one
(CTRL_CLOCK_PORT_PROBE); the host end's interface counters say how many came back.

    python -m p4rotor.fabric.warm --period-ms 2 --summary FILE IFACE [IFACE ...]

runs until SIGTERM or SIGINT, then writes ``FILE`` (JSON: per interface the frames sent and
received back) and exits 0.  The sends are spread over the period (one interface every
period / n), so the switches' extra work never comes at once.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import socket
import sys
import time
from pathlib import Path

from ..control.clockport import probe_frame

WARM_SEQ = 0x50000000  # controller probes: 0x60000000 (clock port), 0x70000000 (PacketOut)
DEFAULT_PERIOD_MS = 2.0  # one switch alone: 71 us after 100 ms of quiet at 2 ms, 98 us at 5 ms, 157 none


class WarmError(ValueError):
    pass


def check_period(text: str) -> float:
    """A period in ms: finite, at least 0.1 and at most 1000 (one-line error otherwise)."""
    try:
        v = float(text)
    except ValueError:
        raise WarmError(f"warm period {text!r} is not a number of ms") from None
    if not math.isfinite(v) or not 0.1 <= v <= 1000:
        raise WarmError(f"warm period {text} ms is out of range: 0.1 to 1000 ms")
    return v


def _counter(iface: str, name: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{iface}/statistics/{name}").read_text())
    except (OSError, ValueError):
        return 0


def run(ifaces: list[str], period_ms: float, summary: Path | None = None) -> dict:
    socks = []
    for name in ifaces:
        try:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # send only
            s.bind((name, 0))
        except OSError as ex:
            raise WarmError(f"warm: interface {name!r}: {ex.strerror or ex}") from None
        socks.append(s)
    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rx0 = {n: _counter(n, "rx_packets") for n in ifaces}
    sent = dict.fromkeys(ifaces, 0)
    errors = dict.fromkeys(ifaces, 0)
    frame = probe_frame(WARM_SEQ)
    step = period_ms / 1000 / max(1, len(socks))
    late = 0
    start = time.monotonic()
    nxt = start
    i = 0
    while not stop:
        name, s = ifaces[i], socks[i]
        try:
            s.send(frame)
            sent[name] += 1
        except OSError:
            errors[name] += 1  # the interface went away (the fabric stopping): counted, not fatal
        i = (i + 1) % len(socks)
        nxt += step
        wait = nxt - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        elif wait < -10 * step:
            late += 1  # this process was not scheduled for a while: start the period afresh
            nxt = time.monotonic()
    time.sleep(0.05)  # the last reflections
    out = {"period_ms": period_ms, "seconds": round(time.monotonic() - start, 3), "late": late,
           "interfaces": {n: {"sent": sent[n], "received": _counter(n, "rx_packets") - rx0[n],
                              "send_errors": errors[n]} for n in ifaces}}
    if summary is not None:
        summary.write_text(json.dumps(out, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m p4rotor.fabric.warm", description=__doc__.split("\n\n")[0])
    p.add_argument("--period-ms", default=str(DEFAULT_PERIOD_MS), help="probe each switch this often (ms)")
    p.add_argument("--summary", type=Path, help="write the counts here (JSON) on exit")
    p.add_argument("ifaces", nargs="+", help="host ends of the switches' clock-port veths")
    a = p.parse_args(argv)
    try:
        run(a.ifaces, check_period(a.period_ms), a.summary)
    except WarmError as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
