"""The hosts' side of an fct run: each host's link shaped to the access rate (agent frames
first), and one short-flow process per host (host/flows.py) under SCHED_RR below the switches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...fabric.switch import HOST_RT_PRIORITY, HarnessError, priority_prefix
from ...stats import percentile
from ...workload.paths import arrival_ns
from ...workload.plane import HEADROOM


FLOWS_RT_PRIORITY = HOST_RT_PRIORITY  # the TCP senders and receivers: below the switches
# A one-byte primer flow this long (wall) before every flow, to the same host, in the calibration,
# the run and the replay alike (host/flows.py says why): on the Opera fabric idle one-packet
# flows took p5 548 us cold and 343 us 2 ms after a primer; 1 ms apart and 2 ms gave the same
# on a bare veth (docs/notes/flow-primers.md).  2 ms: a primer (~0.3-0.8 ms) is done before its flow.
PRIMER_US = 2000


def start_flows(emu, plan: dict[str, list], out: Path, end_ns: int, pace_bps: float = 0.0) -> list:
    """One short-flow process (host/flows.py) per host: its flows, its receive and send logs.
    ``pace_bps``: no TCP flow sends faster than this (the access rate: a NIC's pace).  Without it,
    BBR's start-up sent at up to 2.9x its first estimate, which the fast veth made far above the
    shaped rate: a 1 MB transfer held 210 KB in its host's htb (a SYN behind it waited 90-105 ms);
    at the access rate it holds 2 frames, the SYN waits 9-11 ms and the transfer takes as long
    (1.448 s both: docs/notes/priorities.md).
    Under SCHED_RR below the switches (``FLOWS_RT_PRIORITY``): an application answers at once on
    real hosts, here it waited for the 16 agents' time slices (a one-packet flow's median FCT
    was 2.5x its alone, most of it the senders' and receivers' Python waking up)."""
    procs = []
    for h, fl in plan.items():
        (out / f"flows-{h}.json").write_text(json.dumps(fl))
        procs.append(emu.popen(h, priority_prefix(True, FLOWS_RT_PRIORITY, 0) + [sys.executable, "-m", "p4rotor.host.flows", "--flows", str(out / f"flows-{h}.json"),
                                   "--rx-log", str(out / f"rx-{h}.jsonl"), "--tx-log", str(out / f"tx-{h}.jsonl"),
                                   "--end-ns", str(end_ns), "--pace-bps", str(pace_bps),
                                   "--primer-us", str(PRIMER_US), "--primer-log", str(out / f"primers-{h}.jsonl")],
                          stdout=None, stderr=None))
    return procs


def primer_counts(out: Path, hosts) -> dict:
    """The primers of a run's hosts (host/flows.py logs them apart from the flows): how many were
    sent, answered, and failed (with an error or never answered), and the median primer's FCT."""
    tx, rx = {}, {}
    for h in hosts:
        f = out / f"primers-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            (tx if r.get("side") == "tx" else rx)[r["id"]] = r
    answered = [r for r in tx.values() if r.get("ack_ns") is not None]
    fcts = sorted((arrival_ns(rx[i]) - r["issued_ns"]) / 1e6 for i, r in tx.items()
                  if i in rx and arrival_ns(rx[i]) and r.get("issued_ns"))
    return {"primer_us": PRIMER_US, "sent": len(tx), "answered": len(answered), "failed": len(tx) - len(answered),
            "p50_ms": round(percentile(fcts, 50), 3) if fcts else None}


def shape_hosts(emu, topo, access_bps: float) -> None:
    """Every host sends at most ``access_bps`` (htb on its link to the ToR, one frame per packet),
    the agents' frames (DSCP 8, paced, below 1/HEADROOM of the rate) first: a frame that waits
    behind a TCP burst misses its circuit's window and is dropped as stale (12% of them did in one
    FIFO).  Opera's ToRs give the two classes separate queues the same way ([McGuinness21 §2.6]).
    fabric/shaping.py says why a packet must be one frame; the script is kept in the run directory."""
    from ...fabric.shaping import link_commands, shaper_batch
    from ...p4 import DSCP_DIRECT_ONLY

    for k in topo.racks:
        for h in k.hosts:
            node = emu.host(h.name)
            dev = node.defaultIntf().name
            script = emu.run_dir / f"shaper-{h.name}.tc"
            script.write_text(shaper_batch(dev, access_bps, access_bps / HEADROOM, DSCP_DIRECT_ONLY << 2))
            for cmd in link_commands(dev) + [f"tc -batch {script}"]:
                err = node.cmd(cmd + " 2>&1 >/dev/null").strip()
                if err:
                    raise HarnessError(f"{h.name}: {cmd}: {err.splitlines()[0]}")
