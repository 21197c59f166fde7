"""One mode's run of the flow list on a running fabric: the short flows over TCP, the bulk flows
to the RotorLB agents, waiting until every flow is whole or the drain ends, then what the logs,
the agents' summaries and the switches' counters say of it.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from ... import schedule as S
from ...fabric.agents import account, cycle_start_ns, start_agents
from ...fabric.switch import stop_process_group
from ...rotorlb import wire
from ...host.flows import CLOSE_WAIT_S
from ...stats import percentile
from ...workload import fct as F
from ...workload.agents import agents_loops, agents_priority, bulk_paths, finished_bulk
from ...workload.paths import arrival_ns
from ...workload.plane import FRAME
from ..runner import say
from .calibrate import issued_starts
from .hosts import primer_counts, start_flows


EARLY_END_CYCLES = 5  # cycles the agents run on once every flow is whole (acknowledgements, the empty queues)


def drain_after_arrivals(bulk_sizes: list[int], span_s: float, cycle_s: float, circuit_Bps: float,
                         racks: int, tcp_sizes: list[int] = (), access_Bps: float = 0.0) -> float:
    """How long a run waits after its last arrival for its flows: every bulk byte at a quarter of
    the access rate (total bulk over one circuit's bytes/s per rack, twice), but no longer than the
    arrivals lasted or the largest bulk flow takes on one circuit, whichever is longer; and ten
    cycles.  A stable run's flows are whole long before, and it ends then (``EARLY_END_CYCLES``).
    An unstable run's backlog would take the whole first term (25 min per mode for 2000 Data
    Mining flows); it is judged on its arrivals, and what has not finished is counted unfinished.
    And at least twice the largest TCP flow's time at ``access_Bps`` (a 56 MB Data Mining flow
    takes 78 s: the packet switch's drain of 10 cycles cut the last one short)."""
    tcp = 2 * max(tcp_sizes) / access_Bps if tcp_sizes and access_Bps > 0 else 0.0
    if not bulk_sizes:
        return 10 * cycle_s + tcp + 5
    backlog = 2 * sum(bulk_sizes) / circuit_Bps / max(1, racks)
    return 10 * cycle_s + max(tcp, min(backlog, max(span_s, max(bulk_sizes) / circuit_Bps))) + 5


def bulk_whole(received: dict[str, int], frames_of: dict[int, int]) -> int:
    """How many bulk flows have all their frames at the destination: ``received`` counts frames
    per ``"origin:flow"`` (:meth:`Agents.received`; flow ids are the run's, unique)."""
    got: dict[int, int] = {}
    for key, n in received.items():
        fid = int(key.split(":")[1])
        got[fid] = got.get(fid, 0) + n
    return sum(1 for fid, n in frames_of.items() if got.get(fid, 0) >= n)


