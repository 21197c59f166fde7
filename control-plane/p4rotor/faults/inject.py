"""Apply a fault plan to a running emulation (the harness's share of issue #17).

The harness owns processes, so it applies the faults that are about processes and links:
``link-down`` (the interface set down, then up), ``switch-crash`` (the BMv2 process SIGKILLed,
then started again on the same ports: the controller's session reconnects and re-installs it;
on eBPF the NIKSS pipeline unloaded, then loaded again, empty, as the same pipeline id with the
same ports: the controller sees it come back and re-installs it),
``controller-crash`` (SIGKILL, then a new controller that adopts the running switches) and
``host-pause`` (every process in the host's namespace SIGSTOPped, then SIGCONTed) and
``agent-kill`` (the host's RotorLB agent SIGKILLed with its rlbd; the harness's supervisor,
fabric/supervise.py, notices it by its PID and restarts it after ``restart_after_us``).  ``loss`` and
``clock-skew`` are the controller's (``p4rotor control --faults``); the injector skips them.

Times: a plan's ``start_us``/``end_us``/``restart_after_us`` are emulated us from ``origin_ns``
(wall), multiplied by the dilation.  Every action is recorded as a structured event (wall ns),
with what the recovery took: a restarted switch's gRPC port listening, its re-install seen in
the controller's status file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..control.status import read_status
from ..fabric.switch import CONTROLLER_RT_PRIORITY, realtime_allowed, stop_process_group
from ..control.fault_plan import Fault, FaultPlan

HARNESS_KINDS = ("link-down", "switch-crash", "controller-crash", "host-pause", "agent-kill")


@dataclasses.dataclass
class Injector:
    emu: object            # fabric.mininet.Emulation
    plan: FaultPlan
    origin_ns: int
    dilation: float
    events: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)
    supervisor: object = None  # fabric.supervise.Supervisor: the agents (agent-kill needs it)

    def note_agent(self, host: str, what: str, **kw) -> None:
        """The supervisor's events, as the injector's (``kind`` agent-kill, ``target`` the host)."""
        self.events.append({"t_ns": time.time_ns(), "kind": "agent-kill", "what": what, "target": host, **kw})

    def wall(self, us: int) -> int:
        return self.origin_ns + int(us * self.dilation * 1000)

    def run(self) -> threading.Thread:
        """Apply every harness fault at its time, each in its own thread (a restart waits)."""
        threads = [threading.Thread(target=self._one, args=(f,), daemon=True)
                   for f in self.plan.faults if f.kind in HARNESS_KINDS]
        for t in threads:
            t.start()
        waiter = threading.Thread(target=lambda: [t.join() for t in threads], daemon=True)
        waiter.start()
        return waiter

    def _note(self, fault: Fault, what: str, **kw) -> None:
        self.events.append({"t_ns": time.time_ns(), "kind": fault.kind, "what": what,
                            "target": fault.switch or fault.host or "controller", **kw})

    def _sleep_until(self, t_ns: int) -> None:
        d = (t_ns - time.time_ns()) / 1e9
        if d > 0:
            time.sleep(d)

    def _one(self, f: Fault) -> None:
        try:
            getattr(self, "_" + f.kind.replace("-", "_"))(f)
        except Exception as ex:  # recorded, reported by the experiment: one fault does not end the run
            self.errors.append(f"{f.kind} at {f.start_us} us: {ex}")

    # -- the faults ------------------------------------------------------------------------
    def _link_down(self, f: Fault) -> None:
        intf = f"{f.switch}-eth{f.port}"
        sw = self.emu.net.get(f.switch)   # in its node's namespace: the root one (BMv2) or its own (eBPF)
        self._sleep_until(self.wall(f.start_us))
        _ip_link(sw, intf, "down")
        self._note(f, "down", interface=intf)
        if f.end_us is not None:
            self._sleep_until(self.wall(f.end_us))
            _ip_link(sw, intf, "up")
            self._note(f, "up", interface=intf)

    def _switch_crash(self, f: Fault) -> None:
        sw = self.emu.net.get(f.switch)
        if self.emu.realtime and realtime_allowed():
            # This thread alone, as the controller: its times (restarted, listening, re-installed)
            # are when things happened, not when a loaded machine let it look.
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(CONTROLLER_RT_PRIORITY))
        self._sleep_until(self.wall(f.start_us))
        before = _switch_status(self.emu, f.switch)
        sw.kill_process()
        self._note(f, "killed")
        if f.restart_after_us is None:
            return
        self._sleep_until(self.wall(f.start_us + f.restart_after_us))
        t_start = time.time_ns()
        sw.start([])
        # BMv2: its process started (it listens later); eBPF: the pipeline loaded and its ports
        # attached, which is when it serves (the load is the restart's own time: ``load_ms``).
        restarted = t_start if getattr(sw, "proc", None) is None else time.time_ns()
        self._note(f, "restarted", **({"pid": sw.proc.pid} if getattr(sw, "proc", None) is not None
                                      else {"pipeline": sw.pipeline_id,
                                            "load_ms": (time.time_ns() - t_start) / 1e6}))
        deadline = time.monotonic() + 60
        while not sw.serving():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{f.switch} did not come back within 60 s")
            time.sleep(0.002)
        listening = time.time_ns()
        self._note(f, "listening", after_ms=(listening - restarted) / 1e6)
        while True:  # the controller's re-install: its clears count grows (structured status)
            st = _switch_status(self.emu, f.switch)
            if st.get("clears", 0) > before.get("clears", 0) or st.get("writes", 0) > before.get("writes", 0):
                # Where the time went: listening -> the controller's ready handler (gRPC reconnect,
                # arbitration, the pipeline pushed), then its probe, read, clear and write.
                phases = dict(st.get("phases") or {})
                ready_ns = phases.pop("ready_ns", None)
                if ready_ns is not None:
                    phases = {"connect_ms": round((ready_ns - listening) / 1e6, 3), **phases}
                # When the controller's last write returned (its clock is this machine's), not when
                # this poll of its status file saw it: that is up to 10 ms and a file write later.
                done_ns = phases.pop("done_ns", None) or time.time_ns()
                self._note(f, "reinstalled", after_ms=(done_ns - restarted) / 1e6,
                           entities=st.get("entities"), phases=phases)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{f.switch}: the controller did not re-install it within 60 s")
            time.sleep(0.01)

    def _controller_crash(self, f: Fault) -> None:
        self._sleep_until(self.wall(f.start_us))
        stop_process_group(self.emu.controller, signal.SIGKILL)
        self._note(f, "killed")
        if f.restart_after_us is None:
            return
        self._sleep_until(self.wall(f.start_us + f.restart_after_us))
        t = time.time_ns()
        # A new controller on the same topology and arguments: it adopts what the switches hold
        # (BMv2); on eBPF it cannot read the tables back, and writes them again on a clock of its
        # own whose slot 0 (``t0_ns``) is ahead: the fabric is dark until then.
        self.emu.restart_controller(timeout=60)
        st = read_status(self.emu.run_dir / "status.json") or {}
        adopted = sum(1 for s in st.get("switches", {}).values() if s.get("adopted"))
        self._note(f, "restarted", after_ms=(time.time_ns() - t) / 1e6, adopted=adopted,
                   switches=len(st.get("switches", {})), t0_ns=self.emu.t0_ns)

    def _agent_kill(self, f: Fault) -> None:
        if self.supervisor is None:
            raise RuntimeError("agent-kill: no agents in this run")
        self._sleep_until(self.wall(f.start_us))
        after = None if f.restart_after_us is None else f.restart_after_us * self.dilation / 1e6
        pid = self.supervisor.kill(f.host, after)
        self._note(f, "killed", pid=pid)

    def _host_pause(self, f: Fault) -> None:
        self._sleep_until(self.wall(f.start_us))
        pids = _namespace_pids(self.emu.host(f.host).pid)
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGSTOP)
        self._note(f, "paused", processes=len(pids))
        if f.end_us is not None:
            self._sleep_until(self.wall(f.end_us))
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGCONT)
            self._note(f, "resumed")


def _ip_link(node, intf: str, state: str) -> None:
    r = subprocess.run(["mnexec", "-a", str(node.pid), "ip", "link", "set", "dev", intf, state],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip link set dev {intf} {state}: {r.stderr.strip()}")


def _switch_status(emu, name: str) -> dict:
    st = read_status(emu.run_dir / "status.json") or {}
    return st.get("switches", {}).get(name, {})


def _namespace_pids(shell_pid: int) -> list[int]:
    """Every process in the network namespace of a host (but its Mininet shell)."""
    ns = os.readlink(f"/proc/{shell_pid}/ns/net")
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) not in (shell_pid, os.getpid()):
            with contextlib.suppress(OSError):
                if os.readlink(d / "ns" / "net") == ns:
                    out.append(int(d.name))
    return out

