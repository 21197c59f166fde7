"""Plots drawn from a finished fct run's ``fct.json``: bulk flows against the low-load bound, and
one-packet flows by path.  matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

from pathlib import Path

from . import fct as F
from .paths import QUANTILES
from ..plotting import pyplot, save



def bulk_plot(r: dict, path: Path) -> bool:
    """Every bulk flow's FCT over issue #14's low-load bound against its size, per fabric mode,
    beside RotorLB alone in the model as the fabric runs (a plane per host) and with the rack's
    hosts sharing its circuits (``bulk_bound.rotorlb_alone.per_flow``).  False: nothing to draw."""
    modes = {mode: m["bulk_bound"]["rotorlb_alone"]["per_flow"] for mode, m in r.get("modes", {}).items()
             if m.get("bulk_bound", {}).get("rotorlb_alone", {}).get("per_flow")}
    if not modes:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 4.5), squeeze=False)
    for ax, (mode, pts) in zip(axes[0], sorted(modes.items())):
        pts = sorted(pts, key=lambda p: p[1])
        size = [p[1] for p in pts]
        ax.scatter(size, [p[2] / p[5] for p in pts], s=8, alpha=0.6, label="measured")
        ax.plot(size, [p[3] / p[5] for p in pts], ".", ms=3, color="tab:orange",
                label="RotorLB alone (model): a plane per host")
        ax.plot(size, [p[4] / p[5] for p in pts], ".", ms=3, color="tab:green",
                label="RotorLB alone (model): hosts share the rack's circuits")
        ax.axhline(1, color="grey", linestyle=":", label="the bound")
        ax.set(xscale="log", yscale="log", xlabel="flow size (emulated bytes)", ylabel="FCT / bound",
               title=f"{mode}: bulk flows against the low-load bound ({r.get('workload')} {r.get('load')})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path, dpi=110)
    return True


def paths_plot(r: dict, path: Path) -> bool:
    """Each mode's one-packet low-latency flows by the path class they met (``by_path``: Opera's
    rack hops there and back, the packet switch's one switch): the run's FCT percentiles, with
    the calibrated base each was divided by (thick) and the calibration's own median (dotted).
    False: nothing to draw."""
    modes = {mode: m["by_path"] for mode, m in r.get("modes", {}).items() if m.get("by_path")}
    if not modes:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(modes), figsize=(8 * len(modes), 4.5), squeeze=False)
    for ax, (mode, by) in zip(axes[0], sorted(modes.items())):
        m = r["modes"][mode]
        for i, (k, v) in enumerate(sorted(by.items())):
            color = f"C{i}"
            q = v.get("run_fct_s")
            if q:
                ax.plot([q[f"p{p}"] * 1e3 for p in QUANTILES], QUANTILES, "-", color=color, marker=".",
                        label=f"{k}: in the run ({v['run_flows']}; {v['run_below_base']} below the base)")
            ax.axvline(v["base_s"] * 1e3, color=color, linewidth=2, alpha=0.5)
            cal = v.get("calibration_fct_s") or {}
            if cal.get("p50_s"):
                ax.axvline(cal["p50_s"] * 1e3, color=color, linewidth=1, linestyle=":")
        mean = F.class_mean(m.get("classes", {}).get("low-latency", {}))
        ax.set(xlabel="one-packet FCT (ms)", ylabel="percentile", xscale="log",
               title=f"{mode}: one-packet flows by path; thick = calibrated base, dotted = its idle median\n"
                     f"{r.get('workload')} {r.get('load')}; low-latency mean slowdown "
                     f"{'-' if mean is None else f'{mean:.2f}'}")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path, dpi=110)
    return True
