"""The benchmark report: markdown tables from results/bench.json, into docs/performance.md."""

from __future__ import annotations

from pathlib import Path

EGRESS_GUARD_US = 150  # slot_clock_guard rows: covers BMv2's egress-to-wire latency seen here

def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def fmt(x, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def markdown(res: dict) -> str:
    lines = [f"Machine: {res['machine']['cores']} cores, Python {res['machine']['python']}, "
             f"kernel {res['machine']['kernel']}; offered load "
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
            row = (f"| {r['slot_us']} | {r['night_us']} | {fmt(be.get('p50'), 0)} / {fmt(be.get('p99'), 0)} / "
                   f"{fmt(be.get('max'), 0)} ({bt.get('resolved', 0)}/{bt.get('trains', 0)}) | {r['departed']} | "
                   f"{r['left_outside_day']} ({fmt(lo.get('max'), 0)}) | {r['misswitched']} "
                   f"({fmt(ms.get('p50'), 0)} / {fmt(ms.get('p99'), 0)}) | "
                   f"{pct(r['reconfig_loss'])} | {pct(r['loss_bound'])} |")
            if key == "slot_signal_timed":
                sd = r.get("signal_delay_us", {})
                tm = r.get("timed_margin_us", {})
                row += (f" {fmt(sd.get('p50'), 0)} / {fmt(sd.get('p99'), 0)} / {fmt(sd.get('max'), 0)} "
                        f"(n={sd.get('n', 0)}) | {fmt(tm.get('p50'), 0)} / {fmt(tm.get('min'), 0)}; "
                        f"{r.get('timed_late', 'n/a')} of {r.get('signal_changes_acked', 'n/a')} |")
            elif signal:
                sd = r.get("signal_delay_us", {})
                row += f" {fmt(sd.get('p50'), 0)} / {fmt(sd.get('p99'), 0)} |"
            else:
                po = r.get("packet_out_minus_clock_port_us") or {}
                row += (f" {fmt(r.get('clock_offset_uncertainty_us'), 1)} / "
                        + (", ".join(f"{v:+d}" for v in po.values()) or "n/a") + " |")
            lines.append(row)
        lines.append("")
    tp = res.get("throughput")
    if tp:
        lines += ["### Pipeline throughput", "",
                  f"rotor (clock mode, one circuit): {tp['rotor'].get('pps', 0):.0f} frames/s; trivial port-to-port "
                  f"program, same BMv2, same traffic, measured before and after: "
                  + ", ".join(f"{x.get('pps', 0):.0f}" for x in tp["passthrough"])
                  + f" frames/s; ratio **{fmt(tp['ratio'])}**.", ""]
    if res.get("dilation"):
        lines += ["### Fidelity vs dilation: one schedule, 1024 us slots, 102 us nights", "",
                  "One rotor in clock mode (clock-port time base), the schedule's times multiplied by the "
                  "dilation; errors in wall us and, in brackets, emulated us (wall / dilation) — what the "
                  "emulated fabric sees. Pick the smallest dilation whose emulated error and loss you can "
                  "accept (plot: docs/img/dilation.png).", "",
                  "| dilation | slot / night wall us | boundary error p50 / p99 wall us (emulated) "
                  "| left outside its matching's day | reconfig loss | bound |",
                  "|---|---|---|---|---|---|"]
        for r in res["dilation"]:
            if "error" in r:
                lines.append(f"| {r['dilation']} | | error: {r['error'][:80]} | | | |")
                continue
            be = (r.get("boundary_trains") or {}).get("error_us") or {}
            d = r["dilation"]
            emu = " / ".join(fmt(None if be.get(k) is None else be[k] / d, 1) for k in ("p50", "p99"))
            lines.append(f"| {d} | {r['slot_us']} / {r['night_us']} | {fmt(be.get('p50'), 0)} / "
                         f"{fmt(be.get('p99'), 0)} ({emu}) | {r['left_outside_day']} of {r['departed']} | "
                         f"{pct(r['reconfig_loss'])} | {pct(r['loss_bound'])} |")
        lines.append("")
    if res.get("loss"):
        lines += ["### Optical loss injected in P4 ([Zhuo19 §3])", "",
                  "One rotor port loses frames leaving it with the configured probability (table `loss_out`, "
                  "the target's random extern); frames blasted through one circuit; measured = frames counted "
                  "`OPTICAL_LOSS` / frames the pipeline took in.", "",
                  "| configured | frames in | counted OPTICAL_LOSS | measured | off by | other drops | lost end to end |",
                  "|---|---|---|---|---|---|---|"]
        for r in res["loss"]:
            if "error" in r:
                lines.append(f"| {r['rate']:g} | error: {r['error'][:80]} | | | | | |")
                continue
            lines.append(f"| {r['rate']:g} | {r['pipeline_in']} | {r['optical_loss']} | "
                         f"{fmt(r['measured'], 4)} | {pct(r['relative_error'])} | "
                         f"{sum(r['other_drops'].values())} | {pct(r['end_to_end_loss'])} |")
        lines.append("")
    cp = res.get("control_plane")
    if cp and "error" not in cp:
        lines += ["### Control plane at opera-sim scale", "",
                  f"{cp['racks']} racks, {cp['rotors']} rotors: generate {cp['generate_s']:.2f} s, validate "
                  f"{cp['validate_s']:.2f} s, install on {cp['switches']} switches concurrently: max "
                  f"**{cp['install_max_ms']:.0f} ms** per switch ({max(cp['entities'].values())} entities each)"
                  f"; whole run incl. pipeline push {cp['wall_s_incl_pipeline_push']:.1f} s.", ""]
    sc = res.get("scale")
    if sc:
        lines += ["### Scale (connectivity check in Mininet)", "",
                  "*cells agree*: (slice, src, dst) cells measured as the schedule predicts, of those probed "
                  "(of all). *re-probe*: rounds run, cells re-probed per round (live cells whose every probe "
                  "was lost, plus cells no probe fell in), live cells resolved by a re-probe. *schedule*: "
                  "RotorNet rows (dilation 2000) on a BMv2 per ToR and rotor; Opera rows on the fabric named, "
                  "dilated so that the first pass offers ~6 000 probes/s to the whole fabric. *launch s*: "
                  "switches started, entities installed, reachability checked; *wall s* includes it. *memory*: "
                  "BMv2's RSS, or on eBPF what the kernel charges for the pipelines' maps.", "",
                  "| racks x rotors | schedule, fabric, dilation | switches | connectivity cells agree | first pass | passed "
                  "| re-probe: rounds; cells per round; resolved | memory MiB | launch s | wall s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
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
            what = f"{r.get('kind', 'rotornet')}, {r.get('fabric', 'multi-switch')}, {fmt(r.get('dilation', 2000.0), 0)}"
            target = r.get("target", "bmv2")
            memory = (f"{fmt(r.get('map_memlock_mib'), 0)} (maps)" if target == "ebpf"
                      else fmt(r.get("bmv2_rss_mib"), 0))
            lines.append(f"| {r['racks']} x {r['rotors']} | {what} | {r.get('switches', '?')} "
                         f"{'eBPF' if target == 'ebpf' else 'BMv2'} | {r.get('agree', '-')}/"
                         f"{r.get('cells', '-')}{total} | {first} | {ok} | {rp} | "
                         f"{memory} | {fmt(r.get('launch_s'), 0)} | {r['wall_s']:.0f} |")
        lines.append("")
    if res.get("agents"):
        lines += ["### RotorLB agents: rates and overheads (in-process fabric, one heavy pair on 4 racks)", "",
                  "RotorLB vs one-hop delivered in the same window at each per-agent pacing rate (model: 3.0x); "
                  "CPU of the four agents' process (bench/agents.py).", "",
                  "| pacing frames/s | frame bytes | RotorLB / one-hop | keeps up (>= 0.9 x model) | "
                  "relayed frames | CPU ms per relayed MB | CPU ms per delivered MB | missed offers/accepts |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in res["agents"]:
            lines.append(f"| {r['rate_fps']} | {r['frame_bytes']} | {fmt(r['ratio_vs_one_hop'])} | "
                         f"{'yes' if r['keeps_up'] else 'no'} | {r['relayed_frames']} | "
                         f"{fmt(r['cpu_ms_per_relayed_mb'], 0)} | {fmt(r['cpu_ms_per_mb'], 0)} | {r['missed']} |")
        lines.append("")
    if res.get("datapath"):
        dp = res["datapath"]
        lines += ["### RotorLB agents' data paths: what one host sustains", "",
                  f"One circuit window of {dp['window_s']:g} s at the target rate, {dp['frame_bytes']}-byte frames over "
                  "UDP on loopback to an rlbd that counts them (bench/datapath.py). *python*: the Python agent's "
                  "pacer (host/window.py), lateness against the ideal schedule; *c*: rlbd (control-plane/native/rlbd.c), "
                  "awake a quarter of a frame time before each frame; *a core of its own*: awake 60 µs before each. "
                  "rlbd's error is against each frame's due time (after a stall it catches up at 1.2x). CPU: the "
                  "sender's process, the loopback delivery included.", "",
                  "| data path | target frames/s | sent/s | delivered | sustains (>= 99%) | late p50 µs | late p99 µs | "
                  "frame time µs | CPU µs/frame |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in dp["one_host"]:
            e = r.get("pacing_error_us") or r.get("lateness_us") or {}
            lines.append(f"| {r['datapath']} | {r['rate_fps']} | {r['sent_fps']} | {r['delivered']} | "
                         f"{'yes' if r['sustains'] else 'no'} | {e.get('p50', '-')} | {e.get('p99', '-')} | "
                         f"{r['frame_time_us']} | {fmt(r['cpu_us_per_frame'])} |")
        lines += ["", "Four compiled agents over loopback, one heavy pair on 4 racks (as the Python agents' table "
                  "above): RotorLB / one-hop delivered in the same window (model 3.0).", "",
                  "| pacing frames/s | RotorLB / one-hop | keeps up | frames delivered | lost | rlbd CPU s |",
                  "|---|---|---|---|---|---|"]
        for r in dp["heavy_pair"]:
            lines.append(f"| {r['rate_fps']} | {fmt(r['ratio_vs_one_hop'])} | {'yes' if r['keeps_up'] else 'no'} | "
                         f"{r['delivered_frames']} | {r['lost']} | {fmt(r['rlbd_cpu_s'])} |")
        lines.append("")
    if res.get("energy"):
        en = res["energy"]
        lines += ["### The energy accounting's per-frame loop", "",
                  "One link's generated frames (two channels, 1 ms slots with 100 µs nights) read under each "
                  "reactive policy by energy/states.py's Python loop and by the compiled one "
                  "(control-plane/native/linkstate.c through energy/fast.py); *same*: every outcome equal "
                  "(bench/energy.py).", "",
                  "| policy | frames | Python s | compiled s | Python frames/s | compiled frames/s | ratio | same |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in en["rows"]:
            lines.append(f"| {r['policy']} | {r['frames']} | {r['python_s']} | {fmt(r['compiled_s'], 3)} | "
                         f"{r['python_fps']} | {r['compiled_fps'] or '-'} | {fmt(r['ratio'], 0)} | "
                         f"{'-' if r['same'] is None else 'yes' if r['same'] else 'NO'} |")
        if en.get("run"):
            ru = en["run"]
            lines += ["", f"A whole FCT point, `{ru['path']}` ({ru['mode']}, {ru['frames']} frames over every "
                      f"port): reconstructed and accounted in {ru['wall_s']:g} s with the compiled loop."]
        lines.append("")
    if res.get("fabric_agents"):
        fa = res["fabric_agents"]
        lines += ["### One host's agent on the fabric", "",
                  f"Rack 0's agent sends one-hop to rack 1 in its direct circuit's windows on the {fa['target']} "
                  f"fabric (RotorNet, 8 racks, dilation {fa['dilation']:g}, {fa['guard_us_wall'] / 1000:g} ms wall "
                  f"guards, {fa['cycles']} measured cycles; bench/fabric_agents.py). A window plans 80 % of what "
                  "its time holds at the rate.", "",
                  "| data path | rate frames/s | planned per window | delivered per window | share | "
                  "frames/s in the window | lost | switch drops | pacing p99 µs |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in fa["rows"]:
            drops = ", ".join(f"{k} {v}" for k, v in (r["switch_drops"] or {}).items()) or "0"
            lines.append(f"| {r['datapath']} | {r['rate_fps']} | {r['planned_per_window']} | "
                         f"{r['delivered_per_window']:.0f} | {fmt(r['share_of_plan'], 3)} | {r['in_window_fps']} | "
                         f"{r['lost']} | {drops} | {r['pacing_error_us_p99'] if r['pacing_error_us_p99'] is not None else '-'} |")
        lines.append("")
    if res.get("claims"):
        rows = res["claims"]
        lines += ["### Agents' claims: the rack's file on the disk or on tmpfs", "",
                  f"{rows[0]['agents']} agents, two per rack file, each claiming {rows[0]['claims_per_s']} times a second, "
                  "every claim through the file, one place after the other (bench/agents.py: run_claims; "
                  "fabric/agents.py keeps the agents' live files in /dev/shm).", "",
                  "| the rack's file | file system | claims | median µs | p99 µs | worst ms | over 20 ms |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['where']} | {r['fs']} | {r['claims']} | {fmt(r['median_us'], 0)} | "
                         f"{fmt(r['p99_us'], 0)} | {fmt(r['worst_ms'])} | {r['over_20ms']} |")
        if len(rows) >= 2 and rows[1]["worst_ms"]:
            lines += ["", f"Worst claim on the disk / on tmpfs: {rows[0]['worst_ms'] / rows[1]['worst_ms']:.1f}x "
                          f"(median {rows[0]['median_us'] / max(rows[1]['median_us'], 0.1):.1f}x)."]
        if len(rows) >= 3 and rows[2]["median_us"]:
            lines += ["", f"Median claim, JSON file on tmpfs / shared memory: "
                          f"{rows[1]['median_us'] / max(rows[2]['median_us'], 0.1):.1f}x "
                          f"(worst {rows[1]['worst_ms'] / max(rows[2]['worst_ms'], 0.001):.1f}x)."]
        lines.append("")
    if res.get("kernel"):
        k = res["kernel"]
        lines += ["### BMv2 and eBPF (kernel), side by side", "",
                  f"{k['count']} frames from one sender (a Python AF_PACKET loop, as fast as it can) per target, "
                  "path and frame size, in one run (bench/kernel.py), clock mode, one matching: through one "
                  "rotor (port 1 to port 2), and host to host through ToR -> rotor -> ToR (IPv4). Delivered: "
                  "frames out of the far end over the sender's time (on eBPF the sender's own rate is the "
                  "limit). Switch CPU per delivered frame: BMv2's processes' CPU time (frames it took in and "
                  "dropped included); eBPF's programs' run time (kernel.bpf_stats_enabled).", "",
                  "| path | frame bytes | target | offered frames/s | delivered | delivered frames/s | "
                  "switch CPU ns per delivered frame |",
                  "|---|---|---|---|---|---|---|"]
        for row in k["rows"]:
            path = row.get("path", "rotor")
            for t in ("bmv2", "ebpf"):
                r = row.get(t) or {}
                if "error" in r or not r:
                    lines.append(f"| {path} | {row['size']} | {t} | error: {r.get('error', 'not run')} | | | |")
                    continue
                lines.append(f"| {path} | {row['size']} | {t} | {r['offered_pps']:.0f} | {r['delivered']} | "
                             f"{r['delivered_pps']:.0f} | {fmt(r['cpu_ns_per_frame'], 0)} |")
            lines.append(f"| {path} | {row['size']} | eBPF / BMv2 | | | {fmt(row.get('pps_ratio'), 1)}x | "
                         f"{fmt(row.get('cpu_ratio'), 0)}x less |")
        lines.append("")
        if k.get("fidelity"):
            lines += ["Fidelity of the eBPF rotor (bench/kernel.py `run_fidelity`): two matchings, slot 100 x "
                      "dilation us, night a tenth; one sender, 20 000 frames/s with uniformly random gaps (no "
                      "phase locks to the cycle, no queue builds), for 1 s; a TC program stamps each frame with "
                      "the kernel clock as it leaves the sender's veth (p4src/psa/tc_stamp.c), one hop before the "
                      "switch, and another stamps it as it reaches the receiver's veth, so the pipeline took it in "
                      "inside that bracket. Boundary error by send time: of the frames the switch judged on the "
                      "other side of a boundary than their departure stamp, how far from the nearest day of the "
                      "matching that switched them they were sent (the veth hop before the switch included). In the pipeline: of the same frames, how far the "
                      "bracket lies from the nearest day of the matching that switched them (0: some moment of "
                      "the bracket explains the decision; otherwise the pipeline's boundary was off by at least "
                      "this); the transit (bracket width) over all frames bounds how small an error it can see. "
                      "Reconfiguration loss: NIGHT drops of the frames taken in, against the share the sender "
                      "sent in a night.", "",
                      "| dilation | slot / night us | frames | boundary error by send time p50 / p99 / max us | "
                      "in the pipeline p50 / p99 / max us (frames unexplained) | transit p50 / p99 us | "
                      "on the other matching's port | reconfig loss | sent in a night | loss / sent in a night |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            for r in k["fidelity"]:
                if "error" in r:
                    lines.append(f"| {r['dilation']} | error: {r['error']} | | | | | | | | |")
                    continue
                be = r["boundary_error_us"]
                pe = r.get("pipeline_error_us") or {}
                tr = r.get("transit_us") or {}
                ratio = r["reconfig_loss"] / r["offered_bound"] if r["offered_bound"] else None
                d = f"{r['dilation']}" + (f" (control: epoch {r['skew_us']} us late)" if r.get("skew_us") else "")
                lines.append(f"| {d} | {r['slot_us']} / {r['night_us']} | {r['sent']} | "
                             f"{fmt(be['p50'], 1)} / {fmt(be['p99'], 1)} / {fmt(be['max'], 1)} | "
                             f"{fmt(pe.get('p50'), 1)} / {fmt(pe.get('p99'), 1)} / {fmt(pe.get('max'), 1)} "
                             f"({pe.get('unexplained', '-')}) | {fmt(tr.get('p50'), 1)} / {fmt(tr.get('p99'), 1)} | "
                             f"{r['other_matching']} | "
                             f"{pct(r['reconfig_loss'])} | {pct(r['offered_bound'])} | {fmt(ratio)} |")
            lines.append("")
    if res.get("kernel_scale"):
        lines += ["### eBPF fabrics at scale: launch time and memory (no traffic, no entries)", "",
                  "Every ToR (a host port and an uplink per rotor) and rotor (a port per rack) of the fabric as a "
                  "NIKSS pipeline in one namespace, ports attached (bench/kernel_scale.py). Memory: what the "
                  "kernel charges for the pipelines' maps (preallocated: entries add nothing) and programs. "
                  "BMv2 holds about 115 MiB per switch process (the scale rows above).", "",
                  "| racks x rotors | pipelines | ports | veths s | launch s (veths, loads, ports) | teardown s | "
                  "maps MiB | MiB per pipeline | programs MiB |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in res["kernel_scale"]:
            if "error" in r:
                lines.append(f"| {r['racks']} x {r['rotors']} | error: {r['error']} | | | | | | | |")
                continue
            lines.append(f"| {r['racks']} x {r['rotors']} | {r['pipelines']} | {r['ports']} | {fmt(r['veths_s'], 1)} | "
                         f"{fmt(r['launch_s'], 1)} | {fmt(r['teardown_s'], 1)} | {fmt(r['map_memlock_mib'], 0)} | "
                         f"{fmt(r['map_memlock_mib'] / r['pipelines'], 1)} | {fmt(r['prog_memlock_mib'], 1)} |")
        lines.append("")
    if res.get("fabric_tcp"):
        lines += ["### An unmodified application on the whole fabric: iperf3, BMv2 vs eBPF", "",
                  "`make run`'s fabric (Opera, 8 racks x 2 hosts, 4 rotors, 1 ms slots, dilation 100) on each "
                  "target in turn (bench/fabric_tcp.py): `iperf3 -c` from h0x0 to h5x1 (rack 0 to rack 5) with "
                  "`-S 0xb8` (low latency: the expander's multi-hop paths) and without (bulk: direct or 2-hop "
                  "paths only); goodput at the receiver, wall clock. iperf3 marks only the sender's segments: "
                  "the ACKs ride the bulk class. Ping: 50 low-latency echoes, 20 ms apart.", "",
                  "| target | low latency Gbit/s (min 1-s) | retransmits | bulk Gbit/s (min 1-s) | retransmits | "
                  "ping received | RTT min / avg ms |",
                  "|---|---|---|---|---|---|---|"]
        for r in res["fabric_tcp"]:
            if "error" in r:
                lines.append(f"| {r['target']} | error: {r['error']} | | | | | |")
                continue
            ll, bk, pg = r.get("low-latency", {}), r.get("bulk", {}), r.get("ping_low_latency", {})
            cell = lambda x: (f"error: {x['error'][:60]}" if "error" in x  # noqa: E731
                              else f"{fmt(x.get('gbps'), 3)} ({fmt(x.get('min_interval_gbps'), 3)})")
            lines.append(f"| {r['target']} | {cell(ll)} | {ll.get('retransmits', '')} | {cell(bk)} | "
                         f"{bk.get('retransmits', '')} | {pg.get('received')}/{pg.get('sent')} | "
                         f"{fmt(pg.get('rtt_min_ms'), 3)} / {fmt(pg.get('rtt_avg_ms'), 3)} |")
        by = {r["target"]: r for r in res["fabric_tcp"]}
        try:
            ratio = by["ebpf"]["low-latency"]["gbps"] / by["bmv2"]["low-latency"]["gbps"]
            lines += ["", f"Low-latency goodput, eBPF / BMv2: {ratio:.0f}x."]
        except (KeyError, TypeError, ZeroDivisionError):
            pass
        lines.append("")
    return "\n".join(lines)


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def update_doc(doc: Path, res: dict, command: str) -> None:
    note = "".join(f"; then `{m['command']}`, merged" for m in res.get("merged", []))
    body = f"{BEGIN}\nCommand: `{res.get('command', command)}`{note}\n\n{markdown(res)}\n{END}"
    text = doc.read_text() if doc.exists() else "# Performance\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + body + text[text.index(END) + len(END):]
    else:
        text += "\n" + body + "\n"
    doc.write_text(text)


def plot_dilation(rows: list[dict], png: Path) -> None:
    """Fidelity vs dilation: boundary error in emulated us, and reconfiguration loss against its
    bound, per dilation (log x)."""
    from ..plotting import pyplot, save

    plt = pyplot()

    ok = [r for r in rows if "error" not in r]
    d = [r["dilation"] for r in ok]
    be = [(r.get("boundary_trains") or {}).get("error_us") or {} for r in ok]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, style in (("p50", "o-"), ("p99", "s--")):
        ax.plot(d, [None if b.get(k) is None else b[k] / r["dilation"] for b, r in zip(be, ok)], style, label=k)
    ax.set_xscale("log")
    ax.set_xlabel("dilation")
    ax.set_ylabel("slot boundary error (emulated us)")
    ax.set_title("boundary error seen by the emulated fabric")
    ax.legend()
    ax2.plot(d, [100 * r["reconfig_loss"] for r in ok], "o-", label="reconfiguration loss")
    ax2.plot(d, [100 * r["loss_bound"] for r in ok], "k--", label="its bound (as in the slot tables)")
    ax2.plot(d, [100 * r["left_outside_day"] / max(1, r["departed"]) for r in ok], "x:",
             label="left outside its matching's day")
    ax2.set_xscale("log")
    ax2.set_xlabel("dilation")
    ax2.set_ylabel("% of frames")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    save(fig, png, dpi=110)
