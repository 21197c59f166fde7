"""Experiments on an emulated fabric (``p4rotor experiment NAME``): JSON + PNG under results/.

Every experiment launches its fabric in Mininet, drives probes from real hosts, stops the
fabric, then compares what it measured with what the schedule predicts and prints a one-line
verdict.  Times in results are *emulated* (wall time divided by the dilation).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from .. import schedule as S
from ..fabric import topology as TP
from ..fabric.mininet import Emulation, dilate
from ..fabric.switch import HarnessError, stop_process_group
from ..stats import summarize

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
    try:
        # 100+ BMv2 take a while on 2 cores: starting them, then installing them 8 at a time
        # (~1.5 s per switch at 132 switches)
        emu.start(timeout=max(120.0, 3.5 * (sched.racks + len(sched.rotors))))
    except BaseException:
        emu.stop()  # a failed start (e.g. the controller exits) must not leave switches and links behind
        raise
    return emu, topo


def _probe_cmd(me: int, dsts: list[str], rate: float, start_ns: int, duration: float, dscp: int,
               rx: Path | None, tx: Path | None, gate: Path | None = None, size: int = 64,
               linger: float = 1.5, go: Path | None = None, ready: Path | None = None, count: int = 0) -> str:
    args = [sys.executable, "-m", "p4rotor.host.probe", "--me", str(me), "--rate", str(rate), "--dscp", str(dscp),
            "--start-ns", str(start_ns), "--duration", str(duration), "--size", str(size),
            "--linger", str(linger)]
    for d in dsts:
        args += ["--dst", d]
    for opt, path in (("--rx", rx), ("--tx", tx), ("--go", go), ("--ready", ready)):
        if path:
            args += [opt, str(path)]
    if gate:
        args += ["--gate", f"@{gate}"]
    if count:
        args += ["--count", str(count)]
    return " ".join(args)


def _run_probes(emu: Emulation, topo: TP.Topology, plan: Callable[[int, TP.Host], dict | None],
                duration: float, out: Path, align_ns: int = 0) -> dict[str, list[dict]]:
    """Start a probe process in every host (plan(i, host) -> kwargs or None), wait, collect.

    Every probe first binds its receiver and reports ready; only then is the start time chosen
    and handed to all of them (a go file), so nothing is sent before every receiver listens:
    starting 64+ Python processes on 2 cores takes seconds, and a fixed head start lost the
    first seconds of probes.  Probes start after slot 0 of the schedule, at a multiple of
    ``align_ns`` after it if given.
    """
    hosts = [h for k in topo.racks for h in k.hosts]
    out.mkdir(parents=True, exist_ok=True)
    go = out / "go"
    scratch = [go, out / "go.tmp"]
    go.unlink(missing_ok=True)
    procs = []
    try:
        for i, h in enumerate(hosts):
            kw = plan(i, h) or {"dsts": [], "rate": 1, "dscp": 0}
            ready = out / f"{h.name}.ready"
            ready.unlink(missing_ok=True)
            scratch += [ready, Path(f"{ready}.tmp")]
            gate = None
            if kw.get("gate"):
                gate = out / f"{h.name}.gate.json"
                gate.write_text(json.dumps(kw["gate"]))
                scratch.append(gate)
            cmd = _probe_cmd(i, kw["dsts"], kw["rate"], 0, duration, kw["dscp"], out / f"{h.name}.rx.jsonl",
                             out / f"{h.name}.tx.jsonl", gate, kw.get("size", 64), go=go, ready=ready,
                             count=kw.get("count", 0))
            procs.append((h.name, ready, emu.host(h.name).popen(cmd, shell=True)))
        _await_ready(procs, timeout=30 + 0.5 * len(hosts))
        start_ns = max(time.time_ns(), emu.t0_ns) + 500_000_000
        if align_ns:
            start_ns = emu.t0_ns + -(-(start_ns - emu.t0_ns) // align_ns) * align_ns
        (out / "go.tmp").write_text(str(start_ns))
        os.replace(out / "go.tmp", go)
        t_end = start_ns / 1e9 + duration + 15
        for _, _, p in procs:
            p.wait(max(1, t_end - time.time()))
    finally:
        for _, _, p in procs:
            stop_process_group(p)  # only those still running (an error above), by PID
        for f in scratch:
            f.unlink(missing_ok=True)
    logs = {}
    for h in hosts:
        for kind in ("rx", "tx"):
            f = out / f"{h.name}.{kind}.jsonl"
            logs[f"{h.name}.{kind}"] = [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []
    return logs


def _await_ready(procs: list, timeout: float) -> None:
    """Wait until every probe process has written its ready file; a probe that exits is an error."""
    deadline = time.monotonic() + timeout
    pending = list(procs)
    while pending:
        for item in list(pending):
            name, ready, p = item
            if ready.exists():
                pending.remove(item)
            elif p.poll() is not None:
                err = (p.stderr.read() if p.stderr else b"").decode(errors="replace").strip().splitlines()
                raise HarnessError(f"probe in {name} exited ({p.returncode}) before it was ready: "
                                   + (err[-1] if err else "no output"))
        if pending and time.monotonic() > deadline:
            raise HarnessError(f"{len(pending)} probe processes not ready after {timeout:.0f} s: "
                               + ", ".join(n for n, _, _ in pending[:8]))
        if pending:
            time.sleep(0.05)


# ---------------------------------------------------------------------------
# connectivity
# ---------------------------------------------------------------------------


Cell = tuple[int, int, int]  # (slot in the hyperperiod, source rack, destination rack)


@dataclasses.dataclass
class Judgement:
    """Every (slot, src, dst) cell with src != dst, by what the probes showed against the schedule."""

    agree: list[Cell]
    """Measured as predicted: a probe received on a live circuit, or probes sent and none received on a dark one."""
    false_positive: list[Cell]
    """A probe crossed a circuit the schedule does not have: a failure, never retried away."""
    undecided: list[Cell]
    """Predicted live, probes sent, none received (yet): no evidence either way while the check is
    load-limited; re-probed, and a failure if still nothing arrives after the last round."""
    unprobed: list[Cell]
    """No probe sent in the judged part of the slot: not judged."""

    @property
    def cells(self) -> int:
        """Judged cells: everything that was probed."""
        return len(self.agree) + len(self.false_positive) + len(self.undecided)


def judge_cells(sent, got, predicted) -> Judgement:
    """Judge every cell from probe counts: ``sent[k][i][j]`` probes sent from rack i to rack j inside
    slot k's judged window, ``got[k][i][j]`` of them received, ``predicted[k][i][j]`` the schedule's
    direct circuit.  Pure: no switch, no clock."""
    j_ = Judgement([], [], [], [])
    for k, (sk, gk, pk) in enumerate(zip(sent, got, predicted)):
        n = len(pk)
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                c = (k, i, j)
                if gk[i][j] > 0:
                    (j_.agree if pk[i][j] else j_.false_positive).append(c)
                elif sk[i][j] == 0:
                    j_.unprobed.append(c)
                elif pk[i][j]:
                    j_.undecided.append(c)
                else:
                    j_.agree.append(c)
    return j_


def predicted_circuits(sched: S.Schedule, slots: int) -> list[list[list[bool]]]:
    """predicted[k][i][j]: the schedule has a direct circuit i -> j in slot k (rotor offsets 0)."""
    n = sched.racks
    predicted = [[[False] * n for _ in range(n)] for _ in range(slots)]
    for r in sched.rotors:
        for k in range(slots):
            for i, j in enumerate(r.matchings[k % len(r.matchings)]):
                if j is not None and j != i:
                    predicted[k][i][j] = True
    return predicted


def tally(ds: S.Schedule, logs: dict[str, list[dict]], names: list[str], ips: list[str], t0_ns: int,
          margin_us: float) -> tuple[list, list]:
    """(sent, got)[k][i][j] from probe logs (one host per rack, host index = rack), counting only
    probes sent well inside the day of slot k (``margin_us`` from the night and the slot's end) of
    the dilated schedule ``ds``; a received probe counts in the slot it was *sent* in."""
    n = len(names)
    slots = ds.hyperperiod_us // ds.slot_us
    sent = [[[0] * n for _ in range(n)] for _ in range(slots)]
    got = [[[0] * n for _ in range(n)] for _ in range(slots)]
    index = {ip: i for i, ip in enumerate(ips)}
    for me, name in enumerate(names):
        for rec in logs.get(f"{name}.tx", []):
            k = _slot_of(ds, (rec["tx"] - t0_ns) / 1000, margin_us)
            if k is not None:
                sent[k % slots][me][index[rec["dst"]]] += 1
        for rec in logs.get(f"{name}.rx", []):
            k = _slot_of(ds, (rec["tx"] - t0_ns) / 1000, margin_us)
            if k is not None:
                got[k % slots][rec["src"]][me] += 1
    return sent, got


def reprobe_plan(cells: Iterable[Cell], ds: S.Schedule, margin_us: float, per_cell: float) -> dict[int, dict]:
    """For each source rack with cells to re-probe: the gate windows per destination rack (ns mod
    the dilated hyperperiod; exactly the judged part of each slot) and a send rate giving about
    ``per_cell`` probes to every cell when as many destinations as that rack has in its busiest
    slot share the window."""
    windows: dict[int, dict[int, list[list[int]]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    busy: collections.Counter = collections.Counter()
    for k, i, j in sorted(cells):
        a = math.ceil((k * ds.slot_us + ds.reconfig_us + margin_us) * 1000)
        b = math.floor(((k + 1) * ds.slot_us - margin_us) * 1000)
        windows[i][j].append([a, b])
        busy[(i, k)] += 1
    window_s = (ds.day_us - 2 * margin_us) / 1e6
    plan = {}
    for i, w in windows.items():
        most = max(c for (src, _), c in busy.items() if src == i)
        plan[i] = {"open": dict(w), "rate": max(1.0, per_cell * most / window_s)}
    return plan


def connectivity(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 200.0,
                 cycles: int = 2, probes_per_cell: float = 20, on_running: Callable[[Emulation], None] | None = None,
                 reprobe_rounds: int = 2, reprobe_per_cell: float = 4, reprobe_unprobed: bool = True) -> dict:
    """Which rack pairs are directly reachable in each slot, measured with direct-only probes.

    First pass: every host probes every other rack for ``cycles`` hyperperiods.  A cell the
    schedule says is live but whose probes were all lost is *undecided* (with 70+ BMv2 on 2 cores
    the check is load-limited), as is, if ``reprobe_unprobed``, a cell no probe fell in: up to
    ``reprobe_rounds`` more rounds of one hyperperiod each probe only those cells, gated to the
    judged part of their slot (far lighter).  Evidence accumulates over rounds.  Then: a probe
    received on a dark circuit fails (in any round, never retried away); a live cell with probes
    sent and none received after the last round fails.
    """
    sched = sched or S.generate_rotornet(6, 1, 1000, 100)
    if reprobe_rounds < 0:
        raise ValueError(f"reprobe_rounds must be >= 0, got {reprobe_rounds}")
    out.mkdir(parents=True, exist_ok=True)
    H = sched.hyperperiod_us
    slots = H // sched.slot_us
    duration = cycles * H * dilation / 1e6
    ds = dilate(sched, dilation)
    margin = 0.15 * ds.day_us
    predicted = predicted_circuits(sched, slots)
    rounds: list[dict] = []
    emu, topo = _launch(sched, dilation, 1, build, out / "run")
    ips = [k.hosts[0].ip for k in topo.racks]
    names = [k.hosts[0].name for k in topo.racks]
    try:
        rate = max(50.0, probes_per_cell * (sched.racks - 1) / (sched.day_us * dilation / 1e6))
        if on_running:
            on_running(emu)
        logs = _run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                    "dscp": 8}, duration, out)
        sent, got = tally(ds, logs, names, ips, emu.t0_ns, margin)
        judged = first = judge_cells(sent, got, predicted)
        _say(f"[experiment] connectivity: first pass {len(first.agree)}/{first.cells} cells agree, "
             f"{len(first.undecided)} live cells with every probe lost, {len(first.unprobed)} unprobed, "
             f"{len(first.false_positive)} probes across a circuit the schedule does not have")
        for r in range(1, reprobe_rounds + 1):
            lost = judged.undecided
            todo = lost + (judged.unprobed if reprobe_unprobed else [])
            if not todo:
                break
            plan = reprobe_plan(todo, ds, margin, reprobe_per_cell)
            gate = lambda i: {"t0_ns": emu.t0_ns, "period_ns": ds.hyperperiod_us * 1000,  # noqa: E731
                              "open": {ips[j]: w for j, w in plan[i]["open"].items()}}
            t = time.monotonic()
            logs = _run_probes(emu, topo, lambda i, h: {"dsts": [ips[j] for j in plan[i]["open"]],
                                                        "rate": plan[i]["rate"], "dscp": 8, "gate": gate(i)}
                               if i in plan else None, ds.hyperperiod_us / 1e6, out / f"reprobe{r}")
            s2, g2 = tally(ds, logs, names, ips, emu.t0_ns, margin)
            _add(sent, s2)
            _add(got, g2)
            after = judge_cells(sent, got, predicted)
            rounds.append({"round": r, "cells": len(todo), "undecided": len(lost),
                           "unprobed": len(todo) - len(lost), "sources": len(plan),
                           "max_rate_pps": max(p["rate"] for p in plan.values()),
                           "probes_sent": _total(s2), "probes_received": _total(g2),
                           "resolved": len(set(lost) - set(after.undecided)),
                           "newly_judged": len(set(judged.unprobed) - set(after.unprobed)),
                           "wall_s": time.monotonic() - t})
            _say(f"[experiment] connectivity: re-probe round {r}: {len(todo)} cells ({len(lost)} undecided, "
                 f"{len(todo) - len(lost)} unprobed) from {len(plan)} racks, {_total(s2)} probes -> "
                 f"{rounds[-1]['resolved']} resolved, {len(after.undecided)} still undecided")
            judged = after
    finally:
        emu.stop()
    j_ = judged
    cells, agree = j_.cells, len(j_.agree)
    measured = [[[got[k][i][j] > 0 for j in range(sched.racks)] for i in range(sched.racks)] for k in range(slots)]
    res = {"schedule": sched.to_json(), "dilation": dilation, "slots": slots, "cells": cells, "agree": agree,
           "cells_total": slots * sched.racks * (sched.racks - 1),
           "false_positive": len(j_.false_positive), "missed": len(j_.undecided), "unjudged": len(j_.unprobed),
           "first_pass": {"cells": first.cells, "agree": len(first.agree), "undecided": len(first.undecided),
                          "unprobed": len(first.unprobed), "false_positive": len(first.false_positive),
                          "rate_pps": rate},
           "reprobe": {"rounds": rounds, "rounds_run": len(rounds),
                       "reprobed": sum(x["cells"] for x in rounds),
                       "resolved": sum(x["resolved"] for x in rounds),
                       "newly_judged": sum(x["newly_judged"] for x in rounds)},
           "disagree": sorted(j_.false_positive + j_.undecided)[:1000],
           "measured": measured, "predicted": predicted,
           "probes_sent": _total(sent), "probes_received": _total(got)}
    _plot_connectivity(res, sched.racks, out / "connectivity.png")
    # On disk the grids are one "0"/"1" string per (slot, source rack): a 96-rack run is 0.4 MB, not 3.
    grids = {"grid_format": "measured/predicted[slot][src] = string over dst, '1' = connected"}
    for key in ("measured", "predicted"):
        grids[key] = [["".join("1" if x else "0" for x in row) for row in k] for k in res[key]]
    (out / "connectivity.json").write_text(json.dumps({**res, **grids}))
    rr = res["reprobe"]
    res["verdict"] = (f"connectivity: {agree}/{cells} (slot, pair) cells measured as the schedule predicts "
                      f"({len(j_.false_positive)} probes across a circuit the schedule does not have, "
                      f"{len(j_.undecided)} live cells with every probe lost; {rr['rounds_run']} re-probe rounds, "
                      f"{rr['resolved']} cells resolved by them) "
                      f"-> {'PASS' if agree == cells and cells > 0 else 'FAIL'}")
    return res


def _add(acc, more) -> None:
    for a, b in zip(acc, more):
        for ra, rb in zip(a, b):
            for j, x in enumerate(rb):
                ra[j] += x


def _total(counts) -> int:
    return sum(sum(row) for k in counts for row in k)


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
    """Measured vs predicted reachability per slot; disagreeing cells marked in red.  Above a few
    hundred rack pairs the figure keeps a fixed width (no per-pair labels): one column per pair at
    64 racks was a 97 574-pixel-wide image."""
    plt = _plt()
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    col = {p_: x for x, p_ in enumerate(pairs)}
    labelled = len(pairs) <= 400
    width = max(10, len(pairs) * 0.22) if labelled else 16
    fig, axes = plt.subplots(1, 2, figsize=(width, 3 + min(res["slots"], 40) * 0.3), sharey=True)
    bad = res.get("disagree", [])
    for ax, key, title in ((axes[0], "measured", "measured (direct-only probes)"),
                           (axes[1], "predicted", "schedule")):
        m = [[1 if res[key][k][i][j] else 0 for (i, j) in pairs] for k in range(res["slots"])]
        ax.imshow(m, aspect="auto", cmap="Greens", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title)
        if labelled:
            ax.set_xticks(range(len(pairs)))
            ax.set_xticklabels([f"{i}>{j}" for i, j in pairs], rotation=90, fontsize=6)
            ax.set_xlabel("rack pair (src>dst)")
        else:
            ax.set_xlabel(f"rack pair (src>dst), {len(pairs)} pairs in src-major order")
        if bad:
            ax.scatter([col[(i, j)] for _, i, j in bad], [k for k, _, _ in bad], marker="x", color="red", s=12,
                       label="disagrees")
    axes[0].set_ylabel("slot")
    if bad:
        axes[0].legend(loc="upper right", fontsize=7)
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

        def plan(i, h):
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
        logs = _run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                    "dscp": 46}, duration, out)
    finally:
        emu.stop()
    sent = sum(len(logs[f"{k.hosts[0].name}.tx"]) for k in topo.racks)
    lat = [(r["rx"] - r["tx"]) / 1000 / dilation for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]]
    lost = sent - len(lat)
    reconfigs = int(duration * 1e6 / dilation / sched.slot_us * len(sched.rotors))
    res = {"schedule": sched.to_json(), "dilation": dilation, "epsilon_us": eps, "sent": sent,
           "received": len(lat), "lost": lost, "reconfigurations": reconfigs,
           "latency_emulated_us": summarize(lat)}
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
        logs = _run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
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
