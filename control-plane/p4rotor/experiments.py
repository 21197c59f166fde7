"""Experiments on an emulated fabric (``p4rotor experiment NAME``): JSON + PNG under results/.

Every experiment launches its fabric in Mininet, drives probes from real hosts, stops the
fabric, then compares what it measured with what the schedule predicts and prints a one-line
verdict.  Times in results are *emulated* (wall time divided by the dilation).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from . import schedule as S
from . import topology as TP
from .emulation import Emulation, dilate

PROBE_PORT = 9999


def _say(m: str) -> None:
    print(m, file=sys.stderr, flush=True)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _launch(sched: S.Schedule, dilation: float, hosts: int, build: Path, run_dir: Path,
            epsilon_us: float = 0.0) -> tuple[Emulation, TP.Topology]:
    topo = TP.generate(dilate(sched, dilation), "schedule.json", hosts_per_rack=hosts)
    emu = Emulation(topo, build, run_dir, mode="clock", epsilon_us=epsilon_us * dilation, say=_say)
    emu.start()
    return emu, topo


def _probe_cmd(me: int, dsts: list[str], rate: float, start_ns: int, duration: float, dscp: int,
               rx: Path | None, tx: Path | None, gate: dict | None = None, size: int = 64,
               linger: float = 1.5) -> str:
    args = [sys.executable, "-m", "p4rotor.probe", "--me", str(me), "--rate", str(rate), "--dscp", str(dscp),
            "--start-ns", str(start_ns), "--duration", str(duration), "--size", str(size),
            "--linger", str(linger)]
    for d in dsts:
        args += ["--dst", d]
    if rx:
        args += ["--rx", str(rx)]
    if tx:
        args += ["--tx", str(tx)]
    if gate:
        args += ["--gate", "'" + json.dumps(gate) + "'"]
    return " ".join(args)


def _run_probes(emu: Emulation, topo: TP.Topology, plan: Callable[[int, TP.Host, int], dict | None],
                duration: float, out: Path, align_ns: int = 0) -> dict[str, list[dict]]:
    """Start a probe process in every host (plan(i, host, start_ns) -> kwargs or None), wait, collect.

    Probes start after slot 0 of the schedule, at a multiple of ``align_ns`` after it if given.
    """
    hosts = [h for k in topo.racks for h in k.hosts]
    start_ns = max(time.time_ns(), emu.t0_ns) + 500_000_000
    if align_ns:
        start_ns = emu.t0_ns + -(-(start_ns - emu.t0_ns) // align_ns) * align_ns
    procs = []
    for i, h in enumerate(hosts):
        kw = plan(i, h, start_ns)
        rx = out / f"{h.name}.rx.jsonl"
        tx = out / f"{h.name}.tx.jsonl"
        if kw is None:
            kw = {"dsts": [], "rate": 1, "dscp": 0}
        cmd = _probe_cmd(i, kw["dsts"], kw["rate"], start_ns, duration, kw["dscp"], rx, tx, kw.get("gate"),
                         kw.get("size", 64))
        if kw.get("count"):
            cmd += f" --count {kw['count']}"
        procs.append(emu.host(h.name).popen(cmd, shell=True))
    t_end = start_ns / 1e9 + duration + 15
    for p in procs:
        p.wait(max(1, t_end - time.time()))
    logs = {}
    for h in hosts:
        for kind in ("rx", "tx"):
            f = out / f"{h.name}.{kind}.jsonl"
            logs[f"{h.name}.{kind}"] = [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []
    return logs


# ---------------------------------------------------------------------------
# connectivity
# ---------------------------------------------------------------------------


def connectivity(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 200.0,
                 cycles: int = 2, probes_per_cell: float = 20, on_running: Callable[[Emulation], None] | None = None
                 ) -> dict:
    """Which rack pairs are directly reachable in each slot, measured with direct-only probes."""
    sched = sched or S.generate_rotornet(6, 1, 1000, 100)
    out.mkdir(parents=True, exist_ok=True)
    H = sched.hyperperiod_us
    slots = H // sched.slot_us
    duration = cycles * H * dilation / 1e6
    emu, topo = _launch(sched, dilation, 1, build, out / "run")
    ips = [k.hosts[0].ip for k in topo.racks]
    try:
        rate = max(50.0, probes_per_cell * (sched.racks - 1) / (sched.day_us * dilation / 1e6))
        if on_running:
            on_running(emu)
        logs = _run_probes(emu, topo, lambda i, h, s0: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                        "dscp": 8}, duration, out)
        t0 = emu.t0_ns
    finally:
        emu.stop()
    ds = dilate(sched, dilation)
    # measured[slot][(src, dst)] = (received, sent) for probes sent well inside the day
    n = sched.racks
    sent = [[[0] * n for _ in range(n)] for _ in range(slots)]
    got = [[[0] * n for _ in range(n)] for _ in range(slots)]
    margin = 0.15 * ds.day_us
    for src in range(n):
        name = topo.racks[src].hosts[0].name
        for rec in logs[f"{name}.tx"]:
            dst = ips.index(rec["dst"])
            info = _slot_of(ds, (rec["tx"] - t0) / 1000, margin)
            if info is not None:
                sent[info % slots][src][dst] += 1
        for rec in logs[f"{name}.rx"]:
            s = rec["src"]
            info = _slot_of(ds, (rec["tx"] - t0) / 1000, margin)
            if info is not None:
                got[info % slots][s][src] += 1
    measured = [[[got[k][i][j] > 0 for j in range(n)] for i in range(n)] for k in range(slots)]
    predicted = [[[False] * n for _ in range(n)] for _ in range(slots)]
    for r in sched.rotors:
        for k in range(slots):
            for i, j in enumerate(r.matchings[k % len(r.matchings)]):
                if j is not None and j != i:
                    predicted[k][i][j] = True
    cells = agree = 0
    for k in range(slots):
        for i in range(n):
            for j in range(n):
                if i != j and sent[k][i][j] > 0:
                    cells += 1
                    agree += measured[k][i][j] == predicted[k][i][j]
    res = {"schedule": sched.to_json(), "dilation": dilation, "slots": slots, "cells": cells, "agree": agree,
           "measured": measured, "predicted": predicted,
           "probes_sent": sum(map(sum, (x for s_ in sent for x in s_))),
           "probes_received": sum(map(sum, (x for s_ in got for x in s_)))}
    _plot_connectivity(res, n, out / "connectivity.png")
    (out / "connectivity.json").write_text(json.dumps(res))
    res["verdict"] = (f"connectivity: {agree}/{cells} (slot, pair) cells measured as the schedule predicts "
                      f"-> {'PASS' if agree == cells and cells > 0 else 'FAIL'}")
    return res


def _slot_of(s: S.Schedule, t_us: float, margin: float) -> int | None:
    """Absolute slot of a time (rotor offsets 0), or None if near a night or boundary."""
    if t_us < 0:
        return None
    k = int(t_us // s.slot_us)
    into = t_us - k * s.slot_us
    if into < s.reconfig_us + margin or into > s.slot_us - margin:
        return None
    return k


def _plot_connectivity(res: dict, n: int, path: Path) -> None:
    plt = _plt()
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    fig, axes = plt.subplots(1, 2, figsize=(max(10, len(pairs) * 0.22), 3 + res["slots"] * 0.3), sharey=True)
    for ax, key, title in ((axes[0], "measured", "measured (direct-only probes)"),
                           (axes[1], "predicted", "schedule")):
        m = [[1 if res[key][k][i][j] else 0 for (i, j) in pairs] for k in range(res["slots"])]
        ax.imshow(m, aspect="auto", cmap="Greens", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title)
        ax.set_xticks(range(len(pairs)))
        ax.set_xticklabels([f"{i}>{j}" for i, j in pairs], rotation=90, fontsize=6)
        ax.set_xlabel("rack pair (src>dst)")
    axes[0].set_ylabel("slot")
    fig.suptitle(f"direct reachability per slot: {res['agree']}/{res['cells']} cells agree")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------
# duty cycle
# ---------------------------------------------------------------------------


def duty_cycle(build: Path, out: Path, dilation: float = 100.0, slot_us: int = 2000,
               nights: tuple[int, ...] = (200, 500, 1000), guards: tuple[int, ...] = (100, 300),
               rate: float = 400.0, duration: float = 4.0) -> dict:
    """Throughput fraction between two racks vs (slot - night)/slot; efficiency with a guard time."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for night in nights:
        rows.append(_duty_point(build, out / f"night{night}", dilation, slot_us, night, 0, rate, duration))
        _say(f"[experiment] duty cycle: night {night} us -> received {rows[-1]['fraction']:.3f} "
             f"(predicted {rows[-1]['predicted']:.3f})")
    grows = []
    night = nights[0]
    for guard in guards:
        grows.append(_duty_point(build, out / f"guard{guard}", dilation, slot_us, night, guard, rate, duration))
        _say(f"[experiment] duty cycle: guard {guard} us -> efficiency {grows[-1]['efficiency']:.3f} "
             f"(predicted {grows[-1]['predicted_efficiency']:.3f})")
    res = {"dilation": dilation, "slot_us": slot_us, "rate_pps": rate, "duration_s": duration,
           "nights": rows, "guards": grows}
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = [r["predicted"] for r in rows]
    axes[0].plot(x, [r["fraction"] for r in rows], "o-", label="measured")
    axes[0].plot([0, 1], [0, 1], "k--", lw=0.8, label="(slot - night) / slot")
    axes[0].set_xlabel("(slot - night) / slot")
    axes[0].set_ylabel("delivered / offered")
    axes[0].legend()
    axes[0].set_title("duty cycle")
    axes[1].plot([g["guard_us"] for g in grows], [g["efficiency"] for g in grows], "o-", label="measured")
    axes[1].plot([g["guard_us"] for g in grows], [g["predicted_efficiency"] for g in grows], "k--",
                 label="(uptime - guard) / uptime")
    axes[1].set_xlabel("guard time (emulated us)")
    axes[1].set_ylabel("uptime efficiency")
    axes[1].legend()
    axes[1].set_title(f"hosts stop a guard early (night {night} us)")
    fig.tight_layout()
    fig.savefig(out / "duty_cycle.png", dpi=110)
    plt.close(fig)
    (out / "duty_cycle.json").write_text(json.dumps(res))
    err = max(abs(r["fraction"] - r["predicted"]) for r in rows)
    gerr = max((abs(g["efficiency"] - g["predicted_efficiency"]) for g in grows), default=0)
    res["verdict"] = (f"duty cycle: worst |measured - (slot-night)/slot| = {err:.3f}, worst efficiency error "
                      f"{gerr:.3f} -> {'PASS' if err < 0.05 and gerr < 0.05 else 'FAIL'}")
    return res


