"""One agent run for a list of traffic matrices (``p4rotor experiment rotorlb --agents once``).

Starting the agents for every matrix and mode, then draining them, costs ~15 s of each 20 s run
(docs/rotorlb.md), which kept Figure 2.10 at 3 matrices per density.  Here one run of the agents
carries ``per_run`` matrices back to back.  Each matrix is two *phases*, RotorLB then one-hop,
and a phase is:
- ``WARM_CYCLES`` warm-up cycles, then ``cycles`` measured ones, all from a cycle boundary;
- its saturated flows make data for all of them (flow ids ``FLOW_STRIDE * (phase + 1) + dst``);
- every window opening in it runs the phase's mode (host/agent.py: ``one_hop_from``);
- each receiver counts the frames it got per (origin, flow) at the measured cycles' two
  boundaries (``snapshots``): half a guard before each, when the last day's windows have closed
  and their frames arrived, and the next day's open a night and a guard later.

A phase's throughput is the frames of *its own* flows received between its two boundaries.
Frames of earlier phases still queued when a phase starts are delivered during its warm-up.
What is left of them in its measured cycles is counted apart (``earlier_in_window``) and judged
(``EARLIER_BOUND``): they took circuit time from the phase being measured.
Loss, copies, resends and relay delays are counted per agent run, as for one run per matrix.
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import schedule as S
from ..fabric.agents import account, cycle_start_ns, start_agents

# A phase's own flows join queues still holding what the one before left: two windows per
# destination (the local top-up) and the relays' store.  With 2 warm-up cycles, uniform one-hop
# after uniform RotorLB still met 768 of them in its measured cycles (0.7 of a window per circuit).
WARM_CYCLES = 3
FLOW_STRIDE = 100  # flow ids per phase (a destination rack each)
EARLIER_BOUND = 0.01  # earlier phases' frames in a measured window, at most this share of its own


def phases_for(chunk: list[tuple[int, tuple]], first: int, c0: int, H: int, cycles: int) -> list[dict]:
    """The phases of ``chunk`` ((density, pairs) per matrix; ``first``: the index of its first
    matrix in the whole plan), back to back from the cycle boundary ``c0`` (cycle ``H`` ns)."""
    out, t = [], c0
    for j, (density, pairs) in enumerate(chunk):
        for mode in ("rotorlb", "one-hop"):
            pid = 2 * (first + j) + (mode == "one-hop")
            m0 = t + WARM_CYCLES * H
            out.append({"id": pid, "matrix": first + j, "density": density, "pairs": [list(p) for p in pairs],
                        "mode": mode, "start_ns": t, "m0_ns": m0, "m1_ns": m0 + cycles * H})
            t = m0 + cycles * H
    return out


def flows_for(phases: list[dict], racks: int) -> dict[tuple[int, int], list[dict]]:
    """Every rack's saturated flows, each living for its phase."""
    flows: dict[tuple[int, int], list[dict]] = {(r, 0): [] for r in range(racks)}
    for ph in phases:
        for o, d in ph["pairs"]:
            flows[(o, 0)].append({"flow": FLOW_STRIDE * (ph["id"] + 1) + d, "dst": d, "frames": -1,
                                  "start_ns": ph["start_ns"], "stop_ns": ph["m1_ns"]})
    return flows


def agent_phases(phases: list[dict], early_ns: int) -> dict:
    """host/agent_cli.py ``--phases``: the mode from each phase's start, the snapshot times
    (``early_ns`` before each measured cycles' boundary)."""
    return {"one_hop_from": [[ph["start_ns"], int(ph["mode"] == "one-hop")] for ph in phases],
            "snapshots": sorted(t - early_ns for ph in phases for t in (ph["m0_ns"], ph["m1_ns"]))}


def phase_counts(phases: list[dict], summaries: list[dict], early_ns: int) -> dict[int, dict]:
    """Per phase id: frames of its own flows received in its measured cycles (``own``), frames of
    earlier phases' flows received then (``earlier``), and how late the latest receiver took the
    snapshot that closed them (``late_ms``: after its time, at most a night and 1.5 guards)."""
    at = {}
    for a in summaries:
        for snap in a.get("snapshots", []):
            at.setdefault(snap["t_ns"], []).append(snap)
    out = {}
    for ph in phases:
        own = earlier = 0
        snaps = at.get(ph["m1_ns"] - early_ns, [])
        for snap in snaps:
            for key, n in snap["rx"].items():
                if int(key.split(":")[1]) // FLOW_STRIDE == ph["id"] + 1:
                    own += n
                else:
                    earlier += n
        out[ph["id"]] = {"own": own, "earlier": earlier, "receivers": len(snaps),
                         "late_ms": max((s["late_ns"] / 1e6 for s in snaps), default=None)}
    return out


def run_chunk(emu, topo, ds: S.Schedule, out: Path, chunk, first: int, rate: float, guard_us: float, cycles: int,
              *, retransmit_cycles: int, datapath: str, fill: float | None) -> tuple[list[dict], dict]:
    """One agent run for ``chunk``: per phase its throughput, and the run's account (frames
    accepted, delivered, held, lost, copies, resends, relay delays; the raw summaries' folder)."""
    out.mkdir(parents=True, exist_ok=True)
    H = ds.hyperperiod_us * 1000
    c0 = cycle_start_ns(emu, ds, len(topo.racks))
    phases = phases_for(chunk, first, c0, H, cycles)
    early = int(guard_us * 1000) // 2
    stop = phases[-1]["m1_ns"]
    end = stop + (retransmit_cycles + 3) * H  # as one run per matrix drains (experiments/rotorlb.py)
    agents = start_agents(emu, topo, ds, out, rate=rate, guard_us=guard_us, flows=flows_for(phases, len(topo.racks)),
                          stop_ns=stop, end_ns=end, measure=(c0, stop), host_index=0, start_ns=c0,
                          retransmit_us=retransmit_cycles * ds.hyperperiod_us, ack_direct=True, datapath=datapath,
                          fill=fill, phases=agent_phases(phases, early))
    try:
        summaries = agents.wait((end - time.time_ns()) / 1e9 + 20)
    finally:
        agents.kill()
    acc = account(summaries, agents.dead)
    counts = phase_counts(phases, summaries, early)
    seconds = cycles * H / 1e9
    res = []
    for ph in phases:
        c = counts[ph["id"]]
        res.append({**ph, "throughput_fps": c["own"] / seconds, "earlier_in_window": c["earlier"],
                    "receivers": c["receivers"], "snapshot_late_ms": c["late_ms"],
                    "capacity_frames": summaries[0]["capacity_frames"]})
    delay: dict[str, int] = {}
    for a in summaries:
        for k, v in a["relay_delay_slots"].items():
            delay[k] = delay.get(k, 0) + v
    run = {"matrices": [first, first + len(chunk)], "accepted": acc["accepted"], "delivered": acc["delivered"],
           "held": acc["held"], "lost": acc["accepted"] - acc["delivered"] - acc["held"],
           "dead_agents": acc["dead_agents"], "duplicates": sum(a["duplicates"] for a in summaries),
           "retransmitted": sum(a.get("retransmitted", 0) for a in summaries), "relay_delay_slots": delay,
           "wall_s": round((end - c0) / 1e9, 1)}
    return res, run