def run_mode(emu, topo, ds: S.Schedule, wl, cutoff: float, out: Path, rate: float, guard_us: float,
         pace_bps: float = 0.0, shared: bool = False, datapath: str = "python") -> dict:
    """One mode's run of the flow list: its flows' records (alone not yet known: the caller sets it
    from the calibration and the replay, experiments/fct/denominators.py), pending bytes, the agents' accounting."""
    out.mkdir(parents=True, exist_ok=True)
    payload = FRAME - wire.DATA_HEADER
    ip_rack = {h.ip: k.id for k in topo.racks for h in k.hosts}
    name_ip = {h.name: h.ip for k in topo.racks for h in k.hosts}
    # Every host runs an agent; the agents of the n-th host of each rack form one RotorLB plane
    # (fabric/agents.py), so a bulk flow of host n goes to the n-th agent of the destination rack.
    index = {h.name: n for k in topo.racks for n, h in enumerate(k.hosts)}
    span_s = max(f.start for f in wl.flows)
    # The flow list's time 0 is no earlier than the agents' first window: they open none before
    # every one of them listens (start_lead_s), and the senders start up beside them.  With time 0
    # 4 s away, the agents' first window ~9 s away, the bulk flows of the first 5 s waited for it (Web Search 1 %: flow 2 held 3.8 s, 3.7x the bound, in every run).
    agents_start = None
    if any(f.size >= cutoff for f in wl.flows):
        agents_start = cycle_start_ns(emu, ds, sum(len(k.hosts) for k in topo.racks) + len(name_ip))
    base = max(time.time_ns() + 4_000_000_000, agents_start or 0)
    cycle_s = ds.hyperperiod_us / 1e6
    drain_s = drain_after_arrivals([f.size for f in wl.flows if f.size >= cutoff], span_s, cycle_s,
                                   rate * payload, len(topo.racks),
                                   tcp_sizes=[f.size for f in wl.flows if f.size < cutoff], access_Bps=pace_bps / 8)
    end = base + int((span_s + drain_s) * 1e9)
    ll: dict[str, list] = {h: [] for h in name_ip}
    bulk: dict[tuple[int, int], list] = {}
    cls = {}
    for f in wl.flows:
        start_ns = base + int(f.start * 1e9)
        if f.size < cutoff:
            ll[f.src].append({"id": f.id, "dst": name_ip[f.dst], "size": f.size, "start_ns": start_ns})
            cls[f.id] = "low-latency"
        else:
            src_rack = ip_rack[name_ip[f.src]]
            bulk.setdefault((src_rack, index[f.src]), []).append(
                {"flow": f.id, "dst": ip_rack[name_ip[f.dst]], "frames": max(1, math.ceil(f.size / payload)),
                 "start_ns": start_ns})
            cls[f.id] = "bulk"
    say(f"[experiment] fct: {out.name}: {sum(map(len, ll.values()))} low-latency flows (TCP), "
        f"{sum(map(len, bulk.values()))} bulk (RotorLB), cutoff {cutoff:.0f} B; "
        f"arrivals over {span_s:.0f} s, up to {span_s + drain_s:.0f} s")
    procs = []
    agents = None
    drops_before, kernel_before = emu.drops(), emu.kernel_drops()
    try:
        procs += start_flows(emu, ll, out, end, pace_bps)
        # An agent resends what its destination has not acknowledged three cycles after it left
        # (a relay waits up to a cycle): a bulk flow completes despite a lost frame.
        if bulk:  # the packet switch carries every flow over TCP: no agents there
            # start_agents shares ``rate`` among a rack's hosts; here each host's agent gets all of it.
            per_rack = max(len(k.hosts) for k in topo.racks)
            agents = start_agents(emu, topo, ds, out / "agents", rate=rate * per_rack, guard_us=guard_us,
                                  flows=bulk, stop_ns=end, end_ns=end, retransmit_us=3 * ds.hyperperiod_us,
                                  shared=shared, start_ns=agents_start, realtime=True, datapath=datapath)
        n_ll = sum(map(len, ll.values()))
        frames_of = {fl["flow"]: fl["frames"] for fls in bulk.values() for fl in fls}
        whole_at = None  # wall s (from base) at which every flow was whole
        while time.time_ns() < end:
            done = sum(len((out / f"rx-{h}.jsonl").read_text().splitlines())
                       for h in ll if (out / f"rx-{h}.jsonl").exists())
            bulk_done = bulk_whole(agents.received(), frames_of) if agents is not None else 0
            t = (time.time_ns() - base) / 1e9
            say(f"[experiment] fct: {out.name}: {max(0.0, t):.0f}/{span_s + drain_s:.0f} s, "
                f"low-latency done {done}/{n_ll}" + (f", bulk done {bulk_done}/{len(frames_of)}" if bulk else ""))
            if done == n_ll and bulk_done == len(frames_of) and t > span_s:
                # Every flow is whole: the drain's worst case need not be waited out.  The agents
                # keep running for EARLY_END_CYCLES so the last frames' acknowledgements arrive
                # (no copy is queued again) and the pending curve shows the empty queues; and at
                # least CLOSE_WAIT_S so the last TCP senders write their records.
                if not bulk:
                    break
                if whole_at is None:
                    whole_at = t
                    end = min(end, time.time_ns() + int(max(EARLY_END_CYCLES * cycle_s, CLOSE_WAIT_S + 1) * 1e9))
            time.sleep(min(10.0, max(0.5, (end - time.time_ns()) / 1e9)))
        if agents is None:
            results = []
        elif whole_at is not None:  # told to end before their --end-ns: SIGTERM, each writes its summary
            results = agents.stop()
            say(f"[experiment] fct: {out.name}: every flow whole at {whole_at:.0f} s, "
                f"{span_s + drain_s - whole_at:.0f} s before the drain's end: agents stopped")
        else:
            results = agents.wait(timeout=60)
        time.sleep(1.5)  # the controller publishes the switches' counters every second
        drops = drop_delta(drops_before, emu.drops())
        kernel = {k: n - kernel_before.get(k, 0) for k, n in emu.kernel_drops().items() if n - kernel_before.get(k, 0)}
        drops["kernel"] = kernel  # frames the kernel dropped on the fabric's links (not a switch's cause)
    finally:
        for p in procs:
            stop_process_group(p)
        if agents is not None:
            agents.kill()
    done_ns: dict[int, int] = {}
    retrans: dict[int, int] = {}  # TCP segments sent again, both ends of a flow (host/flows.py)
    dsack: dict[int, int] = {}    # ... of which the receiver reported duplicates
    wakeups: list[float] = []     # ms from a flow's last byte in to its receiver reading it
    for h in ll:
        for side in ("rx", "tx"):
            f = out / f"{side}-{h}.jsonl"
            for line in (f.read_text().splitlines() if f.exists() else []):
                r = json.loads(line)
                if side == "rx":
                    done_ns[r["id"]] = arrival_ns(r)
                    if r.get("rx_ns") is not None:
                        wakeups.append((r["done_ns"] - r["rx_ns"]) / 1e6)
                if r.get("retrans") is not None:
                    retrans[r["id"]] = retrans.get(r["id"], 0) + r["retrans"]
                if r.get("dsack") is not None:
                    dsack[r["id"]] = dsack.get(r["id"], 0) + r["dsack"]
    frames = {fl["flow"]: fl["frames"] for fls in bulk.values() for fl in fls}
    dead = agents.dead if agents is not None else []
    done_ns.update(finished_bulk(results, [agents.progress_of(d["host"]) for d in dead], frames))
    pending: dict[int, float] = {}
    for r in results:
        for t_ns, local, relay in r.get("pending", []):
            b = int((t_ns - base) / (ds.slot_us * 1000))
            pending[b] = pending.get(b, 0) + (local + relay) * payload
    planned = {f.id: base + int(f.start * 1e9) for f in wl.flows}
    starts = dict(planned)
    starts.update(issued_starts({f.id: planned[f.id] for f in wl.flows if cls[f.id] == "low-latency"}, out, ll))
    done = [F.Done(f, cls[f.id], starts[f.id], done_ns.get(f.id), retrans=retrans.get(f.id),
                   dsack=dsack.get(f.id)) for f in wl.flows]
    # Every frame an agent accepted is delivered exactly once (copies a retransmission made are
    # dropped as duplicates) or counted here as not delivered (``agent_frames_lost``, a name kept
    # for the results before; ``agent_frames_held`` says how many of them were still queued).
    # (Still held at the end counts as not delivered; a dead agent's own frames are its loss.)
    for d in dead:  # its frames count as lost: say so, never silently
        say(f"[experiment] fct: {out.name}: WARNING: the agent in {d['host']} wrote no summary "
            f"(exit {d['exit']}{': ' + d['log'] if d['log'] else ''}); the flows its last progress file "
            "shows whole count as finished, the rest as unfinished, and the frames it held as lost")
    if wakeups:
        w = receiver_wakeup(wakeups)
        say(f"[experiment] fct: {out.name}: a TCP flow's FCT ends when its last byte reached the receiving "
            f"host; the receiver read it {w['p50_ms']:.2f} ms later (median; p90 {w['p90_ms']:.2f} ms), not counted")
    acc = account(results, dead)
    lost = acc["accepted"] - acc["delivered"]
    # The flows' own span, first arrival to last byte delivered (unix s): what the measured
    # activity is cut to (experiments/fct/activity.py), the span the reconstruction covers.
    last_ns = max(done_ns.values(), default=0)
    window = (base / 1e9, (last_ns if last_ns > base else time.time_ns()) / 1e9)
    return {"done": done, "window_unix": window, "pending": sorted((b * ds.slot_us / 1e6, v) for b, v in pending.items()),
            "bulk_paths": bulk_paths(results, {i: planned[i] for i in frames if i in planned}, frames),
            "arrivals_s": span_s, "cutoff": cutoff, "agent_frames_lost": lost,
            # ... of which still queued when the agents stopped (a run cut off at the drain's end;
            # a copy queued for a resend counts here too), not lost on the way:
            "agent_frames_held": acc["held"],
            "dead_agents": dead, "switch_drops": drops,
            "retransmitted": sum(r.get("retransmitted", 0) for r in results),
            "duplicates": sum(r.get("duplicates", 0) for r in results),
            "start_lag": start_lag({i: planned[i] for i in planned if cls[i] == "low-latency"}, starts),
            "receiver_wakeup": receiver_wakeup(wakeups), "primers": primer_counts(out, ll),
            "agents_priority": agents_priority(results),
            "agents_loops": agents_loops(results)}


