"""Which fault lost what, under ``experiment faults --traffic``: every bulk frame a receiver never
saw and every TCP byte a reset connection's client wrote and its server never received, placed
in the fault whose window holds it (experiments/faults_load.py judges the run).

* **Bulk**: rlbd notes where a bulk flow's frames went missing and between which two arrivals
  (``bulk_gaps`` in each receiver's summary: [origin, flow, frames still missing, t0, t1], ns of
  the frames around the gap).  A gap's loss belongs to the one fault whose window [start, end +
  2 cycles] its [t0, t1] overlaps; if none, to the first fault that began within the longest
  relay wait after t1 (``relay_span_ns``: a frame held at a relay that the fault then lost); to
  none ("outside every fault": the fabric lost frames while nothing was broken), or to several
  ("between faults": said, not split).  A pair into a killed agent is the kill's whole (its
  receiver's record died with it, and the new one's first gap holds what the old one had
  delivered); what a pair lost beyond its gaps was lost after the receiver's last frame, between
  its arrival and the run's end, and is placed by that span (without them: "not placed"); a
  killed incarnation's own flows are not the run's count and are said apart.  Every
  frame the run lost is in exactly one of these.
* **TCP**: a connection reset in a fault's window loses to that fault what its client wrote and
  its server never received (the split path had accepted it ahead of the circuits); a
  connection that ended as planned had its last bytes in flight when iperf3 stopped, which no
  fault lost."""

from __future__ import annotations

Window = tuple[int, int]


def fault_windows(faults, origin_ns: int, dilation: float, cycle_s: float,
                  ends: dict[int, int] | None = None) -> list[Window]:
    """Each fault's window, wall ns: its start to its end (or its restart; ``ends``: fault index
    -> a later end, wall ns, where the fault lasts past it: a restarted controller until its slot
    0, a restarted agent until it listens) plus two cycles."""
    out = []
    for i, f in enumerate(faults):
        end_us = f.end_us if f.end_us is not None else f.start_us + (f.restart_after_us or 0)
        end = max(origin_ns + int(end_us * dilation * 1000), (ends or {}).get(i, 0))
        out.append((origin_ns + int(f.start_us * dilation * 1000), end + int(2 * cycle_s * 1e9)))
    return out


def place(spans: list[tuple[int, int, int]], wins: list[Window], late_ns: int = 0) -> tuple[list[int], int, int]:
    """(count per window, count outside every window, count over several) of ``spans``
    [(t0, t1, count)]: each span's count goes whole to the one window it overlaps; a span that
    overlaps none goes to the first window beginning within ``late_ns`` after it (a frame held at a
    relay, which a fault then lost), if any."""
    per, outside, several = [0] * len(wins), 0, 0
    for t0, t1, n in spans:
        hits = [i for i, (a, b) in enumerate(wins) if t0 <= b and t1 >= a]
        if not hits:
            after = [i for i, (a, _) in enumerate(wins) if t1 < a <= t1 + late_ns]
            hits = [min(after, key=lambda i: wins[i][0])] if after else []
        if len(hits) == 1:
            per[hits[0]] += n
        elif hits:
            several += n
        else:
            outside += n
    return per, outside, several


def relay_span_ns(summaries: list[dict], slot_s: float) -> int:
    """How long after the frames around a gap a frame of it could still have been lost: the
    longest a relay held a frame in this run (the receivers' ``relay_delay_slots``), plus a slot.
    A frame held at a relay that a fault then lost (a killed agent, a link down) leaves its gap
    before the fault began."""
    worst = max((int(k) for s in summaries for k, n in (s.get("relay_delay_slots") or {}).items() if n), default=0)
    return int((worst + 1) * slot_s * 1e9)


