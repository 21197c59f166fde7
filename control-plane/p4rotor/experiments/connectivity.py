"""Connectivity: which rack pairs are directly reachable in each slice, measured with direct-only probes."""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Callable, Iterable

from .. import p4 as dp
from .. import schedule as S
from ..fabric.mininet import Emulation
from ..plotting import pyplot, save
from .runner import check_fabric, launch, run_probes, say


Cell = tuple[int, int, int]  # (slice of the hyperperiod, source rack, destination rack)
MIN_PER_CELL = 2.0  # probes from a host to each other rack within the shortest cell, whatever probes_per_cell
# A pass lasts at least this long (wall s): at low dilation a hyperperiod is milliseconds, shorter
# than the probe processes' start-up spread; the pass then covers more cycles at a lower rate.
MIN_PASS_S = 1.0
GOLDEN = 0.6180339887


def pass_plan(hyper_wall_s: float, cycles: int, rate: float) -> tuple[int, float]:
    """(cycles, probes/s per host) of a pass asked for ``cycles`` hyperperiods at ``rate``.  When
    that is shorter than MIN_PASS_S it runs more cycles at a rate that sends each cell as many
    probes in all, and whose probes per hyperperiod end in the golden ratio's fraction: a whole
    number would put every cycle's probes at the same phases and leave the same gaps unprobed;
    this way successive cycles fill them evenly."""
    if cycles * hyper_wall_s >= MIN_PASS_S:
        return cycles, rate
    n = math.ceil(MIN_PASS_S / hyper_wall_s)
    per_cycle = rate * cycles / n * hyper_wall_s
    return n, (math.floor(per_cycle) + GOLDEN) / hyper_wall_s


@dataclasses.dataclass
class Judgement:
    """Every (slice, src, dst) cell with src != dst, by what the probes showed against the schedule."""

    agree: list[Cell]
    """Measured as predicted: a probe received on a live circuit, or probes sent and none received on a dark one."""
    false_positive: list[Cell]
    """A probe crossed a circuit the schedule does not have: a failure, never retried away."""
    undecided: list[Cell]
    """Predicted live, probes sent, none received (yet): no evidence either way while the check is
    load-limited; re-probed, and a failure if still nothing arrives after the last round."""
    unprobed: list[Cell]
    """No probe sent in the judged part of the slice: not judged."""

    @property
    def cells(self) -> int:
        """Judged cells: everything that was probed."""
        return len(self.agree) + len(self.false_positive) + len(self.undecided)


def judge_cells(sent, got, predicted, judgeable: list[bool] | None = None) -> Judgement:
    """Judge every cell from probe counts: ``sent[k][i][j]`` probes sent from rack i to rack j inside
    slice k's judged window, ``got[k][i][j]`` of them received, ``predicted[k][i][j]`` the schedule's
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
                    if judgeable is None or judgeable[k]:
                        j_.unprobed.append(c)
                elif pk[i][j]:
                    j_.undecided.append(c)
                else:
                    j_.agree.append(c)
    return j_


def cell_span_us(sched: S.Schedule) -> float:
    """How long a (slice, src, dst) cell lasts at the shortest: a day where every rotor
    reconfigures at once (RotorNet: its nights are slices with nothing live, never judged), the
    shortest slice with a live circuit where rotors are staggered (Opera 108x6: 100 us between
    one rotor's night and the next's, against an 1100 us day)."""
    live = [sl.end_us - sl.start_us for sl in sched.slices() if any(m is not None for m in sl.live)]
    return float(min([sched.day_us, *live]))


def predicted_circuits(sched: S.Schedule) -> list[list[list[bool]]]:
    """predicted[k][i][j]: the schedule has a live direct circuit i -> j in slice k of the
    hyperperiod.  Slices, not slots: with staggered rotors (Opera) "slot k" of one rotor is not a
    time window of the fabric, and every rotor's offset counts."""
    n = sched.racks
    out = []
    for sl in sched.slices():
        pairs = S.direct_pairs(sched, sl)
        out.append([[(i, j) in pairs for j in range(n)] for i in range(n)])
    return out