def _duty_point(build, out, dilation, slot_us, night_us, guard_us, rate, duration) -> dict:
    sched = S.from_json({"version": 1, "racks": 2, "slot_us": slot_us, "reconfig_us": night_us,
                         "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0]]}]})
    emu, topo = _launch(sched, dilation, 1, build, out / "run")
    try:
        dst = topo.racks[1].hosts[0].ip
        ds = dilate(sched, dilation)

        def plan(i, h, s0):
            if i != 0:
                return None
            gate = None
            if guard_us:
                a = ds.reconfig_us * 1000
                b = (ds.slot_us - guard_us * dilation) * 1000
                gate = {"t0_ns": emu.t0_ns, "period_ns": ds.slot_us * 1000, "open": {dst: [[a, b]]}}
            return {"dsts": [dst], "rate": rate, "dscp": 8, "gate": gate}

        logs = _run_probes(emu, topo, plan, duration, out)
    finally:
        emu.stop()
    tx = logs[f"{topo.racks[0].hosts[0].name}.tx"]
    rx = logs[f"{topo.racks[1].hosts[0].name}.rx"]
    offered = int(rate * duration)
    day = (slot_us - night_us) / slot_us
    row = {"night_us": night_us, "guard_us": guard_us, "offered": offered, "sent": len(tx), "received": len(rx),
           "fraction": len(rx) / offered, "predicted": day}
    if guard_us:
        uptime = slot_us - night_us
        row["efficiency"] = len(rx) / (offered * day) if day else 0
        row["predicted_efficiency"] = (uptime - guard_us) / uptime
        row["lost_sent_in_uptime"] = len(tx) - len(rx)
    return row


# ---------------------------------------------------------------------------
# low latency
# ---------------------------------------------------------------------------


def low_latency(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 100.0,
                epsilon_us: float | None = None, duration: float = 6.0, rate: float = 100.0) -> dict:
    """Latency CDF of low-latency (DSCP 46) probes across many reconfigurations; count losses."""
    sched = sched or S.generate_opera(8, 4, 1000, 100)
    out.mkdir(parents=True, exist_ok=True)
    slice_us = min(x.end_us - x.start_us for x in sched.slices())
    eps = slice_us * 0.5 if epsilon_us is None else epsilon_us
    emu, topo = _launch(sched, dilation, 1, build, out / "run", epsilon_us=eps)
    ips = [k.hosts[0].ip for k in topo.racks]
    try:
        logs = _run_probes(emu, topo, lambda i, h, s0: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                        "dscp": 46}, duration, out)
    finally:
        emu.stop()
    sent = sum(len(logs[f"{k.hosts[0].name}.tx"]) for k in topo.racks)
    lat = [(r["rx"] - r["tx"]) / 1000 / dilation for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]]
    lost = sent - len(lat)
    reconfigs = int(duration * 1e6 / dilation / sched.slot_us * len(sched.rotors))
    res = {"schedule": sched.to_json(), "dilation": dilation, "epsilon_us": eps, "sent": sent,
           "received": len(lat), "lost": lost, "reconfigurations": reconfigs,
           "latency_emulated_us": _pcts(lat)}
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    s = sorted(lat)
    ax.plot(s, [(i + 1) / len(s) for i in range(len(s))] if s else [])
    ax.set_xlabel("one-way latency (emulated us)")
    ax.set_ylabel("CDF")
    ax.set_title(f"low-latency probes: {len(lat)} delivered, {lost} lost, {reconfigs} reconfigurations")
    fig.tight_layout()
    fig.savefig(out / "low_latency.png", dpi=110)
    plt.close(fig)
    (out / "low_latency.json").write_text(json.dumps(res))
    res["verdict"] = (f"low latency: {lost} of {sent} probes lost across {reconfigs} reconfigurations (goal 0), "
                      f"p50/p99 {res['latency_emulated_us'].get('p50', float('nan')):.1f}/"
                      f"{res['latency_emulated_us'].get('p99', float('nan')):.1f} emulated us "
                      f"-> {'PASS' if lost == 0 else 'FAIL'}")
    return res


