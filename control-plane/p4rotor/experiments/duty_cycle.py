"""Duty cycle: throughput between two racks vs (slot - night)/slot, and uptime efficiency with a
host guard time ([McGuinness21 §2.2])."""

from __future__ import annotations

import json
from pathlib import Path

from .. import p4 as dp
from .. import schedule as S
from ..plotting import pyplot, save
from .runner import launch, run_probes, say


def duty_cycle(build: Path, out: Path, dilation: float = 100.0, slot_us: int = 2000,
               nights: tuple[int, ...] = (200, 500, 1000), guards: tuple[int, ...] = (100, 300),
               rate: float = 400.0, duration: float = 4.0, target: str = "bmv2") -> dict:
    """Throughput fraction between two racks vs (slot - night)/slot; efficiency with a guard time."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for night in nights:
        rows.append(_duty_point(build, out / f"night{night}", dilation, slot_us, night, 0, rate, duration, target))
        say(f"[experiment] duty cycle: night {night} us -> received {rows[-1]['fraction']:.3f} "
             f"(predicted {rows[-1]['predicted']:.3f})")
    grows = []
    night = nights[0]
    for guard in guards:
        grows.append(_duty_point(build, out / f"guard{guard}", dilation, slot_us, night, guard, rate, duration, target))
        say(f"[experiment] duty cycle: guard {guard} us -> efficiency {grows[-1]['efficiency']:.3f} "
             f"(predicted {grows[-1]['predicted_efficiency']:.3f})")
    res = {"dilation": dilation, "slot_us": slot_us, "rate_pps": rate, "duration_s": duration,
           "nights": rows, "guards": grows}
    plt = pyplot()
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
    save(fig, out / "duty_cycle.png", dpi=110)
    (out / "duty_cycle.json").write_text(json.dumps(res))
    err = max(abs(r["fraction"] - r["predicted"]) for r in rows)
    gerr = max((abs(g["efficiency"] - g["predicted_efficiency"]) for g in grows), default=0)
    res["verdict"] = (f"duty cycle: worst |measured - (slot-night)/slot| = {err:.3f}, worst efficiency error "
                      f"{gerr:.3f} -> {'PASS' if err < 0.05 and gerr < 0.05 else 'FAIL'}")
    return res


def _duty_point(build, out, dilation, slot_us, night_us, guard_us, rate, duration, target="bmv2") -> dict:
    sched = S.from_json({"version": 1, "racks": 2, "slot_us": slot_us, "reconfig_us": night_us,
                         "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0]]}]})
    emu, topo = launch(sched, dilation, 1, build, out / "run", target=target)
    try:
        dst = topo.racks[1].hosts[0].ip
        ds = S.dilate(sched, dilation)

        def plan(i, h):
            if i != 0:
                return None
            gate = None
            if guard_us:
                windows = S.direct_windows(ds, 0, 1, guard_us=guard_us * dilation)
                gate = {"t0_ns": emu.t0_ns, "period_ns": ds.hyperperiod_us * 1000,
                        "open": {dst: [[int(a * 1000), int(b * 1000)] for a, b in windows]}}
            return {"dsts": [dst], "rate": rate, "dscp": dp.DSCP_DIRECT_ONLY, "gate": gate}

        logs = run_probes(emu, topo, plan, duration, out)
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
