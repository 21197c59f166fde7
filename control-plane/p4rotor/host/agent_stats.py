"""What a host agent (host/agent.py) reports rather than does: its JSON summary, the progress file
the harness reads while it runs, the pending curve, and the diagnostics that explain a frame that
missed its window -- how late the agent's loop woke, the garbage collector's pauses, the most
circuit windows open at once, and the kernel's UDP drops the agent's own counters cannot see."""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import time
from pathlib import Path
from typing import Callable


class LoopStalls:
    """How late the agent's loop woke, from a periodic task: stalls of ``STALL_MS`` or more
    counted, the worst kept with when it ended (wall ns)."""

    STALL_MS = 50

    def __init__(self):
        self.samples = self.over = 0
        self.worst_ns = self.worst_at_ns = 0

    def add(self, late_ns: int, now_ns: int) -> None:
        self.samples += 1
        if late_ns >= self.STALL_MS * 1_000_000:
            self.over += 1
        if late_ns > self.worst_ns:
            self.worst_ns, self.worst_at_ns = late_ns, now_ns

    def summary(self) -> dict:
        return {"samples": self.samples, f"over_{self.STALL_MS}ms": self.over,
                "worst_ms": round(self.worst_ns / 1e6, 3), "worst_at_ns": self.worst_at_ns}


class GcPauses:
    """The garbage collector's pauses in this process, per generation: collections, total and
    longest (``gc.callbacks``; :meth:`start` hooks it, :meth:`stop` unhooks)."""

    def __init__(self):
        self.n = collections.Counter()
        self.total_ns = collections.Counter()
        self.worst_ns = collections.Counter()
        self._t = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter_ns()
            return
        g, d = info["generation"], time.perf_counter_ns() - self._t
        self.n[g] += 1
        self.total_ns[g] += d
        self.worst_ns[g] = max(self.worst_ns[g], d)

    def start(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def stop(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def summary(self) -> dict:
        return {str(g): {"collections": self.n[g], "total_ms": round(self.total_ns[g] / 1e6, 3),
                         "worst_ms": round(self.worst_ns[g] / 1e6, 3)} for g in sorted(self.n)}


class Diagnostics:
    """The frames held once a slot (the stability curve of an FCT run), how long the loop could
    not run (a sample of that curve woke late), the collector's pauses, and the most circuit
    windows open at once."""

    def __init__(self):
        self.pending: list[tuple[int, int, int]] = []  # (ns, local frames, relayed frames held)
        self.stalls = LoopStalls()
        self.gc = GcPauses()
        self.windows_open_max = 0

    def windows_open(self, n: int) -> None:
        self.windows_open_max = max(self.windows_open_max, n)

    async def sample_pending(self, period_ns: int, held: Callable[[], tuple[int, int]]) -> None:
        """``held()`` (local, relayed frames) every ``period_ns``; how late each sample woke is
        how long the loop could not run."""
        due = None
        while True:
            now = time.time_ns()
            if due is not None:
                self.stalls.add(now - due, now)
            self.pending.append((now, *held()))
            due = now + period_ns
            await asyncio.sleep(period_ns / 1e9)

    def summary(self) -> dict:
        return {"loop_stalls": self.stalls.summary(), "gc": self.gc.summary(),
                "windows_open_max": self.windows_open_max, "pending": self.pending}


def udp_counter(name: str) -> int | None:
    """A UDP counter of this host's kernel (per network namespace): RcvbufErrors (dropped for a full
    receive buffer), NoPorts (arrived where nothing listened) -- losses the agent's own counters
    cannot see."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Udp:")]
        return int(lines[1][lines[0].index(name)])
    except (OSError, ValueError, IndexError):
        return None


def summary(agent) -> dict:
    """The agent's JSON summary (``--out``): what it accepted, sent, delivered, still holds, the
    relay delays in slots, per-flow accounts, and the diagnostics."""
    rx = agent.rx
    return {"rack": agent.me, "capacity_frames": agent.capacity, "frame_bytes": agent.frame,
            "claimed_frames": agent.claimed if agent.share is not None else None,
            "share_moves": dict(agent.share_moves),
            # idle claims answered without the rack's file (host/share.py: Claimer)
            "claims_skipped": getattr(agent.share, "skipped", None),
            "accepted": {str(k): v for k, v in agent.accepted.items()},
            "delivered": {str(k): v for k, v in rx.delivered.items()},
            "delivered_in_window": {str(k): v for k, v in rx.in_window.items()},
            "duplicates": rx.duplicates, "sent": dict(agent.sent),
            "held_local": sum(len(q) for q in agent.local.values()),
            "held_relay": {str(d): len(q) for d, q in agent.relay.items() if q},
            "held_relay_by_origin": dict(collections.Counter(str(o) for q in agent.relay.values()
                                                             for o, _, _, _, _ in q)),
            "relay_delay_slots": {str(k): v for k, v in sorted(rx.relay_delay.items())},
            "missed": dict(agent.missed), "quiet_offers": agent.quiet,
            "udp_rcvbuf_errors": udp_counter("RcvbufErrors"), "udp_no_ports": udp_counter("NoPorts"),
            "flows_rx": {f"{o}:{fl}": v for (o, fl), v in rx.flow_rx.items()},
            "flows_rx_via": {f"{o}:{fl}": v for (o, fl), v in rx.flow_via.items()},
            "flows_tx": {str(fl): v for fl, v in agent.flow_tx.items()},
            "retransmitted": agent.resend.resent, "unacknowledged": len(agent.resend.inflight),
            "priority": agent.priority.summary(),
            "snapshots": agent.phases.snapshots, **agent.diag.summary()}


def progress(flow_rx: dict[tuple[int, int], list[int]]) -> dict:
    """Frames received per ``"origin:flow"`` and when the last came (``[frames, ns]``, as the
    summary ends with), and when this was written: what the harness has of a flow an agent
    received if it dies before its summary."""
    return {"t_ns": time.time_ns(), "flows_rx": {f"{o}:{fl}": list(v) for (o, fl), v in flow_rx.items()}}


def write_json(path: Path, doc: dict) -> None:
    """``doc`` to ``path``, whole or absent (written aside, renamed): the harness polls for it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


async def publish_progress(path: Path, flow_rx: Callable[[], dict]) -> None:
    """:func:`progress` to ``path`` once a second: the harness ends an FCT run once every flow is
    whole, instead of waiting out its worst-case drain."""
    while True:
        write_json(path, progress(flow_rx()))
        await asyncio.sleep(1.0)
