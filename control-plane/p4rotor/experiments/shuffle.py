"""Shuffle: all-to-all transfer time with TDMA host gating vs the prediction ([TDMA12])."""

from __future__ import annotations

import json
from pathlib import Path

from .. import p4 as dp
from .. import schedule as S
from ..plotting import pyplot, save
from .runner import launch, run_probes, say


def shuffle(build: Path, out: Path, sched: S.Schedule | None = None, dilation: float = 100.0,
            guards: tuple[int, ...] = (0, 100, 300), count: int = 600, rate: float = 500.0,
            target: str = "bmv2") -> dict:
    """All-to-all shuffle with TDMA host gating ([TDMA12]): each host sends ``count`` frames to
    every other rack, to each only while its direct circuit is live and more than a guard time
    from its end.  Transfer time vs the ideal x slot / (slot - night - guard)."""
    sched = sched or S.generate_rotornet(4, 1, 2000, 200)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for g in guards:
        rows.append(_shuffle_point(build, out / f"guard{g}", sched, dilation, g, count, rate, target))
        r = rows[-1]
        say(f"[experiment] shuffle: guard {g} us -> {r['transfer_s']:.3f} s emulated-scaled, predicted "
             f"{r['predicted_s']:.3f} s (ideal {r['ideal_s']:.3f} s), delivered {r['delivered']}/{r['expected']}")
    res = {"schedule": sched.to_json(), "dilation": dilation, "count": count, "rate_pps": rate, "rows": rows}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["guard_us"] for r in rows], [r["transfer_s"] for r in rows], "o-", label="measured")
    ax.plot([r["guard_us"] for r in rows], [r["predicted_s"] for r in rows], "k--",
            label="ideal x slot / (slot - night - guard)")
    ax.set_xlabel("host guard time (emulated us)")
    ax.set_ylabel("all-to-all transfer time (wall s)")
    ax.legend()
    ax.set_title(f"shuffle: {sched.racks} racks, {count} frames to each rack")
    fig.tight_layout()
    save(fig, out / "shuffle.png", dpi=110)
    (out / "shuffle.json").write_text(json.dumps(res))
    err = max(abs(r["transfer_s"] / r["predicted_s"] - 1) for r in rows)
    res["verdict"] = (f"shuffle: worst |measured / predicted - 1| = {err:.3f} over guards "
                      f"{', '.join(str(r['guard_us']) for r in rows)} us -> {'PASS' if err < 0.1 else 'FAIL'}")
    return res


def _shuffle_point(build, out, sched, dilation, guard_us, count, rate, target="bmv2") -> dict:
    ds = S.dilate(sched, dilation)
    emu, topo = launch(sched, dilation, 1, build, out / "run", target=target)
    ips = [k.hosts[0].ip for k in topo.racks]
    cyc = ds.hyperperiod_us * 1000
    try:
        def gate_for(src: int) -> dict:
            # Send to dst only while a direct circuit to it is up and more than the guard from its end.
            windows = {ips[dst]: [[int(a * 1000), int(b * 1000)]
                                  for a, b in S.direct_windows(ds, src, dst, guard_us=guard_us * dilation)]
                       for dst in range(sched.racks) if dst != src}
            return {"t0_ns": emu.t0_ns, "period_ns": cyc, "open": windows}

        ideal = (sched.racks - 1) * count / rate
        predicted = ideal * sched.slot_us / (sched.slot_us - sched.reconfig_us - guard_us)
        duration = predicted * 3 + 2
        logs = run_probes(emu, topo, lambda i, h: {"dsts": [x for x in ips if x != h.ip], "rate": rate,
                                                    "dscp": dp.DSCP_DIRECT_ONLY, "gate": gate_for(i), "count": count},
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
