"""The fct experiment's choices, checked before any switch starts: which modes, circuits shared
or a plane per host, switches kept warm, switches on their own CPUs, a replayed flow list.
A bad one is a WorkloadError (one line, exit 2).
"""

from __future__ import annotations

import math
from pathlib import Path

from ...workload import cdf as C
from ...workload import flowlist


MODES = {"opera": None, "rotornet": 0}  # a fabric mode's cutoff: None = --cutoff or its default
ALL_MODES = (*MODES, "packet-switch")


def parse_modes(text: str | None) -> tuple[str, ...]:
    """``--modes opera,packet-switch``: the runs to make, each once (one-line error otherwise)."""
    if text is None:
        return ALL_MODES
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    for m in modes:
        if m not in ALL_MODES:
            raise C.WorkloadError(f"--modes: unknown mode {m!r} (one or more of {', '.join(ALL_MODES)})")
    if not modes or len(set(modes)) != len(modes):
        raise C.WorkloadError(f"--modes {text!r}: name each of {', '.join(ALL_MODES)} at most once, at least one")
    return modes


# Low-latency routes keep off a rotor this long (schedule us) before its night: 15 ms wall at
# dilation 100, what a frame may take through BMv2's queues on 2 cores before its circuit goes
# dark (at 50 us, 3-7 of 1 608 low-latency flows per 2000-flow run lost a frame: rotor NIGHT, ToR
# STALE; at 100, with the switches' clocks synchronised through their clock ports, 1).  At the
# default 8 x 4 any epsilon up to 150 gives the same paths (1.625 hops on average over the
# hyperperiod, diameter 2-3, never fewer than 3 live rotors); 175 leaves a slice disconnected.
EPSILON_US = 150.0


# --warm-switches auto warms at or below this load.  Measured side by side (docs/notes/cold-switches.md): Data Mining 1 %, first 400 flows: low-latency mean slowdown 2.04 -> 1.90, bulk
# unchanged; Web Search 10 %: short flows 1.94 -> 1.85 but bulk 16-24 % slower.
WARM_MAX_LOAD = 0.05


# --share-circuits auto shares at or below this load.  Measured (docs/notes/bulk-bound.md): Web Search 1 %, every bulk flow alone in the fabric
# within issue #14's bound shared (236 of 236; a plane per host 33 of 146), bulk FCT median 0.63x
# the bound against 1.09x; Web Search 5 %, side by side: bulk FCT median the same (2.27 / 2.25 s),
# mean 6 % longer shared, 150 agent frames resent against 11; at 10 % the shared agents fall
# behind RotorLB (docs/rotorlb.md, "Hosts sharing their rack's circuits").
SHARE_MAX_LOAD = 0.01


def share_choice(choice: str | bool | None, load: float | None) -> bool:
    """``--share-circuits``: "on"/True, "off"/False, or "auto" (or None) -> on at a known ``load``
    of at most SHARE_MAX_LOAD.  A WorkloadError (exit 2) names a bad one."""
    if isinstance(choice, bool):
        return choice
    if choice is None or choice == "auto":
        return load is not None and load <= SHARE_MAX_LOAD
    if choice in ("on", "off"):
        return choice == "on"
    raise C.WorkloadError(f"--share-circuits {choice!r}: must be 'on', 'off' or 'auto'")


def warm_choice(text: str | None, load: float | None) -> float | None:
    """``--warm-switches``: "off" -> None, "on" -> the warmer's default period, "auto" (or None)
    -> "on" at a known ``load`` of at most WARM_MAX_LOAD, else "off"; or a period in ms
    (fabric/warm.py: 0.1-1000).  A WorkloadError (exit 2) names a bad one."""
    from ...fabric.warm import DEFAULT_PERIOD_MS, WarmError, check_period

    if text is None or text == "auto":
        text = "on" if load is not None and load <= WARM_MAX_LOAD else "off"
    if text == "off":
        return None
    if text == "on":
        return DEFAULT_PERIOD_MS
    try:
        return check_period(text)
    except WarmError as ex:
        raise C.WorkloadError(f"--warm-switches: {ex} (or 'auto', 'on', 'off')") from None


def switch_cpu_choice(text: str | None) -> str | None:
    """``--switch-cpus``: "auto" -> the upper half of this machine's CPUs (None on one CPU),
    "none" (or None) -> None (anywhere), else a checked CPU list; a WorkloadError (exit 2) names
    a bad one."""
    from ...fabric.cpu import cpu_list, default_switch_cpus

    if text == "auto":
        return default_switch_cpus()
    if text is None or text == "none":
        return None
    try:
        return cpu_list(text)
    except ValueError as ex:
        raise C.WorkloadError(f"--switch-cpus: {ex}") from None


def replayed(path: str, hosts, factor: float, zipf: float | None = None):
    """The flow list in ``path`` as this run's workload: every flow between two hosts of this
    fabric in different racks (one-line error otherwise).  Sizes are taken as they are (emulated
    bytes); a list scaled for another access rate or dilation (its meta says) is refused, since
    its size buckets would not be the real system's.  Its hot spot (meta.zipf) goes with it; a
    ``zipf`` given beside it must be the one the list records (a list without one is refused:
    --zipf would label flows it did not draw)."""
    from ...workload.generate import Workload

    fl, meta = flowlist.read(path)
    rack = {h.name: h.rack for h in hosts}
    for f in fl:
        for end in (f.src, f.dst):
            if end not in rack:
                raise C.WorkloadError(f"{path}: flow {f.id}: host {end!r} is not in this fabric "
                                      f"({', '.join(sorted(rack))})")
        if rack[f.src] == rack[f.dst]:
            raise C.WorkloadError(f"{path}: flow {f.id}: {f.src} and {f.dst} are in the same rack (inter-rack flows only)")
    theirs = (meta.get("scaling") or {}).get("factor")
    if theirs is not None and not math.isclose(theirs, factor, rel_tol=1e-6):
        raise C.WorkloadError(f"{path}: sizes scaled by {theirs:g}, this run scales by {factor:g} "
                              "(another access rate or dilation): its size buckets would be wrong")
    theirs_zipf = meta.get("zipf")
    if zipf is not None and (theirs_zipf is None or not math.isclose(theirs_zipf, zipf, rel_tol=1e-9)):
        raise C.WorkloadError(f"--zipf {zipf:g} with --flow-list {path}: the list records "
                              + ("no hot spot (uniform destinations, or a CSV's unknown ones)" if theirs_zipf is None
                                 else f"Zipf {theirs_zipf:g}") + "; drop --zipf (the list's own is kept)")
    meta = dict(meta, replayed_from=str(path))
    meta.setdefault("zipf", None)
    meta.setdefault("workload", Path(path).name)
    meta.setdefault("load", None)
    return Workload(fl, meta)
