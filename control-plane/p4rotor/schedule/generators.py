"""Schedule generators: RotorNet, selector (+1, +2, +4, ...) and Opera (staggered rotors whose slices
are expanders).  Every generator validates its arguments with one-line ``ScheduleError`` s."""

from __future__ import annotations

import math
import random

from .analysis import slice_reference
from .expander import arrange
from .factorisation import random_one_factorisation
from ..inputs import MAX_ROTORS, MAX_SLOT_US, show_value
from .model import MAX_RACKS, Rotor, Schedule, ScheduleError


def round_robin_matchings(n: int) -> list[list[int | None]]:
    """1-factorisation of K_n by the circle method: every pair meets exactly once.

    Even n: n-1 perfect matchings.  Odd n: n matchings, each leaving one rack idle
    (``None``).  Circuits are bidirectional (each matching is an involution).
    """
    if n < 2:
        raise ScheduleError("need at least 2 racks")
    m_count = n - 1 if n % 2 == 0 else n
    nodes = list(range(n)) + ([None] if n % 2 else [])
    size = len(nodes)
    out = []
    for rnd in range(m_count):
        perm: list[int | None] = [None] * n
        rot = [nodes[0]] + nodes[1:][rnd:] + nodes[1:][:rnd]
        for a in range(size // 2):
            x, y = rot[a], rot[size - 1 - a]
            if x is not None and y is not None:
                perm[x] = y
                perm[y] = x
        out.append(perm)
    return out


def _split(matchings: list[list[int | None]], rotors: int, racks: int) -> tuple[list[list[list[int | None]]], int]:
    """Deal matchings round-robin to rotors, padding with idle matchings."""
    per = math.ceil(len(matchings) / rotors)
    pad = per * rotors - len(matchings)
    mats = matchings + [[None] * racks for _ in range(pad)]
    return [mats[j::rotors] for j in range(rotors)], pad


def _check_gen_args(racks: int, rotors: int, slot_us: int, reconfig_us: int) -> None:
    if racks < 2:
        raise ScheduleError(f"--racks must be >= 2, got {racks}")
    if racks > MAX_RACKS:
        raise ScheduleError(f"--racks must be <= {MAX_RACKS}, got {racks}")
    if rotors < 1:
        raise ScheduleError(f"--rotors must be >= 1, got {rotors}")
    if rotors > MAX_ROTORS:
        raise ScheduleError(f"--rotors must be <= {MAX_ROTORS}, got {show_value(rotors)}")
    if slot_us < 1:
        raise ScheduleError(f"--slot-us must be >= 1, got {slot_us}")
    if slot_us > MAX_SLOT_US:
        raise ScheduleError(f"--slot-us must be <= {MAX_SLOT_US}, got {show_value(slot_us)}")
    if not 0 <= reconfig_us < slot_us:
        raise ScheduleError(f"--reconfig-us must be in [0, slot_us={slot_us}), got {reconfig_us}")


def generate_rotornet(racks: int, rotors: int, slot_us: int, reconfig_us: int) -> Schedule:
    _check_gen_args(racks, rotors, slot_us, reconfig_us)
    if rotors > racks - 1 + (racks % 2):
        raise ScheduleError(f"rotornet: {rotors} rotors but only {racks - 1 + racks % 2} matchings for {racks} racks")
    per_rotor, _ = _split(round_robin_matchings(racks), rotors, racks)
    rs = tuple(Rotor(name=f"rotor{j}", offset_us=0, matchings=tuple(tuple(m) for m in per_rotor[j]))
               for j in range(rotors))
    return Schedule(racks=racks, slot_us=slot_us, reconfig_us=reconfig_us, rotors=rs, kind="rotornet")


def selector_matchings(racks: int) -> list[list[int | None]]:
    """Offsets +1, +2, +4, ... below ``racks`` (SelectorNet, [McGuinness21 §2.3.1])."""
    out = []
    off = 1
    while off < racks:
        out.append([(i + off) % racks for i in range(racks)])
        off *= 2
    return out


def generate_selector(racks: int, rotors: int, slot_us: int, reconfig_us: int) -> Schedule:
    _check_gen_args(racks, rotors, slot_us, reconfig_us)
    mats = tuple(tuple(m) for m in selector_matchings(racks))
    rs = tuple(Rotor(name=f"selector{j}", offset_us=0, matchings=mats) for j in range(rotors))
    return Schedule(racks=racks, slot_us=slot_us, reconfig_us=reconfig_us, rotors=rs, kind="selector")


# Search budget for all factorisations together, in expander.arrange's work units (~0.1 us
# each on the development machine, so at most ~2 s); counted, never timed.
OPERA_WORK = 20_000_000


def opera_matchings(racks: int, rng: random.Random) -> list[list[int | None]]:
    """A random 1-factorisation of K_racks; odd racks: of K_(racks+1) minus a phantom rack.

    Odd racks keep the circle method's convention: racks matchings, each leaving one rack
    idle (the one the phantom would have met), every pair meeting exactly once.
    """
    if racks % 2 == 0:
        return random_one_factorisation(racks, rng)
    return [[j if j < racks else None for j in m[:racks]] for m in random_one_factorisation(racks + 1, rng)]


def generate_opera(racks: int, rotors: int, slot_us: int, reconfig_us: int,
                   seed: int = 1, tries: int = 4, work: int = OPERA_WORK) -> Schedule:
    """Opera ([McGuinness21 §2.6.1]): rotors staggered by slot/K so at most one is dark, every slice an expander.

    The matchings are a random 1-factorisation (``factorisation``: every rack pair meets
    directly at least once per cycle), arranged by ``expander.arrange`` so that every slice's
    graph of live circuits is connected with a diameter at most one hop above the median
    random regular graph of the same size and degree (``analysis.slice_reference``), and as many
    slices as the search budget allows at that median.  Where the rotors' cycles have spare
    slots (racks-1 not divisible by K) they repeat a matching instead of idling, so every
    slice has K-1 live matchings.  A fresh factorisation is drawn (up to ``tries``) only while
    some slice misses the +1 limit, all sharing the budget; the best arrangement wins.
    Deterministic for a given ``seed``: the search budget ``work`` is counted, not timed.
    """
    _check_gen_args(racks, rotors, slot_us, reconfig_us)
    if rotors < 2:
        raise ScheduleError("opera needs at least 2 rotors (one reconfigures while the others carry traffic)")
    matchings = racks - 1 + racks % 2
    if rotors > matchings:
        # A rotor beyond the (N-1) matchings of K_N would only repeat another's circuits (issue #15).
        raise ScheduleError(f"opera: {rotors} rotors but only {matchings} matchings for {racks} racks "
                            f"(at most {matchings} rotors)")
    if slot_us % rotors:
        raise ScheduleError(f"opera: slot_us={slot_us} must be a multiple of --rotors={rotors} (slices of slot/K)")
    slice_us = slot_us // rotors
    if reconfig_us > slice_us:
        raise ScheduleError(
            f"opera: reconfig_us={reconfig_us} exceeds the slice slot/K={slice_us}: two rotors would be dark at once")
    # Window lengths that are slices: K-1 while a rotor is dark, K while all are live.
    lengths = ([rotors - 1] if reconfig_us > 0 else []) + ([rotors] if reconfig_us < slice_us else [])
    if min(lengths) == 1 and racks > 2:
        raise ScheduleError(
            f"opera: no assignment of matchings to {rotors} rotors keeps every slice connected for {racks} racks "
            f"(a slice with one live matching never is); use more rotors")
    targets = {ln: (int(slice_reference(racks, ln)), int(slice_reference(racks, ln)) + 1) for ln in lengths}
    rng = random.Random(seed)
    best = None
    left = work
    for _ in range(max(1, tries)):
        pool = opera_matchings(racks, rng)
        arr = arrange(pool, rotors, targets, rng, left)
        left -= arr.work
        if best is None or (arr.hard, arr.soft) < (best[1].hard, best[1].soft):
            best = (pool, arr)
        if arr.hard == 0 or left <= 0:
            break
    assert best is not None
    pool, arr = best
    if None in arr.worst.values():
        raise ScheduleError(
            f"opera: no assignment of matchings to {rotors} rotors keeps every slice connected for {racks} racks "
            f"(tried {tries}); use more rotors")
    per = len(arr.seq) // rotors
    rs = tuple(Rotor(name=f"rotor{j}", offset_us=j * slice_us,
                     matchings=tuple(tuple(pool[arr.seq[p * rotors + j]]) for p in range(per)))
               for j in range(rotors))
    return Schedule(racks=racks, slot_us=slot_us, reconfig_us=reconfig_us, rotors=rs, kind="opera")


GENERATORS = {"rotornet": generate_rotornet, "selector": generate_selector, "opera": generate_opera}


def generate(kind: str, racks: int, rotors: int, slot_us: int, reconfig_us: int,
             seed: int | None = None) -> Schedule:
    """The ``kind`` generator; ``seed`` only for the randomised one (opera), None: its default."""
    try:
        gen = GENERATORS[kind]
    except KeyError:
        raise ScheduleError(f"unknown kind {kind!r} (one of {', '.join(GENERATORS)})") from None
    if seed is None:
        return gen(racks, rotors, slot_us, reconfig_us)
    if kind != "opera":
        raise ScheduleError(f"--seed only applies to opera ({kind} schedules are not random)")
    return gen(racks, rotors, slot_us, reconfig_us, seed=seed)


