"""Flow sizes for an emulation that runs slower than the real system.

A rotor fabric serves a flow in units of its schedule cycle: a bulk flow waits for its circuit,
which comes back once a cycle, and a host's access link carries ``rate x cycle`` bytes per cycle.
What a workload means to the fabric is therefore ``flow size / cycle capacity``, where

* real cycle capacity     = real access rate (e.g. 10 Gb/s) x real cycle / 8
* emulated cycle capacity = emulated access rate (wall clock) x cycle x dilation / 8

(the emulator runs the schedule ``dilation`` times slower: ``p4rotor run --dilation``).  Sizes are
multiplied by ``factor = emulated / real`` so that the ratio is the real system's.  When the
emulated schedule is the real one dilated (the default), the cycle cancels and
``factor = access x dilation / real access``: 100 Mb/s at dilation 100 against 10 Gb/s is 1.

A size never drops below one packet (``mss`` bytes, or the flow's own size if it was already
smaller): ``size' = max(factor x size, min(size, mss))``.  Those flows are *clamped*: their ratio
to the cycle is larger than the real one.  :meth:`Scaling.clamped_share` gives their share
under a CDF; the generator counts them in the list it writes.
"""

from __future__ import annotations

import dataclasses
import math

from .cdf import Cdf, WorkloadError

MSS = 1460  # TCP payload per full-size packet: 1500-byte IP MTU - 20 (IPv4) - 20 (TCP)


def cycle_capacity_bytes(rate_bps: float, cycle_us: float) -> float:
    """Bytes a link of ``rate_bps`` carries in ``cycle_us`` microseconds."""
    return rate_bps * cycle_us / 8e6


@dataclasses.dataclass(frozen=True)
class Scaling:
    factor: float
    mss: int = MSS
    emulated_cycle_bytes: float | None = None  # for the record: what the factor came from
    real_cycle_bytes: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise WorkloadError(f"size scaling factor must be a finite number > 0, got {self.factor:g}")
        if self.mss < 1:
            raise WorkloadError(f"--mss must be >= 1 byte, got {self.mss}")

    def exact(self, size: float) -> float:
        """The scaled size before rounding to whole bytes."""
        return max(self.factor * size, min(size, self.mss))

    def size(self, size: float) -> int:
        """The scaled size in whole bytes (at least 1)."""
        return max(1, round(self.exact(size)))

    def clamps(self, size: float) -> bool:
        """True if the floor of one packet, not the factor, decides this size."""
        return self.factor * size < min(size, self.mss)

    def cdf(self, c: Cdf) -> Cdf:
        """The distribution of scaled sizes (before rounding to whole bytes)."""
        breaks = (self.mss, self.mss / self.factor) if self.factor < 1 else ()
        return c.mapped(self.exact, breaks, source=f"{c.source} x {self.factor:g}")

    def clamped_share(self, c: Cdf) -> float:
        """P(clamped) under ``c``: sizes below mss / factor when the factor shrinks them."""
        if self.factor >= 1:
            return 0.0
        x = self.mss / self.factor  # clamped iff size < x
        below = c.cdf(x)
        # c.cdf counts sizes <= x: take away mass sitting exactly on x
        return below - sum(w for w, lo, hi in c.pieces() if lo == hi == x)

    def to_json(self) -> dict[str, float | int | None]:
        return {"factor": self.factor, "mss": self.mss,
                "emulated_cycle_bytes": self.emulated_cycle_bytes, "real_cycle_bytes": self.real_cycle_bytes}


def for_emulation(access_bps: float, dilation: float, cycle_us: float, real_access_bps: float,
                  real_cycle_us: float | None = None, mss: int = MSS) -> Scaling:
    """The scaling that keeps size / cycle capacity as in the real system.

    ``access_bps``: each host's access rate on the wall clock of the emulation; ``cycle_us``:
    the emulated schedule's cycle before dilation; ``real_cycle_us``: the real system's cycle
    (default: the same schedule, undilated).
    """
    for name, v in (("access rate", access_bps), ("dilation", dilation), ("cycle", cycle_us),
                    ("real access rate", real_access_bps)):
        if not (math.isfinite(v) and v > 0):
            raise WorkloadError(f"{name} must be a finite number > 0, got {v:g}")
    real_cycle = cycle_us if real_cycle_us is None else real_cycle_us
    if not (math.isfinite(real_cycle) and real_cycle > 0):
        raise WorkloadError(f"real cycle must be a finite number > 0, got {real_cycle:g}")
    emu = cycle_capacity_bytes(access_bps, cycle_us * dilation)
    real = cycle_capacity_bytes(real_access_bps, real_cycle)
    return Scaling(emu / real, mss, emu, real)
