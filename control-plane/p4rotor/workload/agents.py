"""What the RotorLB agents' summaries say about a run (host/agent.py writes them): when each bulk
flow was whole, how each went (sent, resent, relayed, the agents' loop stalls while it ran), the
agents' real-time priority and their loops, all together.  Pure functions on the summaries.
"""

from __future__ import annotations

import bisect
import math


def agents_priority(summaries: list[dict]) -> dict | None:
    """How long the agents held SCHED_RR (host/priority.py: while they held bulk), all together,
    and the kernel's refusals; None for summaries from before it."""
    ps = [s["priority"] for s in summaries if s.get("priority")]
    if not ps:
        return None
    return {"agents": len(ps), "rt_priority": max((p["rt_priority"] or 0) for p in ps) or None,
            "always": any(p["always"] for p in ps), "raised": sum(p["raised"] for p in ps),
            "busy_s": round(sum(p["busy_s"] for p in ps), 3),
            "errors": sorted({p["error"] for p in ps if p.get("error")})}


def finished_bulk(summaries: list[dict], dead: list[dict], frames: dict[int, int]) -> dict[int, int]:
    """Bulk flow -> when its last frame reached an agent that had all ``frames[flow]`` of it: from
    the agents' summaries (``flows_rx``), and for an agent that died before its summary
    (``dead``: :meth:`Agents.progress_of` each), from its last progress file, at most a second
    old (an older progress file, with counts only, says no time: not taken)."""
    out: dict[int, int] = {}
    for rx in [s.get("flows_rx", {}) for s in summaries] + dead:
        for key, (count, last) in rx.items():
            fid = int(key.split(":")[1])
            if fid in frames and count >= frames[fid] and last is not None:
                out[fid] = last
    return out


def bulk_paths(summaries: list[dict], start_ns: dict[int, int], frames: dict[int, int]) -> dict[int, dict]:
    """How each bulk flow went, from the agents' summaries (host/agent.py: ``flows_tx`` at its
    sender, ``flows_rx_via`` at its receiver), times in s after the flow's start (``start_ns``):
    when its first and last own frames left (``first_sent_s``, ``last_sent_s``), frames sent (a
    resent copy counted again), ``resent``, ``returned`` unsent from a window that closed,
    ``relayed`` of those that arrived and the most slots one waited at its relay
    (``worst_relay_slots``), when the first arrived (``first_rx_s``), second copies the receiver
    dropped (``duplicates``) and so the frames the fabric lost (``lost``: resent less
    duplicates; older summaries have neither), the longest stall of its sender's
    loop and of any agent's while it ran (``sender_stall_ms``, ``worst_stall_ms``; from the agents'
    pending samples, :func:`loop_stalls`).  What an FCT run keeps of the
    flows above the bulk bound, so a slow flow is explained from ``fct.json`` alone; older summaries
    have none of it ({})."""
    out: dict[int, dict] = {}
    for sm in summaries:
        for key, (first, last, sent, resent, returned) in sm.get("flows_tx", {}).items():
            fid = int(key)
            if fid in frames and fid in start_ns:
                out.setdefault(fid, {}).update(
                    first_sent_s=round((first - start_ns[fid]) / 1e9, 6), last_sent_s=round((last - start_ns[fid]) / 1e9, 6),
                    sent=sent, resent=resent, returned=returned)
        for key, (relayed, worst, first_rx, *dup) in sm.get("flows_rx_via", {}).items():
            fid = int(key.split(":")[1])
            if fid in frames and fid in start_ns:
                out.setdefault(fid, {}).update(frames=frames[fid], relayed=relayed, worst_relay_slots=worst,
                                               first_rx_s=round((first_rx - start_ns[fid]) / 1e9, 6),
                                               **({"duplicates": dup[0]} if dup else {}))
    for p in out.values():  # resent frames that arrived once: their first copy was lost
        if "resent" in p and "duplicates" in p:
            p["lost"] = max(0, p["resent"] - p["duplicates"])
    # How long the agents' loops stood still while the flow ran (from its start to its last frame
    # in): its sender's longest stall and the fabric's (any agent's), in ms.  A frame waits a
    # cycle for a window its agent's loop slept through (RotorNet's lone flow 1441 at Data Mining 1 %).
    stalls = [loop_stalls(sm) for sm in summaries]
    senders = {int(k): i for i, sm in enumerate(summaries) for k in sm.get("flows_tx", {})}
    ends = {int(k.split(":")[1]): v[1] for sm in summaries for k, v in sm.get("flows_rx", {}).items()}
    for fid, p in out.items():
        s, e = start_ns[fid], ends.get(fid)
        if e is None or not any(stalls):
            continue
        during = [_stalled(st, s, e) for st in stalls]
        if fid in senders:
            p["sender_stall_ms"] = round(during[senders[fid]], 1)
        p["worst_stall_ms"] = round(max(during), 1)
    return out


STALL_MIN_MS = 20.0  # a sample this much late or more is a stall worth keeping


def _stalled(stalls: list[tuple[int, float]], s: int, e: int) -> float:
    """The longest of ``stalls`` (as :func:`loop_stalls` gives them, in time order) that overlaps
    ``[s, e]`` ns, in ms; 0 for none."""
    worst = 0.0
    for t, late in stalls[bisect.bisect_right(stalls, (s, math.inf)):]:
        if t - late * 1e6 >= e and t - 60e9 > e:  # no stall lasts a minute: past e for good
            break
        if t - late * 1e6 < e:
            worst = max(worst, late)
    return worst


def loop_stalls(summary: dict) -> list[tuple[int, float]]:
    """When an agent's loop stood still, from its pending curve (host/agent.py samples it once a
    slot): each sample that came ``STALL_MIN_MS`` or more after the period, as (ns it came, ms
    late).  The period is the samples' median gap (a slot)."""
    ts = [x[0] for x in summary.get("pending", [])]
    if len(ts) < 3:
        return []
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    period = gaps[len(gaps) // 2]
    return [(b, (b - a - period) / 1e6) for a, b in zip(ts, ts[1:]) if b - a - period >= STALL_MIN_MS * 1e6]


def agents_loops(summaries: list[dict]) -> dict | None:
    """The agents' loops, all together: stalls of 50 ms or more and the worst (host/agent.py
    ``loop_stalls``), the garbage collector's full collections and their worst pause, and the most
    circuit windows one agent had open at once; None for older summaries, without them."""
    ls = [s for s in summaries if s.get("loop_stalls")]
    if not ls:
        return None
    full = [s["gc"].get("2", {}) for s in ls if s.get("gc")]
    return {"agents": len(ls), "stalls_over_50ms": sum(s["loop_stalls"]["over_50ms"] for s in ls),
            "worst_stall_ms": max(s["loop_stalls"]["worst_ms"] for s in ls),
            "full_collections": sum(g.get("collections", 0) for g in full),
            "worst_full_collection_ms": max((g.get("worst_ms", 0.0) for g in full), default=0.0),
            "windows_open_max": max(s.get("windows_open_max", 0) for s in ls)}
