"""Low latency: Opera multi-hop latency across reconfigurations ([McGuinness21 §2.6])."""

from __future__ import annotations

import json
from pathlib import Path

from .. import p4 as dp
from .. import schedule as S
from ..stats import summarize
from ..plotting import pyplot, save
from .runner import check_fabric, launch, run_probes


def low_latency(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 100.0,
                epsilon_us: float | None = None, duration: float = 6.0, rate: float = 100.0,
                fabric: str = "multi-switch", target: str = "bmv2") -> dict:
    """Latency CDF of low-latency (DSCP 46) probes across many reconfigurations; count losses.
    ``fabric``: multi-switch, or one-switch (docs/one-switch.md)."""
    sched = sched or S.generate_opera(8, 4, 1000, 100)
    check_fabric(fabric)
    out.mkdir(parents=True, exist_ok=True)
    slice_us = min(x.end_us - x.start_us for x in sched.slices())
    eps = slice_us * 0.5 if epsilon_us is None else epsilon_us
    emu, topo = launch(sched, dilation, 1, build, out / "run", epsilon_us=eps, one_switch=fabric == "one-switch",
                       target=target)
    ips = [k.hosts[0].ip for k in topo.racks]
    try:
        logs = run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                    "dscp": dp.DSCP_LOW_LATENCY}, duration, out)
    finally:
        emu.stop()
    sent = sum(len(logs[f"{k.hosts[0].name}.tx"]) for k in topo.racks)
    lat = [(r["rx"] - r["tx"]) / 1000 / dilation for k in topo.racks for r in logs[f"{k.hosts[0].name}.rx"]]
    lost = sent - len(lat)
    reconfigs = int(duration * 1e6 / dilation / sched.slot_us * len(sched.rotors))
    res = {"schedule": sched.to_json(), "dilation": dilation, "fabric": fabric, "epsilon_us": eps, "sent": sent,
           "received": len(lat), "lost": lost, "reconfigurations": reconfigs,
           "latency_emulated_us": summarize(lat)}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    s = sorted(lat)
    ax.plot(s, [(i + 1) / len(s) for i in range(len(s))] if s else [])
    ax.set_xlabel("one-way latency (emulated us)")
    ax.set_ylabel("CDF")
    ax.set_title(f"low-latency probes: {len(lat)} delivered, {lost} lost, {reconfigs} reconfigurations")
    fig.tight_layout()
    save(fig, out / "low_latency.png", dpi=110)
    (out / "low_latency.json").write_text(json.dumps(res))
    res["verdict"] = (f"low latency: {lost} of {sent} probes lost across {reconfigs} reconfigurations (goal 0), "
                      f"p50/p99 {res['latency_emulated_us'].get('p50', float('nan')):.1f}/"
                      f"{res['latency_emulated_us'].get('p99', float('nan')):.1f} emulated us "
                      f"-> {'PASS' if lost == 0 else 'FAIL'}")
    return res
