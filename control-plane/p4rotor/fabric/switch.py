"""Owning simple_switch_grpc processes for tests, benchmarks and emulations.

Every switch runs in a network namespace of its own making, with veth pairs
whose far ends stay in the same namespace for ptf (or for a traffic generator).
Readiness is polled (the gRPC port accepts connections), never slept for; the
process is stopped by its PID and the namespace deleted; on failure the switch
log is available to dump.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, Sequence

from ..p4 import CPU_PORT


class HarnessError(RuntimeError):
    pass


def missing_tools(need_p4c: bool = False) -> list[str]:
    """Names of the tools a switch test needs that are not on PATH (or not usable)."""
    out = []
    if not shutil.which("simple_switch_grpc"):
        out.append("simple_switch_grpc (BMv2)")
    if need_p4c and not shutil.which("p4c"):
        out.append("p4c")
    if not shutil.which("ip"):
        out.append("ip (iproute2)")
    if os.geteuid() != 0:
        out.append("root (network namespaces)")
    return out


def run(cmd: Sequence[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def tcp_listening(port: int) -> bool:
    """Whether a socket of this (root) namespace listens on TCP ``port``: /proc/net/tcp{,6}, not
    `ss` (a process per poll: under load the harness saw a restarted switch listen late)."""
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    # local_address ends in :PORT (hex); state 0A is LISTEN
                    if len(cols) > 3 and cols[3] == "0A" and cols[1].endswith(want):
                        return True
        except OSError:
            continue
    return False


def stop_process_group(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 5.0) -> None:
    """Stop a process we started (in its own session) and its children, by PID; escalate to SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while a teardown runs: the first one started it, and a second one
    arriving halfway would leave what the teardown had not reached yet (pipelines, namespaces,
    switch processes).  They are delivered when it is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Netns:
    """A network namespace that is deleted (with its veths) when closed."""

    def __init__(self, prefix: str = "p4r"):
        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        run(["ip", "netns", "add", self.name])
        self.exec(["ip", "link", "set", "lo", "up"])
        # No IPv6 chatter (router solicitations, MLD) on test ports: ptf's
        # verify_no_other_packets must see only what the test sent.
        self.exec(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        self.exec(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def exec(self, cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
        return run(self.prefix() + list(cmd), check=check)

    def veth(self, a: str, b: str, mtu: int = 1500) -> None:
        self.exec(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
        for i in (a, b):
            self.exec(["ip", "link", "set", i, "mtu", str(mtu), "up"])
            self.exec(["sysctl", "-q", "-w", f"net.ipv6.conf.{i}.disable_ipv6=1"], check=False)

    def tcp_listening(self, port: int) -> bool:
        r = self.exec(["ss", "-Hltn", f"sport = :{port}"], check=False)
        return bool(r.stdout.strip())

    def close(self) -> None:
        run(["ip", "netns", "delete", self.name], check=False)


def free_port_in(ns: Netns, start: int = 50051) -> int:
    """A TCP port nothing listens on inside the namespace (fresh namespaces are empty)."""
    for p in range(start, start + 1000):
        if not ns.tcp_listening(p):
            return p
    raise HarnessError("no free port")


# The switches are the emulated hardware: on a loaded machine the hosts, probes, capture and
# controller must wait, not the fabric.  At the default priority, BMv2's transmit thread was
# sometimes descheduled for tens of ms after a frame passed the rotor's egress check, so the frame
# left after its day had ended (issue #17: 2 of 33 000 rotor frames in a CorrOpt run at 50
# probes/s per host, 18 of 52 000 at 80/s; the same runs with the switches at nice -10: 0).
# Root (every harness) gets the priority; as another user ``nice`` says it cannot and runs the
# switch as it is.
SWITCH_NICE = -10
# Real-time (SCHED_RR) instead, for runs whose many host processes would otherwise delay the
# switches (``realtime=True``; the FCT experiment's 16 agents and 16 TCP senders): at nice -10 a
# frame took 5 ms median, 35 ms p90, host to host at 1 % load (the scheduler let a woken
# switch thread wait for the Python processes' slices); under SCHED_RR 1.6 ms and 3.5 ms.  The
# kernel's RT throttling still leaves 5 % of the CPU to the rest.  Not the default: 100+
# switches at scale would keep the controller from its deadlines.
SWITCH_RT_PRIORITY = 20
# The hosts' processes that keep time: SCHED_RR below the switches, so a host waits for the
# fabric and never the fabric for a host.  An FCT run's TCP senders and receivers (an application
# answers at once on a real host) ...
HOST_RT_PRIORITY = SWITCH_RT_PRIORITY - 10
# ... and below them its RotorLB agents, whose pacers must send inside a circuit's window (at the
# default priority they waited for the controller and the harness: flow 1439 of Data Mining 1 %
# alone, 57 of 60 copies within the bulk bound; under SCHED_RR 60 of 60).  At the TCP processes'
# own priority a woken receiver waited for an agent's turn: the low-latency class's mean slowdown
# at Data Mining 1 % rose from 1.64 to 2.02 (docs/notes/priorities.md).
# Below them it was still 2.05; holding this priority only while an agent holds bulk
# (host/priority.py) gave 1.80 but lost the bulk bound (fabric/agents.py: ``rt_always``).
AGENT_RT_PRIORITY = HOST_RT_PRIORITY - 5
# The controller, when the switches run under SCHED_RR: below every host process that keeps
# time, above every process at the default policy.  A restarted switch is back only once the
# controller has re-installed it; at the default policy, under load, it waited for the agents
# and the harness (docs/faults.md, "A restarted switch").
CONTROLLER_RT_PRIORITY = AGENT_RT_PRIORITY - 1


@functools.cache
def realtime_allowed() -> bool:
    """Whether this process may run a switch under SCHED_RR (root with CAP_SYS_NICE, chrt)."""
    try:
        return subprocess.run(["chrt", "--rr", str(SWITCH_RT_PRIORITY), "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def priority_prefix(realtime: bool, rt_priority: int = SWITCH_RT_PRIORITY, nice: int = SWITCH_NICE) -> list[str]:
    """The command prefix that runs a process under SCHED_RR at ``rt_priority`` (``realtime``,
    where allowed), else at ``nice``; both exec the command, so the PID stays its own."""
    if realtime and realtime_allowed():
        return ["chrt", "--rr", str(rt_priority)]
    return ["nice", "-n", str(nice)]


def bmv2_command(device_id: int, ports: dict[int, str], grpc_port: int, thrift_port: int,
                 cpu_port: int = CPU_PORT, extra_args: Sequence[str] = (), realtime: bool = False,
                 cpus: str | None = None) -> list[str]:
    """The one simple_switch_grpc command line p4rotor uses (docs/toolchain.md): no program at
    start (the controller pushes it), ports by explicit number, the CPU port for PacketIn/Out;
    run at priority ``SWITCH_NICE`` (``nice`` execs it: the PID is the switch's), or under
    SCHED_RR with ``realtime`` where that is allowed (``chrt`` execs it the same way); on the
    CPUs ``cpus`` only (a checked list, fabric/cpu.py: ``cpu_list``; ``taskset`` execs too)."""
    cmd = (["taskset", "-c", cpus] if cpus else []) + priority_prefix(realtime) + ["simple_switch_grpc", "--device-id", str(device_id), "--thrift-port", str(thrift_port), "--no-p4"]
    for p, ifc in sorted(ports.items()):
        cmd += ["-i", f"{p}@{ifc}"]
    cmd += list(extra_args)
    return cmd + ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--cpu-port", str(cpu_port)]


@dataclasses.dataclass
class SwitchProcess:
    """One simple_switch_grpc with ports ``{port number: interface}`` in ``ns``."""

    ns: Netns
    ports: dict[int, str]
    device_id: int = 1
    grpc_port: int = 0
    thrift_port: int = 0
    log_path: Path | None = None
    cpu_port: int = CPU_PORT
    extra_args: Sequence[str] = ()
    proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> "SwitchProcess":
        if not self.grpc_port:
            self.grpc_port = free_port_in(self.ns, 50051 + self.device_id)
        if not self.thrift_port:
            self.thrift_port = free_port_in(self.ns, 9090 + self.device_id)
        if self.log_path is None:
            self.log_path = Path(tempfile.mkstemp(prefix=f"bmv2-{self.device_id}-", suffix=".log")[1])
        cmd = self.ns.prefix() + bmv2_command(self.device_id, self.ports, self.grpc_port, self.thrift_port,
                                              self.cpu_port, self.extra_args)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.ns.tcp_listening(self.grpc_port):
            if self.proc.poll() is not None:
                raise HarnessError(f"simple_switch_grpc exited ({self.proc.returncode}) during start:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise HarnessError(f"simple_switch_grpc not listening on {self.grpc_port} after {timeout} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.05)
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        stop_process_group(self.proc)
        if getattr(self, "_log", None):
            self._log.close()


@contextlib.contextmanager
def ptf_bench(num_switches: int = 1, ports: Sequence[int] = (1, 2, 3, 4), log_dir: Path | None = None,
              extra_args: Sequence[str] = (), port_mtus: dict[int, int] | None = None
              ) -> Iterator[tuple[Netns, list[SwitchProcess], dict[tuple[int, int], str]]]:
    """Switches in one fresh namespace, each port wired to a veth whose peer is for ptf.

    ``port_mtus``: the MTU of each port's veth (default 1500, a host link), the same the
    emulation gives the link that port is in, so a test sees what a user sees.
    Yields (namespace, switches, {(device index, port): ptf-side interface}).
    """
    ns = Netns()
    switches: list[SwitchProcess] = []
    ptf_ifaces: dict[tuple[int, int], str] = {}
    try:
        for d in range(num_switches):
            sw_ports = {}
            for p in ports:
                a, b = f"s{d}p{p}", f"t{d}p{p}"
                ns.veth(a, b, mtu=(port_mtus or {}).get(p, 1500))
                sw_ports[p] = a
                ptf_ifaces[(d, p)] = b
            log = (log_dir / f"switch{d}.log") if log_dir else None
            sp = SwitchProcess(ns, sw_ports, device_id=d + 1, log_path=log, extra_args=extra_args)
            switches.append(sp)
            sp.start()
        yield ns, switches, ptf_ifaces
    finally:
        with signals_held():
            for sp in switches:
                sp.stop()
            ns.close()
