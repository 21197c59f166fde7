"""Benchmarks (``p4rotor bench``): slot precision, reconfiguration loss, throughput, control plane.

The outer process owns switches (harness: own namespace, polled readiness, stop by
PID); the measurement itself runs inside that namespace (``python -m p4rotor.bench
inside ...``) because the switch's gRPC port and veths live there.  A benchmark never
fails the build: it reports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import finsy as fy

from .. import control as C
from .. import p4 as dp
from . import measure as M
from .. import schedule as S
from ..host import traffic as T
from ..fabric.switch import ptf_bench
from ..stats import summarize

PORTS = (1, 2, 3, 4)
CLOCK_IFACE = "t0p254"  # host side of switch 0's clock port (harness: veth s0p254 <-> t0p254)


def _ifaces(dev: int = 0) -> dict[int, str]:
    return {p: f"t{dev}p{p}" for p in PORTS}


async def _read_counter(sw: fy.Switch, name: str, index: int) -> tuple[int, int]:
    ents = [e async for e in sw.read(fy.P4CounterEntry(name, index=index))]
    d = ents[0].data if ents else None
    return (d.packet_count, d.byte_count) if d else (0, 0)


async def _drops(sw: fy.Switch) -> dict[str, int]:
    return {c.name: (await _read_counter(sw, dp.C_DROP, int(c)))[0] for c in dp.DropCause}


# ---------------------------------------------------------------------------
# inside the namespace
# ---------------------------------------------------------------------------


def inside_slot_run(a: argparse.Namespace) -> dict:
    """One rotor, 3 matchings, probes from rack 0 at a fixed rate; returns the metrics."""
    sched = S.generate_rotornet(4, 1, a.slot_us, a.night_us)
    rotor = sched.rotors[0]
    pm = C.default_port_map(4)
    spec = C.SwitchSpec("rotor0", "127.0.0.1", a.grpc_port, clock_iface=a.clock_iface or None)
    ctl = C.RotorController(sched, [spec], mode=a.mode, egress_guard_us=a.egress_guard_us,
                            p4info=Path(a.p4info), p4blob=Path(a.p4blob), lead_s=1.0,
                            ack_every=(0 if a.mode != "signal" else 1 if a.signal_timed else max(1, 2000 // a.slot_us)),
                            signal_lead_us=("auto" if a.mode == "signal" and not a.signal_timed else 0.0),
                            signal_timed=a.signal_timed,
                            on_event=lambda m: None)
    out: dict = {}

    async def measure(c: C.RotorController) -> None:
        loop = asyncio.get_running_loop()
        t0_ns = c.tb.wall_ns(c.t0_common_us)
        sw = c.switches[0]
        before = await _drops(sw)
        late0 = (await _read_counter(sw, dp.C_CTRL, int(dp.CtrlCounter.SET_SLOT_LATE)))[0]
        # The receiver runs in a process of its own: in this one it would hold the interpreter
        # lock against the controller's event loop, which is what signal mode measures.
        ctx = multiprocessing.get_context("spawn")
        rx_file = f"/tmp/p4rotor-bench-rx-{os.getpid()}.jsonl"
        ready, stop = ctx.Event(), ctx.Event()
        rproc = ctx.Process(target=T.receive_until, args=({p: i for p, i in _ifaces().items() if p != 1},
                                                          stop, rx_file, ready))
        rproc.start()
        await loop.run_in_executor(None, ready.wait, 30)
        start = max(time.time_ns() + 200_000_000, t0_ns)
        proc = ctx.Process(target=T.send_paced, args=(_ifaces(), a.rate, a.duration, start, [1]))
        proc.start()
        await loop.run_in_executor(None, proc.join)
        # Signal-mode figures count the changes scheduled while traffic ran (paced, trains):
        # between them this process parses captures and may hold up its own controller.
        windows = [(start, time.time_ns())]
        await asyncio.sleep(0.3)
        stop.set()
        await loop.run_in_executor(None, rproc.join)
        rx = T.load_rx(rx_file)
        os.unlink(rx_file)
        after = await _drops(sw)
        # Probe trains around day starts: the boundary error at the resolution of the train.
        trains = []
        if a.trains:
            every = max(1, -(-a.train_period_us // a.slot_us))
            k0 = int((time.time_ns() + 300_000_000 - t0_ns) / 1000 // a.slot_us) + 1
            trains = [(i, k0 + i * every) for i in range(a.trains)]
            bnds = [t0_ns + (k * a.slot_us + a.night_us) * 1000 for _, k in trains]
            before_us = a.train_before_us
            tproc = multiprocessing.get_context("spawn").Process(
                target=T.send_trains, args=(_ifaces()[1], 1, bnds, before_us, a.train_after_us, a.train_gap_us,
                                            a.train_warmup_us))
            tproc.start()
            await loop.run_in_executor(None, tproc.join)
            windows.append((bnds[0] - 1_000_000, bnds[-1] + 1_000_000))
            await asyncio.sleep(0.3)
        sent = int(a.duration * a.rate)
        chk = M.check_frames(rx, sched, rotor, pm, t0_ns, tolerance_us=a.tolerance_us)
        dchk = None
        if a.pcap_dir:
            st = M.switch_times(a.pcap_dir, {f"s0p{p}": p for p in PORTS})
            # Paced frames (the fixed offered load) and train frames are judged apart: a train
            # is a burst beyond BMv2's rate, whose backlog says little about the steady load.
            paced = M.SwitchTimes({k: v for k, v in st.arrivals.items() if k[1] < T.TRAIN_SEQ_BASE},
                                  {k: v for k, v in st.departures.items() if k[1] < T.TRAIN_SEQ_BASE})
            burst = M.SwitchTimes({k: v for k, v in st.arrivals.items() if k[1] >= T.TRAIN_SEQ_BASE},
                                  {k: v for k, v in st.departures.items() if k[1] >= T.TRAIN_SEQ_BASE})
            dchk = M.check_departures(paced, sched, rotor, pm, t0_ns)
            tchk = M.check_departures(burst, sched, rotor, pm, t0_ns)
            if a.dump_t0:
                dump = []
                for i, k in trains[:20]:
                    b = t0_ns + (k * a.slot_us + a.night_us) * 1000
                    fr = sorted((arr, seq) for (port, seq), arr in st.arrivals.items()
                                if port == 1 and seq >= T.TRAIN_SEQ_BASE and (seq - T.TRAIN_SEQ_BASE) >> 16 == i)
                    dump.append([(round((arr - b) / 1000, 1), (st.departures.get((1, seq)) or (None, None))[1],
                                  round(((st.departures.get((1, seq)) or (b, 0))[0] - b) / 1000, 1)) for arr, seq in fr])
                Path(a.dump_t0).write_text(json.dumps({"t0_ns": t0_ns, "trains": trains, "frames": dump}))
            tb = M.train_boundary_errors(st, sched, rotor, pm, t0_ns, 1, trains, T.TRAIN_SEQ_BASE)
            errs = [b.error_us for b in tb if b.error_us is not None]
            out["boundary_trains"] = {
                "trains": len(trains), "resolved": len(errs), "gap_us": a.train_gap_us,
                "before_us": a.train_before_us, "after_us": a.train_after_us,
                "error_us": summarize(errs), "abs_error_us": summarize(abs(e) for e in errs),
                "resolution_us": summarize(b.resolution_us for b in tb
                                               if b.error_us is not None and b.resolution_us == b.resolution_us),
                "late_over_gap": sum(1 for e in errs if e > a.train_gap_us),
                "departed": tchk.departed, "left_outside_day": tchk.outside,
                "left_outside_us": summarize(tchk.outside_us),
            }
        transit = [(r.rx_ns - r.send_ns) / 1000 for r in rx]
        day_frac = sched.day_us / sched.slot_us
        delta = {k: after[k] - before[k] for k in after}
        admitted = sent - delta["NIGHT"] - delta["NOT_STARTED"]
        skew = await c.measure_skew(4) if a.mode == "clock" else {}
        # The PacketOut time base, measured against the installed offset: its bias, side by side.
        po_skew = await c.measure_skew(8, packet_out=True) if a.clock_iface else {}
        out.update({
            "mode": a.mode, "slot_us": a.slot_us, "night_us": a.night_us, "rate_pps": a.rate,
            "duration_s": a.duration, "sent": sent, "received": len(rx), "drops": delta,
            "late_at_receiver": chk.stale, "wrong_port": chk.wrong_port,
            "worst_late_at_receiver_us": chk.worst_late_us,
            "departed": dchk.departed if dchk else None,
            "left_outside_day": dchk.outside if dchk else None,
            "left_outside_us": summarize(dchk.outside_us) if dchk else None,
            "misswitched": dchk.misswitched if dchk else None,
            "misswitch_us": summarize(dchk.miss_us) if dchk else None,
            "reconfig_loss": delta["STALE"] / admitted if admitted > 0 else None,
            "expected_day_fraction": day_frac,
            "transit_us": summarize(transit),
            "loss_bound": (summarize(transit).get("mean", 0) / a.slot_us) if transit else None,
            "boundary_error_us": summarize(M.boundary_errors(rx, sched, rotor, pm, t0_ns)),
            "probe_gap_us": 1e6 / a.rate,
            "clock_residual_us": skew,
            "packet_out_minus_clock_port_us": po_skew,
            "time_base": c.runtimes["rotor0"].offset.method if c.runtimes["rotor0"].offset else None,
            "clock_offset_uncertainty_us": (c.runtimes["rotor0"].offset.uncertainty_us
                                            if c.runtimes["rotor0"].offset else None),
            "clock_port_spread_us": (c.runtimes["rotor0"].offset.spread_us
                                     if c.runtimes["rotor0"].offset else None),
        })
        if a.mode == "signal":
            # The pipeline's boundary error: when it applied each change, after its boundary.
            out["signal_delay_us"] = summarize(c.ack_delays_us("scheduled", windows))
            out["signal_transport_us"] = summarize(c.ack_delays_us("sent", windows))
            out["signal_send_late_us"] = summarize((sent - sch) / 1000 for rt in c.runtimes.values()
                                                       for sch, sent, _, _ in rt.acks
                                                       if any(lo <= sch <= hi for lo, hi in windows))
            out["signal_timed"] = a.signal_timed
            out["signal_changes_acked"] = len(c.ack_delays_us("scheduled", windows))
            out["signal_changes_acked_whole_run"] = len(c.ack_delays_us("scheduled"))
            if a.signal_timed:
                late = (await _read_counter(sw, dp.C_CTRL, int(dp.CtrlCounter.SET_SLOT_LATE)))[0] - late0
                out["timed_late_whole_run"] = late  # counter: every change that arrived after its start
                out["timed_late"] = sum(1 for m in c.timed_margins_us(windows) if m < 0)
                out["timed_refused"] = sum(rt.refused for rt in c.runtimes.values())
                out["timed_margin_us"] = summarize(c.timed_margins_us(windows))

    asyncio.run(ctl.run(duration=0.05, after_ready=measure))
    return out


def inside_throughput(a: argparse.Namespace) -> dict:
    """Frames/s through a program: blast from port 1, count what leaves port 2."""
    res = {}

    async def main():
        sw = fy.Switch("sw", f"127.0.0.1:{a.grpc_port}", fy.SwitchOptions(
            p4info=Path(a.p4info), p4blob=Path(a.p4blob), device_id=1))
        async with sw:
            await sw.delete_all()
            if a.program == "passthrough":
                await sw.write([+fy.P4TableEntry("PIngress.port_map", match=fy.P4TableMatch(in_port=1),
                                                 action=fy.P4TableAction("PIngress.forward", port=2))])
            else:
                s = S.from_json({"version": 1, "racks": 4, "slot_us": 60_000_000, "reconfig_us": 0,
                                 "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})
                seq = 1
                await C.write_batched(sw, C.rotor_entities(s, s.rotors[0], C.default_port_map(4),
                                                           dp.MODE_SIGNAL if a.mode == "signal" else dp.MODE_CLOCK,
                                                           epoch_us=0))
                if a.mode == "signal":
                    await sw.write([C.set_slot_packet(0, 0, False, seq=seq)])
            await asyncio.sleep(0.2)
            loop = asyncio.get_running_loop()
            rcv = T.Receiver({2: _ifaces()[2]}).start()
            secs = await loop.run_in_executor(None, T.blast, _ifaces()[1], 1, a.count)
            rx = await loop.run_in_executor(None, rcv.stop, 1.0)
            if rx:
                span = (max(r.rx_ns for r in rx) - min(r.rx_ns for r in rx)) / 1e9
            else:
                span = 0
            res.update({"program": a.program, "mode": a.mode, "offered": a.count, "send_s": secs,
                        "received": len(rx), "rx_span_s": span,
                        "pps": len(rx) / span if span > 0 else 0.0})

    asyncio.run(main())
    return res


def inside_install(a: argparse.Namespace) -> dict:
    """Install one schedule on several switches at once; report per-switch install times."""
    sched = S.load(a.schedule)
    ports = [int(x) for x in a.grpc_ports.split(",")]
    specs = [C.SwitchSpec(r.name, "127.0.0.1", port, i + 1) for i, (r, port) in enumerate(zip(sched.rotors, ports))]
    ctl = C.RotorController(sched, specs, mode="clock", p4info=Path(a.p4info), p4blob=Path(a.p4blob),
                            lead_s=2.0, probes=4, on_event=lambda m: None)
    t = time.perf_counter()
    asyncio.run(ctl.run(duration=0.05, connect_timeout=60))
    wall = time.perf_counter() - t
    return {"switches": len(specs), "wall_s_incl_pipeline_push": wall,
            "install_ms": {n: rt.install_ms for n, rt in ctl.runtimes.items()},
            "entities": {n: rt.entities for n, rt in ctl.runtimes.items()}}


def inside_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="p4rotor.bench inside")
    p.add_argument("what", choices=["slot", "throughput", "install"])
    p.add_argument("--schedule")
    p.add_argument("--grpc-ports")
    p.add_argument("--grpc-port", type=int, default=0)
    p.add_argument("--p4info", required=True)
    p.add_argument("--p4blob", required=True)
    p.add_argument("--mode", default="clock")
    p.add_argument("--slot-us", type=int, default=1000)
    p.add_argument("--night-us", type=int, default=100)
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--tolerance-us", type=float, default=0.0)
    p.add_argument("--pcap-dir", help="BMv2 --pcap directory: exact switch arrival/departure times")
    p.add_argument("--program", default="rotor")
    p.add_argument("--egress-guard-us", type=int, default=0)
    p.add_argument("--dump-t0", help="debug: write t0_ns and the trains here")
    p.add_argument("--clock-iface", default="", help="host side of the clock port (time probes)")
    p.add_argument("--trains", type=int, default=0, help="probe trains around this many day starts")
    p.add_argument("--train-period-us", type=int, default=5000, help="at most one train per this long")
    p.add_argument("--train-before-us", type=float, default=40)
    p.add_argument("--train-after-us", type=float, default=40)
    p.add_argument("--train-gap-us", type=float, default=4)
    p.add_argument("--train-warmup-us", type=float, default=100, help="warm-up frame this long before a train")
    p.add_argument("--signal-timed", action="store_true", help="signal mode: timed slot changes")
    p.add_argument("--count", type=int, default=20000)
    a = p.parse_args(argv)
    import faulthandler

    faulthandler.dump_traceback_later(a.duration + 60, exit=True)  # a hang reports where it hung
    res = {"slot": inside_slot_run, "throughput": inside_throughput, "install": inside_install}[a.what](a)
    print(json.dumps(res))
    return 0


# ---------------------------------------------------------------------------
# outside: orchestration
# ---------------------------------------------------------------------------


def _inside(ns, sp, build: Path, program: str, *args: str, timeout: float = 120) -> dict:
    cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.run", "inside", *args,
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


def run_throughput(build: Path, program: str, count: int, mode: str = "clock") -> dict:
    with ptf_bench(1) as (ns, sws, _):
        return _inside(ns, sws[0], build, program, "throughput", "--program", program,
                       "--count", str(count), "--mode", mode)


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
        cmd = ns.prefix() + [sys.executable, "-m", "p4rotor.bench.run", "inside", "install",
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


def run_scale(build: Path, sizes=SCALE_SIZES, rotors: int = 4, out: Path = Path("results/scale"),
              mem_limit_mib: float = 20 * 1024, reprobe_rounds: int = 2) -> list[dict]:
    """The largest RotorNet fabric (racks x rotors) that launches and passes the connectivity check.

    Stops at the first size that fails, and before a size whose switches would need more than
    ``mem_limit_mib`` (estimated from the last size's BMv2 RSS per switch)."""
    from ..experiments import runner as E

    rows = []
    per_switch = BMV2_MIB_GUESS
    for n in sizes:
        need = per_switch * (n + rotors)
        if need > mem_limit_mib:
            rows.append({"racks": n, "rotors": rotors, "passed": False, "wall_s": 0.0,
                         "error": f"skipped: ~{need / 1024:.1f} GiB of BMv2 RSS > limit {mem_limit_mib / 1024:.0f} GiB"})
            _say(f"[bench]   {rows[-1]}")
            break
        sched = S.generate_rotornet(n, rotors, 1000, 100)
        mem = {}

        def sample(emu) -> None:
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
        _say(f"[bench] scale: {n} racks x {rotors} rotors ({n + rotors} BMv2 switches)")
        try:
            res = E.connectivity(build, out / f"{n}x{rotors}", sched, dilation=2000.0, cycles=1,
                                 probes_per_cell=2, on_running=sample, reprobe_rounds=reprobe_rounds)
            rp = res["reprobe"]
            row = {"racks": n, "rotors": rotors, "cells": res["cells"], "agree": res["agree"],
                   "cells_total": res["cells_total"], "passed": res["agree"] == res["cells"] and res["cells"] > 0,
                   "false_positive": res["false_positive"], "missed": res["missed"], "unjudged": res["unjudged"],
                   "first_pass_agree": res["first_pass"]["agree"], "first_pass_cells": res["first_pass"]["cells"],
                   "first_pass_rate_pps": res["first_pass"]["rate_pps"],
                   "rounds": rp["rounds_run"], "reprobed": rp["reprobed"],
                   "reprobed_per_round": [r["cells"] for r in rp["rounds"]],
                   "resolved_by_reprobe": rp["resolved"], "newly_judged_by_reprobe": rp["newly_judged"],
                   "probes_sent": res["probes_sent"], "probes_received": res["probes_received"],
                   "wall_s": time.monotonic() - t, **mem}
        except Exception as ex:  # a benchmark reports, it does not fail
            row = {"racks": n, "rotors": rotors, "passed": False, "error": str(ex)[:300],
                   "wall_s": time.monotonic() - t, **mem}
        rows.append(row)
        _say(f"[bench]   {row}")
        if mem.get("switches"):
            per_switch = max(per_switch if rows[:-1] else 0, mem["bmv2_rss_mib"] / mem["switches"])
        if not row["passed"]:
            break
    return rows


def merge_results(old: dict, new: dict, only: set[str], command: str) -> dict:
    """A partial run (``--only``) merged into the previous results: its sections replace the old
    ones (scale rows by racks x rotors, so other sizes stay), everything else is kept."""
    sections = {"slot": ("slot_clock", "slot_signal", "slot_signal_timed", "slot_clock_packet_out", "slot_clock_guard"), "throughput": ("throughput",),
                "control": ("control_plane",), "scale": ("scale",)}
    res = dict(old)
    for what in sorted(only):
        for key in sections.get(what, ()):
            if key not in new:
                continue
            if key == "scale" and old.get("scale"):
                rows = {(r["racks"], r["rotors"]): r for r in old["scale"]}
                rows.update({(r["racks"], r["rotors"]): r for r in new["scale"]})
                res[key] = [rows[k] for k in sorted(rows)]
            else:
                res[key] = new[key]
    res["command"] = old.get("command", "p4rotor bench")
    res["merged"] = [m for m in old.get("merged", []) if m["command"] != command] + [
        {"only": sorted(only), "started": new["started"], "machine": new["machine"], "command": command}]
    return res


EGRESS_GUARD_US = 150  # slot_clock_guard rows: covers BMv2's egress-to-wire latency seen here
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
    if "control" in only:
        _say("[bench] control plane: 108-rack, 6-rotor opera schedule on 6 switches")
        res["control_plane"] = run_control_plane(build)
        cp = res["control_plane"]
        if "error" not in cp:
            _say(f"[bench]   generate {cp['generate_s']:.2f} s, validate {cp['validate_s']:.2f} s, "
                 f"install max {cp['install_max_ms']:.0f} ms per switch")
    if "scale" in only:
        res["scale"] = run_scale(build, scale_sizes)
    res["command"] = command
    if merge and out.exists():
        res = merge_results(json.loads(out.read_text()), res, only, command)
        _say(f"[bench] merged {', '.join(sorted(only))} into the results already in {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    _say(f"[bench] wrote {out}")
    return res


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _f(x, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def markdown(res: dict) -> str:
    lines = [f"Machine: {res['machine']['cores']} cores, Python {res['machine']['python']}, "
             f"kernel {res['machine']['kernel']}; run started {res['started']}; offered load "
             f"{res['rate_pps']:.0f} frames/s from one port.", ""]
    for key, title in (("slot_clock", "clock mode, clock-port time base"),
                       ("slot_clock_packet_out", "clock mode, PacketOut time base (the old one, for comparison)"),
                       ("slot_clock_guard", f"clock mode, clock-port time base, egress guard {EGRESS_GUARD_US} us"),
                       ("slot_signal", "signal mode (immediate changes, sent at the boundary)"),
                       ("slot_signal_timed", "signal mode, timed changes (sent one slot ahead, applied by the "
                                             "switch's clock)")):
        rows = res.get(key)
        if not rows:
            continue
        signal = key.startswith("slot_signal")
        extra = (" slot change applied after its boundary (acks) p50 / p99 / max us | reached the switch "
                 "before its start p50 / min us; late |" if key == "slot_signal_timed"
                 else " slot-change delay (acks) p50 / p99 us |" if signal
                 else " clock offset +/- us (clock port: half the proven bracket; PacketOut: RTT/2) / PacketOut minus clock-port us |")
        lines += [f"### Slot precision and reconfiguration loss, {title}", "",
                  "| slot us | night us | boundary error p50 / p99 / max us (trains resolved) "
                  "| paced frames departed | left outside its matching's day (by max us) "
                  "| arrived outside its matching's day (by p50 / p99 us) | reconfig loss | bound |" + extra,
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r.get('slot_us', '?')} | | error: {r['error'][:80]} | | | | | | |")
                continue
            ms = r.get("misswitch_us") or {}
            lo = r.get("left_outside_us") or {}
            bt = r.get("boundary_trains") or {}
            be = bt.get("error_us") or {}
            row = (f"| {r['slot_us']} | {r['night_us']} | {_f(be.get('p50'), 0)} / {_f(be.get('p99'), 0)} / "
                   f"{_f(be.get('max'), 0)} ({bt.get('resolved', 0)}/{bt.get('trains', 0)}) | {r['departed']} | "
                   f"{r['left_outside_day']} ({_f(lo.get('max'), 0)}) | {r['misswitched']} "
                   f"({_f(ms.get('p50'), 0)} / {_f(ms.get('p99'), 0)}) | "
                   f"{_pct(r['reconfig_loss'])} | {_pct(r['loss_bound'])} |")
            if key == "slot_signal_timed":
                sd = r.get("signal_delay_us", {})
                tm = r.get("timed_margin_us", {})
                row += (f" {_f(sd.get('p50'), 0)} / {_f(sd.get('p99'), 0)} / {_f(sd.get('max'), 0)} "
                        f"(n={sd.get('n', 0)}) | {_f(tm.get('p50'), 0)} / {_f(tm.get('min'), 0)}; "
                        f"{r.get('timed_late', 'n/a')} of {r.get('signal_changes_acked', 'n/a')} |")
            elif signal:
                sd = r.get("signal_delay_us", {})
                row += f" {_f(sd.get('p50'), 0)} / {_f(sd.get('p99'), 0)} |"
            else:
                po = r.get("packet_out_minus_clock_port_us") or {}
                row += (f" {_f(r.get('clock_offset_uncertainty_us'), 1)} / "
                        + (", ".join(f"{v:+d}" for v in po.values()) or "n/a") + " |")
            lines.append(row)
        lines.append("")
    tp = res.get("throughput")
    if tp:
        lines += ["### Pipeline throughput", "",
                  f"rotor (clock mode, one circuit): {tp['rotor'].get('pps', 0):.0f} frames/s; trivial port-to-port "
                  f"program, same BMv2, same traffic, measured before and after: "
                  + ", ".join(f"{x.get('pps', 0):.0f}" for x in tp["passthrough"])
                  + f" frames/s; ratio **{_f(tp['ratio'])}**.", ""]
    cp = res.get("control_plane")
    if cp and "error" not in cp:
        lines += ["### Control plane at opera-sim scale", "",
                  f"{cp['racks']} racks, {cp['rotors']} rotors: generate {cp['generate_s']:.2f} s, validate "
                  f"{cp['validate_s']:.2f} s, install on {cp['switches']} switches concurrently: max "
                  f"**{cp['install_max_ms']:.0f} ms** per switch ({max(cp['entities'].values())} entities each)"
                  f"; whole run incl. pipeline push {cp['wall_s_incl_pipeline_push']:.1f} s.", ""]
    sc = res.get("scale")
    if sc:
        lines += ["### Scale (RotorNet, connectivity check in Mininet, dilation 2000)", "",
                  "*cells agree*: (slot, src, dst) cells measured as the schedule predicts, of those probed "
                  "(of all). *re-probe*: rounds run, cells re-probed per round (live cells whose every probe "
                  "was lost, plus cells no probe fell in), live cells resolved by a re-probe.", "",
                  "| racks x rotors | BMv2 switches | connectivity cells agree | first pass | passed "
                  "| re-probe: rounds; cells per round; resolved | BMv2 RSS total MiB | wall s |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sc:
            total = f" (of {r['cells_total']})" if r.get("cells_total") else ""
            first = (f"{r['first_pass_agree']}/{r['first_pass_cells']}" if "first_pass_agree" in r else "-")
            if "rounds" in r:
                rp = (f"{r['rounds']}; {', '.join(str(x) for x in r.get('reprobed_per_round', [])) or '-'}; "
                      f"{r.get('resolved_by_reprobe', 0)}")
            else:
                rp = "- (no re-probe)"
            if r["passed"]:
                ok = "yes"
            elif "error" in r:
                ok = "no: " + r["error"][:100]
            else:
                ok = (f"no: {r.get('false_positive', '?')} across a dark circuit, "
                      f"{r.get('missed', '?')} live with every probe lost" if "missed" in r else "no: mismatch")
            lines.append(f"| {r['racks']} x {r['rotors']} | {r.get('switches', '?')} | {r.get('agree', '-')}/"
                         f"{r.get('cells', '-')}{total} | {first} | {ok} | {rp} | "
                         f"{_f(r.get('bmv2_rss_mib'), 0)} | {r['wall_s']:.0f} |")
        lines.append("")
    return "\n".join(lines)


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def update_doc(doc: Path, res: dict, command: str) -> None:
    note = "".join(f"; then `{m['command']}` (started {m['started']}), merged" for m in res.get("merged", []))
    body = f"{BEGIN}\nCommand: `{res.get('command', command)}`{note}\n\n{markdown(res)}\n{END}"
    text = doc.read_text() if doc.exists() else "# Performance\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + body + text[text.index(END) + len(END):]
    else:
        text += "\n" + body + "\n"
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "inside":
        return inside_main(argv[1:])
    raise SystemExit("use 'p4rotor bench'")


if __name__ == "__main__":
    sys.exit(main())
