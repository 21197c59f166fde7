"""Pictures of schedules (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from ..schedule import Schedule, analyse


def plot_schedule(s: Schedule, out: Path, cycles: int = 1) -> Path:
    from ..plotting import pyplot, save

    plt = pyplot()

    H = s.hyperperiod_us * cycles
    fig, ax = plt.subplots(figsize=(max(10, min(18, 4 + H / s.slot_us * 0.6)), 1.2 + 0.6 * len(s.rotors)))
    cmap = plt.get_cmap("tab20")
    for row, r in enumerate(s.rotors):
        y = len(s.rotors) - 1 - row
        k0 = -1
        while True:
            start = r.offset_us + k0 * s.slot_us
            if start >= H:
                break
            idx = k0 % len(r.matchings)
            a, b = max(0, start), min(H, start + s.reconfig_us)
            if b > a:
                ax.broken_barh([(a, b - a)], (y - 0.4, 0.8), color="black")
            a, b = max(0, start + s.reconfig_us), min(H, start + s.slot_us)
            if b > a:
                idle = all(x is None for x in r.matchings[idx])
                ax.broken_barh([(a, b - a)], (y - 0.4, 0.8),
                               color="lightgrey" if idle else cmap(idx % 20), edgecolor="white")
                ax.text((a + b) / 2, y, "idle" if idle else f"m{idx}", ha="center", va="center", fontsize=8)
            k0 += 1
    a = analyse(s)
    for sl, d in zip(a.slices, a.diameters):
        if cycles == 1:
            ax.axvline(sl.start_us, color="grey", lw=0.3)
    ax.set_yticks(range(len(s.rotors)))
    ax.set_yticklabels([r.name for r in reversed(s.rotors)])
    ax.set_xlim(0, H)
    ax.set_xlabel("time (us)   black = night (reconfiguration)")
    worst = a.worst_diameter
    ax.set_title(f"{s.kind}: {s.racks} racks, {len(s.rotors)} rotors, slot {s.slot_us} us, night {s.reconfig_us} us"
                 + (f", worst slice diameter {worst}" if worst is not None else ", some slice disconnected"))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    save(fig, out, dpi=110)
    return out
