"""The switches' drop and per-port counters, read periodically into the status file (what
experiments and a loss monitor read)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Sequence

import finsy as fy

from .. import p4 as dp

if TYPE_CHECKING:
    from .runtime import Controller


def port_counters(ports: Sequence[int] | None, name: str) -> Any:
    """One read request for a per-port counter: the listed indices, or the whole array."""
    if ports is None:
        return fy.P4CounterEntry(name)
    return [fy.P4CounterEntry(name, index=p) for p in ports]


class CounterPoller:
    """Every ``every`` s (0: never), one switch's counters into the status file."""

    def __init__(self, ctl: "Controller", every: float):
        self.ctl = ctl
        self.every = every

    async def publish(self, sw: fy.Switch) -> None:
        """The switch's drop counters, by cause (one wildcard read per counter).  A target with
        drops counted in more than one place (Tofino: ingress and egress) sums them per cause.
        The per-port counters are read at the role's data ports only, when it names them."""
        ctl = self.ctl
        ports = ctl.runtimes[sw.name].role.data_ports
        while True:
            drops: dict[str, int] = {}
            for name in ctl.target.drop_counters:
                async for e in sw.read(fy.P4CounterEntry(name)):
                    if e.data is not None and e.index in dp.DropCause._value2member_map_:
                        cause = dp.DropCause(e.index).name
                        drops[cause] = drops.get(cause, 0) + e.data.packet_count
            rx = tx = 0
            async for e in sw.read(port_counters(ports, dp.C_RX)):
                rx += e.data.packet_count if e.data is not None else 0
            async for e in sw.read(port_counters(ports, dp.C_TX)):
                tx += e.data.packet_count if e.data is not None else 0
            # Data frames the pipeline took in but neither sent nor dropped by a cause: lost in
            # BMv2's queues (64 frames per port, dropped silently when full) or still in flight.
            pipeline_drops = sum(n for c, n in drops.items() if c != dp.DropCause.CTRL_ERROR.name)
            ctl.status.counters(sw.name, drops, rx=rx, tx=tx, unaccounted=rx - tx - pipeline_drops)
            await asyncio.sleep(self.every)
