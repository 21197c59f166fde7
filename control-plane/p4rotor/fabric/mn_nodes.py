"""Mininet node classes (imported only where Mininet is installed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mininet.link import Link, TCLink
from mininet.node import Switch

from . import nikss
from .switch import HarnessError, bmv2_command, stop_process_group, tcp_listening


class BMv2Switch(Switch):
    """simple_switch_grpc bound to this node's interfaces by their port numbers."""

    def __init__(self, name, json_path=None, grpc_port=50051, device_id=1, log_file=None, realtime=False, cpus=None,
                 **kw):
        kw.setdefault("inNamespace", False)
        kw.setdefault("dpid", f"{device_id:x}")  # names need not end in a number
        Switch.__init__(self, name, **kw)
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.realtime = realtime
        self.cpus = cpus  # run on these CPUs only (fabric/cpu.py: cpu_list); None: anywhere
        self.log_file = log_file or f"/tmp/{name}.log"
        self.proc: subprocess.Popen | None = None
        self.extra_ports: dict[int, str] = {}  # port -> interface Mininet does not know (the clock port)

    def start(self, controllers):
        ports = {port: intf.name for port, intf in self.intfs.items() if intf.name != "lo" and port > 0}
        ports.update(self.extra_ports)
        args = bmv2_command(self.device_id, ports, self.grpc_port, self.grpc_port + 10000, realtime=self.realtime,
                            cpus=self.cpus)
        self._log = open(self.log_file, "w")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill_process(self):
        stop_process_group(self.proc)

    def serving(self) -> bool:
        """Its gRPC port listens (raises when the process exited instead)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(f"{self.name} exited (status {self.proc.poll()}):\n{self.log_tail()}")
        return tcp_listening(self.grpc_port)

    def stop(self, deleteIntfs=True):
        self.kill_process()
        Switch.stop(self, deleteIntfs)

    def log_tail(self, n=40) -> str:
        try:
            return "\n".join(Path(self.log_file).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


class NikssSwitch(Switch):
    """A switch on the eBPF target: ``program`` loaded by NIKSS with this node's interfaces as its
    ports, in a network namespace of its own (fabric/nikss.py).  No switch process: the node's
    shell only holds the namespace (and runs a user's commands in it from the CLI)."""

    def __init__(self, name, program=None, **kw):
        kw["inNamespace"] = True
        kw.setdefault("dpid", "1")  # not OpenFlow: names need not end in a number
        Switch.__init__(self, name, **kw)
        self.program = program
        self.pipeline: nikss.Pipeline | None = None
        self.pipeline_id: int | None = None  # kept over a restart: the controller knows it by it
        self.port_mtus: dict[str, int] | None = None  # the ports' MTUs as the first load set them

    @property
    def netns(self) -> str:
        """The namespace's path: named (/var/run/netns) while the pipeline is loaded."""
        return self.pipeline.netns if self.pipeline is not None else f"/proc/{self.pid}/ns/net"

    def start(self, controllers):
        """Load the pipeline and attach the ports (brought up, nikss.Pipeline.load); a restart
        (after ``kill_process``) loads it again, empty, as the same pipeline id."""
        ifaces = {port: intf.name for port, intf in self.intfs.items() if intf.name != "lo" and port > 0}
        self.pipeline = nikss.Pipeline.load(self.name, self.program, nikss.netns_path(self.name), ifaces,
                                            holder=self.pid, same_id=self.pipeline_id, mtus=self.port_mtus)
        self.pipeline_id = self.pipeline.id
        self.port_mtus = self.pipeline.mtus

    def serving(self) -> bool:
        """Loaded with its ports attached (``start`` returns only then): ready for its controller."""
        return self.pipeline is not None

    def kill_process(self) -> list[str]:
        """Unload the pipeline (every port detached first): the switch's crash on this target,
        its tables, registers and counters gone; what failed, as text."""
        errors = self.pipeline.unload() if self.pipeline is not None else []
        self.pipeline = None
        return errors

    def stop(self, deleteIntfs=True):
        self.kill_process()
        Switch.stop(self, deleteIntfs)


class IndexedLinkMixin:
    """A link whose end on a ``NikssSwitch`` has the ifindex ``nikss.port_ifindex(port)`` in the
    switch's namespace: made there with that index, never moved (a moved interface keeps the large
    ifindex the root namespace gave it, and NIKSS takes ifindexes modulo 256).  The kernel takes
    the peer's index only when the first end has one too: an end on another node gets a number
    of its own, unique in the emulation."""

    _serial = 1000

    def __init__(self, node1, node2, port1=None, port2=None, **kw):
        def index(node, port):
            if isinstance(node, NikssSwitch):
                if port is None:
                    raise HarnessError(f"{node.name}: a link to a switch on the eBPF target needs its port number")
                return nikss.port_ifindex(port)
            IndexedLinkMixin._serial += 1
            return IndexedLinkMixin._serial

        self._indexes = (index(node1, port1), index(node2, port2))
        super().__init__(node1, node2, port1=port1, port2=port2, **kw)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        i1, i2 = self._indexes
        mac1, mac2 = (f" address {a}" if a else "" for a in (addr1, addr2))
        out = node1.cmd(f"ip link add name {intfname1} index {i1}{mac1} type veth peer name {intfname2} "
                        f"index {i2}{mac2} netns {node2.pid}")
        if out.strip():
            raise HarnessError(f"veth {intfname1} (ifindex {i1}) - {intfname2} (ifindex {i2}): {out.strip()}")


class IndexedLink(IndexedLinkMixin, Link):
    pass


class IndexedTCLink(IndexedLinkMixin, TCLink):
    pass
