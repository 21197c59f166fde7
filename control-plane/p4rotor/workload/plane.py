"""The FCT experiment's fabric as numbers, for the RotorLB model: the default Opera schedule, the
agents' frames, rate and guard, the hosts' access rate; the model's plane of it, its stability
judge, a bulk flow alone in the model and a rack pair's share of the uplinks.

Pure: the experiment (``experiments/fct``) runs the fabric with these numbers, and the offline
judges (``judge.py``) take them again from a finished run's ``fct.json``.
"""

from __future__ import annotations

from .. import schedule as S
from ..schedule import topology as TP
from ..rotorlb.wire import DATA_HEADER as AGENT_HEADER
from ..rotorlb.wire import UDP_OVERHEAD, WINDOW_SLACK
from . import stability as ST

FRAME = 1400                      # agent frame (UDP payload), as the RotorLB experiment
HEADROOM = 1.25  # a host's access rate over its agents' rate: room for the low-latency class
WIRE_FRAME = FRAME + UDP_OVERHEAD  # an agent frame's bytes on the wire


def access_bps(rotors: int, rate: float) -> float:
    """A host's access rate: its agents' frames at ``rate`` a second on each of ``rotors``
    circuits, on the wire, with ``HEADROOM`` for the low-latency class."""
    return HEADROOM * rotors * rate * WIRE_FRAME * 8


def stability_plane(dilation: float, hosts_per_rack: int, rate: float = 100.0,
                    guard_us: float = 10000.0) -> tuple[S.Schedule, ST.Plane]:
    """The experiment's fabric as the RotorLB model sees it (workload/stability.py): the default
    Opera schedule; the agents of the n-th host of each rack are plane n; a slot unit is the
    frames one agent window carries (``agent_duty``)."""
    sched = S.generate_opera(8, 4, 1000, 100)
    ds = S.dilate(sched, dilation)
    topo = TP.generate(ds, "schedule.json", hosts_per_rack=hosts_per_rack)
    where = {h.name: (k.id, n) for k in topo.racks for n, h in enumerate(k.hosts)}
    frames = max(1, int(rate * (ds.day_us - 2 * guard_us) / 1e6 * (1 - WINDOW_SLACK)))
    return sched, ST.Plane(where=where, payload=FRAME - AGENT_HEADER, frames_per_unit=frames,
                           slot_s=ds.slot_us / 1e6)


def stability_judge(sched: S.Schedule, dilation: float, hosts_per_rack: int, rate: float, guard_us: float,
                    shared: bool = False):
    """``judge(flows, cutoff, pending, arrivals_s)``: a mode's stability (workload/stability.py).
    The slack on the model's queue: one cycle of every agent's every circuit (frames the agents'
    protocol holds a slot or two longer than the model: offers, a relay's second hop).
    ``shared``: the racks' hosts share their circuits (the model's plane is the rack's)."""
    s, plane = stability_plane(dilation, hosts_per_rack, rate, guard_us)
    from ..rotorlb.model import cycle_slots

    slack = hosts_per_rack * s.racks * len(s.rotors) * cycle_slots(s) * plane.unit_bytes
    plane = plane.rack_shared() if shared else plane

    def judge(flows, cutoff: float, pending, arrivals_s: float) -> dict:
        return ST.judge(pending, s, flows, cutoff, plane, arrivals_s, slack)

    return judge


def agent_duty(ds: S.Schedule, rate: float, guard_us: float) -> float:
    """The share of a slot an agent sends in: the whole frames one window carries (the day less
    the guard at both ends, less the agent's WINDOW_SLACK: host/agent.py's capacity) at ``rate``,
    over the slot's time at that rate.  At the defaults 5 frames of a 100 ms slot at 100/s: 0.5,
    where the day less the guards alone would say 0.7."""
    window_s = (ds.day_us - 2 * guard_us) / 1e6
    return max(0, int(rate * window_s * (1 - WINDOW_SLACK))) / (rate * ds.slot_us / 1e6)


def rotorlb_alone(sched: S.Schedule, plane: ST.Plane, hosts_per_rack: int):
    """``alone(flow) -> (s, s, s)``: a bulk flow's FCT alone in RotorLB's model (rotorlb/model.py:
    ``alone_slots``, the mean over a cycle's slots it can arrive in), in wall seconds: as the
    agents run the fabric (one plane per host: a circuit carries one unit, the flow is queued at
    once), and with the rack's circuits shared by its hosts (a circuit carries ``hosts_per_rack``
    units; the host's link feeds the rack's queue at its bulk rate, one unit per rotor a slot:
    docs/notes/bulk-bound.md); third, the issue's bound on the agents' own frames
    (their header counted: a unit per rotor a slot, plus matchings + 1 slots).  Memoised per
    (rack pair, frames)."""
    from ..rotorlb.model import alone_slots

    k = len(sched.rotors)
    wait = len(sched.rotors[0].matchings) + 1
    memo: dict[tuple[int, int, int], tuple[float, float, float]] = {}

    def alone(flow) -> tuple[float, float, float]:
        key = (plane.where[flow.src][0], plane.where[flow.dst][0], plane.frames(flow.size))
        if key not in memo:
            sr, dr, frames = key
            units = frames / plane.frames_per_unit
            memo[key] = (alone_slots(sched, sr, dr, units) * plane.slot_s,
                         alone_slots(sched, sr, dr, units, capacity=hosts_per_rack, feed=k) * plane.slot_s,
                         (units / k + wait) * plane.slot_s)
        return memo[key]

    return alone


def pair_shares(sched: S.Schedule, flows, rack: dict[str, int]) -> dict[int, float]:
    """Per flow: the share of the K uplinks RotorLB's model delivers for its rack pair alone and
    saturated (rotorlb/model.py; [McGuinness21 §2.5.4]).  ``rack``: host name -> rack."""
    from ..rotorlb.model import evaluate

    k = len(sched.rotors)
    cap: dict[tuple[int, int], float] = {}
    out = {}
    for f in flows:
        pair = (rack[f.src], rack[f.dst])
        if pair not in cap:
            cap[pair] = float(evaluate(sched, [pair]).rotorlb.delivered_per_slot) / k
        out[f.id] = min(1.0, cap[pair])
    return out