def tally(ds: S.Schedule, logs: dict[str, list[dict]], names: list[str], ips: list[str], t0_ns: int,
          margin_us: float, late: list | None = None) -> tuple[list, list]:
    """(sent, got)[k][i][j] from probe logs (one host per rack, host index = rack), counting only
    probes sent more than ``margin_us`` from both edges of slice k of the dilated schedule ``ds``.

    A received probe counts in slice k only if it also *arrived* before that slice ended: its
    whole life inside slice k, so the circuit it crossed was live in k.  One that arrived after
    its slice ended (it sat in a queue: 132 BMv2 on 2 cores hold frames for seconds) may have
    crossed in any slice its life overlapped, and is no evidence for k; it goes to ``late`` (if a
    list) as (src rack, dst rack, tx us, rx us) for :func:`late_across_dark`, which fails it if
    no slice it overlapped has its circuit."""
    n = len(names)
    clock = S.SliceClock(ds)
    slices = len(clock.slices)
    sent = [[[0] * n for _ in range(n)] for _ in range(slices)]
    got = [[[0] * n for _ in range(n)] for _ in range(slices)]
    index = {ip: i for i, ip in enumerate(ips)}
    for me, name in enumerate(names):
        for rec in logs.get(f"{name}.tx", []):
            k = clock.judged((rec["tx"] - t0_ns) / 1000, margin_us)
            if k is not None:
                sent[k][me][index[rec["dst"]]] += 1
        for rec in logs.get(f"{name}.rx", []):
            tx = (rec["tx"] - t0_ns) / 1000
            k = clock.judged(tx, margin_us)
            if k is None:
                continue
            rx = (rec.get("rx", rec["tx"]) - t0_ns) / 1000
            if rx < clock.instance_end(tx):
                got[k][rec["src"]][me] += 1
            elif late is not None:
                late.append((rec["src"], me, tx, rx))
    return sent, got


def late_across_dark(late: Iterable[tuple[int, int, float, float]], ds: S.Schedule,
                     predicted: list[list[list[bool]]]) -> list[Cell]:
    """The probes of ``late`` (see :func:`tally`) whose circuit is live in none of the slices
    their life overlapped, as the cell of the slice they were sent in: they crossed a circuit the
    schedule does not have, whenever they crossed."""
    clock = S.SliceClock(ds)
    bad = []
    for i, j, tx, rx in late:
        t, ok = tx, False
        while t <= rx and not ok:
            ok = predicted[clock.index(t)][i][j]
            t = clock.instance_end(t)
        if not ok:
            bad.append((clock.index(tx), i, j))
    return bad


