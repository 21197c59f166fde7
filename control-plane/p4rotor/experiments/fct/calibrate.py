"""Flows alone on the fabric, what a run's slowdowns divide by: one-packet flows between every
rack pair in every phase of the hyperperiod (the floor, and the samples by path), and flows of a
few sizes (what a flow's size adds), each one at a time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ...fabric.switch import HarnessError, stop_process_group
from ...workload.paths import arrival_ns
from ...workload.scale import MSS
from .hosts import start_flows


# One-packet flows per rack pair alone, each in another phase of the hyperperiod.  32 puts ~100
# samples in the rarest path class (3-3 on the default Opera fabric) where 16 put 48: its base is
# its fastest sample either way (workload/ideal.py: base_rank), which another unloaded flow beats
# with probability 1/(n+1): 1 % with 100 samples, 2 % with 48.
ALONE_ROUNDS = 32


def alone_round_ns(pairs: int, gap_ns: int, rounds: int, period_ns: int | None) -> int:
    """How far apart the "alone" rounds start: ``pairs`` flows ``gap_ns`` apart, rounded up to
    whole hyperperiods and 1/rounds of one more, so that round r meets each pair r/rounds of a
    hyperperiod later in the schedule (no period: back to back)."""
    round_ns = pairs * gap_ns
    if period_ns:
        round_ns = -(-round_ns // period_ns) * period_ns + period_ns // rounds
    return round_ns


def phase_gap_ns(min_gap_ns: int, period_ns: int | None, phases: int = 16) -> int:
    """At least ``min_gap_ns``, a whole odd number of ``period_ns / phases``: flows that far apart
    start in every one of the ``phases`` (a power of 2) phases of the period before one repeats."""
    if not period_ns:
        return min_gap_ns
    unit = period_ns // phases
    k = -(-min_gap_ns // unit)
    return (k + 1 - k % 2) * unit


def measure_alone(emu, topo, out: Path, rounds: int = ALONE_ROUNDS, gap_ns: int = 30_000_000,
                  hosts: list | None = None, period_ns: int | None = None, pace_bps: float = 0.0) -> int:
    """One-packet flows alone on the fabric (low-latency class): one flow at a time, every ordered
    rack pair ``rounds`` times, the logs of each host in ``out`` (``workload/paths.alone_samples``
    reads them back as samples by path class; ``workload/ideal.py`` takes each class's base from
    them).  Returns how many completed.

    ``period_ns`` (the dilated hyperperiod): round r starts r/rounds of a hyperperiod later in
    the schedule than round 0 did, so a pair's samples fall in ``rounds`` different phases of it.
    Without that, a round lasts 56 pairs x 100 ms = 28 hyperperiods (200 ms) exactly, every sample of a pair
    meets the same slice, and a pair measured on its 3-hop slice makes flows on its direct slice
    look 3x faster than alone (slowdowns of 0.34)."""
    out.mkdir(parents=True, exist_ok=True)
    everyone = hosts if hosts is not None else [h for k in topo.racks for h in k.hosts]
    # A path depends on the rack pair, not on which of a rack's hosts: one host per rack measures
    # (the first); 16 hosts would take 4x longer.
    hosts = list({_rack_of(h): h for h in reversed(everyone)}.values())
    now = time.time_ns() + 1_500_000_000
    plan: dict[str, list] = {h.name: [] for h in hosts}
    i = 0
    pairs = sum(1 for a in hosts for b in hosts if _rack_of(a) != _rack_of(b))
    round_ns = alone_round_ns(pairs, gap_ns, rounds, period_ns)
    t = now
    for r in range(rounds):
        t = now + r * round_ns
        for src in hosts:
            for dst in hosts:
                if _rack_of(src) == _rack_of(dst):
                    continue  # same rack: not a fabric flow
                plan[src.name].append({"id": i, "dst": dst.ip, "size": 1, "start_ns": t})
                t += gap_ns
                i += 1
    run_plan(emu, plan, out, t + 4 * gap_ns, pace_bps)
    done = sum(len(f.read_text().splitlines()) for h in plan if (f := out / f"rx-{h}.jsonl").exists())
    if not done:
        raise HarnessError("no one-packet flow completed alone: the low-latency class does not carry TCP")
    return done


# Flow sizes (in TCP segments) measured alone: dense enough that the line between two is near
# the truth (with 3 and 5 only, a 4-frame flow's alone was 3.9 ms over the floor where 2.1 was
# measured), and whole segments: the kernel's segment carries SEGMENT bytes (the MSS less
# TCP's 12-byte timestamp option), and htb lets 5 of them through as a burst where a sixth
# waits 8 ms -- "5 x 1460 bytes" was 6 segments, slow, and made 5-segment flows "beat" it.
# Every count to 12 (htb's staircase steps at 5 and 10), then about 20 % apart: between two
# calibrated sizes a flow's alone is the smaller one's (the step below), never a line above it.
CALIBRATION_PACKETS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 17, 20, 24, 28, 34, 40, 48, 56, 68, 80)


SEGMENT = MSS - 12
# Flows of each size alone, per source rack: 4 rounds x 8 racks = 32 a size, two halves of 16.
SIZED_ROUNDS = 4


def calibrate(emu, topo, out: Path, rounds: int = SIZED_ROUNDS, gap_ns: int = 300_000_000, hosts: list | None = None,
              period_ns: int | None = None, pace_bps: float = 0.0) -> list[tuple[str, str, int, int, float, int]]:
    """Flows of a few sizes alone: (source host, destination host, issued ns, size, FCT s, round)
    each, what a flow's size adds to the one-packet alone FCT (``workload/ideal.size_extras``:
    one-segment flows, sent with the others, are the reference).  htb is not a wire (it let a
    flow's first frames through as a burst, and released TCP at 6.5-9.8 Mb/s where 5.77 was
    configured), so flows beat an alone FCT computed at the configured rate.  One host per rack
    sends flows of ``CALIBRATION_PACKETS`` segments to the next rack, one at a time.  Flows of
    one size start in 16 phases of the hyperperiod ``period_ns`` (:func:`phase_gap_ns`): 300 ms
    apart at a 200 ms hyperperiod they met two phases only, maybe both on 3-hop paths."""
    out.mkdir(parents=True, exist_ok=True)
    everyone = hosts if hosts is not None else [h for k in topo.racks for h in k.hosts]
    firsts = list({_rack_of(h): h for h in reversed(everyone)}.values())
    gap_ns = phase_gap_ns(gap_ns, period_ns)
    now = time.time_ns() + 1_500_000_000
    plan: dict[str, list] = {h.name: [] for h in firsts}
    meta: dict[int, tuple[str, str, int, int]] = {}
    t, i = now, 0
    for r in range(rounds):
        for n in CALIBRATION_PACKETS:
            for j, src in enumerate(firsts):
                dst = firsts[(j + 1) % len(firsts)]
                plan[src.name].append({"id": i, "dst": dst.ip, "size": n * SEGMENT, "start_ns": t})
                meta[i] = (src.name, dst.name, n * SEGMENT, r)
                t += gap_ns
                i += 1
    end = t + 4 * gap_ns
    starts = run_plan(emu, plan, out, end, pace_bps)
    samples = []
    for h in plan:
        f = out / f"rx-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            a, b, size, rnd = meta[r["id"]]
            samples.append((a, b, starts[r["id"]], size, (arrival_ns(r) - starts[r["id"]]) / 1e9, rnd))
    return samples


def run_plan(emu, plan: dict, out: Path, end: int, pace_bps) -> dict:
    """Run every host's flows of ``plan`` until ``end`` (wall ns), stop their processes, and
    return when each flow was issued (:func:`issued_starts`)."""
    procs = []
    try:
        procs += start_flows(emu, plan, out, end, pace_bps)
        for p in procs:
            p.wait(timeout=(end - time.time_ns()) / 1e9 + 30)
    finally:
        for p in procs:
            stop_process_group(p)
    return issued_starts({f["id"]: f["start_ns"] for fl in plan.values() for f in fl}, out, plan)


def issued_starts(planned: dict[int, int], out: Path, hosts) -> dict[int, int]:
    """Each low-latency flow's start: when its sender really began it (``issued_ns`` in the
    sender's tx log), never before its planned start.  A Python timer on a loaded 2-core machine
    fires milliseconds late (7.6 ms median with 16 agents beside it): that lag is the
    emulator's, not the fabric's, so the FCT counts from the issue (the lag is reported)."""
    got = dict(planned)
    for h in hosts:
        f = out / f"tx-{h}.jsonl"
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            if r.get("issued_ns") and r["id"] in got:
                got[r["id"]] = max(got[r["id"]], r["issued_ns"])
    return got


def _rack_of(h) -> str:
    """A host's rack by its address (10.0.R.N): also on the packet switch, where every host hangs
    off one ToR but keeps its address."""
    return h.ip.rsplit(".", 1)[0]
