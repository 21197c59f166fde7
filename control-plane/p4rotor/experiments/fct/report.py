"""An fct run's results: ``fct.json`` (every mode's classes, stability, bulk bound, what the agents
and switches said), the one-line verdict, and the plots (fct.png here; bulk.png and paths.png:
workload/plots.py).
"""

from __future__ import annotations

import math
from pathlib import Path

from ...fabric.switch import realtime_allowed
from ...workload import bound as B
from ...workload import fct as F
from ...workload import hotspot
from ...workload import stability as ST
from ...workload.plots import bulk_plot, paths_plot
from ...workload.results import write_fct
from ...plotting import pyplot, save
from ..runner import say
from .calibrate import SEGMENT


def report(runs: dict, wl, access_bps: float, factor: float, default_cutoff: float, dilation: float,
            out: Path, hosts_per_rack: int = 1, bound: dict | None = None, epsilon_us: float | None = None,
            calibrations: dict | None = None, calibration_file: str | None = None,
            calibration_machine: dict | None = None,
            share: dict[int, float] | None = None, judge=None, agent_rate: float | None = None,
            guard_us: float | None = None, shared: bool = False, idle_poll: bool | None = None,
            switch_cpus: str | None = None, warm_ms: float | None = None, target: str = "bmv2",
            datapath: str = "python") -> dict:
    """``idle_poll``: whether the fabric's idle CPUs polled (fabric/cpu.py; None: not run);
    ``switch_cpus``: the CPUs the switches ran on (None: anywhere); ``warm_ms``: the warmer's
    period (fabric/warm.py; None: none).  ``calibrations``: per emulation ("fabric",
    "packet-switch") the calibrated ideal every flow was divided by (workload/ideal.py), read
    from ``calibration_file`` or measured by this run on its idle fabric; ``judge``: a mode's
    stability (:func:`stability_judge`)."""
    cals = calibrations or {}
    res = {"workload": wl.meta["workload"], "load": wl.meta["load"], "zipf": wl.meta.get("zipf"),
           "flows": len(wl.flows),
           "replayed_from": wl.meta.get("replayed_from"), "hosts_per_rack": hosts_per_rack,
           "access_mbps": access_bps / 1e6, "dilation": dilation, "target": target, "datapath": datapath,
           "agent_rate": agent_rate, "guard_us": guard_us, "shared_circuits": shared,
           "epsilon_us": epsilon_us, "scaling_factor": factor,
           "calibration": {k: v.to_json() for k, v in cals.items()},
           "calibration_file": calibration_file, "calibration_machine": calibration_machine,
           "default_cutoff_bytes": default_cutoff, "switches_realtime": realtime_allowed(),
           "cpu_idle_poll": idle_poll, "switch_cpus": switch_cpus, "warm_ms": warm_ms, "modes": {}}
    lines = []
    for mode, r in runs.items():
        # Within RotorLB's capacity, and the fabric's queue no longer than the model's
        # (workload/stability.py).  The trend over the arrivals alone could not tell a heavy
        # tail from an overload: Data Mining 10 % drained every flow and still "climbed".
        arrivals_s = r.get("arrivals_s", math.inf)
        if judge is not None and r["cutoff"] != math.inf:
            say(f"[experiment] fct: {mode}: stability against RotorLB's model (the flows 6 times; "
                "~1 min for 2000 Data Mining flows)")
            st = judge(wl.flows, r["cutoff"], r["pending"], arrivals_s)
        else:  # the packet switch: every flow over TCP, no agent queues
            tr = ST.trend([(t, b) for t, b in r["pending"] if t <= arrivals_s])
            st = {"stable": True, "why": "no bulk flows: nothing queued at the agents", "trend": tr,
                  **{k: tr.get(k) for k in ("mean_bytes", "slope_bytes_per_s", "rise_bytes")}}
        summ = F.summarize(r["done"], access_bps, factor)
        unfinished = sum(1 for d in r["done"] if d.done_ns is None)
        res["modes"][mode] = {"cutoff_bytes": r["cutoff"], "stable": st["stable"], "stability": st,
                              "arrivals_s": r.get("arrivals_s"),
                              "unfinished": unfinished, "agent_frames_lost": r["agent_frames_lost"],
                              "agent_frames_held": r.get("agent_frames_held"),
                              "duplicates": r["duplicates"], "retransmitted": r["retransmitted"], "classes": summ,
                              "pending_bytes": r["pending"], "per_flow": F.per_flow(r["done"], factor),
                              "start_lag": r.get("start_lag", {}), "receiver_wakeup": r.get("receiver_wakeup", {}),
                              "primers": r.get("primers"),
                              "by_path": r.get("by_path"), "replay": r.get("replay"),
                              "switch_drops": r.get("switch_drops"),
                              "warm": r.get("warm"), "dead_agents": r.get("dead_agents", []),
                              "agents_priority": r.get("agents_priority"),
                              "agents_loops": r.get("agents_loops"), "activity": r.get("activity")}
        if bound and any(d.cls == "bulk" for d in r["done"]):
            res["modes"][mode]["bulk_bound"] = B.bulk_bound_check(r["done"], **bound, share=share, shared=shared)
            res["modes"][mode]["bulk_bound"]["above"] = B.above_bound(r["done"], r.get("bulk_paths", {}), **bound)
        if not st["stable"]:
            lines.append(f"{mode}: unstable ({st['why']}); unfinished {unfinished}")
            continue
        parts = []
        for cls, per in summ.items():
            for b, v in per.items():
                if v["slowdown_mean"] is not None:
                    alone = (f"; alone {v['slowdown_alone_mean']:.1f} ±{v['slowdown_alone_ci95']:.1f} "
                             f"({v['replayed']} replayed)" if v.get("replayed") else "")
                    parts.append(f"{cls} {b}: slowdown mean {v['slowdown_mean']:.1f} p99 {v['slowdown_p99']:.1f} "
                                 f"({v['flows']} flows, {v['slowdown_below_1']} below 1{alone})")
        bb = res["modes"][mode].get("bulk_bound")
        if bb and bb["flows"]:
            pc = bb.get("pair_capacity")
            parts.append(f"bulk within the low-load bound {bb['within']}/{bb['flows']} (worst {bb['worst_ratio']:.2f}x)"
                         + (f", at the pair's RotorLB capacity {pc['within']}/{bb['flows']} "
                            f"(median {pc['median_ratio']:.2f}x)" if pc else "") + B.rack_alone_numbers(bb))
        ll = summ.get("low-latency", {})
        if any("retransmitted" in v for v in ll.values()):
            parts.append(f"low-latency segments lost {sum(v.get('segments_lost', 0) for v in ll.values())} "
                         f"(resent {sum(v.get('retransmitted', 0) for v in ll.values())}, reported as duplicates "
                         f"{sum(v.get('duplicates_reported', 0) for v in ll.values())}; "
                         f"{sum(v.get('flows_timing_out', 0) for v in ll.values())} flows waited for a timeout)")
        pr = r.get("primers") or {}
        if pr.get("failed"):  # a flow whose primer failed ran cold (host/flows.py)
            parts.append(f"primers failed {pr['failed']} of {pr['sent']}")
        sd = r.get("switch_drops") or {}
        if sd.get("total") is not None:
            parts.append("switch drops " + (", ".join(f"{c} {n}" for c, n in sorted(sd["total"].items()))
                                            or "none"))
        dead = r.get("dead_agents") or []
        lines.append(f"{mode}: " + "; ".join(parts) + f"; unfinished {unfinished}"
                     + (f" (agents without a summary: {', '.join(d['host'] for d in dead)})" if dead else ""))
    write_fct(out, res)
    bulk_plot(res, out / "bulk.png")
    paths_plot(res, out / "paths.png")
    fct_plot(runs, access_bps, out, models={m: v["stability"]["tracking"]["model_curve"]
                                          for m, v in res["modes"].items() if "tracking" in v["stability"]})
    load = "?" if wl.meta["load"] is None else f"{wl.meta['load']:g}"
    hot = hotspot.label(wl.meta.get("zipf"))
    res["verdict"] = (f"fct {wl.meta['workload']} load {load}{hot}, {len(wl.flows)} flows: "
                      + " | ".join(lines))
    return res


