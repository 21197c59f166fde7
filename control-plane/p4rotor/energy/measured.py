"""A run's per-port per-slot activity as the data plane **measured** it: the ``activity.json``
the controller's recorder wrote (``p4rotor control --activity``; control/activity_recorder.py).
An interval runs from the previous read to its own (``t_s``: a read can take longer than the
recorder's period, on eBPF seconds: the times are the reads', not the period's).

Each interval of the file holds, per switch, port and slot position of the switch's cycle, the
frames and bytes that left (``tx``) and came in (``rx``).  A transmitter is taken where it is
measured sending (a switch's ``tx``); the hosts' own transmitters, which no switch sees send, from
their ToR's ``rx``.  An interval's counts of a cell are spread evenly over the switch's cycles in it (the read is not aligned to slots: the slot in
progress at a read has its frames in two intervals).  A slot position is placed in each cycle
where its span lies (a rotor: its matching's slot; a ToR: its slice, on the slot of the schedule,
or of the uplink's rotor, that holds the slice's middle).

Times: the file's schedule is the one the switches ran (wall time); with the run's dilation
(``dilation`` in any of the run's JSON files, else 1) every time is divided back into schedule
time, as the reconstructions do.

Traffic class (version 2): a ToR counts apart, in the same cells, the frames not known to be bulk
(``tx_ll``/``rx_ll``: low-latency, or a frame it could not classify).  A port's low-latency bytes
of a slot are those counts; the rest of its frames are bulk, granted per slot at OFFER time
(RotorLB), so the predictive policy places them back to back from the day's start and sleeps
after them (account.busy); a slot with any low-latency byte keeps its whole day awake.  The rotor
parses no class: a rotor port's low-latency bytes are those its receiving ToR counted coming in
on the uplink (the same channel's frames, counted at its other end).  A transmitter whose class
neither end counts (a version 1 file, or a switch without the counter) has every frame taken as
low-latency, as before: the conservative reading.  The reactive policies see the totals only, the
same frames whatever the class.
"""

from __future__ import annotations

import math
from pathlib import Path

from .. import schedule as S
from ..inputs import MALFORMED, read_json
from .activity import Activity, Port
from .model import CLASSES, EnergyError

VERSIONS = (1, 2)        # 1: no traffic class counted (every frame low-latency); 2: a ToR's low-latency counts
DEFAULT_RATE_BPS = 1e9   # a link's rate when the run records none (veth links are not shaped)


def activity_file(run: Path, mode: str | None = None) -> Path:
    """A run's measured activity: ``activity.json``, or for one mode of an fct run
    ``activity-MODE.json`` (the experiment cuts each mode's run out of the recorder's file)."""
    return Path(run) / (f"activity-{mode}.json" if mode else "activity.json")


def has_activity(run: Path, mode: str | None = None) -> bool:
    return activity_file(run, mode).is_file()


