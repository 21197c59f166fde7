"""Mininet node classes (imported only where Mininet is installed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mininet.node import Switch

from .switch import bmv2_command, stop_process_group


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

    def stop(self, deleteIntfs=True):
        self.kill_process()
        Switch.stop(self, deleteIntfs)

    def log_tail(self, n=40) -> str:
        try:
            return "\n".join(Path(self.log_file).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"
