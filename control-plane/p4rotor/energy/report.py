"""What ``p4rotor energy`` prints and draws: the one-line summary (also printed by the fct and
rotorlb experiments), the markdown table (docs/energy.md's block is this table), the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..workload import hotspot
from .model import CLASSES, SLEEP_STATES, EnergyError

NAMES = {"always-on": "always on", "tos": "TOS", "trs": "TRS", "predictive": "predictive"}
SHORT = {"host-link": "host", "tor-uplink": "uplink", "rotor-port": "rotor port"}
BEGIN, END = "<!-- energy:begin -->", "<!-- energy:end -->"


def _pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f} %"


def _delay(p: dict) -> str:
    d = p["delay"]
    us = d["mean_per_frame_us"]
    if not d["frames_delayed"]:
        return "0"
    rel = d.get("vs_alone_floor")
    return f"+{us:.2g} µs" + ("" if rel is None else f" ({_pct(rel)})")


def _util(r: dict) -> str:
    u = r["utilisation"]
    return f"{_pct(u['host-link'])} / {_pct(u['tor-uplink'])}"


def summary_line(r: dict) -> str:
    """One line: each policy's saving against always on and the delay it adds per frame."""
    pol = r["policies"]
    parts = [f"{NAMES[k]} saves {_pct(pol[k]['saving'])} ({_delay(pol[k])})" for k in ("tos", "trs", "predictive")]
    return (f"energy ({r['mode']}; {r.get('activity', 'reconstructed')} activity; utilisation host {_pct(r['utilisation']['host-link'])}, fabric "
            f"{_pct(r['utilisation']['tor-uplink'])}): " + "; ".join(parts))


def _point(r: dict) -> str:
    """A row's point: "websearch 10 %", "websearch 10 %, Zipf 0.8" for a hot spot (fct.json's
    ``zipf``; rows made before it was recorded have none: uniform), else the run's directory."""
    load, hot = r.get("load"), hotspot.label(r.get("zipf"))
    return f"{r.get('workload')} {100 * load:g} %{hot}" if isinstance(load, (int, float)) else Path(r["run"]).name + hot


