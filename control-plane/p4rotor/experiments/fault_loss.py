"""Which fault lost what, under ``experiment faults --traffic``: every TCP byte a reset
connection's client wrote and its server never received is placed in the fault whose window
holds the moment the connection stopped carrying bytes (experiments/faults_load.py judges the
run).  A connection reset in a fault's window loses to that fault what its client wrote and its
server never received (the split path had accepted it ahead of the circuits); a connection that
ended as planned had its last bytes in flight when iperf3 stopped, which no fault lost.

Bulk is placed per fault only for an ``agent-kill`` (the pairs into the killed agent, its
whole): a frame lost on a link or a switch is counted per rack pair over the run, not per fault
(docs/faults.md says why)."""

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


def place(spans: list[tuple[int, int, int]], wins: list[Window]) -> tuple[list[int], int, int]:
    """(count per window, count outside every window, count over several) of ``spans``
    [(t0, t1, count)]: each span's count goes whole to the one window it overlaps."""
    per, outside, several = [0] * len(wins), 0, 0
    for t0, t1, n in spans:
        hits = [i for i, (a, b) in enumerate(wins) if t0 <= b and t1 >= a]
        if len(hits) == 1:
            per[hits[0]] += n
        elif hits:
            several += n
        else:
            outside += n
    return per, outside, several


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
    spans, in_flight, dup = [], 0, 0
    for r in runs:
        lost = (r.get("sent") or 0) - (r.get("received") or 0)
        if lost < 0:
            dup += -lost
        elif not r.get("error"):
            in_flight += lost
        else:
            t = died_ns(r)
            spans.append((t, t + int(CUT_S * 1e9), lost))
    per, outside, several = place(spans, wins)
    return {"per_fault": per, "outside_faults": outside, "between_faults": several,
            "in_flight_at_planned_ends": in_flight, "received_more_than_written": dup}
