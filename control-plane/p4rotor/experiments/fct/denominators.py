"""The fct experiment's two denominators on a running, idle fabric (workload/ideal.py says what
they are): the calibration (one-packet flows alone by path class, flows of a few sizes alone),
measured or read from a file measured earlier on the same fabric, and the replay of a sample of
the run's flows one at a time after the run.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from ...cliutil import code_commit
from ...schedule import topology as TP
from ...workload import cdf as C
from ...workload import ideal as I
from ...workload.ideal import FABRIC
from ...workload.generate import Workload
from ...workload.paths import alone_samples
from ...workload.plane import FRAME
from ..runner import say
from .calibrate import calibrate, measure_alone
from .hosts import PRIMER_US



def fingerprint(emulation: str, target: str, topo: TP.Topology, hosts_per_rack: int, dilation: float,
                epsilon_us: float, access_bps: float) -> dict:
    """What a calibration is only valid for (workload/ideal.py: FINGERPRINT_KEYS)."""
    s = topo.schedule
    return {"emulation": emulation, "target": target, "racks": len(topo.racks), "hosts_per_rack": hosts_per_rack,
            "rotors": len(s.rotors), "slot_us": s.slot_us, "night_us": s.reconfig_us, "dilation": dilation,
            "epsilon_us": epsilon_us, "access_bps": access_bps, "primer_us": PRIMER_US}


def read_calibration(path: str, emulation: str, fp: dict) -> I.Calibration:
    """The ``emulation`` section of a calibration.json, checked against this run's fabric
    (a WorkloadError, one line, otherwise)."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as ex:
        raise C.WorkloadError(f"--calibration {path}: {ex}") from None
    if not isinstance(d, dict) or emulation not in d:
        raise C.WorkloadError(f"--calibration {path}: no {emulation!r} calibration in it "
                              f"(has {', '.join(sorted(d)) if isinstance(d, dict) else 'none'})")
    cal = I.Calibration.from_json(d[emulation], f"--calibration {path} ({emulation})")
    cal.check(fp, f"--calibration {path} ({emulation})")
    return cal


def write_calibration(out: Path, emulation: str, cal: I.Calibration, meta: dict) -> None:
    """Add ``emulation``'s section to ``out``/calibration.json (the fabric's and the packet
    switch's are measured in two emulations, one file)."""
    f = out / "calibration.json"
    d = json.loads(f.read_text()) if f.exists() else {}
    d[emulation] = dict(cal.to_json(), measured=meta)
    f.write_text(json.dumps(d, indent=1))


def measure_calibration(emu, topo, out: Path, key_of, access_bps: float, fp: dict, period_ns: int | None,
                        hosts: list | None = None, tag: str = "") -> I.Calibration:
    """One-packet flows alone between every rack pair in 32 phases of the hyperperiod, and flows of
    a few sizes alone (calibrate.py), on the idle fabric; the calibration they make."""
    t0 = time.monotonic()
    measure_alone(emu, topo, out / f"alone{tag}", hosts=hosts, period_ns=period_ns, pace_bps=access_bps)
    sized = calibrate(emu, topo, out / f"calibrate{tag}", hosts=hosts, period_ns=period_ns, pace_bps=access_bps)
    every = [h for k in topo.racks for h in k.hosts]
    racks = {h.name: k.id for k in topo.racks for h in k.hosts}
    samples = alone_samples(out / f"alone{tag}", racks, {h.ip: k.id for k in topo.racks for h in k.hosts})
    one = [(key_of(a, b, t), fct, half) for a, b, t, fct, half in with_halves(samples)]
    keyed = [(key_of(racks[a], racks[b], t), size, fct, rnd % 2) for a, b, t, size, fct, rnd in sized]
    cal = I.calibration_from(one, keyed, access_bps, fp)
    # The samples themselves, so that any other estimate can be made from the same measurement.
    (out / f"calibration-samples{tag}.json").write_text(json.dumps(
        {"columns": {"one_packet": ["path class", "fct_s", "half"], "sized": ["path class", "size", "fct_s", "half"]},
         "one_packet": one, "sized": keyed}))
    ho = cal.held_out.get("all") or {}
    say(f"[experiment] fct: calibrated {fp['emulation']} ({len(one)} one-packet flows alone, {len(sized)} sized, "
        f"{len(every)} hosts, {time.monotonic() - t0:.0f} s): base by path class "
        + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(cal.base_s.items()))
        + (f"; held-out flows below their ideal: {ho['below_1']} of {ho['flows']}" if ho else ""))
    warn = I.held_out_warning(cal, f"the calibration of {fp['emulation']}")
    if warn:
        say(f"[experiment] fct: {warn}")
    return cal