def say_curve(what: str, curve: F.AloneCurve, access_bps: float) -> None:
    say(f"[experiment] fct: {what}, a flow's size adds " + ", ".join(
        f"{round(s / SEGMENT)}: {e * 1e3:.1f} ms" for s, e in curve.points[:40]) + f" (segments: time), then "
        f"{curve.tail_bps / 1e6:.2f} Mb/s ({access_bps / 1e6:.2f} configured)")


def fct_plot(runs: dict, access_bps: float, out: Path, models: dict | None = None) -> None:
    """``models``: per mode, the RotorLB model's pending bytes for the same flows (dashed)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for mode, r in runs.items():
        fin = [d for d in r["done"] if d.fct_s is not None]
        axes[0].scatter([d.flow.size for d in fin], [d.slowdown(access_bps) for d in fin],
                        s=6, alpha=0.6, label=mode)
        for cls in ("low-latency", "bulk"):
            xs = sorted(d.fct_s for d in fin if d.cls == cls)
            if xs:
                axes[1].plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{mode} {cls}")
        if r["pending"]:
            line, = axes[2].plot([t for t, _ in r["pending"]], [b / 1e3 for _, b in r["pending"]], label=mode)
            model = (models or {}).get(mode)
            if model:
                axes[2].plot([t for t, _ in model], [b / 1e3 for _, b in model], linestyle="--",
                             color=line.get_color(), alpha=0.7, label=f"{mode}: RotorLB model")
    axes[0].set(xlabel="flow size (emulated bytes)", ylabel="slowdown", title="slowdown vs size")
    axes[1].set(xlabel="FCT (wall s)", ylabel="CDF", title="FCT per class")
    finished = any(d.fct_s for r in runs.values() for d in r["done"])
    if finished:
        axes[0].set(xscale="log", yscale="log")
        axes[1].set(xscale="log")
    else:  # a log axis of nothing is an error in matplotlib: say so on the plot instead
        for ax in axes[:2]:
            ax.text(0.5, 0.5, "no flow finished", ha="center", va="center", transform=ax.transAxes)
    arrivals = max((r.get("arrivals_s") or 0 for r in runs.values()), default=0)
    if arrivals:  # stability is judged left of it: the drain after the last arrival always falls
        axes[2].axvline(arrivals, color="grey", linestyle=":", label="last arrival")
    axes[2].set(xlabel="time from first arrival (wall s)", ylabel="pending KB (agents)", title="bytes pending")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out / "fct.png", dpi=110)
