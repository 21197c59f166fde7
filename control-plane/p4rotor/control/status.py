"""The controller's status as structured data: what other processes read instead of its log.

``p4rotor control --status-file F`` keeps F a JSON object, rewritten atomically (write a
temporary file, rename) on every change, so a reader never sees half of it:

```json
{"version": 1, "pid": 1234, "mode": "clock", "phase": "running",
 "switches": {"rotor0": {"kind": "rotor", "installed": true, "entities": 42, "install_ms": 12.5,
                         "adopted": false, "writes": 42, "clears": 1, "generation": 4711, "epoch_us": 1000000,
                         "offset_us": -3, "offset": "+/- 12.0 us proven, clock port, 64 probes",
                         "drops": {"NIGHT": 0, "STALE": 2}, "rx": 900, "tx": 898, "unaccounted": 0,
                         "drops_ns": ...}},
 "installed": 12, "total": 12, "t0_ns": 1763900000000000000, "error": null, "updated_ns": ...}
```

``phase``: ``starting`` (connecting), ``installing``, ``running`` (every switch installed; ``t0_ns``
is the wall time of schedule slot 0), ``failed`` (``error`` says why, one line) or ``stopped``.

Per switch, once ready: ``adopted`` (clock mode: it held what this run would install and its
clock runs on; nothing was written), ``writes`` (entity updates this run wrote to it, all
installs together), ``clears`` (times this run cleared it), ``generation``, ``epoch_us`` (its
slot config's epoch in this run's common time, us since the run started); adopted also
``installed_epoch_us`` and ``installed_offset_us`` (as the switch holds them: the installing
run's common time) and ``cycle_us``; rewritten in clock mode, ``not_adopted`` (why, one line).
Clock mode, per switch: ``offset_us`` (the offset the controller's slot config is built on: measured
at install, or by the last re-sync that rewrote it), ``injected_skew_us`` (a fault plan's clock skew
live now, control/skew.py), ``config_offset_us`` (what the slot config holds: offset_us +
injected_skew_us, what the switch adds to its raw clock); with ``--resync-every`` also
``resyncs`` (config rewrites by the re-sync), ``last_resync_error_us`` (installed minus fresh
offset at the last check) and ``last_resync_check_ns`` (its wall time).
Top level, ``adopted``: how many switches are (``t0_ns`` is then in the past: the adopted clock's).
With ``--corropt-threshold`` (the live CorrOpt monitor, control/loss_monitor.py), top level
``corropt``: ``threshold``, ``rates`` (per link ``"rotor:rack"``: the latest estimate per direction,
``{"in": [rate, frames], "out": ...}``), ``decisions`` (in order: ``rotor``, ``rack``, ``port``,
``rate``, ``action`` disable/keep, ``reason`` (one line: the slice connectivity that decided it),
``t_ns``, ``applied_ns`` (disable: when the masked routes and circuits were written), ``writes``)
and ``disabled`` (the links off now).

The launcher (fabric/mininet.py), experiments and bench wait on ``phase`` and ``t0_ns``; the log
text is for people and free to change.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

PHASES = ("starting", "installing", "running", "failed", "stopped")
FORMAT_VERSION = 1


class StatusFile:
    """Publishes the controller's status to a file (or nowhere, with ``path=None``)."""

    def __init__(self, path: Path | None, mode: str, switches: dict[str, str]):
        self.path = Path(path) if path else None
        self.data: dict[str, Any] = {
            "version": FORMAT_VERSION, "pid": os.getpid(), "mode": mode, "phase": "starting",
            "switches": {name: {"kind": kind, "installed": False} for name, kind in switches.items()},
            "installed": 0, "adopted": 0, "total": len(switches), "t0_ns": None, "error": None}
        self._write()

    def installed(self, name: str, entities: int, install_ms: float, offset_us: int | None = None,
                  offset: Any = None, **more: Any) -> None:
        """A switch is ready: installed, or adopted (``more``: adopted, writes, clears, generation,
        epoch_us; adopted: installed_epoch_us, installed_offset_us, cycle_us; else not_adopted, and
        written_over when not cleared first).
        ``offset``: the clock offset's estimate (timebase.OffsetEstimate: its words, method and
        uncertainty are kept) or words alone."""
        sw = self.data["switches"][name]
        for k in ("installed_epoch_us", "installed_offset_us", "cycle_us", "not_adopted", "written_over"):
            sw.pop(k, None)  # from an earlier install of the same switch
        sw.update(installed=True, entities=entities, install_ms=round(install_ms, 3), **more)
        if offset_us is not None:
            if hasattr(offset, "describe"):
                sw.update(offset_us=offset_us, offset=offset.describe(), offset_method=offset.method,
                          offset_uncertainty_us=round(offset.uncertainty_us, 1))
            else:
                sw.update(offset_us=offset_us, offset=offset)
        self.data["installed"] = sum(1 for s in self.data["switches"].values() if s["installed"])
        self.data["adopted"] = sum(1 for s in self.data["switches"].values() if s.get("adopted"))
        if self.data["phase"] == "starting":
            self.data["phase"] = "installing"
        self._write()

    def clock(self, name: str, **fields: Any) -> None:
        """A switch's clock changed or was checked while running (clock mode): a skew injected or
        over, a re-sync check (``injected_skew_us``, ``config_offset_us``, ``resyncs``,
        ``last_resync_error_us``, ``last_resync_check_ns``; ``generation``, ``writes``, ``offset_us``)."""
        self.data["switches"][name].update(fields)
        self._write()

    def counters(self, name: str, drops: dict[str, int], rx: int = 0, tx: int = 0, unaccounted: int = 0) -> None:
        """The switch's drop counter by cause (``--counters-every``), its data frames in and out, and
        those neither sent nor dropped by a cause (BMv2 queue overflow, or in flight), with the time."""
        self.data["switches"][name].update(drops=drops, rx=rx, tx=tx, unaccounted=unaccounted,
                                           drops_ns=time.time_ns())
        self._write()

    def corropt(self, **fields: Any) -> None:
        """The live CorrOpt monitor's state (module docstring): threshold, rates, decisions, disabled."""
        self.data.setdefault("corropt", {}).update(fields)
        self._write()

    def running(self, t0_ns: int) -> None:
        self.data.update(phase="running", t0_ns=t0_ns)
        self._write()

    def failed(self, error: str) -> None:
        self.data.update(phase="failed", error=error.splitlines()[0] if error else "unknown error")
        self._write()

    def stopped(self) -> None:
        if self.data["phase"] != "failed":
            self.data["phase"] = "stopped"
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        self.data["updated_ns"] = time.time_ns()
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(tmp, self.path)


def read_status(path: Path) -> dict[str, Any] | None:
    """The last status written, or None if there is none yet (the file appears atomically)."""
    try:
        d = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    if d.get("version") != FORMAT_VERSION or d.get("phase") not in PHASES:
        raise ValueError(f"{path}: not a p4rotor controller status file")
    return d
