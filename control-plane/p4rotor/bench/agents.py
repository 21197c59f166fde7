"""RotorLB agents' rates and overheads (issue #13: "agent CPU per relayed MB, pps at which the
agents keep up"), measured on the in-process fabric (host/loopback.py): the agents' own logic
without the kernel and BMv2, so the numbers bound what the agents cost, not the fabric.

One heavy pair on 4 racks (RotorNet, 3 matchings): RotorLB carries it over its direct slot and
two relays, 3x the one-hop throughput in the model ([McGuinness21 §2.5], Figure 2.10: N_R - 1).  At
each per-agent pacing rate, RotorLB and one-hop run side by side; the agents keep up while the
ratio stays at the model's 3x (their CPU holds every slot) -- the ratio, not an absolute time,
is what survives this noisy 2-core machine."""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import time
from pathlib import Path

from ..host import loopback

MODEL_RATIO = 3.0   # 4 racks, one rotor: direct + 2 relays
RATES_FPS = (1000, 2000, 4000, 8000)


def run_agents(rates=RATES_FPS, frame: int = 1000, cycles: int = 6, slot_us: int = 60_000) -> list[dict]:
    rows = []
    for rate in rates:
        lb, _, cpu = loopback.run_fabric([(0, 1)], cycles=cycles, slot_us=slot_us, rate=rate, frame=frame,
                                         drain_cycles=2)
        oh, _, _ = loopback.run_fabric([(0, 1)], one_hop=True, cycles=cycles, slot_us=slot_us, rate=rate,
                                       frame=frame, drain_cycles=2)
        got_lb = lb[1]["delivered_in_window"].get("0", 0)
        got_oh = oh[1]["delivered_in_window"].get("0", 0)
        relayed = sum(r["sent"].get("relay_first", 0) + r["sent"].get("relay_second", 0) for r in lb)
        delivered = sum(sum(r["delivered"].values()) for r in lb)
        mb = delivered * frame / 1e6
        ratio = got_lb / got_oh if got_oh else None
        rows.append({
            "rate_fps": rate, "frame_bytes": frame, "delivered_frames": delivered,
            "relayed_frames": relayed, "cpu_s": round(cpu, 3),
            "cpu_ms_per_mb": round(cpu * 1e3 / mb, 1) if mb else None,
            "cpu_ms_per_relayed_mb": round(cpu * 1e3 / (relayed * frame / 1e6), 1) if relayed else None,
            "ratio_vs_one_hop": round(ratio, 2) if ratio else None,
            "keeps_up": bool(ratio and ratio >= 0.9 * MODEL_RATIO),
            "missed": sum(sum(r["missed"].values()) for r in lb),
        })
    return rows


# -- the rack's claims file: on the disk or on tmpfs ------------------------------------------------
# Sixteen agents claim their share of each window 40 times a second (host/share.py).  Where their
# racks' files live decides how long a claim can take (fabric/agents.py: LIVE_ROOT): on ext4 each
# rewrite of a file truncated to nothing starts its write-back and can wait on the journal.
CLAIM_AGENTS, CLAIM_PER_S, CLAIM_SLOW_MS = 16, 40, 20


def fs_type(path: Path) -> str:
    """The file system ``path`` is on (the longest mount point above it in /proc/self/mounts)."""
    path, best, kind = str(Path(path).resolve()), "", "?"
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in lines:
        f = line.split()
        if len(f) >= 3 and (path == f[1] or path.startswith(f[1].rstrip("/") + "/")) and len(f[1]) >= len(best):
            best, kind = f[1], f[2]
    return kind


def _claim_loop(path: str, member: int, seconds: float, per_s: int, q, kind: str = "file") -> None:
    from ..host.share import FileShare, ShmShare
    share = (ShmShare if kind == "shm" else FileShare)(Path(path), 10).member(member % 2)
    lat, i = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic_ns()
        share.claim((0, i), 1 + i % 3)  # busy: every claim goes through the file
        lat.append(time.monotonic_ns() - t)
        i += 1
        time.sleep(1 / per_s)
    q.put(lat)


def run_claims(places: dict[str, Path], agents: int = CLAIM_AGENTS, per_s: int = CLAIM_PER_S,
               seconds: float = 20.0, shm: Path | None = None) -> list[dict]:
    """``agents`` processes, two per rack file, each claiming ``per_s`` times a second for
    ``seconds``, in a fresh directory under each of ``places`` in turn (the JSON file rewritten
    per claim), then with the claims in shared memory under ``shm`` (host/share.py: ShmShare, what
    the agents use): how long a claim took."""
    ctx = multiprocessing.get_context("fork")
    rows = []
    runs = [(label, root, "file") for label, root in places.items()]
    if shm is not None:
        runs.append((f"{shm} (shared memory, what the agents use)", shm, "shm"))
    for label, root, kind in runs:
        d = Path(tempfile.mkdtemp(prefix="p4rotor-claims-", dir=root))
        try:
            q = ctx.Queue()
            ps = [ctx.Process(target=_claim_loop, args=(str(d / f"share-rack{k // 2}.{'shm' if kind == 'shm' else 'json'}"),
                                                        k, seconds, per_s, q, kind))
                  for k in range(agents)]
            for p in ps:
                p.start()
            lat = sorted(x for _ in ps for x in q.get(timeout=seconds + 60))
            for p in ps:
                p.join(10)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        rows.append({"where": label, "kind": kind, "fs": fs_type(root), "agents": agents, "claims_per_s": per_s,
                     "claims": len(lat), "median_us": round(lat[len(lat) // 2] / 1e3, 1),
                     "p99_us": round(lat[int(len(lat) * 0.99)] / 1e3, 1), "worst_ms": round(lat[-1] / 1e6, 2),
                     f"over_{CLAIM_SLOW_MS}ms": sum(1 for x in lat if x > CLAIM_SLOW_MS * 1e6)})
    return rows
