"""How good the Opera generator's schedules are, size by size (``p4rotor schedule quality``).

Seed 000 §2.6.1 asks that every Opera slice be an expander.  This report measures, per fabric
size, what the generator delivers against that: the fewest live matchings in any slice, the
worst slice diameter per slice degree beside the random-regular reference
(``analysis.slice_reference``), whether every rack pair meets directly once per cycle, and how
long generation took.  The time is wall-clock and only reported: the generator's own stopping
rule is a counted work budget, so the schedule itself never depends on the machine.
"""

from __future__ import annotations

import dataclasses
import time

from .analysis import DegreeRow, analyse, degree_table, fmt_diameter, live_matchings
from .generators import generate_opera
from .model import ScheduleError

DEFAULT_SIZES = ((16, 4), (32, 4), (64, 6), (108, 6), (128, 4))


@dataclasses.dataclass(frozen=True)
class SizeRow:
    racks: int
    rotors: int
    min_live: int               # fewest live matchings in any slice
    degrees: list[DegreeRow]    # worst diameter per slice degree vs the reference
    pairs_covered: int          # unordered rack pairs with a direct circuit at least once per cycle
    pairs: int                  # racks*(racks-1)/2
    seconds: float              # generation time (wall-clock; informative only)

    @property
    def meets_target(self) -> bool:
        """Every slice connected, diameter <= reference + 1, at least K-1 live, all pairs covered."""
        return (self.min_live >= self.rotors - 1 and self.pairs_covered == self.pairs
                and all(r.worst is not None and r.worst <= int(r.reference) + 1 for r in self.degrees))


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"16x4,32x4"`` -> [(16, 4), (32, 4)]; a one-line ScheduleError otherwise."""
    out = []
    for part in text.split(","):
        racks, sep, rotors = part.strip().partition("x")
        if not sep or not racks.isdigit() or not rotors.isdigit():
            raise ScheduleError(f"--sizes: {part.strip()!r} is not RACKSxROTORS (e.g. 16x4)")
        out.append((int(racks), int(rotors)))
    return out


def measure(racks: int, rotors: int, slot_us: int, reconfig_us: int, seed: int = 1) -> SizeRow:
    t0 = time.perf_counter()
    s = generate_opera(racks, rotors, slot_us, reconfig_us, seed=seed)
    seconds = time.perf_counter() - t0
    a = analyse(s)
    covered = sum(1 for (i, j), n in a.pair_meetings.items() if i < j and n and a.pair_meetings[(j, i)])
    return SizeRow(racks=racks, rotors=rotors, min_live=min(live_matchings(s, x) for x in a.slices),
                   degrees=degree_table(s, a), pairs_covered=covered, pairs=racks * (racks - 1) // 2,
                   seconds=seconds)


def report(rows: list[SizeRow], seed: int, slot_us: int, reconfig_us: int) -> str:
    """A Markdown table (pasted as is into docs/opera-expanders.md)."""
    lines = [f"Opera schedules, seed {seed}, slot {slot_us} us, night {reconfig_us} us; "
             "diameter: worst slice / random-regular median (20 seeds)",
             "",
             "| racks x rotors | min live matchings | diameter, K-1 live | diameter, K live "
             "| pairs covered | generation s | target met |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        by = {d.degree: d for d in r.degrees}
        cells = []
        for deg in (r.rotors - 1, r.rotors):
            d = by.get(deg)
            cells.append("-" if d is None else
                         f"{'disconnected' if d.worst is None else d.worst} / {fmt_diameter(d.reference)}")
        lines.append(f"| {r.racks}x{r.rotors} | {r.min_live} | {cells[0]} | {cells[1]} "
                     f"| {r.pairs_covered}/{r.pairs} | {r.seconds:.2f} | {'yes' if r.meets_target else 'NO'} |")
    return "\n".join(lines)
