"""What every experiment shares: launch a fabric, run probe processes in its hosts, collect logs.

Every experiment launches its fabric in Mininet, drives probes from real hosts, stops the
fabric, then compares what it measured with what the schedule predicts and prints a one-line
verdict.  Times in results are *emulated* (wall time divided by the dilation) unless marked wall.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from .. import schedule as S
from ..schedule import topology as TP
from ..fabric.mininet import Emulation
from ..fabric.switch import HarnessError, stop_process_group


def say(m: str) -> None:
    print(m, file=sys.stderr, flush=True)



FABRICS = ("multi-switch", "one-switch")


def check_fabric(fabric: str) -> None:
    if fabric not in FABRICS:
        raise S.ScheduleError(f"--fabric {fabric!r}: one of {', '.join(FABRICS)}")


def launch(sched: S.Schedule, dilation: float, hosts: int, build: Path, run_dir: Path,
            epsilon_us: float = 0.0, link_mbps: float | None = None,
            controller_args: tuple[str, ...] = (), one_switch: bool = False,
            check_forwarding: bool = True, realtime: bool = False,
            idle_poll: bool | None = None, switch_cpus: str | None = None,
            warm_ms: float | None = None, target: str = "bmv2") -> tuple[Emulation, TP.Topology]:
    """``link_mbps``: shape every link (host and fabric) to this rate (an access rate);
    ``controller_args``: more `p4rotor control` options; ``one_switch``: the one-switch fabric
    (one BMv2 emulating every ToR and rotor, docs/one-switch.md); ``check_forwarding``: ping
    every rack pair before returning (the connectivity check's own probes do more); ``realtime``:
    the switches under SCHED_RR where allowed (fabric/switch.py), and idle CPUs polling
    (fabric/cpu.py) unless ``idle_poll`` is False; ``switch_cpus``: the switches run on these
    CPUs only (a list fabric/cpu.py's ``cpu_list`` checked; None: anywhere); ``warm_ms``: a probe
    through each switch's clock port this often keeps it warm (fabric/warm.py; None: none);
    ``target``: "bmv2" or "ebpf" (the switches as NIKSS pipelines: fabric/nikss.py)."""
    topo = TP.generate(S.dilate(sched, dilation), "schedule.json", hosts_per_rack=hosts, one_switch=one_switch)
    emu = Emulation(topo, build, run_dir, mode="clock", epsilon_us=epsilon_us * dilation, say=say,
                    link_mbps=link_mbps, controller_args=controller_args, realtime=realtime,
                    idle_poll=idle_poll, switch_cpus=switch_cpus, warm_ms=warm_ms, target=target)
    if switch_cpus:
        say(f"[run] the switches run on CPU {switch_cpus} only; the hosts' processes keep the others")
    try:
        # 100+ BMv2 take a while on 2 cores: starting them, then installing them 8 at a time
        # (3.4 s per switch at 132 switches, with the ToRs' routes carrying their deadlines and the
        # switches at nice -10: 112 of 132 in 450 s).  One switch holds
        # racks^2 x slices routes: their computation and writing take the time (Opera 108 x 6:
        # 3.3 M entries, over 6 min).
        timeout = max(120.0, 6.0 * (sched.racks + len(sched.rotors)))
        if one_switch:
            timeout = max(timeout, 3e-4 * sched.racks ** 2 * len(sched.slices()))
        elif target == "ebpf":
            # Every ToR holds racks x slices routes, written by one controller process (Opera
            # 108 x 6: 3.3 M entries, ~4.5 s of its CPU per ToR), after Mininet built the fabric.
            timeout += 4e-4 * sched.racks ** 2 * len(sched.slices())
        emu.start(timeout=timeout, check_forwarding=check_forwarding)
    except BaseException:
        emu.stop()  # a failed start (e.g. the controller exits) must not leave switches and links behind
        raise
    return emu, topo


def probe_cmd(me: int, dsts: list[str], rate: float, start_ns: int, duration: float, dscp: int,
               rx: Path | None, tx: Path | None, gate: Path | None = None, size: int = 64,
               linger: float = 1.5, go: Path | None = None, ready: Path | None = None, count: int = 0) -> str:
    args = [sys.executable, "-m", "p4rotor.host.probe", "--me", str(me), "--rate", str(rate), "--dscp", str(dscp),
            "--start-ns", str(start_ns), "--duration", str(duration), "--size", str(size),
            "--linger", str(linger)]
    for d in dsts:
        args += ["--dst", d]
    for opt, path in (("--rx", rx), ("--tx", tx), ("--go", go), ("--ready", ready)):
        if path:
            args += [opt, str(path)]
    if gate:
        args += ["--gate", f"@{gate}"]
    if count:
        args += ["--count", str(count)]
    return " ".join(args)


def run_probes(emu: Emulation, topo: TP.Topology, plan: Callable[[int, TP.Host], dict | None],
                duration: float, out: Path, align_ns: int = 0, start_at_ns: int = 0) -> dict[str, list[dict]]:
    """Start a probe process in every host (plan(i, host) -> kwargs or None), wait, collect.

    Every probe first binds its receiver and reports ready; only then is the start time chosen
    and handed to all of them (a go file), so nothing is sent before every receiver listens:
    starting 64+ Python processes on 2 cores takes seconds, and a fixed head start lost the
    first seconds of probes.  Probes start after slot 0 of the schedule, at a multiple of
    ``align_ns`` after it if given.
    """
    hosts = [h for k in topo.racks for h in k.hosts]
    out.mkdir(parents=True, exist_ok=True)
    go = out / "go"
    scratch = [go, out / "go.tmp"]
    go.unlink(missing_ok=True)
    procs = []
    try:
        for i, h in enumerate(hosts):
            kw = plan(i, h) or {"dsts": [], "rate": 1, "dscp": 0}
            ready = out / f"{h.name}.ready"
            ready.unlink(missing_ok=True)
            scratch += [ready, Path(f"{ready}.tmp")]
            gate = None
            if kw.get("gate"):
                gate = out / f"{h.name}.gate.json"
                gate.write_text(json.dumps(kw["gate"]))
                scratch.append(gate)
            cmd = probe_cmd(i, kw["dsts"], kw["rate"], 0, duration, kw["dscp"], out / f"{h.name}.rx.jsonl",
                             out / f"{h.name}.tx.jsonl", gate, kw.get("size", 64), go=go, ready=ready,
                             count=kw.get("count", 0))
            procs.append((h.name, ready, emu.popen(h.name, ["sh", "-c", cmd])))
        await_ready(procs, timeout=30 + 0.5 * len(hosts))
        start_ns = max(time.time_ns(), emu.t0_ns) + 500_000_000
        if start_at_ns:  # a start time fixed beforehand (a fault plan's origin)
            if start_at_ns < start_ns:
                raise HarnessError(f"probes ready {(start_ns - start_at_ns) / 1e9:.1f} s after their start time")
            start_ns = start_at_ns
        if align_ns:
            start_ns = emu.t0_ns + -(-(start_ns - emu.t0_ns) // align_ns) * align_ns
        (out / "go.tmp").write_text(str(start_ns))
        os.replace(out / "go.tmp", go)
        t_end = start_ns / 1e9 + duration + 15
        for _, _, p in procs:
            p.wait(max(1, t_end - time.time()))
    finally:
        for _, _, p in procs:
            stop_process_group(p)  # only those still running (an error above), by PID
        for f in scratch:
            f.unlink(missing_ok=True)
    logs = {}
    for h in hosts:
        for kind in ("rx", "tx"):
            f = out / f"{h.name}.{kind}.jsonl"
            logs[f"{h.name}.{kind}"] = [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []
    return logs


def await_ready(procs: list, timeout: float) -> None:
    """Wait until every probe process has written its ready file; a probe that exits is an error."""
    deadline = time.monotonic() + timeout
    pending = list(procs)
    while pending:
        for item in list(pending):
            name, ready, p = item
            if ready.exists():
                pending.remove(item)
            elif p.poll() is not None:
                err = (p.stderr.read() if p.stderr else b"").decode(errors="replace").strip().splitlines()
                raise HarnessError(f"probe in {name} exited ({p.returncode}) before it was ready: "
                                   + (err[-1] if err else "no output"))
        if pending and time.monotonic() > deadline:
            raise HarnessError(f"{len(pending)} probe processes not ready after {timeout:.0f} s: "
                               + ", ".join(n for n, _, _ in pending[:8]))
        if pending:
            time.sleep(0.05)
