"""The harness's watch over a run's RotorLB agents: a dead agent is noticed by its PID and started
again with its flags (fabric/agents.py ``Agents.restart``), and what that took is recorded.

A thread polls every agent's process every ``POLL_S``.  One that exited while the run goes on
(killed, crashed: an agent that ends by itself at its ``--end-ns`` exits 0) is *noticed*; after its restart delay (0 unless a fault said otherwise:
``expect``) it is restarted as the next incarnation, its first window at the next cycle boundary
it can listen by (``cycle_start_ns``), and the thread waits for its ready file.  Every step is a
structured event (wall ns) given to ``note``: ``noticed`` (with the exit status and how long after
the kill it was seen, if the harness killed it), ``restarted`` (pid, incarnation), ``listening``.
An agent is restarted at most ``MAX_RESTARTS`` times: one that keeps dying stays dead (reported
in ``Agents.dead`` as before).
"""

from __future__ import annotations

import json
import signal
import threading
import time

from .agents import Agents, start_lead_s
from .switch import stop_process_group

POLL_S = 0.05
MAX_RESTARTS = 8


class Supervisor:
    def __init__(self, agents: Agents, t0_ns: int, hyperperiod_ns: int, note=lambda host, what, **kw: None,
                 restart_until_ns: int = 1 << 62):
        """``restart_until_ns``: a death noticed after this (the run's traffic over) is noted, not
        restarted."""
        self.agents, self.t0_ns, self.H = agents, t0_ns, hyperperiod_ns
        self.restart_until_ns = restart_until_ns
        self.note = note
        self.delay_s: dict[str, float | None] = {}   # host -> restart delay of its next death (None: none)
        self.killed_ns: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Supervisor":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Before the agents end by themselves (or are stopped): their exits are not deaths."""
        self.stopping.set()
        self._thread.join(10)

    def kill(self, name: str, restart_after_s: float | None) -> int:
        """SIGKILL host ``name``'s agent (its process group: rlbd with it); restarted after
        ``restart_after_s`` from the kill (None: never).  Returns the PID killed."""
        p = self.agents.proc(name)
        self.delay_s[name] = restart_after_s
        self.killed_ns[name] = time.time_ns()
        stop_process_group(p, signal.SIGKILL)
        return p.pid

    def _run(self) -> None:
        seen = set()
        while not self.stopping.wait(POLL_S):
            for name, p in list(self.agents.procs):
                if p.pid in seen or p.poll() is None:
                    continue
                seen.add(p.pid)
                if self.stopping.is_set():
                    return
                if p.returncode == 0:  # it ended by itself (its --end-ns): not a death
                    continue
                try:
                    self._restart(name, p)
                except Exception as ex:  # recorded, reported: one agent does not end the run
                    self.errors.append(f"agent {name}: {ex}")

    def _restart(self, name: str, p) -> None:
        now = time.time_ns()
        killed = self.killed_ns.pop(name, None)
        self.note(name, "noticed", exit=p.returncode, pid=p.pid,
                  **({"after_kill_ms": (now - killed) / 1e6} if killed is not None else {}))
        delay = self.delay_s.pop(name, 0.0)
        if delay is None or self.restarts.get(name, 0) >= MAX_RESTARTS or now > self.restart_until_ns:
            return
        if self.stopping.wait(max(0.0, (killed or now) / 1e9 + delay - time.time())):
            return
        self.restarts[name] = self.restarts.get(name, 0) + 1
        # Its first window at the first cycle boundary it can be listening by (one agent's lead).
        ready_by = time.time_ns() + int(start_lead_s(1) * 1e9)
        start = self.t0_ns + -(-(ready_by - self.t0_ns) // self.H) * self.H
        q = self.agents.restart(name, start)
        t = time.time_ns()
        self.note(name, "restarted", pid=q.pid, incarnation=self.agents.incarnation[name], first_window_ns=start,
                  **({"after_kill_ms": (t - killed) / 1e6} if killed is not None else {}))
        ready = self.agents.out / f"agent-{name}.ready"
        deadline = time.monotonic() + 30
        while not ready.exists():
            if q.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"restarted agent not listening (exit {q.poll()})")
            time.sleep(0.02)
        self.note(name, "listening", after_restart_ms=(json.loads(ready.read_text())["ready_ns"] - t) / 1e6)