def _pcts(xs):
    s = sorted(xs)
    if not s:
        return {"n": 0}
    pick = lambda p: s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]  # noqa: E731
    return {"n": len(s), "p50": pick(50), "p90": pick(90), "p99": pick(99), "max": s[-1],
            "mean": statistics.fmean(s)}


# ---------------------------------------------------------------------------
# shuffle
# ---------------------------------------------------------------------------


def shuffle(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 100.0,
            guards: tuple[int, ...] = (0, 100, 300), count: int = 600, rate: float = 500.0) -> dict:
    """All-to-all shuffle with TDMA host gating (seed 002): each host sends ``count`` frames to
    every other rack, to each only while its direct circuit is live and more than a guard time
    from its end.  Transfer time vs the ideal x slot / (slot - night - guard)."""
    sched = sched or S.generate_rotornet(4, 1, 2000, 200)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for g in guards:
        rows.append(_shuffle_point(build, out / f"guard{g}", sched, dilation, g, count, rate))
        r = rows[-1]
        _say(f"[experiment] shuffle: guard {g} us -> {r['transfer_s']:.3f} s emulated-scaled, predicted "
             f"{r['predicted_s']:.3f} s (ideal {r['ideal_s']:.3f} s), delivered {r['delivered']}/{r['expected']}")
    res = {"schedule": sched.to_json(), "dilation": dilation, "count": count, "rate_pps": rate, "rows": rows}
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["guard_us"] for r in rows], [r["transfer_s"] for r in rows], "o-", label="measured")
    ax.plot([r["guard_us"] for r in rows], [r["predicted_s"] for r in rows], "k--",
            label="ideal x slot / (slot - night - guard)")
    ax.set_xlabel("host guard time (emulated us)")
    ax.set_ylabel("all-to-all transfer time (wall s)")
    ax.legend()
    ax.set_title(f"shuffle: {sched.racks} racks, {count} frames to each rack")
    fig.tight_layout()
    fig.savefig(out / "shuffle.png", dpi=110)
    plt.close(fig)
    (out / "shuffle.json").write_text(json.dumps(res))
    err = max(abs(r["transfer_s"] / r["predicted_s"] - 1) for r in rows)
    res["verdict"] = (f"shuffle: worst |measured / predicted - 1| = {err:.3f} over guards "
                      f"{', '.join(str(r['guard_us']) for r in rows)} us -> {'PASS' if err < 0.1 else 'FAIL'}")
    return res


