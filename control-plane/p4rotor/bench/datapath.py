"""The RotorLB agents' two data paths side by side: the Python agent's pacer (host/window.py) and
the compiled rlbd (control-plane/native/rlbd.c, host/datapath.py), each sending one circuit
window of frames at a target rate over UDP on loopback to the same receiver (an rlbd, which
counts what arrives, exactly once).  What one host's agent sustains, how far its frames leave from
their due time, and the CPU each frame costs -- ratios in one run, since absolute times on a
2-core machine are noisy.  The heavy-pair run (``pair_rows``) is the in-process agents' bench
(bench/agents.py) on the compiled path: four agents over loopback, RotorLB vs one-hop."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from ..host import datapath as D
from ..host import loopback
from ..rotorlb import wire
from .kernel import process_cpu_s

RATES_FPS = (10_000, 25_000, 50_000, 100_000, 150_000, 200_000)
PAIR_RATES_FPS = (1000, 4000, 8000, 32_000)
FRAME = 1400     # the agents' default data frame (host/agent_cli.py --frame)
SECONDS = 1.0    # one window this long per rate
SPIN_NS = 60_000  # "a core of its own": awake up to 60 us before every frame


def _receiver(port: int) -> D.DataPath:
    """The rlbd both senders send to (rack 1 at 127.0.2.2), started."""
    rx = D.DataPath(1, 2, FRAME, {0: ("127.0.2.1", port)}, bind="127.0.2.2", port=port, tos=0)
    rx.start()
    return rx


def _pair(port: int, spin_ns: int = 0) -> tuple[D.DataPath, D.DataPath]:
    tx = D.DataPath(0, 2, FRAME, {1: ("127.0.2.2", port)}, bind="127.0.2.1", port=port, tos=0, spin_ns=spin_ns)
    tx.start()
    return tx, _receiver(port)


def compiled_row(rate: int, spin_ns: int = 0, seconds: float = SECONDS, port: int = 9990) -> dict:
    """rlbd sends ``rate`` x ``seconds`` frames in a window of ``seconds``."""
    tx, rx = _pair(port, spin_ns)
    try:
        with tempfile.TemporaryDirectory(prefix="p4rotor-dp-") as d:
            n = int(rate * seconds)
            tx.add_local(1, 1, n)
            cpu0 = process_cpu_s(tx.proc.pid)
            tx.win_open(1, 0, 1, 0, time.time_ns() + int(seconds * 1e9), int(1e9 / rate))
            tx.win_add(1, D.DIRECT, 1, n)
            done: list = []
            tx.on_window_done = lambda *ev: done.append(ev)
            end = time.monotonic() + seconds + 5
            while not done and time.monotonic() < end:
                time.sleep(0.02)
                tx.pump()
            cpu = process_cpu_s(tx.proc.pid) - cpu0
            time.sleep(0.1)
            s, r = tx.stats(Path(d) / "tx.json"), rx.stats(Path(d) / "rx.json")
    finally:
        tx.stop()
        rx.stop()
    sent = s["sent"]["frames"]
    return {"datapath": "c, a core of its own" if spin_ns else "c", "rate_fps": rate, "frames": n, "sent": sent,
            "sent_fps": round(sent / seconds), "delivered": sum(r["delivered"].values()),
            "duplicates": r["duplicates"], "pacing_error_us": s["pacing_error_us"],
            "frame_time_us": round(1e6 / rate, 1), "cpu_us_per_frame": round(cpu * 1e6 / sent, 2) if sent else None,
            "sustains": sent >= 0.99 * n}


def python_row(rate: int, seconds: float = SECONDS, port: int = 9990) -> dict:
    """The Python agent's pacer (host/window.py: pace) sends the same window to an rlbd receiver;
    its lateness is each frame's send time less its due time on the ideal schedule."""
    import socket

    from ..host.gate import Circuit
    from ..host.window import HostLink, Window, pace

    rx = _receiver(port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.2.1", 0))
    try:
        n = int(rate * seconds)
        late: list[int] = []

        async def main():
            start = time.time_ns()
            win = Window(Circuit(0, 0, 1, start, start + int(seconds * 1e9)), start + int(seconds * 1e9))
            win.out = [wire.encode_data(wire.Data(0, 0, 0, 1, i, 1, False, 0, 0), FRAME) for i in range(n)]
            gap = 1e9 / rate
            t0 = time.time_ns()

            def send(buf: bytes, i=[0]) -> None:
                sock.sendto(buf, ("127.0.2.2", port))
                late.append(max(0, time.time_ns() - int(t0 + i[0] * gap)))
                i[0] += 1

            return await pace(win, rate, HostLink(None), send)

        cpu0 = time.process_time()
        sent = asyncio.run(main())
        cpu = time.process_time() - cpu0
        time.sleep(0.1)
        with tempfile.TemporaryDirectory(prefix="p4rotor-dp-") as d:
            r = rx.stats(Path(d) / "rx.json")
    finally:
        sock.close()
        rx.stop()
    late.sort()
    return {"datapath": "python", "rate_fps": rate, "frames": n, "sent": sent, "sent_fps": round(sent / seconds),
            "delivered": sum(r["delivered"].values()), "duplicates": r["duplicates"],
            "lateness_us": {"p50": round(late[len(late) // 2] / 1e3), "p99": round(late[int(len(late) * 0.99)] / 1e3)}
            if late else None,
            "frame_time_us": round(1e6 / rate, 1), "cpu_us_per_frame": round(cpu * 1e6 / sent, 2) if sent else None,
            "sustains": sent >= 0.99 * n}


def pair_rows(rates=PAIR_RATES_FPS) -> list[dict]:
    """bench/agents.py's heavy pair on four racks, agents on the compiled path: the ratio to
    one-hop stays at the model's 3 while the agents keep up."""
    rows = []
    for rate in rates:
        lb, _, kcpu = loopback.run_compiled([(0, 1)], cycles=6, rate=rate, frame=FRAME, slot_us=60_000)
        oh, _, _ = loopback.run_compiled([(0, 1)], one_hop=True, cycles=6, rate=rate, frame=FRAME, slot_us=60_000)
        got_lb, got_oh = lb[1]["delivered_in_window"].get("0", 0), oh[1]["delivered_in_window"].get("0", 0)
        acc = sum(sum(r["accepted"].values()) for r in lb)
        delivered = sum(sum(r["delivered"].values()) for r in lb)
        held = sum(r["held_local"] + sum(r["held_relay"].values()) for r in lb)
        ratio = got_lb / got_oh if got_oh else None
        rows.append({"rate_fps": rate, "frame_bytes": FRAME, "delivered_frames": delivered, "accepted": acc,
                     "held": held, "lost": acc - delivered - held, "rlbd_cpu_s": round(kcpu, 3),
                     "ratio_vs_one_hop": round(ratio, 2) if ratio else None,
                     "keeps_up": bool(ratio and ratio >= 0.9 * 3.0)})
    return rows


def run_datapath(quick: bool = False, say=print) -> dict:
    rates = (10_000, 100_000) if quick else RATES_FPS
    host = []
    for rate in rates:
        for row in (python_row(rate), compiled_row(rate), compiled_row(rate, SPIN_NS)):
            host.append(row)
            err = row.get("pacing_error_us") or row.get("lateness_us") or {}
            say(f"[bench]   {row['datapath']:>22} at {rate:>6} frames/s: sent {row['sent_fps']:>6}/s, "
                f"delivered {row['delivered']}, {row['cpu_us_per_frame']} us CPU/frame, "
                f"late p50/p99 {err.get('p50')}/{err.get('p99')} us (frame time {row['frame_time_us']} us)")
    pairs = pair_rows((1000, 8000) if quick else PAIR_RATES_FPS)
    for r in pairs:
        say(f"[bench]   four compiled agents at {r['rate_fps']} frames/s: ratio {r['ratio_vs_one_hop']} (model 3.0), "
            f"lost {r['lost']}")
    return {"one_host": host, "heavy_pair": pairs, "frame_bytes": FRAME, "window_s": SECONDS}