def _run_value(run: Path, key: str) -> tuple[float, str] | None:
    """The first positive number ``key`` at the top of the run's other JSON files, and the file."""
    for p in sorted(Path(run).glob("*.json")):
        if p.name.startswith("activity"):
            continue   # the measured activity itself (large): none of the run's settings
        try:
            d = read_json(p, EnergyError, nonfinite=True)
        except EnergyError:
            continue
        v = d.get(key) if isinstance(d, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            return float(v), p.name
    return None


def _dilation(run: Path) -> float:
    found = _run_value(run, "dilation")
    return found[0] if found else 1.0


def _rates(run: Path, s: S.Schedule) -> tuple[dict[str, float], str]:
    """Each class's link rate in schedule time, and where it came from: a rotorlb run's, as its
    reconstruction takes it (a slot capacity of agent frames fills the day); a run's
    ``link_mbps`` (the real-system rate the harness shaped to); else DEFAULT_RATE_BPS."""
    if (run / "rotorlb.json").is_file():
        from .rotorlb_run import FRAME_BYTES

        rows = read_json(run / "rotorlb.json", EnergyError)["rows"]
        cap = max((float(r["rotorlb"]["capacity_frames"]) for r in rows), default=0.0)
        if math.isfinite(cap) and cap > 0:
            circuit = cap * FRAME_BYTES * 8 / ((s.slot_us - s.reconfig_us) / 1e6)
            return ({"host-link": circuit * len(s.rotors), "tor-uplink": circuit, "rotor-port": circuit},
                    "rotorlb.json: a slot capacity fills the day")
    if (run / "fct.json").is_file():
        access = read_json(run / "fct.json", EnergyError).get("access_mbps")
        if isinstance(access, (int, float)) and not isinstance(access, bool) and math.isfinite(access) and access > 0:
            # as the fct reconstruction takes it: every link at the hosts' access rate
            return {c: access * 1e6 * _dilation(run) for c in CLASSES}, "fct.json: access_mbps"
    found = _run_value(run, "link_mbps")
    if found:
        return {c: found[0] * 1e6 for c in CLASSES}, f"{found[1]}: link_mbps"
    return {c: DEFAULT_RATE_BPS for c in CLASSES}, f"not recorded: {DEFAULT_RATE_BPS / 1e9:g} Gb/s assumed"


def _scaled(sched_doc: dict, dil: float) -> S.Schedule:
    j = dict(sched_doc)
    j["slot_us"] = sched_doc["slot_us"] / dil
    j["reconfig_us"] = sched_doc["reconfig_us"] / dil
    j["rotors"] = [dict(r, offset_us=r["offset_us"] / dil) for r in sched_doc["rotors"]]
    for k in ("slot_us", "reconfig_us"):
        if float(j[k]).is_integer():
            j[k] = int(j[k])
    for r in j["rotors"]:
        if float(r["offset_us"]).is_integer():
            r["offset_us"] = int(r["offset_us"])
    return S.from_json(j)


def from_run(run: Path, mode: str | None = None) -> Activity:
    """``mode``: that mode's part of an fct run (``activity-MODE.json``)."""
    path = activity_file(run, mode)
    doc = read_json(path, EnergyError)
    try:
        return _measured(doc, Path(run), path.name)
    except EnergyError:
        raise
    except S.ScheduleError as ex:
        raise EnergyError(f"{path}: schedule: {ex}") from None
    except MALFORMED as ex:
        raise EnergyError(f"{path}: not a recorder's activity ({type(ex).__name__}: {str(ex)[:60]})") from None


def _measured(doc: dict, run: Path, name: str = "activity.json") -> Activity:
    where = f"{run}/{name}"
    if doc.get("version") not in VERSIONS:
        raise EnergyError(f"{where}: version {doc.get('version')!r}, this reads {' or '.join(map(str, VERSIONS))}")
    dil = _dilation(run)
    s = _scaled(doc["schedule"], dil)
    rate_bps, rate_from = _rates(run, s)
    act = Activity(s, 0.0, rate_bps, {}, f"measured: the data plane's per-slot counters ({where})")
    switches = doc["switches"]
    measured_tx = {(v["tx"]["link"], v["tx"]["channel"]) for sw in switches.values() for v in sw["ports"].values()}
    ll_from = _class_sources(doc)
    for sw in switches.values():
        for v in sw["ports"].values():
            for d in ("tx", "rx"):
                t = v[d]
                act.port(t["link"], int(t["channel"]), t["class"], t["rotor"])
    n_int = len(doc["intervals"])
    start_us = 0.0
    for iv in doc["intervals"]:
        end_us = float(iv["t_s"]) * 1e6 / dil
        if not (math.isfinite(end_us) and end_us > start_us):
            raise EnergyError(f"{where}: interval times must increase, got {iv['t_s']!r}")
        for name, moves in iv["switches"].items():
            sw = switches[name]
            cycle = float(sw["cycle_us"]) / dil
            first = round(start_us / cycle)
            per = max(1, round(end_us / cycle) - first)
            spans = sw["slot_spans_us"]
            for d in ("tx", "rx", "tx_ll", "rx_ll"):
                for key, (frames, nbytes) in moves.get(d, {}).items():
                    port, slot = key.split(":")
                    t = sw["ports"][port][d[:2]]
                    chan = (t["link"], int(t["channel"]))
                    if d == "rx" and chan in measured_tx:
                        continue   # that transmitter is measured where it sends
                    if d in ("tx_ll", "rx_ll") and ll_from.get(chan) != (name, d[:2]):
                        continue   # its class is read at the other end (not both: not twice)
                    a, b = spans[int(slot)]
                    mid = (a + b) / 2 / dil
                    p = act.ports[chan]
                    t0 = first * cycle + mid
                    if d in ("tx", "rx"):   # the frames; all low-latency if no end counts the class
                        _add(act, p, t0, cycle, per, frames, nbytes, 0 if chan in ll_from else nbytes)
                    else:                   # the low-latency bytes among them
                        _add(act, p, t0, cycle, per, 0, 0, nbytes)
        start_us = end_us
    act.horizon_us = start_us
    act.notes = {"mode": "measured", "intervals": n_int, "cycles_per_read": doc.get("cycles_per_read"),
                 "dilation": dil, "rate": rate_from, "alone_floor_us": None,
                 "classes": _classes_note(act, ll_from),
                 # an fct mode's part of the recorder's file (control/activity_recorder.window)
                 **({"window": doc["window"]} if isinstance(doc.get("window"), dict) else {})}
    return act


def _class_sources(doc: dict) -> dict[tuple[str, int], tuple[str, str]]:
    """Where each transmitter's low-latency counts are read: (switch, "tx") where it is measured
    sending, if that switch counts the class; else (switch, "rx"), the switch at its other end.
    A transmitter absent is one whose class no end counts (a version 1 file: none)."""
    if doc["version"] < 2:
        return {}
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for d in ("rx", "tx"):   # tx last: where the sender counts the class, its count is taken
        for name, sw in doc["switches"].items():
            if sw.get("low_latency") is not True:
                continue
            for v in sw["ports"].values():
                t = v[d]
                chan = (t["link"], int(t["channel"]))
                out[chan] = (name, d)
    return out


def _classes_note(act: Activity, ll_from: dict) -> str:
    if not ll_from:
        return "not counted (activity.json version 1): every frame taken as low-latency"
    unknown = sorted(f"{link}/{ch}" for (link, ch) in act.ports if (link, ch) not in ll_from)
    return ("low-latency counted by the ToRs (a rotor port's at its receiving ToR); the rest bulk"
            + (f"; not counted, all low-latency: {', '.join(unknown)}" if unknown else ""))


def _add(act: Activity, p: Port, t0: float, cycle: float, per: int, frames: float, nbytes: float,
         ll_bytes: float) -> None:
    """A cell's counts of one interval (frames, bytes, and the bytes of low-latency frames among
    them), spread evenly over its ``per`` cycles starting at t0."""
    s = act.schedule
    off = 0 if p.rotor is None else s.rotors[p.rotor].offset_us
    for c in range(per):
        k = int((t0 + c * cycle - off) // s.slot_us)
        b = p.bins[k]
        b[0] += frames / per
        b[1] += nbytes / per
        b[2] += ll_bytes / per

