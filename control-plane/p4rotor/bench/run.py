"""Benchmarks (``p4rotor bench``): slot precision, reconfiguration loss, throughput, control plane.

The outer process owns switches (harness: own namespace, polled readiness, stop by
PID); the measurement itself runs inside that namespace (``python -m p4rotor.bench.inside
...``, bench/inside.py) because the switch's gRPC port and veths live there.  A benchmark never
fails the build: it reports.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .. import p4 as dp
from .. import schedule as S
from ..fabric.switch import ptf_bench
from .inside import CLOCK_IFACE, PORTS
from .report import EGRESS_GUARD_US
from .report import fmt as _f
from .report import pct as _pct

# ---------------------------------------------------------------------------
# outside: orchestration
# ---------------------------------------------------------------------------


def _inside(ns, sp, build: Path, program: str, *args: str, timeout: float = 120) -> dict:
    cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.inside", *args,
                         "--grpc-port", str(sp.grpc_port),
                         "--p4info", str(build / f"{program}.p4info.txtpb"),
                         "--p4blob", str(build / f"{program}.json")]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "switch_log_tail": sp.log_tail(20)}
    if r.returncode != 0:
        return {"error": " | ".join(r.stderr.strip().splitlines()[-3:]) or "?", "stderr_tail": r.stderr[-2000:],
                "switch_log_tail": sp.log_tail(20)}
    return json.loads(r.stdout.strip().splitlines()[-1])


def train_params(mode: str, timed: bool = False) -> list[str]:
    """Probe trains: dense and short in clock mode and for timed signal changes (us errors),
    long and sparser in immediate signal mode (the switch follows the controller by ~1 ms)."""
    if mode == "clock" or timed:
        return ["--trains", "100", "--train-period-us", "5000", "--train-before-us", "24",
                "--train-after-us", "40", "--train-gap-us", "4"]
    return ["--trains", "100", "--train-period-us", "10000", "--train-before-us", "40",
            "--train-after-us", "2000", "--train-gap-us", "100"]


def run_slot(build: Path, mode: str, slot_us: int, night_us: int, rate: float, duration: float,
             tolerance_us: float = 0.0, time_base: str = "clock-port", egress_guard_us: int = 0,
             timed: bool = False, trains: Sequence[str] | None = None, dump: str | None = None) -> dict:
    import tempfile

    pcap = tempfile.mkdtemp(prefix="p4rotor-pcap-")
    try:
        with ptf_bench(1, ports=PORTS + (dp.CLOCK_PORT,), extra_args=["--pcap", pcap]) as (ns, sws, _):
            extra = ["--clock-iface", CLOCK_IFACE] if time_base == "clock-port" else []
            return _inside(ns, sws[0], build, "rotor", "slot", "--mode", mode, "--slot-us", str(slot_us),
                           "--night-us", str(night_us), "--rate", str(rate), "--duration", str(duration),
                           "--tolerance-us", str(tolerance_us), "--pcap-dir", pcap, *extra,
                           "--egress-guard-us", str(egress_guard_us), *(["--signal-timed"] if timed else []), *(["--dump-t0", dump] if dump else []),
                           *(train_params(mode, timed) if trains is None else trains), timeout=duration + 120)
    finally:
        import shutil

        shutil.rmtree(pcap, ignore_errors=True)


def run_throughput(build: Path, program: str, count: int, mode: str = "clock", loss: float = 0.0) -> dict:
    with ptf_bench(1) as (ns, sws, _):
        return _inside(ns, sws[0], build, program, "throughput", "--program", program,
                       "--count", str(count), "--mode", mode, "--loss", str(loss), timeout=300)


DILATIONS = (1, 3, 10, 30, 100)


def run_dilation(build: Path, rate: float, quick: bool = False) -> list[dict]:
    """Fidelity vs dilation (issue #15): one schedule (1024 us slots, 102 us nights) run at each
    dilation on one rotor in clock mode, so a user can pick the smallest dilation that holds.
    Errors are reported in wall us and in emulated us (wall / dilation): what the emulated
    fabric sees."""
    rows = []
    for d in DILATIONS[::2] if quick else DILATIONS:
        # 1024/102 us, not 1000/100: probes 1 ms apart would hit the same phase of every 1 ms slot
        # (at dilation 1 only 91 of 3000 left, all in the same corner of the cycle).
        slot, night = 1024 * d, 102 * d
        dur = max(3.0, 30 * 3 * slot / 1e6)
        _say(f"[bench] fidelity vs dilation: dilation {d} (slot {slot} us, night {night} us wall), "
             f"{rate:.0f} pps for {dur:.1f} s, then probe trains")
        r = run_slot(build, "clock", slot, night, rate, dur)
        r["dilation"] = d
        rows.append(r)
        if "error" in r:
            _say(f"[bench]   error: {r['error'][:200]}")
            continue
        be = (r.get("boundary_trains") or {}).get("error_us") or {}
        _say(f"[bench]   boundary error p50/p99 {_f(be.get('p50'), 0)}/{_f(be.get('p99'), 0)} us wall; left outside "
             f"its matching's day {r['left_outside_day']} of {r['departed']}; reconfig loss "
             f"{_pct(r['reconfig_loss'])} (bound {_pct(r['loss_bound'])})")
    return rows


LOSS_RATES = ((0.01, 40000), (0.03, 20000), (0.1, 10000))  # (rate, frames): ~2 sigma within 10% at 1e-2


def run_loss(build: Path, quick: bool = False) -> list[dict]:
    """Optical loss injected in P4 (issue #17): per configured rate, the measured share of frames
    the pipeline dropped as OPTICAL_LOSS (of those it took in), and the end-to-end share lost."""
    rows = []
    for rate, count in LOSS_RATES[::2] if quick else LOSS_RATES:
        _say(f"[bench] optical loss: rate {rate:g} on one rotor port, {count} frames")
        r = run_throughput(build, "rotor", count, "clock", loss=rate)
        if "error" in r:
            rows.append({"rate": rate, "error": r["error"]})
            _say(f"[bench]   error: {r['error'][:200]}")
            continue
        lost = r.get("drops", {}).get("OPTICAL_LOSS", 0)
        pin = r.get("pipeline_in") or 0
        measured = lost / pin if pin else None
        other = {c: n for c, n in r.get("drops", {}).items() if c != "OPTICAL_LOSS"}
        row = {"rate": rate, "offered": count, "pipeline_in": pin, "optical_loss": lost, "received": r["received"],
               "measured": measured, "relative_error": None if measured is None else measured / rate - 1,
               "end_to_end_loss": 1 - r["received"] / count, "other_drops": other}
        rows.append(row)
        _say(f"[bench]   measured {measured if measured is None else f'{measured:.4f}'} "
             f"({_pct(row['relative_error'])} off), {lost} of {pin} frames counted OPTICAL_LOSS, "
             f"{r['received']} received, other drops {other or 'none'}")
    return rows


def run_control_plane(build: Path, racks: int = 108, rotors: int = 6, slot_us: int = 600,
                      night_us: int = 90, tmp: Path = Path("/tmp")) -> dict:
    """Generate, validate and install an opera-sim-scale schedule on one switch per rotor."""
    t = time.perf_counter()
    sched = S.generate_opera(racks, rotors, slot_us, night_us)
    gen_s = time.perf_counter() - t
    path = tmp / f"p4rotor-bench-{racks}x{rotors}.json"
    path.write_text(sched.dumps())
    t = time.perf_counter()
    S.load(path)
    S.analyse(S.load(path))
    check_s = time.perf_counter() - t
    with ptf_bench(rotors, ports=()) as (ns, sws, _):
        cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.inside", "install",
                             "--schedule", str(path), "--grpc-ports", ",".join(str(s.grpc_port) for s in sws),
                             "--p4info", str(build / "rotor.p4info.txtpb"), "--p4blob", str(build / "rotor.json")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return {"error": r.stderr[-2000:]}
        res = json.loads(r.stdout.strip().splitlines()[-1])
    res.update({"racks": racks, "rotors": rotors, "generate_s": gen_s, "validate_s": check_s,
                "install_max_ms": max(res["install_ms"].values())})
    return res


def machine() -> dict:
    return {"cores": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()}


SCALE_SIZES = (16, 32, 64)
BMV2_MIB_GUESS = 115.0  # RSS of one BMv2 with its tables, before any measurement (64x4: 7577 MiB / 68)
SCALE_PROBE_PPS = 6000.0  # staggered schedules: the dilation that keeps the whole fabric's first pass near this


@dataclasses.dataclass(frozen=True)
class ScaleSpec:
    """One scale point: a fabric of ``racks`` x ``rotors`` with a ``kind`` schedule on ``fabric``."""

    racks: int
    rotors: int = 4
    kind: str = "rotornet"  # or "opera"
    fabric: str = "multi-switch"  # or "one-switch"
    target: str = "bmv2"  # or "ebpf"

    @property
    def key(self) -> tuple:
        return (self.racks, self.rotors, self.kind, self.fabric, self.target)

    @property
    def label(self) -> str:
        return f"{self.racks}x{self.rotors}" + ("" if self.kind == "rotornet" else f"-{self.kind}") + \
            ("" if self.fabric == "multi-switch" else f"-{self.fabric}") + ("" if self.target == "bmv2" else f"-{self.target}")


def parse_scale_sizes(text: str, kind: str = "rotornet", fabric: str = "multi-switch",
                      target: str = "bmv2") -> tuple[ScaleSpec, ...]:
    """``"16,32,108x6"`` -> specs (4 rotors unless ``NxK``); ValueError with a one-line reason."""
    if kind not in ("rotornet", "opera"):
        raise ValueError(f"scale schedule kind must be rotornet or opera, got {kind!r}")
    if fabric not in ("multi-switch", "one-switch"):
        raise ValueError(f"scale fabric must be multi-switch or one-switch, got {fabric!r}")
    if target not in ("bmv2", "ebpf"):
        raise ValueError(f"scale target must be bmv2 or ebpf, got {target!r}")
    if target == "ebpf" and fabric == "one-switch":
        raise ValueError("the eBPF target has no one-switch fabric (multi-switch only)")
    out = []
    for tok in text.split(","):
        n, _, k = tok.strip().partition("x")
        try:
            racks, rotors = int(n), int(k) if k else 4
        except ValueError:
            raise ValueError(f"comma list of RACKS or RACKSxROTORS, got {tok.strip()!r}") from None
        if racks < 2 or rotors < 1:
            raise ValueError(f"racks must be >= 2 and rotors >= 1, got {tok.strip()!r}")
        out.append(ScaleSpec(racks, rotors, kind, fabric, target))
    return tuple(out)


def scale_schedule(spec: ScaleSpec) -> tuple[S.Schedule, float]:
    """The schedule of a scale point and its dilation: RotorNet at 2000 (2 s slots); a staggered (Opera) schedule dilated so that the connectivity check's probes
    (MIN_PER_CELL per shortest cell from every host to every other rack) come to about
    SCALE_PROBE_PPS over the fabric (its 100 us slices need 11x RotorNet's probe rate at the same
    dilation)."""
    from ..experiments.connectivity import MIN_PER_CELL, cell_span_us

    if spec.kind == "rotornet":
        return S.generate_rotornet(spec.racks, spec.rotors, 1000, 100), 2000.0
    sched = S.generate_opera(spec.racks, spec.rotors, 1200, 100)
    need = MIN_PER_CELL * spec.racks * (spec.racks - 1) / (cell_span_us(sched) / 1e6)  # pps at dilation 1
    return sched, float(max(2000, math.ceil(need / SCALE_PROBE_PPS / 1000) * 1000))


def run_scale(build: Path, sizes=SCALE_SIZES, rotors: int = 4, out: Path = Path("results/scale"),
              mem_limit_mib: float = 20 * 1024, reprobe_rounds: int = 2) -> list[dict]:
    """The largest fabric (racks x rotors; RotorNet on a switch per ToR and rotor unless a spec
    says otherwise) that launches and passes the connectivity check.

    Stops at the first size that fails, and before a multi-switch size whose switches would need
    more than ``mem_limit_mib`` (estimated from the last size's BMv2 RSS per switch)."""
    from ..experiments.connectivity import connectivity

    specs = [s if isinstance(s, ScaleSpec) else ScaleSpec(s, rotors) for s in sizes]
    rows = []
    per_switch = BMV2_MIB_GUESS
    for spec in specs:
        n, k = spec.racks, spec.rotors
        one = spec.fabric == "one-switch"
        base = {"racks": n, "rotors": k, "kind": spec.kind, "fabric": spec.fabric, "target": spec.target}
        ebpf = spec.target == "ebpf"
        need = per_switch * (n + k)
        if not one and not ebpf and need > mem_limit_mib:
            rows.append({**base, "passed": False, "wall_s": 0.0,
                         "error": f"skipped: ~{need / 1024:.1f} GiB of BMv2 RSS > limit {mem_limit_mib / 1024:.0f} GiB"})
            _say(f"[bench]   {rows[-1]}")
            break
        sched, dilation = scale_schedule(spec)
        mem = {}

        def sample(emu) -> None:
            if ebpf:
                from ..fabric import bpf_stats

                mem["map_memlock_mib"] = sum(bpf_stats.map_memlock(sw.pipeline.id) for sw in emu.switches) / 2**20
                mem["switches"] = len(emu.switches)
                return
            rss = 0
            for sw in emu.switches:
                try:
                    for line in open(f"/proc/{sw.proc.pid}/status"):
                        if line.startswith("VmRSS:"):
                            rss += int(line.split()[1])
                except OSError:
                    pass
            mem["bmv2_rss_mib"] = rss / 1024
            mem["switches"] = len(emu.switches)

        t = time.monotonic()
        _say(f"[bench] scale: {n} racks x {k} rotors, {spec.kind}, "
             + ("ONE BMv2 switch" if one else f"{n + k} {'eBPF' if ebpf else 'BMv2'} switches")
             + f", dilation {dilation:.0f}")
        try:
            res = connectivity(build, out / spec.label, sched, dilation=dilation, cycles=1,
                                 probes_per_cell=2, on_running=sample, reprobe_rounds=reprobe_rounds,
                                 fabric=spec.fabric, target=spec.target)
            rp = res["reprobe"]
            row = {**base, "dilation": dilation, "slices": res["slices"], "cells": res["cells"], "agree": res["agree"],
                   "cells_total": res["cells_total"], "passed": res["agree"] == res["cells"] and res["cells"] > 0,
                   "false_positive": res["false_positive"], "missed": res["missed"], "unjudged": res["unjudged"],
                   "first_pass_agree": res["first_pass"]["agree"], "first_pass_cells": res["first_pass"]["cells"],
                   "first_pass_rate_pps": res["first_pass"]["rate_pps"],
                   "rounds": rp["rounds_run"], "reprobed": rp["reprobed"],
                   "reprobed_per_round": [r["cells"] for r in rp["rounds"]],
                   "resolved_by_reprobe": rp["resolved"], "newly_judged_by_reprobe": rp["newly_judged"],
                   "probes_sent": res["probes_sent"], "probes_received": res["probes_received"],
                   "launch_s": res.get("launch_s"), "wall_s": time.monotonic() - t, **mem}
        except Exception as ex:  # a benchmark reports, it does not fail
            row = {**base, "dilation": dilation, "passed": False, "error": str(ex)[:300],
                   "wall_s": time.monotonic() - t, **mem}
        rows.append(row)
        _say(f"[bench]   {row}")
        if mem.get("switches") and not one and not ebpf:
            per_switch = max(per_switch if rows[:-1] else 0, mem["bmv2_rss_mib"] / mem["switches"])
        if not row["passed"]:
            break
    return rows


def _scale_key(r: dict) -> tuple:
    """Rows from before the spec had kind and fabric are RotorNet on a switch per ToR and rotor."""
    return (r["racks"], r["rotors"], r.get("kind", "rotornet"), r.get("fabric", "multi-switch"), r.get("target", "bmv2"))


def merge_results(old: dict, new: dict, only: set[str], command: str) -> dict:
    """A partial run (``--only``) merged into the previous results: its sections replace the old
    ones (scale rows by racks x rotors, so other sizes stay), everything else is kept."""
    sections = {"slot": ("slot_clock", "slot_signal", "slot_signal_timed", "slot_clock_packet_out", "slot_clock_guard"), "throughput": ("throughput",),
                "control": ("control_plane",), "scale": ("scale",), "agents": ("agents",), "datapath": ("datapath",), "fabric-agents": ("fabric_agents",), "claims": ("claims",), "loss": ("loss",),
                "dilation": ("dilation",), "kernel": ("kernel",),
                "kernel-scale": ("kernel_scale",), "fabric-tcp": ("fabric_tcp",), "energy": ("energy",)}
    res = dict(old)
    for what in sorted(only):
        for key in sections.get(what, ()):
            if key not in new:
                continue
            if key == "scale" and old.get("scale"):
                rows = {_scale_key(r): r for r in old["scale"]}
                rows.update({_scale_key(r): r for r in new["scale"]})
                res[key] = [rows[k] for k in sorted(rows)]
            else:
                res[key] = new[key]
    res["command"] = old.get("command", "p4rotor bench")
    res["merged"] = [m for m in old.get("merged", []) if m["command"] != command] + [
        {"only": sorted(only), "started": new["started"], "machine": new["machine"], "command": command}]
    return res


SLOTS_US = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_all(build: Path, out: Path, only: set[str], quick: bool = False, rate: float = 1000,
            scale_sizes=SCALE_SIZES, merge: bool = False, command: str = "p4rotor bench") -> dict:
    """Every benchmark, side by side in one run; progress on stderr; never raises for a bad number."""
    res: dict = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "rate_pps": rate}
    slots = SLOTS_US[::2] if quick else SLOTS_US
    if "slot" in only:
        runs = [("slot_clock", "clock", "clock-port", slots), ("slot_signal", "signal", "clock-port", slots),
                ("slot_signal_timed", "signal", "clock-port", slots),
                ("slot_clock_packet_out", "clock", "packet-out", (1024,) if quick else (256, 1024, 4096)),
                ("slot_clock_guard", "clock", "clock-port", (1024,) if quick else (1024, 4096, 16384))]
        for key, mode, tbase, lengths in runs:
            rows = []
            for slot in lengths:
                night = max(1, slot // 10)
                dur = max(1.5 if quick else 3.0, 30 * 3 * slot / 1e6)
                _say(f"[bench] slot precision: {mode} mode{' (timed changes)' if key == 'slot_signal_timed' else ''} "
                     f"({tbase} time base), slot {slot} us, night {night} us, "
                     f"{rate:.0f} pps for {dur:.1f} s, then probe trains")
                guard = EGRESS_GUARD_US if key == "slot_clock_guard" else 0
                timed = key == "slot_signal_timed"
                r = run_slot(build, mode, slot, night, rate, dur, time_base=tbase, egress_guard_us=guard, timed=timed)
                r["egress_guard_us"] = guard
                rows.append(r)
                if "error" in r:
                    _say(f"[bench]   error: {r['error']}")
                else:
                    be = (r.get("boundary_trains") or {}).get("error_us") or {}
                    _say(f"[bench]   boundary error p50/p99/max {_f(be.get('p50'), 0)}/{_f(be.get('p99'), 0)}/"
                         f"{_f(be.get('max'), 0)} us; left outside its matching's day {r['left_outside_day']} of "
                         f"{r['departed']} paced; reconfig loss {_pct(r['reconfig_loss'])} "
                         f"(bound {_pct(r['loss_bound'])})"
                         + (f"; slot-change delay p50/p99 {_f(r['signal_delay_us'].get('p50'), 0)}/"
                            f"{_f(r['signal_delay_us'].get('p99'), 0)} us" if mode == "signal" else ""))
            res[key] = rows
    if "throughput" in only:
        count = 20000 if quick else 60000
        _say(f"[bench] throughput: {count} frames, rotor (clock) vs passthrough, side by side")
        pt = run_throughput(build, "passthrough", count)
        ro = run_throughput(build, "rotor", count, "clock")
        pt2 = run_throughput(build, "passthrough", count)
        base = (pt.get("pps", 0) + pt2.get("pps", 0)) / 2
        res["throughput"] = {"passthrough": [pt, pt2], "rotor": ro,
                             "ratio": ro.get("pps", 0) / base if base else None}
        _say(f"[bench]   rotor {ro.get('pps', 0):.0f} pps / passthrough {base:.0f} pps = {_f(res['throughput']['ratio'])}")
    if "loss" in only:
        res["loss"] = run_loss(build, quick)
    if "dilation" in only:
        res["dilation"] = run_dilation(build, rate, quick)
    if "control" in only:
        _say("[bench] control plane: 108-rack, 6-rotor opera schedule on 6 switches")
        res["control_plane"] = run_control_plane(build)
        cp = res["control_plane"]
        if "error" not in cp:
            _say(f"[bench]   generate {cp['generate_s']:.2f} s, validate {cp['validate_s']:.2f} s, "
                 f"install max {cp['install_max_ms']:.0f} ms per switch")
    if "scale" in only:
        res["scale"] = run_scale(build, scale_sizes)
    if "agents" in only:
        from .agents import RATES_FPS, run_agents
        _say("[bench] RotorLB agents (in-process fabric): one heavy pair, RotorLB vs one-hop per pacing rate")
        res["agents"] = run_agents((1000, 4000) if quick else RATES_FPS)
        for r in res["agents"]:
            _say(f"[bench]   {r['rate_fps']} frames/s: ratio {r['ratio_vs_one_hop']} (model 3.0), "
                 f"{r['cpu_ms_per_relayed_mb']} ms CPU per relayed MB, keeps up: {r['keeps_up']}")
    if "datapath" in only:
        from ..host.datapath import missing
        from .datapath import run_datapath

        why = missing()
        if why:
            _say(f"[bench] datapath: SKIPPED, {why}")
        else:
            _say("[bench] agents' data paths: one window at a target rate, Python pacer vs rlbd (loopback)")
            res["datapath"] = run_datapath(quick, say=_say)
    if "energy" in only:
        from .energy import run_energy
        _say("[bench] energy accounting's per-frame loop: Python vs compiled (build/liblinkstate.so)")
        res["energy"] = run_energy(quick, say=_say)
    if "fabric-agents" in only:
        from ..fabric.nikss import missing_tools as ebpf_missing
        from .fabric_agents import run_fabric_agents

        miss = ebpf_missing() + [str(build / "ebpf" / f) for f in ("rotor.o", "tor.o") if not (build / "ebpf" / f).exists()]
        if miss:
            _say(f"[bench] fabric-agents: SKIPPED, missing {', '.join(miss)} (make build-ebpf; docs/toolchain.md)")
        else:
            _say("[bench] fabric-agents: one host's agent, one-hop rack 0 -> 1 on the eBPF fabric, Python vs rlbd")
            res["fabric_agents"] = run_fabric_agents(build, say=_say)
    if "claims" in only:
        from ..fabric.agents import LIVE_ROOT
        from .agents import run_claims
        _say(f"[bench] agents' claims: 16 agents, 40 a second each, the rack's file beside {out} vs in {LIVE_ROOT}")
        places = {"beside the results (disk)": out.parent.resolve()}
        if LIVE_ROOT.is_dir():
            places[f"{LIVE_ROOT} (JSON file)"] = LIVE_ROOT
        out.parent.mkdir(parents=True, exist_ok=True)
        res["claims"] = run_claims(places, seconds=5.0 if quick else 20.0,
                                   shm=LIVE_ROOT if LIVE_ROOT.is_dir() else None)
        for r in res["claims"]:
            _say(f"[bench]   {r['where']} ({r['fs']}): median {r['median_us']} us, worst {r['worst_ms']} ms, "
                 f"{r['over_20ms']} of {r['claims']} over 20 ms")
    if "kernel" in only:
        from ..fabric.nikss import missing_tools as ebpf_missing
        from .kernel import run_kernel

        miss = ebpf_missing() + [str(f) for f in (build / "ebpf" / "rotor.o", build / "ebpf" / "xdp_pass.o")
                                 if not f.exists()]
        if miss:
            _say(f"[bench] kernel: SKIPPED, missing {', '.join(miss)} (make build-ebpf; docs/toolchain.md)")
        else:
            res["kernel"] = run_kernel(build, quick)
    if "kernel-scale" in only:
        from ..fabric.nikss import missing_tools as ebpf_missing
        from .kernel_scale import SIZES as KSIZES
        from .kernel_scale import run_launch

        miss = ebpf_missing() + [str(build / "ebpf" / f) for f in ("rotor.o", "tor.o", "xdp_pass.o")
                                 if not (build / "ebpf" / f).exists()]
        if miss:
            _say(f"[bench] kernel-scale: SKIPPED, missing {', '.join(miss)} (make build-ebpf; docs/toolchain.md)")
        else:
            rows = []
            for racks, rotors in KSIZES:
                _say(f"[bench] kernel-scale: {racks} ToRs and {rotors} rotors as eBPF pipelines, ports attached")
                try:
                    r = run_launch(build, racks, rotors)
                except (subprocess.SubprocessError, OSError, RuntimeError) as ex:
                    r = {"racks": racks, "rotors": rotors, "error": str(ex)[:300]}
                    _say(f"[bench]   error: {r['error']}")
                else:
                    _say(f"[bench]   {r['pipelines']} pipelines, {r['ports']} ports in {r['launch_s']:.1f} s; "
                         f"maps {r['map_memlock_mib']:.0f} MiB, programs {r['prog_memlock_mib']:.1f} MiB")
                rows.append(r)
            res["kernel_scale"] = rows
    if "fabric-tcp" in only:
        from ..fabric.nikss import missing_tools as ebpf_missing
        from .fabric_tcp import run_fabric_tcp

        miss = ebpf_missing() + [str(build / "ebpf" / f) for f in ("rotor.o", "tor.o", "xdp_pass.o")
                                 if not (build / "ebpf" / f).exists()]
        targets = ("bmv2",) if miss else ("bmv2", "ebpf")
        if miss:
            _say(f"[bench] fabric-tcp: eBPF SKIPPED, missing {', '.join(miss)} (make build-ebpf; docs/toolchain.md)")
        _say(f"[bench] fabric-tcp: iperf3 and ping between two racks of make run's fabric on {', '.join(targets)}")
        with tempfile.TemporaryDirectory(prefix="p4rotor-fabric-tcp-") as runs:   # logs, not results
            res["fabric_tcp"] = run_fabric_tcp(build, Path(runs), targets, seconds=5.0 if quick else 10.0, say=_say)
    res["command"] = command
    if merge and out.exists():
        res = merge_results(json.loads(out.read_text()), res, only, command)
        _say(f"[bench] merged {', '.join(sorted(only))} into the results already in {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    _say(f"[bench] wrote {out}")
    return res
