"""A rotorlb experiment run's per-port per-slot activity, from RotorLB's own plan of it.

``results/rotorlb/rotorlb.json`` records, per traffic matrix, the heavy pairs and the frames the
agents delivered, not when each circuit carried them.  But RotorLB decides that per slot, before
the slot, from queue lengths alone ([McGuinness21 §2.5], Algorithm 1: OFFER/ACCEPT): the fluid
model (rotorlb/core.py) run on the same schedule and pairs gives what each direction of each
circuit carries in each slot (``circuit_use``, in slot capacities).  Per matrix, :func:`from_run`
takes the model's slots for the run's measured cycles, one slot capacity as the run's
``capacity_frames``, and scales them so the frames add up to what the run delivered in its
window.  A host link carries everything its rack's uplinks send (its own frames and the second
hops it relays) and everything its rack's rotor ports deliver.  The one-hop baseline rows are
not accounted.  docs/energy.md, "Where the activity comes from".
"""

from __future__ import annotations

import math
from pathlib import Path

from .. import schedule as S
from ..inputs import MALFORMED, check_work, read_json
from ..rotorlb import model as RM
from ..rotorlb.core import FabricState, add_local, run_slot
from ..rotorlb.wire import UDP_OVERHEAD
from .activity import Activity, fabric_ports
from .model import EnergyError

FRAME_BYTES = 1400 + UDP_OVERHEAD   # the agents' data frame (host/agent_cli.py --frame) on the wire
WARMUP_CYCLES = 8         # as the model's own runs (rotorlb/model.py: simulate)
MAX_MODEL_SLOTS = 10 ** 6  # rows x cycles x slots per cycle: the committed sweep needs 30 x 11 x 7


def from_run(run: Path) -> Activity:
    doc = read_json(run / "rotorlb.json", EnergyError)
    try:
        return _reconstruct(doc, str(run))
    except RM.ModelError as ex:
        raise EnergyError(f"{run}/rotorlb.json: {ex}") from None
    except S.ScheduleError as ex:
        raise EnergyError(f"{run}/rotorlb.json: schedule: {ex}") from None
    except MALFORMED as ex:
        raise EnergyError(f"{run}: not a rotorlb run's results ({type(ex).__name__}: {str(ex)[:60]})") from None


def _plan(s: S.Schedule, pairs, cycles: int) -> tuple[list[list[tuple[int, int, int, float, float]]], float]:
    """Per measured slot, (rotor, a, b, units a->b, units b->a) of every circuit; and the units
    delivered in those slots (what the measured frames are scaled to)."""
    H = RM.cycle_slots(s)
    level = float(len(s.rotors) + 1)  # as simulate(): saturated heavy pairs
    state = FabricState.empty(s.racks)
    out, delivered = [], 0.0
    for k in range((WARMUP_CYCLES + cycles) * H):
        circuits, owner = [], []
        for r, rot in enumerate(s.rotors):
            m = rot.matchings[k % len(rot.matchings)]
            for i, j in enumerate(m):
                if j is not None and i < j:
                    circuits.append((i, j))
                    owner.append(r)
        top_up = {(a, b): level - state.racks[a].local.get(b, 0) for a, b in pairs}
        state, rep = run_slot(add_local(state, top_up), circuits)
        if k >= WARMUP_CYCLES * H:
            delivered += rep.delivered()
            out.append([(r, a, b, float(u[0]), float(u[1])) for r, (a, b), u in zip(owner, circuits, rep.circuit_use)])
    return out, delivered


def _reconstruct(doc: dict, where: str) -> Activity:
    s = S.from_json(doc["schedule"])
    RM.check_schedule(s)
    dil, cycles = float(doc["dilation"]), int(doc["cycles"])
    if not (math.isfinite(dil) and dil > 0) or not 1 <= cycles <= 1000:
        raise EnergyError(f"{where}/rotorlb.json: dilation must be > 0 and cycles in 1..1000")
    H = RM.cycle_slots(s)
    rows = doc["rows"]
    check_work(len(rows) * (WARMUP_CYCLES + cycles) * H, MAX_MODEL_SLOTS, f"{where}: the model's slots", EnergyError)
    caps = {float(r["rotorlb"]["capacity_frames"]) for r in rows}
    cap = max(caps) if caps else 1.0
    if not (math.isfinite(cap) and cap > 0):
        raise EnergyError(f"{where}/rotorlb.json: capacity_frames must be > 0")
    day_us = s.slot_us - s.reconfig_us
    circuit_bps = cap * FRAME_BYTES * 8 / (day_us / 1e6)  # a slot capacity fills the day
    rates = {"host-link": circuit_bps * len(s.rotors), "tor-uplink": circuit_bps, "rotor-port": circuit_bps}
    act = Activity(s, 0.0, rates, {}, f"reconstructed from {where} (rotorlb): RotorLB's per-slot plan, "
                   "scaled to the frames delivered")
    hosts = {f"h{r}x0": r for r in range(s.racks)}
    fabric_ports(act, hosts)
    slot0 = 0
    for row in rows:
        pairs = RM.check_matrix(s.racks, row["pairs"])
        fps = float(row["rotorlb"]["throughput_fps"])
        if not (math.isfinite(fps) and fps >= 0):
            raise EnergyError(f"{where}/rotorlb.json: throughput_fps must be >= 0, got {fps!r}")
        plan, units = _plan(s, pairs, cycles)
        frames = fps * cycles * H * s.slot_us * dil / 1e6  # delivered in the measured window
        scale = frames / (units * cap) if units > 0 else 0.0
        for i, circuits in enumerate(plan):
            k = slot0 + i
            for r, a, b, ab, ba in circuits:
                name = s.rotors[r].name
                t = s.rotors[r].offset_us + k * s.slot_us
                for x, y, u in ((a, b, ab), (b, a, ba)):
                    n = u * cap * scale
                    if n <= 0:
                        continue
                    act.port(f"tor{x}~{name}", 0, "tor-uplink", r).add(k, n, n * FRAME_BYTES)
                    act.port(f"tor{y}~{name}", 1, "rotor-port", r).add(k, n, n * FRAME_BYTES)
                    hk = int(t // s.slot_us)
                    act.port(f"h{x}x0~tor{x}", 0, "host-link", None).add(hk, n, n * FRAME_BYTES)
                    act.port(f"h{y}x0~tor{y}", 1, "host-link", None).add(hk, n, n * FRAME_BYTES)
        slot0 += cycles * H
    act.horizon_us = slot0 * s.slot_us + max(r.offset_us for r in s.rotors)
    act.notes = {"matrices": len(rows), "cycles_per_matrix": cycles, "dilation": dil, "mode": "rotorlb",
                 "frame_bytes": FRAME_BYTES, "alone_floor_us": None}
    return act
