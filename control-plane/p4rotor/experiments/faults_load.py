"""Faults under load (``p4rotor experiment faults --traffic bulk,tcp``): RotorLB agents on the
compiled data path (rlbd) move saturated bulk between racks, and one iperf3 TCP connection crosses
the fabric through the split-TCP path (host/stream.py), while the plan's faults are applied.

* **Bulk**: every rack's agent saturates one flow to rack ``(r + 3) % racks`` from before the
  probes start until they end; the agents then drain their relays (``DRAIN_CYCLES``) and write
  their summaries.  rlbd resends stream frames only (``--resend-streams-only``): a bulk frame is
  sent once, so none can be delivered twice, not even by an agent restarted mid-run (whose record
  of what it had delivered died with it), and a lost one is counted lost.
* **Agents die and come back**: the harness's supervisor (fabric/supervise.py) polls every
  agent's PID; a dead one (a plan's ``agent-kill``, or a crash) is restarted with its flags as the
  next incarnation (new flow and connection ids; its peers reset their split connections with
  it at once: host/stream.py).
* **TCP**: ``iperf3 -c 10.200.<dst>.1`` from rack 0 for the whole run (dst: the rack of the first
  killed agent, else 5); a client that ends early (its connection reset) is started again.

Everything here is read from structured data: the agents' summaries and progress files (JSON),
iperf3's JSON, the supervisor's events.  ``report`` judges it (``CHECKS``).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from ..control.fault_plan import FaultPlanError
from .fault_loss import bulk_by_fault, fault_windows, relay_span_ns, tcp_by_fault
from ..fabric.agents import Agents, start_agents, start_lead_s
from ..fabric.supervise import Supervisor
from ..fabric.switch import stop_process_group
from ..host.agent_cli import INCARNATION_FLOW_SHIFT
from ..rotorlb import wire

TRAFFIC = ("bulk", "tcp")
# frames/s per circuit.  At 80, 8 agents, 12 BMv2 and the probes overloaded this 2-core machine:
# 150 rotor frames left 2-52 ms after their day ended (BMv2's transmit thread descheduled), and a
# restarted agent took 4.7 s to listen.
RATE = 40.0
GUARD_US = 5000.0      # wall us kept free at both ends of a day (a slot is 100 ms wall at dilation 100)
RETRANSMIT_CYCLES = 3  # stream frames resent after this long unacknowledged
DRAIN_CYCLES = 10      # after the bulk stops: relays delivered, iperf3's last exchange, summaries written
SAMPLE_S = 0.5         # the receivers' progress is read this often
FLOW = 1               # each rack's bulk flow id (a restarted agent's: + incarnation << 20)
TCP_PORT = 5201
# The PASS bounds.  A restarted agent's bulk must be delivered again within this many cycles of
# its first window (its first window is the first cycle boundary after its start-up lead; a
# direct circuit to its destination comes within a cycle, a relay within two).
REFLOW_CYCLES = 3
RECOVERY_S = 10.0      # the probes (and the bulk, and iperf3) run this long after the last fault
NOTICE_MS = 500        # a killed agent noticed within this (the supervisor polls every 50 ms)
PAYLOAD = 1400 - wire.DATA_HEADER  # bulk bytes per frame (the agents' 1400-byte frames)


def parse_traffic(s: str | None) -> frozenset[str]:
    """``--traffic bulk,tcp`` (either or both); None or "" is today's probes only."""
    if not s:
        return frozenset()
    got = [x.strip() for x in s.split(",")]
    bad = [x for x in got if x not in TRAFFIC]
    if bad or not got:
        raise FaultPlanError(f"--traffic {s!r}: a comma-separated subset of {','.join(TRAFFIC)}")
    if "tcp" in got and "bulk" not in got:
        raise FaultPlanError("--traffic tcp needs bulk too (the split connections ride the bulk agents)")
    return frozenset(got)


