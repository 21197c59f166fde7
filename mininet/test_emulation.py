"""Integration: a 4-rack, 2-rotor emulation in Mininet (root, Mininet, BMv2; skips loudly otherwise).

Rotor a pairs racks 0-1 and 2-3, rotor b pairs 0-2 and 1-3 (staggered half a slot).  Bulk
traffic from rack 0 to rack 1 has exactly one path: a's direct circuit (no 2-hop path exists
while a is dark).  So every ping that gets through must have crossed while the controller's
trace shows a in its day; and after stop nothing of the fabric is left on the machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor import topology as TP
from p4rotor.harness import missing_tools

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build"))


def _skip_reason():
    miss = missing_tools()
    if not shutil.which("mnexec"):
        miss.append("mininet (mnexec)")
    for p in ("rotor", "tor"):
        if not (BUILD / f"{p}.json").exists():
            miss.append(f"build/{p}.json (make build; needs p4c)")
    return ("SKIPPED: emulation needs: " + ", ".join(miss)) if miss else None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def sched() -> S.Schedule:
    return S.from_json({"version": 1, "kind": "opera", "racks": 4, "slot_us": 400_000, "reconfig_us": 100_000,
                        "rotors": [{"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
                                   {"name": "b", "offset_us": 200_000, "matchings": [[2, 3, 0, 1]]}]})


def test_host_reaches_other_rack_only_through_its_circuit(tmp_path):
    from p4rotor.emulation import Emulation, leftovers

    topo = TP.generate(sched(), "schedule.json", hosts_per_rack=1)
    emu = Emulation(topo, BUILD, tmp_path / "run", mode="clock", say=lambda m: None)
    pids = []
    try:
        emu.start()
        pids = [sw.proc.pid for sw in emu.switches] + [emu.controller.pid]
        h0 = emu.host("h0x0")
        out = h0.cmd("ping -D -n -i 0.02 -c 150 -W 1 10.0.1.1")
    finally:
        emu.stop()
    replies = [(float(m.group(1)), float(m.group(2)))
               for m in re.finditer(r"\[(\d+\.\d+)\].*icmp_seq=\d+ .*time=([\d.]+) ms", out)]
    assert replies, f"no ping reply at all:\n{out}"
    assert len(replies) < 150, "some pings must be lost while rotor a is dark"
    trace = [json.loads(x) for x in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    a_events = sorted((t["t_ns"] / 1e9, t["night"]) for t in trace if t["switch"] == "a")
    assert a_events, "trace has rotor a's slot changes"

    def a_dark_at(t: float) -> bool | None:
        prev = [n for (ts, n) in a_events if ts <= t]
        if not prev:
            return None
        # within 15 ms of a boundary: too close to call on a shared machine
        if min(abs(ts - t) for ts, _ in a_events) < 0.015:
            return None
        return prev[-1]

    judged = 0
    for recv, rtt_ms in replies:
        sent = recv - rtt_ms / 1000
        for t in (sent, recv):
            d = a_dark_at(t)
            if d is not None:
                judged += 1
                assert d is False, f"a ping crossed at {t:.3f} while rotor a was dark"
    assert judged >= len(replies)
    # Nothing left: processes, interfaces, listeners.
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert leftovers(topo) == []
