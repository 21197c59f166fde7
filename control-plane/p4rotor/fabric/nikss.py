"""An eBPF switch: a NIKSS pipeline loaded into the kernel, its ports attached in a namespace.

No process per switch: the PSA program (build/ebpf/<program>.o, p4src/psa) runs at the XDP hook
of each port.  What this module owns, it removes: ``close()`` detaches every port, unloads the
pipeline and removes its pins under /sys/fs/bpf, also after a failed start.

Facts of the target it relies on (docs/targets.md):
- NIKSS pins a pipeline under /sys/fs/bpf/pipeline<id>, in the root mount namespace: ids are
  global, so a free one is taken under a lock; ``nikss-ctl`` runs through ``nsenter --net``
  (``ip netns exec`` remounts /sys and hides the BPF file system).
- A port is its interface's ifindex; NIKSS's port map holds 256 (an ifindex is taken modulo
  256), so two ports of one switch must differ modulo 256.
- A veth takes frames another XDP program redirects to it only when its peer runs XDP: the
  far end of every port needs an XDP program (``pass_xdp``: build/ebpf/xdp_pass.o).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

from ..control.nikss import NikssError, cli_runner
from .switch import HarnessError, Netns, run

BPFFS = Path("/sys/fs/bpf")
LOCK = Path("/run/p4rotor-nikss.lock")
FIRST_ID = 100      # pipeline ids this harness takes (others' ids stay out of its way)
NIKSS_PORTS = 256   # NIKSS's port map size


def missing_tools() -> list[str]:
    return [t for t in ("nikss-ctl", "p4c-ebpf", "clang", "llc") if shutil.which(t) is None]


def mount_bpffs() -> None:
    """The BPF file system at /sys/fs/bpf (NIKSS pins there); mounted once, left mounted."""
    r = subprocess.run(["mountpoint", "-q", str(BPFFS)])
    if r.returncode != 0:
        run(["mount", "-t", "bpf", "bpf", str(BPFFS)])


def pass_xdp(netns: str, iface: str, obj: Path) -> None:
    """Load the XDP_PASS program on ``iface`` (the host's end of a port's veth)."""
    run(["ip", "netns", "exec", netns, "ip", "link", "set", "dev", iface, "xdp", "obj", str(obj), "sec", "xdp"])


@contextlib.contextmanager
def _id_lock() -> Iterator[None]:
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class EbpfSwitch:
    """A NIKSS pipeline with ``ifaces`` (in namespace ``netns``) attached as its ports."""

    def __init__(self, name: str, netns: str, obj: Path, ifaces: dict[int, str]):
        self.name = name
        self.netns = netns
        self.obj = obj
        self.ifaces = dict(ifaces)          # logical port -> interface name
        self.pipeline: int | None = None
        self.ports: dict[int, int] = {}     # logical port -> ifindex (the PSA port)

    def _ctl(self, *args: str, check: bool = True) -> str:
        """nikss-ctl in the switch's namespace (control/nikss.py runs it for the controller too)."""
        try:
            return cli_runner(self.netns)(args)
        except NikssError as ex:
            if check:
                raise HarnessError(f"{self.name}: {ex}") from None
            return ""

    def start(self) -> "EbpfSwitch":
        if not self.obj.is_file():
            raise HarnessError(f"{self.name}: {self.obj} not found: run 'make build-ebpf'")
        mount_bpffs()
        try:
            with _id_lock():
                pid = FIRST_ID
                while (BPFFS / f"pipeline{pid}").exists():
                    pid += 1
                self._ctl("pipeline", "load", "id", str(pid), str(self.obj))
                self.pipeline = pid
            for port, iface in sorted(self.ifaces.items()):
                out = self._ctl("add-port", "pipe", str(self.pipeline), "dev", iface)
                self.ports[port] = int(json.loads(out)["port_id"])
            clash = _modulo_clash(self.ports)
            if clash:
                raise HarnessError(f"{self.name}: ports {clash} have ifindexes equal modulo {NIKSS_PORTS} "
                                   f"({self.ports}): NIKSS would confuse them")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.pipeline is None:
            return
        for iface in self.ifaces.values():
            self._ctl("del-port", "pipe", str(self.pipeline), "dev", iface, check=False)
        self._ctl("pipeline", "unload", "id", str(self.pipeline), check=False)
        pins = BPFFS / f"pipeline{self.pipeline}"
        if pins.exists():
            shutil.rmtree(pins, ignore_errors=True)
        self.pipeline = None


def _modulo_clash(ports: dict[int, int]) -> list[int]:
    seen: dict[int, int] = {}
    for port, ifindex in sorted(ports.items()):
        if ifindex % NIKSS_PORTS in seen:
            return [seen[ifindex % NIKSS_PORTS], port]
        seen[ifindex % NIKSS_PORTS] = port
    return []


def leftover_pipelines() -> list[str]:
    """Pipelines this harness's id range still has pinned (none once every switch closed)."""
    if not BPFFS.is_dir():
        return []
    out = []
    for p in BPFFS.glob("pipeline*"):
        with contextlib.suppress(ValueError):
            if int(p.name[len("pipeline"):]) >= FIRST_ID:
                out.append(p.name)
    return sorted(out)


@contextlib.contextmanager
def ebpf_bench(obj: Path, pass_obj: Path, ports: tuple[int, ...] = (1, 2, 3, 4)
               ) -> Iterator[tuple[Netns, EbpfSwitch, dict[int, str]]]:
    """One eBPF switch in a fresh namespace, each port wired to a veth whose far end (for the
    test or bench; it runs ``pass_obj``) is yielded: (namespace, switch, {port: far end})."""
    if not pass_obj.is_file():
        raise HarnessError(f"{pass_obj} not found: run 'make build-ebpf'")
    ns = Netns()
    sw = None
    try:
        far = {}
        for p in ports:
            ns.veth(f"s0p{p}", f"t0p{p}")
            pass_xdp(ns.name, f"t0p{p}", pass_obj)
            far[p] = f"t0p{p}"
        sw = EbpfSwitch("ebpf0", ns.name, obj, {p: f"s0p{p}" for p in ports}).start()
        yield ns, sw, far
    finally:
        if sw is not None:
            sw.close()
        ns.close()