class Load:
    """The agents, their supervisor, the progress samples and the iperf3 runs of one faults run."""

    def __init__(self, emu, topo, ds, out: Path, traffic: frozenset[str], note):
        self.emu, self.topo, self.ds, self.out, self.traffic = emu, topo, ds, out, traffic
        self.note = note
        self.H = int(ds.hyperperiod_us * 1000)
        self.racks = len(topo.racks)
        self.agents: Agents | None = None
        self.supervisor: Supervisor | None = None
        self.samples: list[tuple[int, int]] = []   # (t_ns, frames delivered so far, every receiver)
        self.tcp_runs: list[dict] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.server = None

    def start(self, origin_ns: int, duration_s: float, tcp_dst: int) -> None:
        end = origin_ns + int(duration_s * 1e9)
        self.stop_ns, self.end_ns = end, end + DRAIN_CYCLES * self.H
        flows = {(k.id, 0): [{"flow": FLOW, "dst": (k.id + 3) % self.racks, "frames": -1}] for k in self.topo.racks}
        start = self.emu.t0_ns + -(-(time.time_ns() + int(start_lead_s(self.racks) * 1e9) - self.emu.t0_ns)
                                   // self.H) * self.H
        self.agents = start_agents(self.emu, self.topo, self.ds, self.out / "agents", rate=RATE, guard_us=GUARD_US,
                                   flows=flows, host_index=0, start_ns=start, stop_ns=self.stop_ns,
                                   end_ns=self.end_ns, datapath="c", tcp_split="tcp" in self.traffic,
                                   retransmit_us=RETRANSMIT_CYCLES * self.ds.hyperperiod_us,
                                   resend_streams_only=True)
        self.supervisor = Supervisor(self.agents, self.emu.t0_ns, self.H, note=self.note,
                                     restart_until_ns=self.stop_ns).start()
        self._spawn(self._sample)
        if "tcp" in self.traffic:
            self.tcp_src, self.tcp_dst = self.topo.racks[0].hosts[0].name, self.topo.racks[tcp_dst].hosts[0].name
            self.tcp_addr = f"10.200.{tcp_dst}.1"
            (self.out / "iperf3").mkdir(parents=True, exist_ok=True)
            self.server_log = open(self.out / "iperf3" / "server.json", "wb")  # a pipe would fill and stall it
            self.server = self.emu.popen(self.tcp_dst, ["iperf3", "-s", "-p", str(TCP_PORT), "-J"],
                                         stdout=self.server_log, stderr=self.server_log)
            self._spawn(self._tcp, origin_ns, end)

    def _spawn(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _sample(self) -> None:
        """Bulk frames delivered, summed over every receiver's progress file; a receiver whose
        counts went down was restarted: its new counts are new frames."""
        prev: dict[tuple[str, str], int] = {}
        total = 0
        while not self._stop.wait(SAMPLE_S):
            for name, _ in list(self.agents.procs):
                for key, (n, _) in self.agents.progress_of(name).items():
                    if not is_bulk(int(key.split(":")[1])):
                        continue
                    p = prev.get((name, key), 0)
                    total += n - p if n >= p else n
                    prev[(name, key)] = n
            self.samples.append((time.time_ns(), total))

    def _tcp(self, origin_ns: int, end_ns: int) -> None:
        """iperf3 from rack 0 until ``end_ns``; a client that ends early is started again."""
        d = self.out / "iperf3"
        d.mkdir(parents=True, exist_ok=True)
        time.sleep(max(0.0, (origin_ns - time.time_ns()) / 1e9))
        while not self._stop.is_set():
            left = (end_ns - time.time_ns()) / 1e9
            if left < 4:
                return
            t = time.time_ns()
            # it ends 2 s before the bulk stops: its last exchange crosses while the agents run
            p = self.emu.popen(self.tcp_src, ["iperf3", "-c", self.tcp_addr, "-p", str(TCP_PORT), "-t", str(int(left) - 2),
                                              "-J", "-i", "0.5", "--connect-timeout", "30000"])
            try:  # a client still waiting when the agents end would wait forever
                out, _ = p.communicate(timeout=max(1.0, (self.end_ns - time.time_ns()) / 1e9))
            except subprocess.TimeoutExpired:
                stop_process_group(p)
                out = b'{"error": "still running when the agents ended: stopped"}'

            i = len(self.tcp_runs)
            (d / f"client-{i}.json").write_bytes(out)
            try:
                r = json.loads(out)
            except ValueError:
                r = {"error": "no JSON"}
            ivs = [(t + int(iv["sum"]["start"] * 1e9), iv["sum"]["bytes"]) for iv in r.get("intervals", [])]
            # no intervals: the client was stopped (or wrote no JSON) before it reported what it wrote
            self.tcp_runs.append({"start_ns": t, "end_ns": time.time_ns(), "error": r.get("error"),
                                  "intervals": ivs, "sent": sum(b for _, b in ivs) if "intervals" in r else None,
                                  "received": None})
            if r.get("error"):
                time.sleep(1.0)  # the server notices the cut connection before the next test

    def abort(self) -> None:
        """A run that failed: everything of the load stopped, by PID."""
        self._stop.set()
        if self.supervisor is not None:
            self.supervisor.stop()
        if self.agents is not None:
            self.agents.kill()
        stop_process_group(self.server)

    def finish(self) -> dict:
        """Wait for the agents to drain and end; everything the report needs."""
        left = (self.end_ns - time.time_ns()) / 1e9
        self._stop.set()
        for t in self._threads:
            t.join(max(1.0, left + 60))
        self.supervisor.stop()
        summaries = self.agents.wait(max(0.0, left) + 120)
        server = []
        if self.server is not None:
            stop_process_group(self.server)
            self.server_log.close()
            text = (self.out / "iperf3" / "server.json").read_text(errors="replace")
            dec, i = json.JSONDecoder(), 0
            while (j := text.find("{", i)) >= 0:
                try:
                    doc, i = dec.raw_decode(text, j)
                except ValueError:
                    break
                server.append([(iv["sum"]["start"], iv["sum"]["bytes"]) for iv in doc.get("intervals", [])])
        # What the server received, second by second, on the clock of the client run it belongs to
        # (the n-th test the server saw is the n-th client run; it starts a cycle or so after it).
        for run, ivs in zip(self.tcp_runs, server):
            run["received_intervals"] = [(run["start_ns"] + int(a * 1e9), n) for a, n in ivs]
            run["received"] = sum(n for _, n in ivs)
        kept = {}
        for f in sorted((self.out / "agents").glob("agent-*.inc*.progress")):
            host, inc = f.name[len("agent-"):].split(".inc")
            kept[(host, int(inc.split(".")[0]))] = json.loads(f.read_text())["flows_rx"]
        return {"summaries": summaries, "dead": self.agents.dead, "old_progress": kept,
                "samples": self.samples, "tcp_runs": self.tcp_runs, "server_received": server,
                "supervisor_errors": self.supervisor.errors, "stop_ns": self.stop_ns, "end_ns": self.end_ns,
                "where": dict(self.agents.where)}


def is_bulk(flow: int) -> bool:
    """A bulk flow's id (any incarnation's), not a split connection's stream (top bits set)."""
    return flow < 1 << 26


def bulk_account(d: dict, killed: set[int]) -> dict:
    """Per (origin rack, destination rack): frames made, delivered (every incarnation of the
    receiver: the summaries, and what a killed one's last progress file said), and lost; the
    survivors' identity ``made = delivered + held + lost``; duplicates; the cause of each loss."""
    made: dict[tuple[int, int], int] = {}
    dst_of: dict[tuple[int, int], int] = {}
    held_by_origin: dict[int, int] = {}
    for s in d["summaries"]:
        for fl, n in s["accepted"].items():
            if not is_bulk(int(fl)):
                continue
            made[(s["rack"], int(fl))] = made.get((s["rack"], int(fl)), 0) + n
            dst_of[(s["rack"], int(fl))] = (s["rack"] + 3) % max(1, len(d["where"]))
        # bulk frames only: streams' frames are held beside them (rlbd's per-flow and bulk counts)
        own = sum(n for k, n in (s.get("held_local_by_flow") or {}).items() if is_bulk(int(k.split(":")[1])))
        held_by_origin[s["rack"]] = held_by_origin.get(s["rack"], 0) + own
        for o, n in (s.get("held_relay_bulk_by_origin") or {}).items():
            held_by_origin[int(o)] = held_by_origin.get(int(o), 0) + n
    delivered: dict[tuple[int, int], int] = {}

    def add(rx: dict) -> None:
        for k, v in rx.items():
            o, fl = (int(x) for x in k.split(":"))
            if not is_bulk(fl):
                continue
            delivered[(o, fl)] = delivered.get((o, fl), 0) + v[0]

    for s in d["summaries"]:
        add(s["flows_rx"])
    for rx in d["old_progress"].values():
        add(rx)
    pairs: dict[str, dict] = {}
    from_killed = 0
    for (o, fl), n in delivered.items():
        if (o, fl) not in made:  # a killed incarnation's flow: what it made died with it
            from_killed += n
    for (o, fl), n in made.items():
        dst = dst_of[(o, fl)]
        key = f"{o}->{dst}"
        p = pairs.setdefault(key, {"made": 0, "delivered": 0, "flows": []})
        p["made"] += n
        p["delivered"] += delivered.get((o, fl), 0)
        p["flows"].append(fl)
    held = sum(held_by_origin.get(o, 0) for o in {o for o, _ in made})
    for key, p in pairs.items():
        o, dst = (int(x) for x in key.split("->"))
        p["held"] = held_by_origin.get(o, 0)
        p["lost"] = p["made"] - p["delivered"] - p["held"]
        p["cause"] = ("to a killed agent: held by it, in flight to it, or delivered after its last progress write"
                      if dst in killed else "the fabric's faults (dropped on a link or switch), or relayed "
                      "through a killed agent" if p["lost"] else None)
    # A second copy a receiver dropped (flows_rx_via's last field), per kind of flow: a bulk frame
    # is sent once, so a bulk copy would be a frame delivered twice had rlbd not dropped it; a
    # stream frame is resent when its ACK is late, and its second copy is expected (dropped).
    dups = stream_dups = 0
    for s in d["summaries"]:
        for k, v in s.get("flows_rx_via", {}).items():
            if is_bulk(int(k.split(":")[1])):
                dups += v[3]
            else:
                stream_dups += v[3]
    over = sum(max(0, -p["lost"]) for p in pairs.values())
    return {"made": sum(made.values()), "delivered": sum(p["delivered"] for p in pairs.values()), "held": held,
            "lost": sum(p["lost"] for p in pairs.values()), "duplicates": dups, "delivered_more_than_made": over,
            "stream_copies_dropped": stream_dups,
            "delivered_from_killed_incarnations": from_killed, "pairs": pairs,
            "lost_to_killed": sum(p["lost"] for k, p in pairs.items() if int(k.split("->")[1]) in killed)}


def reflow(d: dict, host: str, rack: int, incarnation: int) -> dict:
    """When a restarted agent's bulk moved again: its first frame sent (its own summary) and first
    frame delivered anywhere (the receivers' ``flows_rx_via`` first_ns), wall ns."""
    base = incarnation << INCARNATION_FLOW_SHIFT

    def mine(fl) -> bool:  # its bulk flows, not its streams (ids with the top bits set)
        return base <= int(fl) < base + (1 << INCARNATION_FLOW_SHIFT)

    s = next((x for x in d["summaries"] if x["host"] == host), None)
    sent = [v[0] for fl, v in (s or {}).get("flows_tx", {}).items() if mine(fl) and v[0]]
    got = [v[2] for x in d["summaries"] for k, v in x["flows_rx_via"].items()
           if int(k.split(":")[0]) == rack and mine(k.split(":")[1]) and v[2]]
    return {"first_sent_ns": min(sent, default=None), "first_delivered_ns": min(got, default=None)}


def load_report(d: dict, fp, inj, rows: list[dict], origin: int, dilation: float, ds, slot_s: float,
                steps: list | None = None) -> dict:
    """Per fault (``rows``, the probes' report, extended in place) and for the run: bulk delivered
    in the fault's window against before the first fault, TCP bytes in it, and for an agent kill
    what its death cost and how long the agent took to come back; the PASS checks, each stated."""
    H = ds.hyperperiod_us / 1e6
    killed_hosts = {f.host for f in fp.faults if f.kind == "agent-kill"}
    rack_of = {h: r for h, (r, _) in d["where"].items()}
    # killed rack -> its fault's index (bulk_by_fault); its keys are what bulk_account leaves out
    kills = {rack_of[f.host]: i for i, f in enumerate(fp.faults) if f.kind == "agent-kill" and f.host in rack_of}
    bulk = bulk_account(d, set(kills))
    samples = d["samples"]

    def delivered(a: int, b: int) -> int:
        ins = [n for t, n in samples if a <= t <= b]
        before = [n for t, n in samples if t < a]
        return (ins[-1] - (before[-1] if before else ins[0])) if ins else 0

    first = min((origin + int(f.start_us * dilation * 1000) for f in fp.faults), default=origin)
    base_rate = delivered(origin, first) / max(1e-9, (first - origin) / 1e9)
    tcp_iv = [iv for r in d["tcp_runs"] for iv in r.get("received_intervals", [])]
    # What each fault lost (experiments/fault_loss.py): bulk frames by where their flow's frames
    # went missing, TCP bytes by the fault a connection was reset in.
    # A fault lasts past its plan's end while what it broke is away: a restarted controller until
    # its slot 0 (the probes' window_end_s), a killed agent until it listens again and its bulk
    # is delivered again (its relays with it).
    ends, reflowed = {}, {}  # reflowed: fault index -> its restarted agent's reflow()
    for i, (f, row) in enumerate(zip(fp.faults, rows)):
        if row.get("window_end_s") is not None:
            ends[i] = origin + int(row["window_end_s"] * 1e9)
        if f.kind == "agent-kill":
            ev = {e["what"]: e for e in inj.events if e["kind"] == "agent-kill" and e["target"] == f.host}
            if "restarted" in ev and f.host in rack_of:
                reflowed[i] = reflow(d, f.host, rack_of[f.host], ev["restarted"]["incarnation"])
            again = reflowed[i]["first_delivered_ns"] if i in reflowed else None
            ends[i] = max(ev.get("listening", {}).get("t_ns", 0), again or 0)
    wins = fault_windows(fp.faults, origin, dilation, H, ends)
    bl = bulk_by_fault(d["summaries"], bulk["pairs"], kills, wins, origin, lambda fl: is_bulk(int(fl)),
                       relay_span_ns(d["summaries"], slot_s), d.get("end_ns"))
    tl = tcp_by_fault(d["tcp_runs"], wins)
    checks: dict[str, bool] = {}
    for i, row in enumerate(rows):
        row["bulk_frames_lost"] = bl["per_fault"][i]
        row["bulk_bytes_lost"] = bl["per_fault"][i] * PAYLOAD
        # a duplicate has no time: the run's count, 0 for every fault when it is 0
        row["bulk_bytes_duplicated"] = 0 if bulk["duplicates"] == 0 else None
        row["tcp_bytes_lost"] = tl["per_fault"][i]
        row["tcp_bytes_duplicated"] = 0 if tl["received_more_than_written"] == 0 else None
        f = row["fault"]
        a, b = wins[i]
        row["window_s"] = [round((a - origin) / 1e9, 3), round((b - origin) / 1e9, 3)]
        row["bulk_frames_per_s_in_window"] = round(delivered(a, b) / max(1e-9, (b - a) / 1e9), 1)
        row["bulk_frames_per_s_before_faults"] = round(base_rate, 1)
        row["tcp_bytes_received_in_window"] = sum(n for t, n in tcp_iv if a <= t < b)
        row["tcp_resets_in_window"] = sum(1 for r in d["tcp_runs"] if r["error"] and a <= r["end_ns"] < b + int(H * 1e9))
        if row.get("recovered_after_end_s") is not None:
            row["recovered_after_end_slots"] = round(row["recovered_after_end_s"] / slot_s, 1)
        if f["kind"] != "agent-kill":
            continue
        ev = {e["what"]: e for e in inj.events if e["kind"] == "agent-kill" and e["target"] == f["host"]}
        k = rack_of.get(f["host"])
        p_in = sum(p["lost"] for key, p in bulk["pairs"].items() if int(key.split("->")[1]) == k)
        row["bulk_frames_lost_to_it"] = p_in
        row["bulk_bytes_lost_to_it"] = p_in * PAYLOAD
        row["noticed_after_kill_ms"] = ev.get("noticed", {}).get("after_kill_ms")
        if "restarted" in ev and "killed" in ev:
            kill_ns = ev["killed"]["t_ns"]
            row["restarted_after_kill_ms"] = ev["restarted"]["after_kill_ms"]
            row["listening_after_restart_ms"] = ev.get("listening", {}).get("after_restart_ms")
            # from when it listened (a start-up slower than its lead misses its first window)
            first_win = max(ev["restarted"]["first_window_ns"],
                            ev["restarted"]["t_ns"] + int((ev.get("listening", {}).get("after_restart_ms") or 0) * 1e6))
            fl = reflowed[i] if i in reflowed else reflow(d, f["host"], k, ev["restarted"]["incarnation"])
            for what in ("first_sent_ns", "first_delivered_ns"):
                t = fl[what]
                row[what.replace("_ns", "_after_kill_s")] = None if t is None else round((t - kill_ns) / 1e9, 3)
            t = fl["first_delivered_ns"]
            row["bulk_again_after_listening_cycles"] = None if t is None else round((t - first_win) / 1e9 / H, 2)
            checks[f"{f['host']}: bulk delivered again within {REFLOW_CYCLES} cycles of its first window "
                   "(or of listening, if later)"] = \
                t is not None and (t - first_win) / 1e9 <= REFLOW_CYCLES * H
        n = row["noticed_after_kill_ms"]
        checks[f"{f['host']}: noticed within {NOTICE_MS} ms"] = n is not None and n <= NOTICE_MS
    tcp = {}
    for s in d["summaries"]:
        for key, v in (s.get("tcp") or {}).items():
            tcp[key] = tcp.get(key, 0) + v
    runs = d["tcp_runs"]
    checks["bulk duplicated 0"] = bulk["duplicates"] == 0 and bulk["delivered_more_than_made"] == 0
    # What the switches dropped outside every fault's window, by cause (``steps``: the drop
    # counters' increments): a frame the fabric lost while nothing was broken is one of them, or
    # it was lost silently.
    bl["switch_drops_outside_faults"] = outside = {}
    for t, inc in steps or []:
        if not any(a <= t <= b for a, b in wins):
            for c, n in inc.items():
                outside[c] = outside.get(c, 0) + n
    checks["bulk: a frame lost outside every fault's window was dropped by a switch, by cause"] = \
        bl["outside_faults"] <= sum(outside.values())
    checks["bulk: every lost frame placed in one fault"] = bl["recorded"] and \
        bl["between_faults"] == 0 and bl["not_placed"] == 0 and bl["gaps_not_recorded"] == 0
    if runs:
        checks["TCP duplicated 0: no server received more than its client wrote"] = tl["received_more_than_written"] == 0
        checks["TCP: bytes lost only by a connection reset in one fault's window"] = \
            tl["outside_faults"] == 0 and tl["between_faults"] == 0
    checks["bulk made = delivered + held + lost, no pair negative"] = all(p["lost"] >= 0 for p in bulk["pairs"].values())
    if killed_hosts and runs:
        # a connection through a killed agent ends (reset), and TCP carries bytes again after it
        last_restart = max((e["t_ns"] for e in inj.events if e["what"] == "listening"), default=None)
        checks["TCP: a connection through a killed agent was reset"] = any(r["error"] for r in runs)
        checks["TCP: bytes again after the restart"] = last_restart is not None and any(
            n > 0 for t, n in tcp_iv if t > last_restart)
    if runs:
        checks["TCP: bytes carried"] = sum(n for _, n in tcp_iv) > 0
    checks["no supervisor errors"] = not d["supervisor_errors"]
    return {"bulk": bulk, "bulk_bytes_lost": bulk["lost"] * PAYLOAD, "bulk_bytes_duplicated": bulk["duplicates"] * PAYLOAD,
            "bulk_lost_by_fault": bl, "tcp_lost_by_fault": tl,
            "payload_bytes_per_frame": PAYLOAD, "tcp_runs": [{k: v for k, v in r.items() if k != "intervals"} for r in runs],
            "tcp_server_received": d["server_received"], "tcp_split": tcp, "checks": checks,
            "bounds": {"reflow_cycles": REFLOW_CYCLES, "notice_ms": NOTICE_MS}}


def load_table(res: dict) -> str:
    """The run's per-fault table (markdown), generated from faults.json: what docs/faults.md shows."""
    lr = res["load"]

    def v(x, fmt="{}"):  # noqa: E306
        return "—" if x is None else fmt.format(x)

    rows = ["| fault | probes lost | switch drops in its window | recovery (slots after its end) | bulk frames/s "
            "in its window (before the faults) | TCP bytes received in its window | TCP resets | agent: noticed / restarted "
            "after the kill (ms) | its bulk delivered again (s after the kill; cycles after it could send) | "
            "bulk lost in its window: frames (bytes) | bulk bytes duplicated | TCP bytes lost | TCP bytes duplicated |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["faults"]:
        f = r["fault"]
        who = f.get("switch") or f.get("host") or ""
        drops = ", ".join(f"{k} {n}" for k, n in sorted(r["drops"].items())) or "—"
        kill = (f"{v(r.get('noticed_after_kill_ms'), '{:.0f}')} / {v(r.get('restarted_after_kill_ms'), '{:.0f}')}"
                if f["kind"] == "agent-kill" else "—")
        again = (f"{v(r.get('first_delivered_after_kill_s'))}; {v(r.get('bulk_again_after_listening_cycles'))}"
                 if f["kind"] == "agent-kill" else "—")
        rows.append(f"| {f['kind']} {who} | {r['probes_lost']} of {r['probes_in_window']} | {drops} | "
                    f"{v(r.get('recovered_after_end_slots'))} | {r['bulk_frames_per_s_in_window']} "
                    f"({r['bulk_frames_per_s_before_faults']}) | {r['tcp_bytes_received_in_window']} | {r['tcp_resets_in_window']} | "
                    f"{kill} | {again} | {v(r.get('bulk_frames_lost'))} ({v(r.get('bulk_bytes_lost'))}) | "
                    f"{v(r.get('bulk_bytes_duplicated'))} | {v(r.get('tcp_bytes_lost'))} | {v(r.get('tcp_bytes_duplicated'))} |")
    b = lr["bulk"]
    out = "\n".join(rows) + "\n\n"
    out += (f"Bulk over the run: {b['made']} frames made, {b['delivered']} delivered, {b['held']} still held, "
            f"**{b['lost']} lost** ({b['lost_to_killed']} on pairs into a killed agent, {b['lost'] - b['lost_to_killed']} "
            f"on the others), **{b['duplicates']} duplicated**; {b['delivered_from_killed_incarnations']} frames a "
            f"killed agent had made were delivered (what it had made and not sent died with it). "
            f"{lr['payload_bytes_per_frame']} payload bytes a frame.\n\n")
    bl, tl = lr.get("bulk_lost_by_fault"), lr.get("tcp_lost_by_fault")
    if bl is not None:
        out += (f"Where the bulk was lost: {sum(bl['per_fault'])} frames in one fault's window (or held at a relay "
                f"the next fault broke, within the longest relay wait, {bl['relay_span_ms']:.0f} ms), {bl['outside_faults']} outside "
                f"every fault's ({bl.get('before_first_fault', 0)} of them before the first began), "
                f"{bl['between_faults']} between two faults ({bl.get('after_last_frame', 0)} of all these lost after "
                f"their receiver's last frame, placed by the span from it to the run's end), {bl['not_placed']} not "
                f"placed, {bl['gaps_not_recorded']} in gaps not recorded; "
                f"{bl['of_killed_incarnations']} of a killed incarnation's own flows. The switches dropped, outside "
                f"every fault's window: {', '.join(f'{c} {n}' for c, n in sorted(bl.get('switch_drops_outside_faults', {}).items())) or 'nothing'}.\n\n")
    if tl is not None:
        out += (f"TCP: {sum(tl['per_fault'])} bytes written and never received by connections reset in a fault's "
                f"window, {tl['outside_faults']} by resets outside every one, {tl['between_faults']} over two; "
                f"{tl['in_flight_at_planned_ends']} still in flight when a run ended as planned (lost by no fault).\n\n")
    out += "| check (PASS bound) | result |\n|---|---|\n" + "".join(
        f"| {k} | {'pass' if ok else '**FAIL**'} |\n" for k, ok in lr["checks"].items())
    return out
