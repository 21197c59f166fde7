"""Launch a whole fabric in Mininet: hosts, ToRs and rotors as simple_switch_grpc, the controller.

Every link is on the explicit ports of the topology (ToR uplink port <-> rotor port of that
rack; host <-> its ToR port).  Switches run in the root namespace (their gRPC ports on
127.0.0.1 are what the controller dials); hosts get their own namespaces from Mininet.
Start-up is polled and shown; whatever happens (normal exit, Ctrl-C, a failure during
start) every switch process is stopped by PID and Mininet removes its links.

On the eBPF target (``target="ebpf"``) a switch is a NIKSS pipeline in a network namespace of its
own (fabric/nikss.py), loaded with its ports before the controller starts (``--pipeline
NAME=ID@NETNS``; the map in ebpf-switches.json), unloaded with its pins whatever happens."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from ..schedule import topology as TP
from ..control.status import read_status
from . import nikss
from .cpu import IdlePoll
from .shaping import qdisc_drops
from .switch import (CONTROLLER_RT_PRIORITY, HarnessError, missing_tools, priority_prefix, run, signals_held,
                     stop_process_group, tcp_listening)


@dataclasses.dataclass
class Emulation:
    topo: TP.Topology
    build: Path
    run_dir: Path
    mode: str = "clock"
    link_mbps: float | None = None
    epsilon_us: float = 0.0
    controller_args: tuple[str, ...] = ()  # more `p4rotor control` options, e.g. ("--quiet",)
    realtime: bool = False  # the switches under SCHED_RR where allowed (fabric/switch.py)
    # ... and, with ``realtime``, idle CPUs poll instead of halting while the emulation runs
    # (fabric/cpu.py: a cold packet paid ~0.4 ms per switch for waking halted vCPUs).
    idle_poll: bool | None = None
    # The switches run on these CPUs only (fabric/cpu.py: ``cpu_list``, e.g. "1"); None: anywhere.
    # The hosts' processes keep the other CPUs (a one-packet flow's FCT 4.1 -> 2.3 ms on 2 CPUs).
    switch_cpus: str | None = None
    # Each switch's clock port (254) wired to a root-namespace veth the controller probes through:
    # offsets to ~15 us instead of the PacketOut probes' +/- 200-700 us, so a ToR and a rotor agree
    # on when a night ends (clock_iface_names; docs/dataplane.md "Clock port").
    clock_ports: bool = True
    # Every ``warm_ms`` a time probe through each switch's clock port (fabric/warm.py): a BMv2 that
    # saw nothing for 30 ms took 230-310 us to forward a frame, 50-80 us right after another.
    # None: no warmer.  On a one-switch fabric the clock port is wired for it alone.
    warm_ms: float | None = None
    # "bmv2": simple_switch_grpc processes; "ebpf": NIKSS pipelines (clock mode, multi-switch,
    # unshaped links: frames a switch XDP_REDIRECTs bypass every qdisc; no clock ports)
    target: str = "bmv2"
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)
    net: object | None = None
    controller: subprocess.Popen | None = None
    switches: list = dataclasses.field(default_factory=list)
    t0_ns: int = 0
    _poll: IdlePoll | None = None
    _warmer: subprocess.Popen | None = None
    _clock_wired: list = dataclasses.field(default_factory=list)  # switch names

    def start(self, timeout: float = 120.0, check_forwarding: bool = True) -> "Emulation":
        from mininet.link import Link, TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        from .mn_nodes import BMv2Switch, IndexedLink, NikssSwitch

        setLogLevel("output")  # CLI command output shows; Mininet's info chatter does not
        import logging

        logging.getLogger("mininet").propagate = False  # printed once, by Mininet
        ebpf = self.target == "ebpf"
        miss = nikss.missing_tools() if ebpf else missing_tools()
        if miss:
            raise HarnessError("emulation needs: " + ", ".join(miss))
        t = self.topo
        one = t.one_switch
        if ebpf:
            nikss.check_emulation(t, self.mode, self.link_mbps, self.warm_ms, self.build)
        for prog in () if ebpf else ("oneswitch",) if one else ("rotor", "tor"):
            if not (self.build / f"{prog}.json").exists():
                raise HarnessError(f"{self.build / prog}.json missing: run 'make build'")
        busy = [str(p) for _, _, p in t.switches() if not ebpf and tcp_listening(p)]
        if busy:
            raise HarnessError(f"gRPC ports already in use: {', '.join(busy)} (another emulation running?)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if ebpf:
            nikss.clean_stale(self.say)
        else:
            self._remove_stale_interfaces([name for name, _, _ in t.switches()])
        if self.idle_poll if self.idle_poll is not None else self.realtime:
            self._poll = IdlePoll()
            if self._poll.hold():
                self.say("[run] idle CPUs poll while the emulation runs (PM QoS: /dev/cpu_dma_latency = 0)")
            else:
                self.say(f"[run] WARNING: idle CPUs will halt ({self._poll.why_not}): a packet after a quiet "
                         "spell pays ~0.4 ms per switch to wake them (docs/notes/cold-switches.md)")
        link_cls = IndexedLink if ebpf else TCLink if self.link_mbps else Link
        net = Mininet(topo=None, controller=None, link=link_cls, build=False, autoSetMacs=False)
        self.net = net
        self.say(f"[run] building {len(t.racks)} racks x {len(t.racks[0].hosts)} hosts, {len(t.rotors)} rotors ("
                 + (f"one BMv2 switch emulating all {len(t.racks) + len(t.rotors)}" if one
                    else f"{len(t.racks) + len(t.rotors)} {'eBPF (NIKSS)' if ebpf else 'BMv2'} switches") + ")")
        nodes = {}
        rotors = {r.name for r in t.rotors}
        for name, dev, grpc in t.switches():
            if ebpf:
                nodes[name] = net.addSwitch(name, cls=NikssSwitch,
                                            program=nikss.object_path(self.build, "rotor" if name in rotors else "tor"))
                continue
            nodes[name] = net.addSwitch(name, cls=BMv2Switch, json_path=None, grpc_port=grpc, device_id=dev,
                                        log_file=str(self.run_dir / f"{name}.log"), realtime=self.realtime,
                                        cpus=self.switch_cpus)
        for k in t.racks:
            plen = ipaddress.ip_network(k.prefix).prefixlen
            for h in k.hosts:
                nodes[h.name] = net.addHost(h.name, ip=f"{h.ip}/{plen}", mac=h.mac)
        opts = {"bw": self.link_mbps} if self.link_mbps else {}
        links = []  # (link, MTU from the topology)
        if one:
            # Every host on the one switch, ports 1, 2, ... in topology order (control/one_switch.py).
            from ..control.one_switch import host_ports

            ports = host_ports(t)
            for k in t.racks:
                for h in k.hosts:
                    links.append((net.addLink(nodes[h.name], nodes[one.name], port2=ports[h.name], **opts),
                                  t.host_mtu))
        for k in t.racks if not one else ():
            for h in k.hosts:
                links.append((net.addLink(nodes[h.name], nodes[k.tor.name], port2=h.port, **opts), t.host_mtu))
            for r in t.rotors:
                links.append((net.addLink(nodes[k.tor.name], nodes[r.name], port1=k.tor.uplinks[r.name],
                                          port2=r.ports[k.id], **opts), t.fabric_mtu))
        net.build()
        for link, mtu in links:
            for intf in (link.intf1, link.intf2):
                intf.node.cmd(f"ip link set dev {intf.name} mtu {mtu}")
        for h in net.hosts:
            # Every other rack is reached through the ToR, which forwards by IP: on-link (static ARP).
            h.cmd(f"ip route add default dev {h.defaultIntf().name}")
            # BMv2 does not complete checksums the kernel left to the NIC; no IPv6 chatter.
            for intf in h.intfList():
                h.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            for intf in h.intfList() if ebpf else ():
                nikss.attach_xdp_pass(f"/proc/{h.pid}/ns/net", intf.name, nikss.object_path(self.build, "xdp_pass"))
        for sw in net.switches:
            for intf in sw.intfList():
                if intf.name != "lo":
                    sw.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1; "
                           f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        net.staticArp()
        if ((self.clock_ports and not one) or self.warm_ms) and not ebpf:
            self._wire_clock_ports(net.switches)
        self.say("[run] loading the switches' pipelines (NIKSS)" if ebpf else "[run] starting switches")
        self.switches = list(net.switches)  # stop() unloads what was loaded, also after a failure here
        for sw in net.switches:
            sw.start([])
        if ebpf:
            nikss.write_switch_map(self.run_dir / "ebpf-switches.json",
                                   [(sw.pipeline, "rotor" if sw.name in rotors else "tor", sw.program)
                                    for sw in net.switches])
        deadline = time.monotonic() + timeout
        pending = {} if ebpf else {sw.name: sw for sw in net.switches}
        while pending:
            for name, sw in list(pending.items()):
                if sw.proc.poll() is not None:
                    raise HarnessError(f"{name} exited during start:\n{sw.log_tail()}")
                if tcp_listening(sw.grpc_port):
                    del pending[name]
            if time.monotonic() > deadline:
                raise HarnessError(f"switches not listening after {timeout:.0f} s: {', '.join(pending)}")
            self.say(f"[run]   {len(net.switches) - len(pending)}/{len(net.switches)} switches listening")
            if pending:
                time.sleep(0.25)
        self._start_controller(deadline)
        if self.warm_ms:
            self._start_warmer()
        # A probe may have to wait for its circuit: allow two cycles beyond the start deadline, and
        # a second per rack (each host tries the other racks one after another: at 128 racks on
        # 132 BMv2, 3 084 of 16 256 pairs had answered when two cycles were up).
        if check_forwarding:
            self._await_forwarding(max(deadline, time.monotonic() + 2 * t.schedule.hyperperiod_us / 1e6 + 10
                                       + len(t.racks)))
        return self

    def clock_ifaces(self) -> dict[str, str]:
        """{switch: the controller's end of its clock-port veth} (none on a one-switch fabric: one
        clock, nothing to agree with; none on the eBPF target: no clock port)."""
        if not self.clock_ports or self.topo.one_switch is not None or self.target == "ebpf":
            return {}
        return {name: clock_iface_names(name)[1] for name, _, _ in self.topo.switches()}

    def _wire_clock_ports(self, switches) -> None:
        """A veth per switch: one end is the switch's clock port, the other stays in the root
        namespace for the controller's two-way time probes (control/clockport.py)."""
        from ..p4 import constants as K

        for sw in switches:
            sw_end, ctl_end = clock_iface_names(sw.name)
            run(["ip", "link", "add", sw_end, "type", "veth", "peer", "name", ctl_end])
            for end in (sw_end, ctl_end):
                run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False)
                run(["ethtool", "-K", end, "tx", "off", "rx", "off"], check=False)
                run(["ip", "link", "set", end, "up"])
            sw.extra_ports = {K.CLOCK_PORT: sw_end}
            self._clock_wired.append(sw.name)

    def _start_warmer(self) -> None:
        """The warmer (fabric/warm.py) on the controller's ends of the clock ports, once every
        program is in (before that a switch has nothing to reflect the probes with)."""
        ifaces = [clock_iface_names(n)[1] for n in self._clock_wired]
        log = open(self.run_dir / "warm.log", "w")
        self._warmer = subprocess.Popen([sys.executable, "-m", "p4rotor.fabric.warm", "--period-ms", str(self.warm_ms),
                                         "--summary", str(self.run_dir / "warm.json"), *ifaces],
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()  # the warmer holds its own copy
        time.sleep(0.3)  # a bad interface or period: it says so in one line and exits at once
        if self._warmer.poll() is not None:
            why = (self.run_dir / "warm.log").read_text(errors="replace").strip().splitlines()
            raise HarnessError(f"the warmer exited ({self._warmer.returncode}): {why[-1] if why else 'no output'}")
        self.say(f"[run] switches kept warm: a clock-port probe through each of the {len(ifaces)} every "
                 f"{self.warm_ms:g} ms")

    def warm_summary(self) -> dict | None:
        """What the warmer sent and got back (per interface), once it has stopped; None without one."""
        try:
            return json.loads((self.run_dir / "warm.json").read_text()) if self._warmer is not None else None
        except (OSError, ValueError):
            return None

    def stop_warmer(self) -> dict | None:
        """Stop the warmer (SIGTERM: it writes its counts) and return them."""
        if self._warmer is not None:
            stop_process_group(self._warmer)
        return self.warm_summary()

    def _remove_stale_interfaces(self, switch_names: list[str]) -> None:
        """Delete root-namespace interfaces a killed run left behind under our switches' names.

        Switches live in the root namespace, so their veth ends outlive a run that was killed
        (SIGKILL, a lost machine session); Mininet would then fail with "RTNETLINK answers: File
        exists".  No switch of ours is running (the gRPC ports were free), so these are stale.
        """
        prefixes = tuple(p for n in switch_names for p in (f"{n}-eth", clock_iface_names(n)[0]))
        stale = sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefixes))
        if not stale:
            return
        for d in Path("/proc").iterdir():  # a live switch's interfaces are not stale
            with contextlib.suppress(OSError):
                argv = (d / "cmdline").read_bytes().split(b"\0") if d.name.isdigit() else []
                used = [n for n in stale if any(a.endswith(b"@" + n.encode()) for a in argv)]
                if used:
                    raise HarnessError(f"interface {used[0]} belongs to a running switch (pid {d.name}): "
                                       "another emulation uses the same switch names")
        self.say(f"[run] removing {len(stale)} interfaces left by an earlier run ({stale[0]} ...)")
        for name in stale:
            # Deleting one end of a veth removes its peer too: later names may be gone already.
            if os.path.exists(f"/sys/class/net/{name}"):
                run(["ip", "link", "del", name], check=False)

    def _await_forwarding(self, deadline: float) -> None:
        """Return once one probe per ordered rack pair has crossed the fabric and come back.

        A ping from the first host of each rack to the first host of every other rack, tried in the
        low-latency class (Opera's expander paths exist in every slice) and then as bulk (direct or
        2-hop: a RotorNet schedule has no multi-hop paths), until one gets a reply.  The controller
        being ready means every switch was written to, not that the fabric forwards yet.  Results
        are files of "ip class" lines, one per reached rack; no log text is read."""
        firsts = [(k, k.hosts[0]) for k in self.topo.racks if k.hosts]
        if len(firsts) < 2:
            return
        total = len(firsts) * (len(firsts) - 1)
        # RotorNet has no low-latency paths: a try in that class only costs its 0.5 s timeout
        # (127 of them per host at 128 racks).
        ll_try = ("" if self.topo.schedule.kind == "rotornet" else
                  "ping -n -q -c1 -W0.5 -Q 0xb8 $ip >/dev/null 2>&1 && ok=low-latency || ")
        # A bulk try covers a whole cycle: echo requests at half a day apart (0.02..0.2 s) until one
        # is answered.  A single request per try (0.5 s timeout) met a RotorNet pair's circuit one
        # time in ~8, so a host's seven racks, probed one after another, took 52 +- 20 s and the
        # slowest of eight hosts sometimes outlasted the start deadline.
        sch = self.topo.schedule
        interval = min(0.2, max(0.02, sch.day_us / 2e6))
        cover = math.ceil(sch.hyperperiod_us / 1e6 + 0.5)  # ping takes whole seconds
        bulk_try = f"ping -n -q -c1 -i {interval:.3f} -w {cover} $ip"
        procs = []
        for k, h in firsts:
            out = self.run_dir / f"reach-{h.name}.txt"
            out.unlink(missing_ok=True)
            dsts = " ".join(o.ip for kk, o in firsts if kk.id != k.id)
            # Between failed tries a pause of 0..0.9 s in a pseudo-random order, so that tries never
            # phase-lock to the cycle.
            script = (f"i=0; for ip in {dsts}; do ok=; while [ -z \"$ok\" ]; do "
                      f"{ll_try}"
                      f"{{ {bulk_try} >/dev/null 2>&1 && ok=bulk; }} || "
                      "{ i=$((i + 1)); sleep 0.$(( (i * 37) % 10 )); }; done; "
                      f"echo \"$ip $ok\" >> {out}; done")
            procs.append((out, self.popen(h.name, ["sh", "-c", script])))
        reached = -1
        try:
            while True:
                lines = [ln for out, _ in procs if out.exists() for ln in out.read_text().splitlines()]
                if len(lines) != reached:
                    reached = len(lines)
                    self.say(f"[run]   fabric forwards: {reached}/{total} rack pairs answered a probe")
                if all(p.poll() is not None for _, p in procs) and reached >= total:
                    return
                if time.monotonic() > deadline:
                    raise HarnessError(f"the fabric does not forward: {reached}/{total} rack pairs answered a "
                                       f"probe before the start deadline")
                time.sleep(0.2)
        finally:
            for _, p in procs:
                stop_process_group(p)

    def _start_controller(self, deadline: float) -> None:
        topo_path = self.run_dir / "topology.json"
        sched_path = self.run_dir / "schedule.json"
        sched_path.write_text(self.topo.schedule.dumps())
        d = self.topo.to_json()
        d["schedule"] = "schedule.json"
        topo_path.write_text(json.dumps(d, indent=1))
        # A restarted controller's output follows its predecessor's.
        log = open(self.run_dir / "controller.log", "a" if self.controller is not None else "w")
        status_path = self.run_dir / "status.json"
        status_path.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "p4rotor.cli", "control", "--topology", str(topo_path),
               "--mode", self.mode, "--build-dir", str(self.build), "--trace", str(self.run_dir / "trace.jsonl"),
               "--status-file", str(status_path), "--counters-every", "1",
               "--epsilon-us", str(self.epsilon_us), "--lead", "2", "--connect-timeout",
               str(max(10, int(deadline - time.monotonic()))),
               *(f"--clock-iface={name}={iface}" for name, iface in self.clock_ifaces().items()),
               *(("--target", "ebpf") if self.target == "ebpf" else ()),
               *(f"--pipeline={sw.name}={sw.pipeline.id}@{Path(sw.pipeline.netns).name}"
                 for sw in self.switches if getattr(sw, "pipeline", None)),
               *self.controller_args]
        clk = [c for c in cmd if c.startswith(("--clock-iface=", "--pipeline="))]
        self.say("[run] starting controller: " + " ".join(c for c in cmd[2:] if c not in clk)
                 + (f" (and --clock-iface or --pipeline for each of the {len(clk)} switches)" if clk else ""))
        if self.realtime:
            cmd = priority_prefix(True, CONTROLLER_RT_PRIORITY, 0) + cmd
        self.controller = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        seen = -1
        while True:
            st = read_status(status_path)  # structured (control/status.py): the log's wording is free
            if st is not None and st["installed"] != seen:
                seen = st["installed"]
                self.say(f"[run]   controller: {seen}/{st['total']} switches installed")
            if st is not None and st["phase"] == "running":
                self.t0_ns = st["t0_ns"]
                return
            if (st is not None and st["phase"] == "failed") or self.controller.poll() is not None:
                why = st["error"] if st and st.get("error") else self._controller_last_line()
                raise HarnessError(f"controller failed: {why}")
            if time.monotonic() > deadline:
                raise HarnessError(f"controller not ready in time ({seen} switches installed; "
                                   f"log: {self.run_dir / 'controller.log'})")
            time.sleep(0.2)

    def restart_controller(self, timeout: float = 60.0) -> None:
        """A new controller with the same arguments (after the old one died or was killed): in
        clock mode it adopts the running switches (docs/controller.md)."""
        stop_process_group(self.controller, signal.SIGKILL)
        self._start_controller(time.monotonic() + timeout)

    def drops(self) -> dict[str, dict[str, int]]:
        """{switch: {cause: packets dropped}} as the controller last read them (each second), with
        UNACCOUNTED: frames a switch took in but neither sent nor dropped by a cause."""
        st = read_status(self.run_dir / "status.json") or {}
        return {n: {**sw.get("drops", {}), "UNACCOUNTED": sw.get("unaccounted", 0)}
                for n, sw in st.get("switches", {}).items()}

    def kernel_drops(self) -> dict[str, int]:
        """Frames the kernel dropped on the fabric's links, outside any switch's counters:
        {"<interface> rx|tx": n} from each namespace's /proc/<pid>/net/dev (the switches'
        interfaces live in the root namespace), {"<host interface> qdisc": n} (what each host's
        own qdisc dropped: ``tc -s``) and "softnet backlog": the per-CPU input backlogs'
        drops (/proc/net/softnet_stat, machine-wide).  Counters since the links were made; take the
        difference of two readings."""
        out: dict[str, int] = {}
        if self.net is None:
            return out
        names = {sw.name for sw in self.switches}
        sources = [(f"/proc/{h.pid}/net/dev", lambda i: True) for h in self.net.hosts]
        # Not the clock ports' host ends (``-clkh``): the time probes the controller and the
        # warmer (fabric/warm.py) get back are read from packet sockets or counted by the warmer,
        # and the kernel counts each as dropped (no protocol takes it) -- 45 M in a 2 h warmed run.
        sources.append(("/proc/net/dev", lambda i: i.split("-")[0] in names and not i.endswith("-clkh")))
        for path, mine in sources:
            with contextlib.suppress(OSError):
                for line in Path(path).read_text().splitlines()[2:]:
                    name, _, rest = line.partition(":")
                    name, f = name.strip(), rest.split()
                    if name == "lo" or not mine(name):
                        continue
                    # receive: bytes packets errs drop ...; transmit starts at field 8
                    for key, n in ((f"{name} rx", int(f[2]) + int(f[3])), (f"{name} tx", int(f[10]) + int(f[11]))):
                        out[key] = n
        # The hosts' own qdiscs (the fct experiment shapes each host link with htb): what they
        # dropped is in neither /proc/net/dev nor a switch's counters.
        for h in self.net.hosts:
            dev = h.defaultIntf().name
            with contextlib.suppress(ValueError, OSError, AssertionError):  # a host already gone
                out[f"{dev} qdisc"] = qdisc_drops(h.cmd(f"tc -s -j qdisc show dev {dev} 2>/dev/null"))
        with contextlib.suppress(OSError):
            out["softnet backlog"] = sum(int(line.split()[1], 16)
                                         for line in Path("/proc/net/softnet_stat").read_text().splitlines())
        return out

    def _controller_last_line(self) -> str:
        """For a controller that died before it could say why in its status (bad arguments):
        its last output line, shown to the user as is."""
        lines = (self.run_dir / "controller.log").read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exited with status {self.controller.returncode}"

    @property
    def polling(self) -> bool:
        """Whether idle CPUs poll during this emulation (the PM QoS request holds)."""
        return self._poll is not None and self._poll.held

    def stop(self) -> None:
        with signals_held():  # a second Ctrl-C or SIGTERM waits until all is gone
            self.stop_warmer()
            stop_process_group(self.controller, signal.SIGINT)
            for sw in self.switches:  # before Mininet deletes the links: a pipeline's ports go first
                for why in sw.kill_process() or ():
                    self.say(f"[run] WARNING: {sw.name}: {why}")
            if self.net is not None:
                self._kill_host_processes()
                with contextlib.suppress(Exception):
                    self.net.stop()  # stops switches (by PID) and deletes every link
            for name in self._clock_wired:  # not Mininet's links (deleting one end removes its peer)
                if os.path.exists(f"/sys/class/net/{clock_iface_names(name)[0]}"):
                    run(["ip", "link", "del", clock_iface_names(name)[0]], check=False)
            if self._poll is not None:
                self._poll.release()

    def _kill_host_processes(self) -> None:
        """Whatever still runs in a host's network namespace (a user's `iperf3 -s -D`, an agent):
        Mininet stops only the host's shell, and a daemon would outlive the emulation."""
        hosts = {}
        for h in self.net.hosts:
            with contextlib.suppress(OSError):
                hosts[os.readlink(f"/proc/{h.pid}/ns/net")] = h.pid
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                shell = hosts.get(os.readlink(d / "ns" / "net"))
                if shell is not None and int(d.name) != shell:
                    os.kill(int(d.name), signal.SIGKILL)

    def host(self, name: str):
        return self.net.get(name)

    def popen(self, name: str, args: list[str], **kw) -> subprocess.Popen:
        """Start a process in host ``name``'s network namespace, in a session of its own (stop it by
        PID with ``stop_process_group``).  nsenter enters the network namespace only: Mininet's own
        popen (mnexec -a) also enters the mount namespace, which leaves a chroot (a fresh-machine
        check runs in one) for the host's root directory."""
        pid = self.host(name).pid
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["nsenter", "-t", str(pid), "-n", *args], start_new_session=True, **kw)


def clock_iface_names(switch: str) -> tuple[str, str]:
    """(the switch's end, the controller's end) of a switch's clock-port veth."""
    return f"{switch}-clk", f"{switch}-clkh"


def leftovers(topo: TP.Topology, target: str = "bmv2") -> list[str]:
    """Anything of this topology still on the machine: interfaces, switch processes; on eBPF (none
    in the root namespace) its pipelines, pins, namespaces, not another live emulation's."""
    names = [name for name, _, _ in topo.switches()]
    if target == "ebpf":
        return nikss.leftovers(names)
    out = []
    links = run(["ip", "-o", "link"], check=False).stdout
    for line in links.splitlines():
        ifname = line.split(":")[1].strip().split("@")[0]
        if any(ifname.startswith((n + "-eth", clock_iface_names(n)[0])) for n in names):
            out.append(f"interface {ifname}")
    ports = [p for _, _, p in topo.switches()]
    return out + [f"listener on {p}" for p in ports if tcp_listening(p)]