def start_lag(planned: dict[int, int], issued: dict[int, int]) -> dict:
    """How late the senders began their flows: median, p99 and max, in ms."""
    lags = sorted((issued[i] - t) / 1e6 for i, t in planned.items() if i in issued)
    if not lags:
        return {}
    return {"p50_ms": round(percentile(lags, 50), 3), "p99_ms": round(percentile(lags, 99), 3),
            "max_ms": round(lags[-1], 3), "flows": len(lags)}


def receiver_wakeup(ms: list[float]) -> dict:
    """How long after a low-latency flow's last byte reached its host the receiving process read
    it (host/flows.py: ``done_ns - rx_ns``): the emulator's wait for a CPU, which the FCT no
    longer counts (it ends at ``rx_ns``); reported, as ``start_lag`` is at the other end."""
    if not ms:
        return {"flows": 0}
    ms = sorted(ms)
    return {"p50_ms": round(percentile(ms, 50), 3), "p90_ms": round(percentile(ms, 90), 3),
            "mean_ms": round(sum(ms) / len(ms), 3), "max_ms": round(ms[-1], 3), "flows": len(ms)}


def drop_delta(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict:
    """What the switches dropped between two readings of their counters: ``total`` by cause, and
    ``by_switch`` (causes that moved only)."""
    by_switch = {}
    for sw, causes in after.items():
        moved = {c: n - before.get(sw, {}).get(c, 0) for c, n in causes.items()
                 if n - before.get(sw, {}).get(c, 0)}
        if moved:
            by_switch[sw] = moved
    total: dict[str, int] = {}
    for moved in by_switch.values():
        for c, n in moved.items():
            total[c] = total.get(c, 0) + n
    return {"total": total, "by_switch": by_switch}