def with_halves(samples: list[tuple[int, int, int, float]]) -> list[tuple[int, int, int, float, int]]:
    """Each one-packet sample (source rack, destination rack, issued ns, FCT s) with its half: the
    parity of its place among its rack pair's samples in time (rounds alternate between halves)."""
    seen: dict[tuple[int, int], int] = {}
    out = []
    for a, b, t, fct in sorted(samples, key=lambda x: x[2]):
        i = seen.get((a, b), 0)
        seen[(a, b)] = i + 1
        out.append((a, b, t, fct, i % 2))
    return out


def replay_alone(run, emu, topo, ds, wl, cutoff: float, out: Path, rate: float, guard_us: float,
                 access_bps: float, cal: I.Calibration, key_of, sample: int, seed: int, **kw) -> dict:
    """``sample`` of the run's flows replayed one at a time on the idle fabric (``run``: the
    experiment's run_mode), spaced by an upper estimate of each flow's FCT alone; returns per
    flow id its FCT alone (flows that overlapped another or did not finish are left out) and
    what the replay was (``info``)."""
    if sample <= 0:
        return {"alone": {}, "info": {"sampled": 0}}
    chosen = I.replay_sample(wl.flows, sample, seed)
    cycle_s = ds.hyperperiod_us / 1e6
    per_circuit_Bps = rate * FRAME  # an agent's frames per circuit, a frame's payload at most

    def upper(f) -> float:
        # TCP: three times its ideal (a one-packet path can be 3 hops both ways); bulk: a cycle to
        # its first circuit and its bytes over one circuit, twice.
        if f.size < cutoff:
            return 3 * cal.ideal_s(f.size, None)
        return 2 * (cycle_s + f.size / per_circuit_Bps)

    plan = I.replay_plan(chosen, upper, gap_s=max(0.05, 2 * cal.floor_s))
    t0 = time.monotonic()
    r = run(emu, topo, ds, Workload(plan, dict(wl.meta, replay_of=len(wl.flows))), cutoff, out, rate, guard_us,
            pace_bps=access_bps, **kw)
    bad = I.overlapped(r["done"])
    alone = {d.flow.id: d.fct_s for d in r["done"] if d.fct_s is not None and d.flow.id not in bad}
    info = {"sampled": len(chosen), "seed": seed, "alone": len(alone), "overlapped": len(bad),
            "unfinished": sum(1 for d in r["done"] if d.fct_s is None), "wall_s": round(time.monotonic() - t0, 1),
            "agent_frames_lost": r.get("agent_frames_lost", 0)}
    say(f"[experiment] fct: {out.name}: {info['alone']} of {len(chosen)} sampled flows replayed alone "
        f"({info['overlapped']} overlapped another, {info['unfinished']} unfinished; {info['wall_s']:.0f} s)")
    return {"alone": alone, "info": info}


def judged(done: list, cal: I.Calibration, key_of, alone: dict[int, float]) -> list:
    """A run's flows with both denominators (nothing of the run's own FCTs goes in)."""
    return I.with_replay(I.with_ideal(done, cal, key_of), alone)


def cutoff_of(mode_cutoff, cutoff, default_cutoff) -> float:
    c = (cutoff if cutoff is not None else default_cutoff) if mode_cutoff is None else mode_cutoff
    return math.inf if c is None else c


def measured(t0: float) -> dict:
    """When and where a calibration was measured (stored beside it)."""
    return {"commit": code_commit(), "wall_s": round(time.monotonic() - t0, 1),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}


def machine() -> dict:
    """What the idle fabric's speed depends on besides the code: this boot of this machine
    (``boot_id``), its CPUs and kernel.  A one-packet base measured on one boot was 16 % slower
    than the same code's on another (docs/notes/datamining-40.md)."""
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text()
        except OSError:
            return None

    cpu = next((line.split(":", 1)[1].strip() for line in (read("/proc/cpuinfo") or "").splitlines()
                if line.startswith("model name")), None)
    return {"boot_id": (read("/proc/sys/kernel/random/boot_id") or "").strip() or None, "cpu": cpu,
            "cpus": os.cpu_count(), "kernel": os.uname().release}


def calibration_machine(path: str | None, emulation: str = FABRIC) -> dict:
    """Whether ``path``'s ``emulation`` calibration was measured on this boot of this machine:
    {"same_boot": True|False|None (not recorded), "measured_on": its machine, "run_on": this one}."""
    here = machine()
    there = None
    if path is not None:
        try:
            there = (json.loads(Path(path).read_text()).get(emulation, {}).get("measured") or {}).get("machine")
        except (OSError, ValueError, AttributeError):
            there = None
    same = None if not isinstance(there, dict) or not there.get("boot_id") else there["boot_id"] == here["boot_id"]
    return {"same_boot": same, "measured_on": there, "run_on": here}