def markdown(rows: Sequence[dict], model: str) -> str:
    lines = [f"Power model: `{model}`. Activity: {'; '.join(sorted({_how(r) for r in rows}))}.", "",
             "| point | mode | utilisation host / fabric | TOS saving | TOS delay | TRS saving | TRS delay "
             "| predictive saving | predictive delay |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["policies"]
        lines.append(f"| {_point(r)} | {r['mode']} | {_util(r)} | "
                     + " | ".join(f"{_pct(p[k]['saving'])} | {_delay(p[k])}" for k in ("tos", "trs", "predictive"))
                     + " |")
    lines += ["", "Saving per port class (host link / ToR uplink / rotor port):", "",
              "| point | mode | TOS | TRS | predictive | predictive: time in L0 / L0s / L1 (rotor port) |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        p = r["policies"]
        cells = [" / ".join(f"{100 * p[k]['classes'][c]['saving']:.0f}" for c in CLASSES) + " %"
                 for k in ("tos", "trs", "predictive")]
        share = p["predictive"]["classes"]["rotor-port"]["state_share"]
        lines.append(f"| {_point(r)} | {r['mode']} | " + " | ".join(cells) + " | "
                     + " / ".join(f"{100 * share[s]:.0f}" for s in ("L0", "L0s", "L1")) + " % |")
    return "\n".join(lines) + "\n"


def _how(r: dict) -> str:
    if r.get("activity") == "measured":
        return "measured by the data plane's per-slot counters (runs with activity.json or activity-MODE.json)"
    if r["mode"] == "rotorlb" and r["source"].startswith("reconstructed"):
        return "RotorLB's per-slot plan scaled to the frames delivered (rotorlb runs)"
    if r["source"].startswith("reconstructed"):
        return "reconstructed from the runs' flow records (fct runs)"
    return r["source"]


def update_doc(doc: Path, table: str) -> None:
    """Replace the text between the energy markers of ``doc`` with ``table``."""
    try:
        text = doc.read_text()
    except OSError as ex:
        raise EnergyError(f"--doc {doc}: cannot read: {ex.strerror}") from None
    if BEGIN not in text or END not in text:
        raise EnergyError(f"--doc {doc}: no '{BEGIN}' ... '{END}' block to replace")
    text = text[:text.index(BEGIN)] + f"{BEGIN}\n{table}{END}" + text[text.index(END) + len(END):]
    doc.write_text(text)


def plot(rows: Sequence[dict], png: Path) -> None:
    """Left: time in each state per port class and policy, for the busiest FCT run mode (the
    busiest of all if there is none); right: saving against always on vs offered load, per
    policy and mode."""
    from ..plotting import pyplot, save

    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    fct = [r for r in rows if isinstance(r.get("load"), (int, float))] or list(rows)
    r0 = max(fct, key=lambda r: r["utilisation"]["host-link"] or 0)
    colors = {"L0": "#c0392b", "L0s": "#f39c12", "L1": "#2e86c1", "off": "#7f8c8d"}
    labels, x = [], 0
    for pol in ("always-on", "tos", "trs", "predictive"):
        for c in CLASSES:
            share = r0["policies"][pol]["classes"][c]["state_share"]
            bottom = 0.0
            for s in ("L0", *SLEEP_STATES):
                ax.bar(x, share[s], bottom=bottom, color=colors[s], label=s if x == 0 else None)
                bottom += share[s]
            labels.append(f"{NAMES[pol]}\n{SHORT[c]}")
            x += 1
        x += 0.5
    ticks = [i + 0.5 * (i // 3) for i in range(len(labels))]
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=6)
    ax.set_ylabel("share of time per port")
    ax.set_title(f"state time per port, {_point(r0)} {r0['mode']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    marks = {"opera": "o", "rotornet": "s"}
    colors2 = {"tos": "#f39c12", "trs": "#2e86c1", "predictive": "#27ae60"}
    for pol in ("tos", "trs", "predictive"):
        for mode in sorted({r["mode"] for r in rows}):
            for wl in sorted({_series(r) for r in rows}):
                pts = sorted((r["load"], r["policies"][pol]["saving"]) for r in rows
                             if r["mode"] == mode and _series(r) == wl and isinstance(r.get("load"), (int, float)))
                if pts:
                    dash = "--" if wl.startswith("datamining") else "-"
                    ax2.plot([100 * p[0] for p in pts], [100 * p[1] for p in pts], dash,
                             color=colors2[pol], marker=marks.get(mode, "x"), label=f"{NAMES[pol]}, {mode}, {wl}")
    ax2.set_xscale("log")
    ax2.set_xlabel("offered load (% of the access rate)")
    ax2.set_ylabel("saving vs always on (%)")
    ax2.set_title("network power saved vs load", fontsize=9)
    ax2.legend(fontsize=5.5, ncol=2)
    fig.tight_layout()
    try:
        save(fig, png, dpi=110)
    except OSError as ex:
        raise EnergyError(f"--output {png}: cannot write: {ex.strerror}") from None


def _series(r: dict) -> str:
    """A line of the saving-vs-load plot: the workload, and the hot spot if any."""
    return str(r.get("workload")) + hotspot.label(r.get("zipf"))


def summary_for(run: Path) -> list[str]:
    """The energy lines of an experiment's output directory (the fct and rotorlb experiments
    print them after their verdict); a run it cannot account says why, in one line, and never
    fails the experiment whose results are already written."""
    from ..inputs import MALFORMED
    from . import model as M
    from .cli import evaluate

    try:
        rows = evaluate([Path(run)], M.load())
    except (EnergyError, *MALFORMED) as ex:
        return [f"energy: not accounted ({str(ex)[:200]})"]
    return [summary_line(r) for r in rows] or ["energy: no fabric mode in this run to account"]