def _shuffle_point(build, out, sched, dilation, guard_us, count, rate) -> dict:
    ds = dilate(sched, dilation)
    emu, topo = _launch(sched, dilation, 1, build, out / "run")
    ips = [k.hosts[0].ip for k in topo.racks]
    cyc = ds.hyperperiod_us * 1000
    try:
        def gate_for(src: int) -> dict:
            windows = {}
            for dst in range(sched.racks):
                if dst == src:
                    continue
                w = []
                for r in ds.rotors:
                    for k in range(ds.hyperperiod_us // ds.slot_us):
                        if r.matchings[k % len(r.matchings)][src] == dst:
                            a = (r.offset_us + k * ds.slot_us + ds.reconfig_us) * 1000
                            b = (r.offset_us + (k + 1) * ds.slot_us - guard_us * dilation) * 1000
                            w.append([a % cyc, a % cyc + (b - a)])
                windows[ips[dst]] = w
            return {"t0_ns": emu.t0_ns, "period_ns": cyc, "open": windows}

        ideal = (sched.racks - 1) * count / rate
        predicted = ideal * sched.slot_us / (sched.slot_us - sched.reconfig_us - guard_us)
        duration = predicted * 3 + 2
        logs = _run_probes(emu, topo, lambda i, h, s0: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                        "dscp": 8, "gate": gate_for(i), "count": count},
                           duration, out, align_ns=cyc)
    finally:
        emu.stop()
    txs = [r["tx"] for k in topo.racks for r in logs[f"{k.hosts[0].name}.tx"]]
    rxs = [r["rx"] for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]]
    start = min(txs) if txs else 0
    # transfer time: from the first frame sent to the last delivered, rounded to whole opportunities
    transfer = (max(rxs) - start) / 1e9 if rxs else float("nan")
    return {"guard_us": guard_us, "expected": sched.racks * (sched.racks - 1) * count, "sent": len(txs),
            "delivered": len(rxs), "transfer_s": transfer, "ideal_s": ideal, "predicted_s": predicted}


EXPERIMENTS = {"connectivity": connectivity, "duty-cycle": duty_cycle, "low-latency": low_latency,
               "shuffle": shuffle}
