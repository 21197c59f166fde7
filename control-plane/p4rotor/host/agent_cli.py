"""Run one RotorLB host agent (``python -m p4rotor.host.agent_cli``; host/agent.py): started by
the fabric's harness (fabric/agents.py), one per host, until ``--end-ns`` or SIGTERM; it then
writes its JSON summary (host/agent_stats.py) to ``--out``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import sys
from pathlib import Path

from .. import schedule as S
from ..rotorlb import wire
from .agent import Agent
from .agent_stats import write_json
from .priority import BusyPriority


INCARNATION_FLOW_SHIFT = 20  # a restarted agent's flow ids: flow + incarnation << 20
FLOW_SPAN = 1 << INCARNATION_FLOW_SHIFT


def _running_rr() -> bool:
    try:
        return os.sched_getscheduler(0) == os.SCHED_RR
    except OSError:
        return False


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4rotor.host.agent_cli", description=__doc__.splitlines()[0])
    p.add_argument("--schedule", required=True, help="the DILATED schedule the fabric runs")
    p.add_argument("--t0-ns", type=int, required=True, help="wall time of schedule slot 0 (status file)")
    p.add_argument("--rack", type=int, required=True)
    p.add_argument("--peers", required=True, help='JSON {"rack": "agent IP", ...} for every rack')
    p.add_argument("--flows", default="[]", help='JSON [{"flow": id, "dst": rack, "frames": n (-1: saturate), '
                   '"start_ns": t (optional: made at t)}], or @FILE')
    p.add_argument("--rate", type=float, default=500, help="frames/s on a circuit")
    p.add_argument("--frame", type=int, default=1400, help="UDP payload bytes per data frame")
    p.add_argument("--guard-us", type=float, default=0, help="wall us kept free at each end of a day")
    p.add_argument("--one-hop", action="store_true", help="baseline: direct only, no offers")
    p.add_argument("--stop-ns", type=int, required=True, help="saturated flows stop making data")
    p.add_argument("--end-ns", type=int, required=True, help="stop (after draining relays)")
    p.add_argument("--start-ns", type=int, default=0, help="open no circuit window before this wall time")
    p.add_argument("--ready", help="write this file once listening (the harness waits for every agent's)")
    p.add_argument("--measure", default="0,0", help="START_NS,END_NS of the throughput window")
    p.add_argument("--tun", metavar="ADDR/PLEN", help="make a TUN interface rlb0 with this address "
                   "(10.200.RACK.N/16): IP packets to another rack's TUN address are bulk data")
    p.add_argument("--retransmit-us", type=float, default=0.0,
                   help="resend own frames not acknowledged this long after they left (wall us; 0: never); "
                        "ACKs ride the low-latency class")
    p.add_argument("--ack-direct", action="store_true",
                   help="with --retransmit-us: ACK over the direct circuit to the origin (its next window), "
                        "not the low-latency class (a schedule without one, e.g. RotorNet)")
    p.add_argument("--progress", help="write frames received per flow here once a second (JSON)")
    p.add_argument("--share", metavar="FILE",
                   help="share the rack's circuits with its other agents through this shared-memory file, on "
                        "tmpfs (host/share.py: ShmShare): --rate is then the whole circuit's")
    p.add_argument("--share-member", type=int, default=0, help="with --share: this agent's index in its rack")
    p.add_argument("--share-members", type=int, default=1, help="with --share: the rack's agents")
    p.add_argument("--host-rate", type=float,
                   help="frames/s this host's link carries over all its circuits together (default: no cap)")
    p.add_argument("--rt-priority", type=int, metavar="N",
                   help="run under SCHED_RR at N while holding bulk, the default policy while idle "
                        "(host/priority.py; needs CAP_SYS_NICE)")
    p.add_argument("--rt-always", action="store_true", help="with --rt-priority: SCHED_RR idle or not")
    p.add_argument("--fill", type=float, default=1 - wire.WINDOW_SLACK,
                   help="the share of a window's time frames are planned for (default %(default)s)")
    p.add_argument("--tcp-split", action="store_true",
                   help="with --datapath c: TCP connections to other racks' 10.200.R.N end at this agent and "
                        "cross as RotorLB streams (host/stream.py; the harness redirects them here)")
    p.add_argument("--plane", type=int, default=0,
                   help="with --tcp-split: this host's index in its rack (its peers are the hosts of that index)")
    p.add_argument("--spin-ns", type=int, metavar="NS",
                   help="with --datapath c: rlbd stays awake this long before each frame is due "
                        "(default: a quarter of a frame time; 0: never)")
    p.add_argument("--datapath", choices=("python", "c"), default="python",
                   help="who moves the frames: this process (python), or the compiled rlbd (c; host/fast_agent.py)")
    p.add_argument("--incarnation", type=int, default=0,
                   help="with --datapath c: how often the harness restarted this host's agent before: its flows' "
                        "ids get incarnation << 20 added (a receiver takes none of its frames for its predecessor's) "
                        "and its split connections are new (host/stream.py)")
    p.add_argument("--resend-streams-only", action="store_true",
                   help="with --retransmit-us and --datapath c: resend stream frames only; bulk frames are sent "
                        "once (delivered at most once, even by a restarted receiver)")
    p.add_argument("--phases", metavar="JSON|@FILE",
                   help='one run for a list of matrices: {"one_hop_from": [[t_ns, 0|1], ...], "snapshots": [t_ns, ...]} '
                        "(saturated flows then carry their own start_ns / stop_ns)")
    p.add_argument("--out", required=True, help="the JSON summary goes here")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.rt_always and a.rt_priority is None:
        print("error: --rt-always needs --rt-priority", file=sys.stderr)
        return 2
    if a.rt_priority is not None and not 1 <= a.rt_priority <= 99:
        print(f"error: --rt-priority {a.rt_priority} is out of range: SCHED_RR takes 1 to 99", file=sys.stderr)
        return 2
    sched = S.load(a.schedule)
    peers = {int(k): v for k, v in json.loads(a.peers).items()}
    ms = tuple(int(x) for x in a.measure.split(","))
    flows = json.loads(Path(a.flows[1:]).read_text() if a.flows.startswith("@") else a.flows)
    if a.spin_ns is not None and not 0 <= a.spin_ns <= 10_000_000:
        print(f"error: --spin-ns {a.spin_ns}: must be in 0..10000000", file=sys.stderr)
        return 2
    if not 0 < a.fill <= 1:
        print(f"error: --fill {a.fill}: must be in (0, 1]", file=sys.stderr)
        return 2
    if a.tcp_split and a.datapath != "c":
        print("error: --tcp-split needs --datapath c", file=sys.stderr)
        return 2
    if a.datapath == "c" and a.tun:
        print("error: --datapath c does not do --tun yet", file=sys.stderr)
        return 2
    if (a.incarnation or a.resend_streams_only) and a.datapath != "c":
        print("error: --incarnation and --resend-streams-only need --datapath c", file=sys.stderr)
        return 2
    if not 0 <= a.incarnation < 64:
        print(f"error: --incarnation {a.incarnation}: 0..63", file=sys.stderr)
        return 2
    if a.incarnation:
        if any(not 0 <= f["flow"] < FLOW_SPAN for f in flows):
            print(f"error: --incarnation: flow ids must be below {FLOW_SPAN}", file=sys.stderr)
            return 2
        flows = [dict(f, flow=f["flow"] + (a.incarnation << INCARNATION_FLOW_SHIFT)) for f in flows]
    try:
        phases = _phases(a.phases)
    except (OSError, ValueError) as ex:
        print(f"error: --phases: {ex}", file=sys.stderr)
        return 2
    kind, extra = Agent, {}
    if a.datapath == "c":
        from .fast_agent import FastAgent as kind
        extra = {"tcp_split": a.tcp_split, "plane": a.plane, "spin_ns": a.spin_ns, "incarnation": a.incarnation,
                 "resend_streams_only": a.resend_streams_only}
    try:
        agent = kind(sched, a.t0_ns, a.rack, peers, rate=a.rate, frame=a.frame, guard_us=a.guard_us,
                     flows=flows, one_hop=a.one_hop, stop_ns=a.stop_ns, end_ns=a.end_ns,
                     measure=(ms[0], ms[1]), retransmit_us=a.retransmit_us, start_ns=a.start_ns,
                     ready_file=Path(a.ready) if a.ready else None, ack_direct=a.ack_direct,
                     progress_file=Path(a.progress) if a.progress else None, host_rate=a.host_rate,
                     planes=a.share_members if a.share else 1, fill=a.fill, phases=phases, **extra)
    except ValueError as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 2
    if a.rt_priority is not None:
        agent.priority = BusyPriority(a.rt_priority, always=a.rt_always, started_rr=_running_rr())
    if a.share:
        from .share import ShmShare

        try:
            agent.share = ShmShare(Path(a.share), agent.capacity).member(a.share_member)
        except (OSError, ValueError) as ex:
            print(f"error: --share {a.share}: {ex}", file=sys.stderr)
            return 2
    if a.tun:
        from .tun import Tun

        agent.tun = Tun("rlb0", a.tun, mtu=a.frame - wire.DATA_HEADER)

    async def run() -> dict:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: agent.stopping.set() if hasattr(agent, "stopping") else None)
        return await agent.run()

    # What start-up made (modules, the schedule, the flow list) lives until the end: left out of
    # every collection, so a full one walks only what the run makes.
    gc.freeze()
    write_json(Path(a.out), asyncio.run(run()))
    return 0


def _phases(arg: str | None) -> dict | None:
    """``--phases``, checked: a mode change is [t_ns, 0 or 1], a snapshot a t_ns (ValueError)."""
    if arg is None:
        return None
    doc = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    if not isinstance(doc, dict) or set(doc) - {"one_hop_from", "snapshots"}:
        raise ValueError('want an object with "one_hop_from" and "snapshots" only')
    for m in doc.get("one_hop_from", []):
        if not (isinstance(m, list) and len(m) == 2 and isinstance(m[0], int) and m[1] in (0, 1)):
            raise ValueError(f"one_hop_from entry {m!r}: want [t_ns, 0 or 1]")
    for t in doc.get("snapshots", []):
        if not isinstance(t, int) or t < 0:
            raise ValueError(f"snapshot {t!r}: want a wall time in ns")
    return doc


if __name__ == "__main__":
    sys.exit(main())
