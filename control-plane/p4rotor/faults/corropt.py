"""Per-link corruption loss rates as measured in production datacenters ([Zhuo19 §3.2], Table 3.1:
links with corruption, by loss bucket), as a fault plan of ``loss`` faults on the rotor links.

Among links with corruption: 47.23% in [1e-8, 1e-5), 18.43% in [1e-5, 1e-4), 21.66% in
[1e-4, 1e-3), 12.67% at 1e-3 and above (capped here at 1e-1, the worst the issue asks to
measure); the rate is log-uniform inside a bucket.  Corruption is one-way on 91.8% of links
("only 8.2% of the links with packet corruption had bidirectional corruption", §3.2).
"""

from __future__ import annotations

import math
import random

from ..schedule.topology import Topology
from ..control.fault_plan import Fault, FaultPlan, FaultPlanError

BUCKETS = ((1e-8, 1e-5, 0.4723), (1e-5, 1e-4, 0.1843), (1e-4, 1e-3, 0.2166), (1e-3, 1e-1, 0.1267))
BIDIRECTIONAL = 0.082


def draw_rate(rng: random.Random) -> float:
    x = rng.random()
    for lo, hi, p in BUCKETS:
        if x < p:
            return math.exp(rng.uniform(math.log(lo), math.log(hi)))
        x -= p
    lo, hi, _ = BUCKETS[-1]
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def corrupt_links(topo: Topology, fraction: float, seed: int, start_us: int = 0,
                  end_us: int | None = None) -> FaultPlan:
    """``fraction`` of the rotor links (rotor port = one fibre pair) get corruption, each with a
    rate drawn from Table 3.1, one-way (a random direction) or, for 8.2% of them, both ways."""
    if type(seed) is not int:
        raise FaultPlanError(f"--seed must be an integer, got {seed!r}")
    if not 0 < fraction <= 1:
        raise FaultPlanError(f"the lossy fraction must be in (0, 1], got {fraction}")
    rng = random.Random(seed)
    links = [(r.name, p) for r in topo.rotors for p in sorted(r.ports.values())]
    chosen = rng.sample(links, max(1, round(fraction * len(links))))
    faults = []
    for rotor, port in sorted(chosen):
        rate = draw_rate(rng)
        dirs = ("in", "out") if rng.random() < BIDIRECTIONAL else (rng.choice(("in", "out")),)
        for d in dirs:
            faults.append(Fault("loss", start_us, end_us, rotor=rotor, port=port, direction=d, rate=rate))
    return FaultPlan(tuple(faults))


def plan_rates(plan, topo) -> dict[tuple[str, int], float]:
    """{(rotor, rack): rate} from a plan's loss faults: the max over each link's faults, whatever
    their direction, matching or time window (the plan read as one measurement)."""
    racks = {r.name: {port: rack for rack, port in r.ports.items()} for r in topo.rotors}
    rates: dict[tuple[str, int], float] = {}
    for f in plan.faults:
        if f.kind == "loss":
            link = (f.rotor, racks[f.rotor][f.port])
            rates[link] = max(rates.get(link, 0.0), f.rate)
    return rates