def bulk_by_fault(summaries: list[dict], pairs: dict[str, dict], kills: dict[int, int], wins: list[Window],
                  origin_ns: int, is_bulk, relay_ns: int = 0, end_ns: int | None = None) -> dict:
    """Bulk frames lost per fault (``kills``: killed rack -> its fault's index), and the rest:
    outside every fault, between faults, not placed; ``pairs``: bulk_account's, per "o->d" (its
    ``flows``: the live incarnations' flow ids); ``relay_ns``: ``place``'s ``late_ns``."""
    spans: list[tuple[int, int, int]] = []
    in_gaps: dict[str, int] = {}
    live = {(int(k.split("->")[0]), int(fl)) for k, p in pairs.items() for fl in p.get("flows", [])}
    recorded = all(s.get("bulk_gaps") is not None for s in summaries)
    dropped = dead = 0
    for s in summaries:
        dropped += s.get("bulk_gaps_dropped") or 0
        if s["rack"] in kills:
            continue
        for o, fl, n, t0, t1 in s.get("bulk_gaps") or []:
            if not is_bulk(fl):
                continue
            if (o, fl) not in live:
                dead += n
                continue
            spans.append((t0 or origin_ns, t1, n))
            key = f"{o}->{s['rack']}"
            in_gaps[key] = in_gaps.get(key, 0) + n
    # What a pair lost after its receiver's last frame (no later frame opened a gap): between that
    # frame's arrival (flows_rx's last ns) and the run's end.
    last = {}
    for s in summaries:
        for k, v in (s.get("flows_rx") or {}).items():
            o, fl = (int(x) for x in k.split(":"))
            if (o, fl) in live and isinstance(v, list) and len(v) > 1:
                key = f"{o}->{s['rack']}"
                last[key] = max(last.get(key, 0), v[1])
    tails = 0
    for key, p in pairs.items():
        tail = p["lost"] - in_gaps.get(key, 0)
        if tail > 0 and int(key.split("->")[1]) not in kills and end_ns is not None and key in last:
            spans.append((last[key], end_ns, tail))
            in_gaps[key] = in_gaps.get(key, 0) + tail
            tails += tail
    per, outside, several = place(spans, wins, relay_ns)
    # of those outside every fault, the ones before the first began (the agents' start-up): a span
    # that ends a relay wait before the first window can neither overlap a window nor precede one
    first = min((a for a, _ in wins), default=None)
    early = sum(n for _, t1, n in spans if first is not None and t1 + relay_ns < first)
    not_placed = 0
    for key, p in pairs.items():
        dst = int(key.split("->")[1])
        if dst in kills:
            per[kills[dst]] += p["lost"]
        else:
            not_placed += p["lost"] - in_gaps.get(key, 0)
    return {"recorded": recorded, "per_fault": per, "outside_faults": outside, "before_first_fault": early,
            "between_faults": several,
            "not_placed": not_placed, "after_last_frame": tails, "gaps_not_recorded": dropped,
            "of_killed_incarnations": dead,
            "relay_span_ms": relay_ns / 1e6}


def died_ns(run: dict) -> int:
    """When a connection stopped carrying bytes: the end of the last second its server received
    any (its start if none).  Its client's error comes later, when iperf3 next writes on its
    control connection (at the end of its test), so its end says nothing of when it was cut; and
    the server reports whole seconds only, on a clock that starts up to a cycle after its client's,
    so the cut is in the two seconds after this (``CUT_S``)."""
    ivs = sorted(run.get("received_intervals") or [])
    last = max((i for i, (_, n) in enumerate(ivs) if n > 0), default=None)
    if last is None:
        return run["start_ns"]
    return ivs[last + 1][0] if last + 1 < len(ivs) else ivs[last][0] + int(1e9)  # a second: iperf3's interval


CUT_S = 2.0


def tcp_by_fault(runs: list[dict], wins: list[Window]) -> dict:
    """TCP bytes lost per fault: each reset connection's written - received, in the one window
    its cut ([``died_ns``, + ``CUT_S``]) overlaps; outside every window, or over several, said."""
    spans, in_flight, dup, unknown = [], 0, 0, 0
    for r in runs:
        if r.get("sent") is None:  # its client was stopped before it reported: written unknown
            unknown += r.get("received") or 0
            continue
        lost = r["sent"] - (r.get("received") or 0)
        if lost < 0:
            dup += -lost
        elif not r.get("error"):
            in_flight += lost
        else:
            t = died_ns(r)
            spans.append((t, t + int(CUT_S * 1e9), lost))
    per, outside, several = place(spans, wins)
    return {"per_fault": per, "outside_faults": outside, "between_faults": several,
            "in_flight_at_planned_ends": in_flight, "received_more_than_written": dup,
            "received_by_runs_without_a_client_report": unknown}
