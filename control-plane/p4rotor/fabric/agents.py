"""RotorLB agents in the hosts of a running emulation (the harness owns them: started in the
hosts, ready when their TUN interfaces are up, stopped by PID; each writes a JSON summary).

Agents pair by host index: the agent of host N in rack R exchanges with host N of every other
rack, each with its host's share of the rack's uplink (``rate`` / hosts per rack).  With TUN, host
N of rack R is 10.200.R.(N+1): an application reaches host N of another rack through RotorLB at
10.200.<rack>.(N+1) (docs/rotorlb.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from .. import schedule as S
from .switch import AGENT_RT_PRIORITY, HarnessError, priority_prefix, stop_process_group

FAR_NS = 1 << 62  # wall ns in the year 2116: "until stopped"
# What SIGTERMed agents get, all together, to finish their open windows and write their summaries.
# 10 s per agent, waited in turn, was too little for the first one after a 2 h run (16 summaries
# of ~2 MB written at once beside 12 busy switches): it was killed, and the 12 flows it had
# received whole were reported unfinished (docs/notes/cold-switches.md).
STOP_WAIT_S = 60.0
# Where agents keep the files they rewrite many times a second: their rack's claims (host/share.py,
# 40 a second per agent) and their progress (once a second).  On the disk (ext4) each rewrite
# starts write-back, and a writer can wait on the journal: with no fabric running, 16 agents'
# claims took up to 69 ms there against 4.5 ms on tmpfs (docs/notes/agents-on-tmpfs.md).  Mininet's hosts share the file system, /dev/shm with it.
LIVE_ROOT = Path("/dev/shm")


def live_dir(out: Path, root: Path | None = None) -> Path:
    """A fresh directory on tmpfs (under ``root``, default LIVE_ROOT) for a run's agents' live
    files; ``out`` itself where there is no such file system or it cannot be written."""
    root = LIVE_ROOT if root is None else root
    try:
        if root.is_dir() and os.access(root, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="p4rotor-agents-", dir=root))
    except OSError:
        pass
    return out


@dataclasses.dataclass
class Agents:
    """The agents of a run.  An agent that dies (killed, crashed) is not an error that ends the
    run: it is *reported* in ``dead`` (host, rack, exit status, the last line of its log), and
    ``account`` counts the frames its death cost (issue #13)."""

    out: Path
    # The agents' live files (claims, progress; ``live_dir``), kept into ``out`` when they end.
    live: Path | None = None
    procs: list = dataclasses.field(default_factory=list)  # (host name, Popen)
    where: dict = dataclasses.field(default_factory=dict)  # host name -> (rack, host index)
    dead: list = dataclasses.field(default_factory=list)
    emu: object = None                                     # the emulation (restart starts one in its host)
    args: dict = dataclasses.field(default_factory=dict)   # host name -> the agent's command line
    incarnation: dict = dataclasses.field(default_factory=dict)  # host name -> restarts so far

    def proc(self, name: str):
        return next(p for n, p in self.procs if n == name)

    def restart(self, name: str, start_ns: int):
        """Start host ``name``'s agent again, with its flags, as incarnation N + 1 (host/agent_cli.py
        ``--incarnation``: new flow and connection ids) opening no window before ``start_ns``.  The
        dead one's last progress file is kept as ``agent-NAME.incN.progress`` (what the run has of
        what it received).  Returns the new process; readiness is its ready file, as at the start."""
        n = self.incarnation.get(name, 0)
        live = self.live or self.out
        last = live / f"agent-{name}.progress"
        if last.exists():
            shutil.copyfile(last, self.out / f"agent-{name}.inc{n}.progress")
            last.unlink()
        (self.out / f"agent-{name}.ready").unlink(missing_ok=True)
        args = list(self.args[name])
        args[args.index("--start-ns") + 1] = str(start_ns)
        args += ["--incarnation", str(n + 1)]
        self.incarnation[name] = n + 1
        log = open(self.out / f"agent-{name}.log", "a")
        p = self.emu.popen(name, args, stdout=log, stderr=log)
        self.procs = [(h, p if h == name else q) for h, q in self.procs]
        return p

    def wait(self, timeout: float) -> list[dict]:
        """Wait for every agent to end by itself (its --end-ns) and read the summaries of those
        that did; the others are in ``dead``."""
        deadline = time.monotonic() + timeout
        for name, p in self.procs:
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except Exception:
                raise HarnessError(f"agent in {name} did not end in time") from None
        self._keep_live()
        return self.summaries()

    def stop(self, timeout: float = STOP_WAIT_S) -> list[dict]:
        """SIGTERM every agent (it finishes open windows and writes its summary), give them all
        ``timeout`` s together, then read the summaries (an agent killed after that is in ``dead``)."""
        for _, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except Exception:
                stop_process_group(p)
        self._keep_live()
        return self.summaries()

    def progress_of(self, name: str) -> dict[str, tuple[int, int | None]]:
        """What agent ``name`` last said it had received: ``"origin:flow"`` -> (frames, when the
        last came, ns; None in an older agent's file, which had counts only).  Empty if
        it wrote none yet or is writing it (each is rewritten once a second, renamed into place)."""
        f = self.live / f"agent-{name}.progress" if self.live is not None else None
        if f is None or not f.exists():
            f = self.out / f"agent-{name}.progress"
        try:
            rx = json.loads(f.read_text())["flows_rx"]
        except (OSError, ValueError, KeyError):
            return {}
        return {k: (v[0], v[1]) if isinstance(v, list) else (v, None) for k, v in rx.items()}

    def received(self) -> dict[str, int]:
        """Frames received so far per ``"origin:flow"``, summed over every agent's progress file
        (a file not yet written counts nothing)."""
        out: dict[str, int] = {}
        for name, _ in self.procs:
            for key, (n, _) in self.progress_of(name).items():
                out[key] = out.get(key, 0) + n
        return out

    def summaries(self) -> list[dict]:
        """The summaries of the agents that ended well (each with its ``host`` and ``plane``: the
        host index its agents pair by); the others are listed in ``dead``."""
        out, self.dead = [], []
        for name, p in self.procs:
            f = self.out / f"agent-{name}.json"
            rack, plane = self.where.get(name, (None, 0))
            if p.poll() in (0, None) and f.exists():
                out.append(dict(json.loads(f.read_text()), host=name, plane=plane))
                continue
            log = self.out / f"agent-{name}.log"
            err = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
            self.dead.append({"host": name, "rack": rack, "plane": plane, "exit": p.poll(),
                              "log": err[-1] if err else ""})
        return out

    def kill(self) -> None:
        for _, p in self.procs:
            stop_process_group(p)
        self._keep_live()

    def _keep_live(self) -> None:
        """Once the agents are gone: their live files into ``out`` (the last progress of an agent
        that died is what the run has of its flows), and the live directory removed."""
        if self.live is None or self.live == self.out or not self.live.is_dir():
            return
        for f in [*self.live.glob("agent-*.progress"), *self.live.glob("share-rack*.shm")]:
            shutil.copyfile(f, self.out / f.name)
        shutil.rmtree(self.live, ignore_errors=True)


def account(summaries: list[dict], dead: list[dict] = ()) -> dict:
    """Every frame an agent accepted is delivered exactly once, still held, or lost: counted.

    With dead agents the survivors' frames are judged alone: frames from a dead agent's host that
    reached a survivor are reported (``delivered_from_dead``) but outside the identity (what it
    accepted died with it), and a survivor's frame that was held by the dead agent, in flight to
    it or delivered to it (no summary says which) is ``lost`` -- the loss its death caused."""
    dead_racks = {(d["plane"], str(d["rack"])) for d in dead}
    accepted = delivered = held = from_dead = copies = 0
    # A stream frame held at a relay whose receiver already handed it over in order is a copy its
    # origin resent (its first ACK late): held and delivered once, counted once (delivered).
    prefix = {(s.get("plane", 0), s["rack"]): s.get("rx_stream_next") or {} for s in summaries}
    for s in summaries:
        plane = s.get("plane", 0)
        for o, dst, fl, seq in s.get("held_relay_streams") or []:
            if (plane, str(o)) not in dead_racks and seq < prefix.get((plane, dst), {}).get(f"{o}:{fl}", 0):
                copies += 1
    for s in summaries:
        plane = s.get("plane", 0)
        accepted += sum(s["accepted"].values())
        for origin, n in s["delivered"].items():
            if (plane, origin) in dead_racks:
                from_dead += n
            else:
                delivered += n
        held += s["held_local"]
        by_origin = s.get("held_relay_by_origin")
        if by_origin is None:
            held += sum(s["held_relay"].values())
        else:
            held += sum(n for o, n in by_origin.items() if (plane, o) not in dead_racks)
    held -= copies
    return {"accepted": accepted, "delivered": delivered, "held": held, "lost": accepted - delivered - held,
            "relay_copies_delivered": copies, "dead_agents": [d["host"] for d in dead], "delivered_from_dead": from_dead}


def redirect_tcp(host) -> None:
    """In ``host``'s namespace: a route for the bulk addresses 10.200.0.0/16 (connect() needs one)
    and netfilter sending TCP to them to the agent's split-connection port (host/stream.py), once."""
    from ..rotorlb.wire import SPLIT_TCP_PORT

    rule = f"OUTPUT -p tcp -d 10.200.0.0/16 -j REDIRECT --to-ports {SPLIT_TCP_PORT}"
    out = host.cmd("dev=$(ip -o -4 addr show scope global | awk '{print $2; exit}'); "
                   "ip route replace 10.200.0.0/16 dev $dev && "
                   f"{{ iptables -t nat -C {rule} 2>/dev/null || iptables -t nat -A {rule}; }} && echo redirected")
    if "redirected" not in out:
        raise HarnessError(f"{host.name}: cannot redirect TCP to its agent: {out.strip()[-200:]}")


def _await_listening(agents: Agents, start_ns: int) -> None:
    """Readiness by polling: every agent writes its ready file once its socket is bound."""
    late: dict[str, float] = {}
    deadline = time.monotonic() + max(30.0, (start_ns - time.time_ns()) / 1e9 + 30)
    for name, p in agents.procs:
        f = agents.out / f"agent-{name}.ready"
        while not f.exists():
            if p.poll() is not None:
                log = agents.out / f"agent-{name}.log"
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                raise HarnessError(f"agent in {name} exited ({p.poll()}) before listening: {' '.join(tail)}")
            if time.monotonic() > deadline:
                raise HarnessError(f"agent in {name} not listening after 30 s")
            time.sleep(0.05)
        ready = json.loads(f.read_text())["ready_ns"]
        if ready > start_ns:
            late[name] = (ready - start_ns) / 1e9
    if late:
        raise HarnessError("agents not listening by their start time (frames to them would be lost): "
                           + ", ".join(f"{n} {s:.2f} s late" for n, s in late.items())
                           + "; the machine is too busy for the start-up lead (start_lead_s)")


def _flows_file(out: Path, host: str, flows: list[dict]) -> Path:
    """An agent's flows go in a file: an FCT run's thousands would not fit on a command line."""
    f = out / f"flows-{host}.json"
    f.write_text(json.dumps(flows))
    return f


def start_lead_s(n_agents: int) -> float:
    """Wall seconds from launching ``n_agents`` agents to all of them listening, with margin (a
    Python start-up each, two cores shared with the switches).  0.3 s each left 16 agents up to
    1.2 s late in a fresh Debian root running the whole suite."""
    return 1.0 + 0.5 * n_agents


def cycle_start_ns(emu, ds: S.Schedule, n_agents: int) -> int:
    """The first cycle boundary at which ``n_agents`` agents launched now are all listening."""
    H = ds.hyperperiod_us * 1000
    now = time.time_ns() + int(start_lead_s(n_agents) * 1e9)
    return emu.t0_ns + -(-(now - emu.t0_ns) // H) * H


def start_agents(emu, topo, ds: S.Schedule, out: Path, *, rate: float, guard_us: float,
                 flows: dict[tuple[int, int], list[dict]] | None = None, one_hop: bool = False,
                 tun: bool = False, stop_ns: int = FAR_NS, end_ns: int = FAR_NS,
                 measure: tuple[int, int] = (0, 0), host_index: int | None = None,
                 retransmit_us: float = 0.0, start_ns: int | None = None, ack_direct: bool = False,
                 shared: bool = False, realtime: bool = False, rt_always: bool = True,
                 datapath: str = "python", fill: float | None = None, tcp_split: bool = False,
                 spin_ns: int | None | str = "auto", resend_streams_only: bool = False,
                 phases: dict | None = None) -> Agents:
    """One agent per host (or only hosts of index ``host_index``); ``flows[(rack, host)]``: the
    built-in sender's flows of that host.  No agent opens a circuit window before ``start_ns``
    (default: as soon as all can listen, ``start_lead_s``); returns once every agent listens (and
    its TUN interface is up), or raises if one was not listening by ``start_ns`` -- its peers'
    first frames to it would have been lost.  ``rate`` is a rack's per circuit: a plane per host
    splits it evenly; ``shared``, a rack's agents share its circuits instead (host/share.py:
    each window's frames claimed through ``share-rack<k>.shm``), each host sending at most its
    plane's worth over all its circuits together, as with a plane per host.  ``realtime``: each
    agent under SCHED_RR below the switches and an FCT run's TCP processes, where allowed
    (fabric/switch.py: AGENT_RT_PRIORITY) while it holds bulk, the default policy while idle
    (``rt_always``, the default: idle too; else only while it holds bulk, host/priority.py): its
    pacer then sends when its window says, not when the scheduler gets to it.  ``datapath``: who
    moves the agents' frames (host/agent_cli.py ``--datapath``: python, or c: the compiled rlbd);
    ``fill``: the share of each window's time frames are planned for (None: the agents' default);
    ``tcp_split`` (datapath c): each host's TCP connections to 10.200.R.N end at its agent and cross
    as RotorLB streams (host/stream.py; :func:`redirect_tcp`); ``spin_ns`` (datapath c): how long
    rlbd stays awake before each frame is due (host/agent_cli.py ``--spin-ns``); "auto": never when
    there are more agents than CPUs -- at 4 400 frames/s per circuit 16 agents spinning a quarter
    of each frame time kept both of 2 cores busy, and the Python agents' slot loops stalled for
    seconds (websearch 10 %, 2000 flows: 8 500 windows missed per agent) -- else rlbd's default;
    ``resend_streams_only`` (datapath c, with ``retransmit_us``): bulk frames are sent once, only
    stream frames resent (an agent restarted mid-run then delivers no frame twice);
    ``phases``: every agent's host/agent_cli.py ``--phases`` (one run for a list of matrices)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("agent-*.json"), *out.glob("agent-*.ready"), *out.glob("agent-*.progress"),
                *out.glob("share-rack*.shm")]:
        old.unlink()  # a summary read later must be this run's
    sched_file = out / "schedule.json"
    sched_file.write_text(ds.dumps())
    phases_file = out / "phases.json"
    if phases:
        phases_file.write_text(json.dumps(phases))
    hosts = max(len(k.hosts) for k in topo.racks)
    live = live_dir(out)
    agents = Agents(out, live=live, emu=emu)
    prefix = priority_prefix(True, AGENT_RT_PRIORITY, 0) if realtime else []
    # Started under SCHED_RR (its start-up keeps its lead); ``rt_always`` (the default): it keeps it
    # idle too.  Off, it keeps it only while it holds bulk (host/priority.py): at Data Mining 1 %
    # the low-latency class's mean slowdown fell from 2.05 to 1.80, but 70 of 76 lone bulk flows
    # met the bound instead of 90 of 90 (docs/notes/priorities.md).
    rt_args = (["--rt-priority", str(AGENT_RT_PRIORITY)] + (["--rt-always"] if rt_always else [])
               if prefix[:1] == ["chrt"] else [])
    n_agents = sum(1 for k in topo.racks for n in range(len(k.hosts)) if host_index in (None, n))
    if spin_ns == "auto":
        spin_ns = 0 if n_agents > (os.cpu_count() or 1) else None
    if start_ns is None:
        start_ns = time.time_ns() + int(start_lead_s(n_agents) * 1e9)
    try:
        for n in range(hosts):
            if host_index is not None and n != host_index:
                continue
            peers = json.dumps({str(k.id): k.hosts[n].ip for k in topo.racks if len(k.hosts) > n})
            for k in topo.racks:
                if len(k.hosts) <= n:
                    continue
                h = k.hosts[n]
                args = prefix + [sys.executable, "-m", "p4rotor.host.agent_cli", "--schedule", str(sched_file),
                        "--t0-ns", str(emu.t0_ns), "--rack", str(k.id), "--peers", peers,
                        "--flows", "@" + str(_flows_file(out, h.name, (flows or {}).get((k.id, n), []))),
                        "--rate", str(rate / (1 if host_index is not None or shared else hosts)),
                        "--guard-us", str(guard_us), "--stop-ns", str(stop_ns), "--end-ns", str(end_ns),
                        "--measure", f"{measure[0]},{measure[1]}", "--out", str(out / f"agent-{h.name}.json"),
                        "--start-ns", str(start_ns), "--ready", str(out / f"agent-{h.name}.ready"),
                        "--progress", str(live / f"agent-{h.name}.progress")] + rt_args
                if one_hop:
                    args.append("--one-hop")
                if phases:
                    args += ["--phases", "@" + str(phases_file)]
                if datapath != "python":
                    args += ["--datapath", datapath]
                    if spin_ns is not None:
                        args += ["--spin-ns", str(spin_ns)]
                if fill is not None:
                    args += ["--fill", repr(fill)]
                if retransmit_us:
                    args += ["--retransmit-us", str(retransmit_us)]
                    if ack_direct:
                        args.append("--ack-direct")
                    if resend_streams_only:
                        args.append("--resend-streams-only")
                if shared and host_index is None:
                    args += ["--share", str(live / f"share-rack{k.id}.shm"), "--share-member", str(n),
                             "--share-members", str(len(k.hosts)), "--host-rate", str(rate / hosts * len(ds.rotors))]
                if tun:
                    args += ["--tun", f"10.200.{k.id}.{n + 1}/16"]
                if tcp_split:
                    args += ["--tcp-split", "--plane", str(n)]
                    redirect_tcp(emu.host(h.name))
                log = open(out / f"agent-{h.name}.log", "w")  # an agent's errors, for the user
                agents.procs.append((h.name, emu.popen(h.name, args, stdout=log, stderr=log)))
                agents.args[h.name] = args
                agents.where[h.name] = (k.id, n)
        _await_listening(agents, start_ns)
        if tun:
            for name, p in agents.procs:  # readiness by polling: the TUN interface is up
                deadline = time.monotonic() + 30
                while "10.200." not in emu.host(name).cmd("ip -o addr show dev rlb0 2>/dev/null"):
                    if p.poll() is not None or time.monotonic() > deadline:
                        raise HarnessError(f"agent in {name}: no TUN interface (exited {p.poll()})")
                    time.sleep(0.1)
    except BaseException:
        agents.kill()
        raise
    return agents