def reprobe_plan(cells: Iterable[Cell], ds: S.Schedule, margin_us: float, per_cell: float) -> dict[int, dict]:
    """For each source rack with cells to re-probe: the gate windows per destination rack (ns mod
    the dilated hyperperiod; exactly the judged part of each slice, what ``tally`` counts) and a send
    rate giving about ``per_cell`` probes to every cell when as many destinations as that rack has
    in its busiest slice share the window."""
    clock = S.SliceClock(ds)
    windows: dict[int, dict[int, list[list[int]]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    busy: collections.Counter = collections.Counter()
    shortest: dict[int, float] = {}
    for k, i, j in sorted(cells):
        w = clock.judged_window(k, margin_us)
        if w is None:
            continue
        a, b = math.ceil(w[0] * 1000), math.floor(w[1] * 1000)
        windows[i][j].append([a, b])
        busy[(i, k)] += 1
        shortest[i] = min(shortest.get(i, math.inf), (b - a) / 1e9)
    plan = {}
    for i, w in windows.items():
        most = max(c for (src, _), c in busy.items() if src == i)
        plan[i] = {"open": dict(w), "rate": max(1.0, per_cell * most / shortest[i])}
    return plan


def connectivity(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 200.0,
                 cycles: int = 2, probes_per_cell: float = 20, on_running: Callable[[Emulation], None] | None = None,
                 reprobe_rounds: int = 2, reprobe_per_cell: float = 4, reprobe_unprobed: bool = True,
                 fabric: str = "multi-switch", target: str = "bmv2") -> dict:
    """Which rack pairs are directly reachable in each slice, measured with direct-only probes.

    First pass: every host probes every other rack for ``cycles`` hyperperiods.  A cell the
    schedule says is live but whose probes were all lost is *undecided* (with 70+ BMv2 on 2 cores
    the check is load-limited), as is, if ``reprobe_unprobed``, a cell no probe fell in: up to
    ``reprobe_rounds`` more rounds of one hyperperiod each probe only those cells, gated to the
    judged part of their slice (far lighter).  Evidence accumulates over rounds.  Then: a probe
    received on a dark circuit fails (in any round, never retried away); a live cell with probes
    sent and none received after the last round fails.
    """
    sched = sched or S.generate_rotornet(6, 1, 1000, 100)
    check_fabric(fabric)
    if reprobe_rounds < 0:
        raise ValueError(f"reprobe_rounds must be >= 0, got {reprobe_rounds}")
    out.mkdir(parents=True, exist_ok=True)
    H = sched.hyperperiod_us
    duration = cycles * H * dilation / 1e6
    ds = S.dilate(sched, dilation)
    span = cell_span_us(ds)
    margin = 0.15 * span  # slices shorter than two margins (RotorNet's nights) are not judged
    predicted = predicted_circuits(sched)
    slots = len(predicted)  # slices of the hyperperiod: the cells' time unit
    clock = S.SliceClock(ds)
    judgeable = [clock.judged_window(k, margin) is not None for k in range(slots)]
    rounds: list[dict] = []
    t_launch = time.monotonic()
    # No ping of every rack pair first above 64 racks: the first pass judges every pair in every
    # slice, and a RotorNet bulk ping at 128 racks finds a path both ways in ~3 % of tries (a
    # 2-hop path needs a neighbour whose circuit to the destination is live in the same slice):
    # ~30 s per pair, 1 466 of 16 256 pairs in 5 min.
    emu, topo = launch(sched, dilation, 1, build, out / "run", one_switch=fabric == "one-switch",
                       check_forwarding=sched.racks <= 64, target=target)
    launch_s = time.monotonic() - t_launch
    ips = [k.hosts[0].ip for k in topo.racks]
    names = [k.hosts[0].name for k in topo.racks]
    try:
        # probes_per_cell to every other rack per day, and at least 2 within the shortest cell:
        # round-robin sending then puts a probe into every judged window (the middle 70 %).
        rate = max(50.0, probes_per_cell * (sched.racks - 1) / (ds.day_us / 1e6),
                   MIN_PER_CELL * (sched.racks - 1) / (span / 1e6))
        run_cycles, rate = pass_plan(ds.hyperperiod_us / 1e6, cycles, rate)
        duration = run_cycles * ds.hyperperiod_us / 1e6
        if on_running:
            on_running(emu)
        logs = run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                    "dscp": dp.DSCP_DIRECT_ONLY}, duration, out)
        late: list = []  # probes that outlived the slice they were sent in (tally)

        def judge() -> Judgement:
            j_ = judge_cells(sent, got, predicted, judgeable)
            bad = set(late_across_dark(late, ds, predicted))
            if bad:
                j_ = Judgement([c for c in j_.agree if c not in bad], sorted(set(j_.false_positive) | bad),
                               [c for c in j_.undecided if c not in bad], [c for c in j_.unprobed if c not in bad])
            return j_

        sent, got = tally(ds, logs, names, ips, emu.t0_ns, margin, late)
        judged = first = judge()
        say(f"[experiment] connectivity: first pass {len(first.agree)}/{first.cells} cells agree, "
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
            logs = run_probes(emu, topo, lambda i, h: {"dsts": [ips[j] for j in plan[i]["open"]],
                                                        "rate": plan[i]["rate"], "dscp": dp.DSCP_DIRECT_ONLY, "gate": gate(i)}
                               if i in plan else None, max(ds.hyperperiod_us / 1e6, MIN_PASS_S), out / f"reprobe{r}")
            s2, g2 = tally(ds, logs, names, ips, emu.t0_ns, margin, late)
            _add(sent, s2)
            _add(got, g2)
            after = judge()
            rounds.append({"round": r, "cells": len(todo), "undecided": len(lost),
                           "unprobed": len(todo) - len(lost), "sources": len(plan),
                           "max_rate_pps": max(p["rate"] for p in plan.values()),
                           "probes_sent": _total(s2), "probes_received": _total(g2),
                           "resolved": len(set(lost) - set(after.undecided)),
                           "newly_judged": len(set(judged.unprobed) - set(after.unprobed)),
                           "wall_s": time.monotonic() - t})
            say(f"[experiment] connectivity: re-probe round {r}: {len(todo)} cells ({len(lost)} undecided, "
                 f"{len(todo) - len(lost)} unprobed) from {len(plan)} racks, {_total(s2)} probes -> "
                 f"{rounds[-1]['resolved']} resolved, {len(after.undecided)} still undecided")
            judged = after
    finally:
        emu.stop()
    j_ = judged
    cells, agree = j_.cells, len(j_.agree)
    measured = [[[got[k][i][j] > 0 for j in range(sched.racks)] for i in range(sched.racks)] for k in range(slots)]
    res = {"schedule": sched.to_json(), "dilation": dilation, "fabric": fabric, "target": target, "launch_s": launch_s,
           "slices": slots, "cells": cells, "agree": agree,
           "cells_total": slots * sched.racks * (sched.racks - 1),
           "false_positive": len(j_.false_positive), "missed": len(j_.undecided), "unjudged": len(j_.unprobed),
           "first_pass": {"cells": first.cells, "agree": len(first.agree), "undecided": len(first.undecided),
                          "unprobed": len(first.unprobed), "false_positive": len(first.false_positive),
                          "rate_pps": rate, "cycles": run_cycles, "wall_s": duration},
           "reprobe": {"rounds": rounds, "rounds_run": len(rounds),
                       "reprobed": sum(x["cells"] for x in rounds),
                       "resolved": sum(x["resolved"] for x in rounds),
                       "newly_judged": sum(x["newly_judged"] for x in rounds)},
           "disagree": sorted(j_.false_positive + j_.undecided)[:1000],
           "measured": measured, "predicted": predicted,
           "probes_sent": _total(sent), "probes_received": _total(got),
           # Received after the slice they were sent in had ended: judged against every slice
           # their life overlapped (late_across_dark), not as evidence for one.
           "probes_late": len(late)}
    _plot_connectivity(res, sched.racks, out / "connectivity.png")
    # On disk the grids are one "0"/"1" string per (slice, source rack): a 96-rack run is 0.4 MB, not 3.
    grids = {"grid_format": "measured/predicted[slice][src] = string over dst, '1' = connected"}
    for key in ("measured", "predicted"):
        grids[key] = [["".join("1" if x else "0" for x in row) for row in k] for k in res[key]]
    (out / "connectivity.json").write_text(json.dumps({**res, **grids}))
    rr = res["reprobe"]
    res["verdict"] = (f"connectivity: {agree}/{cells} (slice, pair) cells measured as the schedule predicts "
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


def _plot_connectivity(res: dict, n: int, path: Path) -> None:
    """Measured vs predicted reachability per slice; disagreeing cells marked in red.  Above a few
    hundred rack pairs the figure keeps a fixed width (no per-pair labels): one column per pair at
    64 racks was a 97 574-pixel-wide image."""
    plt = pyplot()
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    col = {p_: x for x, p_ in enumerate(pairs)}
    labelled = len(pairs) <= 400
    width = max(10, len(pairs) * 0.22) if labelled else 16
    fig, axes = plt.subplots(1, 2, figsize=(width, 3 + min(res["slices"], 40) * 0.3), sharey=True)
    bad = res.get("disagree", [])
    for ax, key, title in ((axes[0], "measured", "measured (direct-only probes)"),
                           (axes[1], "predicted", "schedule")):
        m = [[1 if res[key][k][i][j] else 0 for (i, j) in pairs] for k in range(res["slices"])]
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
    axes[0].set_ylabel("slice of the hyperperiod")
    if bad:
        axes[0].legend(loc="upper right", fontsize=7)
    fig.suptitle(f"direct reachability per slice: {res['agree']}/{res['cells']} cells agree")
    fig.tight_layout()
    save(fig, path, dpi=110)


# ---------------------------------------------------------------------------
# duty cycle
# ---------------------------------------------------------------------------
