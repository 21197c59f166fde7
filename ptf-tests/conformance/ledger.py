"""Accounting for every frame a test sends: the switch's counters and the kernel's drops."""

from __future__ import annotations

import time
from pathlib import Path

from p4rotor import p4 as dp


def kernel_drops() -> dict[str, int]:
    """Frames the kernel dropped in this network namespace (ptf runs in the switches' one):
    per interface, receive and transmit drops from /proc/self/net/dev, and the per-CPU input
    backlogs' drops (/proc/net/softnet_stat, machine-wide).  A burst that overruns a veth's
    backlog or BMv2's packet socket shows up here, not in any switch counter."""
    out: dict[str, int] = {}
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        out[f"{name.strip()} rx"] = int(f[3])
        out[f"{name.strip()} tx"] = int(f[11])
    out["softnet backlog"] = sum(int(ln.split()[1], 16)
                                 for ln in Path("/proc/net/softnet_stat").read_text().splitlines())
    return out


class FrameLedger:
    """Accounts for frames sent into one switch port towards another: what the switch's ingress
    counted (rx), sent (tx) and dropped by cause, what the kernel dropped, and what is left:
    frames that reached the switch's ingress but neither left nor were dropped by a cause
    (BMv2's traffic manager between ingress and egress) and frames that never reached its
    ingress (the veth, the packet socket, BMv2's input buffer).  Differences since creation."""

    def __init__(self, test, sw, in_port: int, out_port: int):
        self.test, self.sw, self.in_port, self.out_port = test, sw, in_port, out_port
        self.base = self._read()

    def _read(self) -> dict:
        return {"rx": self.sw.counter(dp.C_RX, self.in_port)[0],
                "tx": self.sw.counter(dp.C_TX, self.out_port)[0],
                "drops": {c.name: self.test.drops(c, self.sw) for c in dp.DropCause},
                "kernel": kernel_drops()}

    def now(self, sent: int) -> dict:
        """The ledger for ``sent`` frames: every key a count since creation; ``accounted`` is
        tx + drops; ``in switch`` and ``before switch`` are the frames not (yet) accounted."""
        cur = self._read()
        rx, tx = cur["rx"] - self.base["rx"], cur["tx"] - self.base["tx"]
        drops = {k: v - self.base["drops"][k] for k, v in cur["drops"].items() if v != self.base["drops"][k]}
        kernel = {k: v - self.base["kernel"].get(k, 0) for k, v in cur["kernel"].items()
                  if v != self.base["kernel"].get(k, 0)}
        accounted = tx + sum(drops.values())
        return {"sent": sent, "rx": rx, "tx": tx, "drops": drops, "accounted": accounted,
                "in switch": rx - accounted, "before switch": sent - rx, "kernel": kernel}

    def wait(self, sent: int, timeout: float = 10) -> dict:
        """Poll until every one of ``sent`` frames is accounted for (or ``timeout``)."""
        deadline = time.time() + timeout
        while True:
            led = self.now(sent)
            if led["accounted"] >= sent or time.time() > deadline:
                return led
            time.sleep(0.05)
