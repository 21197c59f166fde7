"""The controller's options, one small value per job: how signal mode sends slot changes, the
periodic clock re-sync, the faults the controller injects itself, the live CorrOpt monitor.
Plain values; ``check`` refuses a bad one against the run's mode and switches before anything
is started (the status file either): one line."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Sequence

from .errors import ControllerError
from .skew import ClockDrift, ClockSkew, LossFault

if TYPE_CHECKING:
    from ..schedule import Schedule
    from .loss_monitor import LossMonitor
    from .roles import Role


@dataclasses.dataclass(frozen=True)
class SignalOptions:
    """Signal mode: how the controller sends slot changes (docs/dataplane.md)."""

    lead_us: float | str = 0.0  # send each change this early; "auto": the median acked delay
    timed: bool = False         # each change one slot ahead with its start time (the switch applies it)
    ack_every: int = 0          # ask every Nth change for an ack (0: never)
    spin_us: int = 150          # busy-wait this last part of the wait for a boundary

    def check(self, mode: str) -> None:
        lead = self.lead_us
        if lead != "auto" and not (isinstance(lead, (int, float)) and lead >= 0):
            raise ControllerError(f"bad signal lead {lead!r}: microseconds >= 0 or 'auto'")
        if lead == "auto" and not self.ack_every:
            raise ControllerError("signal lead 'auto' learns from acks: give --ack-every N too")
        if self.timed and mode != "signal":
            raise ControllerError("timed slot changes are a signal-mode option")
        if self.timed and lead:
            raise ControllerError("timed slot changes go one slot ahead: no signal lead with them")


@dataclasses.dataclass(frozen=True)
class ResyncOptions:
    """Clock mode: re-measure each switch's offset every ``every`` s (0: never) and rewrite its
    slot config when it is off by more than ``bound_us`` (``skew.ResyncCheck``)."""

    every: float = 0.0
    bound_us: float = 100.0

    def check(self, mode: str) -> None:
        if not self.every >= 0:  # NaN too
            raise ControllerError(f"bad re-sync period {self.every}: seconds >= 0 (0: off)")
        if not self.bound_us > 0:
            raise ControllerError(f"bad re-sync bound {self.bound_us}: microseconds > 0")
        if self.every and mode != "clock":
            raise ControllerError("the periodic re-sync is a clock-mode option (signal mode sends every slot)")


@dataclasses.dataclass(frozen=True)
class InjectedFaults:
    """A fault plan's faults the controller applies itself: clock skews and drifts (through the
    slot config's offset, clock mode) and optical loss (a rotor's loss tables)."""

    skews: Sequence[ClockSkew] = ()
    losses: Sequence[LossFault] = ()
    drifts: Sequence[ClockDrift] = ()

    def check(self, mode: str, roles: Sequence["Role"]) -> None:
        names = {r.spec.name for r in roles}
        for sk in (*self.skews, *self.drifts):
            what = "clock skew" if isinstance(sk, ClockSkew) else "clock drift"
            if sk.switch not in names:
                raise ControllerError(f"{what} on {sk.switch!r}: not a switch this controller drives")
            if mode != "clock":
                raise ControllerError(f"{what} is injected in clock mode only (through the slot config's offset)")
        for x in self.losses:
            if x.switch not in names:
                raise ControllerError(f"loss on {x.switch!r}: not a switch this controller drives")
            if not any(r.spec.name == x.switch and r.kind == "rotor" for r in roles):
                raise ControllerError(f"loss on {x.switch!r}: optical loss is a rotor's (its loss tables)")


@dataclasses.dataclass(frozen=True)
class CorrOptOptions:
    """The live CorrOpt monitor: its state, how often it reads the counters, and ``replan``:
    every role for a masked schedule (what the switches get when a link is turned off)."""

    monitor: "LossMonitor"
    replan: Callable[["Schedule"], Sequence["Role"]] | None
    every: float = 1.0

    def check(self) -> None:
        if self.replan is None:
            raise ControllerError("the loss monitor needs the fabric's roles for a masked schedule (--topology)")
        if not self.every > 0:
            raise ControllerError(f"bad monitor period {self.every}: seconds > 0")
