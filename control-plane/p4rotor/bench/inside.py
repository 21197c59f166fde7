"""The measuring half of a benchmark, run inside the switch's namespace
(``python -m p4rotor.bench.inside WHAT ...``): its gRPC port and veths live there.  Prints one
JSON object (the result) on its last stdout line; bench/run.py starts it and reads that.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import finsy as fy

from .. import control as C
from .. import p4 as dp
from .. import schedule as S
from ..host import traffic as T
from ..control.acks import ack_delays_us, timed_margins_us
from ..control.passthrough import forward_entry
from ..experiments.frame_check import check_frames
from ..stats import summarize
from . import measure as M

PORTS = (1, 2, 3, 4)
CLOCK_IFACE = "t0p254"  # host side of switch 0's clock port (harness: veth s0p254 <-> t0p254)


def _ifaces(dev: int = 0) -> dict[int, str]:
    return {p: f"t{dev}p{p}" for p in PORTS}


async def _read_counter(sw: fy.Switch, name: str, index: int) -> tuple[int, int]:
    ents = [e async for e in sw.read(fy.P4CounterEntry(name, index=index))]
    d = ents[0].data if ents else None
    return (d.packet_count, d.byte_count) if d else (0, 0)


async def _drops(sw: fy.Switch, target: C.Target = C.BMV2) -> dict[str, int]:
    """Drops by cause, summed over the target's drop counters (Tofino: ingress and egress)."""
    return {c.name: sum([(await _read_counter(sw, name, int(c)))[0] for name in target.drop_counters])
            for c in dp.DropCause}


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
                            signal=C.SignalOptions(
                                ack_every=(0 if a.mode != "signal" else 1 if a.signal_timed
                                           else max(1, 2000 // a.slot_us)),
                                lead_us=("auto" if a.mode == "signal" and not a.signal_timed else 0.0),
                                timed=a.signal_timed),
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
        chk = check_frames(rx, sched, rotor, pm, t0_ns, tolerance_us=a.tolerance_us)
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
            out["signal_delay_us"] = summarize(ack_delays_us(c, "scheduled", windows))
            out["signal_transport_us"] = summarize(ack_delays_us(c, "sent", windows))
            out["signal_send_late_us"] = summarize((sent - sch) / 1000 for rt in c.runtimes.values()
                                                       for sch, sent, _, _ in rt.acks
                                                       if any(lo <= sch <= hi for lo, hi in windows))
            out["signal_timed"] = a.signal_timed
            out["signal_changes_acked"] = len(ack_delays_us(c, "scheduled", windows))
            out["signal_changes_acked_whole_run"] = len(ack_delays_us(c, "scheduled"))
            if a.signal_timed:
                late = (await _read_counter(sw, dp.C_CTRL, int(dp.CtrlCounter.SET_SLOT_LATE)))[0] - late0
                out["timed_late_whole_run"] = late  # counter: every change that arrived after its start
                out["timed_late"] = sum(1 for m in timed_margins_us(c, windows) if m < 0)
                out["timed_refused"] = sum(rt.refused for rt in c.runtimes.values())
                out["timed_margin_us"] = summarize(timed_margins_us(c, windows))

    asyncio.run(ctl.run(duration=0.05, after_ready=measure))
    return out


LOSS_PPS = 4000  # the loss benchmark's paced rate (BMv2 forwards tens of kpps)


def inside_throughput(a: argparse.Namespace) -> dict:
    """Frames/s through a program: blast from port 1, count what leaves port 2."""
    res = {}

    async def main():
        sw = fy.Switch("sw", f"127.0.0.1:{a.grpc_port}", fy.SwitchOptions(
            p4info=Path(a.p4info), p4blob=Path(a.p4blob), device_id=1))
        async with sw:
            await sw.delete_all()
            if a.program == "passthrough":
                await sw.write([+forward_entry(1, 2)])
            else:
                s = S.from_json({"version": 1, "racks": 4, "slot_us": 60_000_000, "reconfig_us": 0,
                                 "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2]]}]})
                seq = 1
                await C.write_batched(sw, C.rotor_entities(s, s.rotors[0], C.default_port_map(4),
                                                           dp.MODE_SIGNAL if a.mode == "signal" else dp.MODE_CLOCK,
                                                           epoch_us=0))
                if a.mode == "signal":
                    await sw.write([C.set_slot_packet(0, 0, False, seq=seq)])
                if a.loss:  # optical loss on the frames leaving port 2 (issue #17)
                    await C.write_batched(sw, [+e for e in C.loss_entries([C.LinkLoss(2, "out", a.loss)])])
            await asyncio.sleep(0.2)
            loop = asyncio.get_running_loop()
            rcv = T.Receiver({2: _ifaces()[2]}).start()
            if a.loss:
                # Paced where BMv2 keeps up: a blast overflows its input (frames lost before the
                # pipeline) and its egress queue (silently), and the loss measured is not the P4's.
                t = time.perf_counter()
                await loop.run_in_executor(None, T.send_paced, {1: _ifaces()[1]}, LOSS_PPS, a.count / LOSS_PPS)
                secs = time.perf_counter() - t
            else:
                secs = await loop.run_in_executor(None, T.blast, _ifaces()[1], 1, a.count)
            rx = await loop.run_in_executor(None, rcv.stop, 1.0)
            if rx:
                span = (max(r.rx_ns for r in rx) - min(r.rx_ns for r in rx)) / 1e9
            else:
                span = 0
            res.update({"program": a.program, "mode": a.mode, "offered": a.count, "send_s": secs,
                        "received": len(rx), "rx_span_s": span,
                        "pps": len(rx) / span if span > 0 else 0.0})
            if a.program == "rotor":
                await asyncio.sleep(0.5)
                drops = {}
                async for e in sw.read(fy.P4CounterEntry(dp.C_DROP)):
                    if e.data is not None and e.data.packet_count:
                        drops[dp.DropCause(e.index).name] = e.data.packet_count
                rx_in = 0
                async for e in sw.read(fy.P4CounterEntry(dp.C_RX)):
                    rx_in += e.data.packet_count if e.data is not None else 0
                res.update({"drops": drops, "pipeline_in": rx_in, "loss_configured": a.loss})

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
    p.add_argument("--loss", type=float, default=0.0, help="throughput: optical loss rate on port 2 out")
    a = p.parse_args(argv)
    import faulthandler

    faulthandler.dump_traceback_later(a.duration + 60, exit=True)  # a hang reports where it hung
    res = {"slot": inside_slot_run, "throughput": inside_throughput, "install": inside_install}[a.what](a)
    print(json.dumps(res))
    return 0


def main(argv: list[str] | None = None) -> int:
    return inside_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
