"""An unmodified application on the whole fabric, BMv2 vs eBPF side by side: iperf3 and ping
between two racks of ``make run``'s default fabric (Opera, 8 racks x 2 hosts, 4 rotors, 1 ms
slots, dilation 100), in the low-latency class (``-S 0xb8``: DSCP 46, Opera's multi-hop expander
paths) and the bulk class (no DSCP: direct or 2-hop paths only).

Rates are wall-clock goodput at the receiver (iperf3's ``sum_received``); each target launches its
own fabric, one after the other, in the same bench run.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from .. import schedule as S
from ..fabric.mininet import Emulation, leftovers
from ..schedule import topology as TP

SRC, DST, DST_IP = "h0x0", "h5x1", "10.0.5.2"
CLASSES = {"low-latency": "-S 0xb8", "bulk": ""}


def _server(emu: Emulation, timeout: float = 10.0) -> None:
    """iperf3's server on the destination host, polled until it listens."""
    h = emu.host(DST)
    h.cmd("iperf3 -s -D >/dev/null 2>&1")
    deadline = time.monotonic() + timeout
    while "5201" not in h.cmd("ss -Hltn sport = :5201") and time.monotonic() < deadline:
        time.sleep(0.1)


def _iperf(emu: Emulation, seconds: float, tos: str) -> dict:
    out = emu.host(SRC).cmd(f"iperf3 -c {DST_IP} -t {seconds:g} {tos} -J")
    try:
        d = json.loads(out[out.index("{"):])
        end = d["end"]
        iv = [i["sum"]["bits_per_second"] / 1e9 for i in d["intervals"]]
        return {"gbps": round(end["sum_received"]["bits_per_second"] / 1e9, 3),
                "retransmits": end["sum_sent"].get("retransmits"),
                "min_interval_gbps": round(min(iv), 3) if iv else None, "seconds": seconds}
    except (ValueError, KeyError) as ex:
        return {"error": f"iperf3: {ex}: {out.strip()[-200:]}"}


def _ping(emu: Emulation, count: int = 50) -> dict:
    out = emu.host(SRC).cmd(f"ping -n -q -i 0.02 -c {count} -Q 0xb8 {DST_IP}")
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", out)
    got = re.search(r"(\d+) received", out)
    return {"received": int(got.group(1)) if got else 0, "sent": count,
            **({"rtt_min_ms": float(m.group(1)), "rtt_avg_ms": float(m.group(2))} if m else {})}


def run_fabric_tcp(build: Path, out: Path, targets=("bmv2", "ebpf"), seconds: float = 10.0,
                   dilation: float = 100.0, say=print) -> list[dict]:
    rows = []
    sched = S.generate_opera(8, 4, 1000, 100)
    for target in targets:
        topo = TP.generate(S.dilate(sched, dilation), "schedule.json", hosts_per_rack=2)
        emu = Emulation(topo, build, out / f"fabric-tcp-{target}", mode="clock", epsilon_us=50.0 * dilation,
                        target=target, say=lambda m: None, controller_args=("--quiet",))
        row: dict = {"target": target, "dilation": dilation, "fabric": "opera 8x4, 2 hosts per rack"}
        t = time.monotonic()
        try:
            emu.start(timeout=240)
            row["launch_s"] = round(time.monotonic() - t, 1)
            row["ping_low_latency"] = _ping(emu)
            _server(emu)
            for cls, tos in CLASSES.items():
                row[cls] = _iperf(emu, seconds, tos)
                say(f"[bench]   {target} {cls}: {row[cls]}")
        except Exception as ex:  # noqa: BLE001 -- a failed target is a result, the other still runs
            row["error"] = str(ex)[:300]
            say(f"[bench]   {target}: error: {row['error']}")
        finally:
            emu.stop()
            row["left_behind"] = leftovers(topo, target)
        rows.append(row)
    return rows
