"""Switches on the eBPF target: NIKSS pipelines loaded, given their ports, unloaded, accounted for.

A switch there is no process: it is a PSA program NIKSS loaded into the kernel as pipeline <id>
(its programs and maps pinned under /sys/fs/bpf/pipeline<id>), with the interfaces of the switch's
network namespace attached as ports.  Three things shape this module:

* Pipeline ids are global on the machine, so they are allocated, not derived from the topology:
  the lowest id from ``FIRST_ID`` up with neither pins nor a record of ours, chosen under a lock, and recorded in
  ``STATE`` (who owns it, which namespace, which interfaces) before anything is loaded.  A run that
  was killed (SIGKILL) leaves its records behind; the next start unloads what they name.
* A load pins the program's maps by name at the top of the bpffs (/sys/fs/bpf/<map>) before
  moving them into pipeline<id>: two loads at once collide there (one fails, EINVAL), and a load
  that fails or is killed leaves those pins behind, where the next load of a program with a map of
  that name would take them over.  So loads are serialized under the same lock, and whatever
  top-level pin a load leaves is removed (``_load_locked``).
* nikss-ctl runs through ``nsenter --net=<namespace>`` (``add-port`` resolves interface names
  there); never ``ip netns exec``, which remounts /sys and hides the bpffs of the root mount
  namespace, where the pins must live.
* A PSA port is the interface's ifindex, and NIKSS keeps ports in a DEVMAP of 256 entries, taking
  an ifindex modulo 256: a switch's ifindexes must be distinct modulo 256, and below 256 so that a
  port and its ifindex are the same number in the program's 512-cell port counters too.  The
  fabric gives the switch end of topology port P the ifindex P + 1 (``port_ifindex``; 1 is lo),
  and checks what NIKSS reports.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

from typing import Iterator

from .switch import HarnessError, Netns, run, signals_held

BPFFS = Path("/sys/fs/bpf")
NETNS_DIR = Path("/var/run/netns")  # ``ip netns`` names: the controller's --pipeline NAME=ID@NETNS
STATE = Path("/run/p4rotor/nikss")  # pipeline<id>.json per pipeline p4rotor loaded on this machine
DEVMAP_SIZE = 256
FIRST_ID = 100      # pipeline ids p4rotor takes (lower ids stay free for other NIKSS users)


def missing_tools() -> list[str]:
    """What a switch on the eBPF target needs that this machine lacks (named for a skip message)."""
    out = [f"{t} ({why})" for t, why in (("nikss-ctl", "NIKSS"), ("nsenter", "util-linux"), ("ip", "iproute2"),
                                         ("p4c-ebpf", "p4c's eBPF back end"), ("clang", "LLVM"), ("llc", "LLVM"))
           if not shutil.which(t)]
    if os.geteuid() != 0:
        out.append("root (BPF, network namespaces)")
    return out


def ensure_bpffs() -> None:
    """The BPF file system at /sys/fs/bpf (NIKSS pins every pipeline there); mounted if it is not."""
    if not os.path.ismount(BPFFS):
        run(["mount", "-t", "bpf", "bpf", str(BPFFS)])


def object_path(build: Path, name: str) -> Path:
    """A program of the eBPF target in the build directory (``make build-ebpf``): rotor, tor, xdp_pass."""
    return build / "ebpf" / f"{name}.o"


def check_emulation(topo, mode: str, link_mbps: float | None, warm_ms: float | None, build: Path) -> None:
    """What an emulation on the eBPF target cannot do, refused before anything is made."""
    if topo.one_switch is not None:
        raise HarnessError("the one-switch fabric has no eBPF program (multi-switch only on the eBPF target)")
    if mode != "clock":
        raise HarnessError("the eBPF target runs in clock mode only (NIKSS has no PacketOut)")
    if link_mbps:
        raise HarnessError("no shaped links on the eBPF target: frames a switch XDP_REDIRECTs bypass every qdisc")
    if warm_ms:
        raise HarnessError("no warmer on the eBPF target: its switches have no clock port")
    miss = [str(object_path(build, p)) for p in ("rotor", "tor", "xdp_pass") if not object_path(build, p).exists()]
    if miss:
        raise HarnessError(f"{', '.join(miss)} missing: run 'make build-ebpf'")


def port_ifindex(port: int) -> int:
    """The ifindex the fabric gives the switch end of topology port ``port`` (ports are 1..253)."""
    return port + 1


def check_port_map(switch: str, ports: dict[int, int], any_ifindex: bool = False) -> None:
    """Refuse a port map NIKSS would corrupt: every ifindex below DEVMAP_SIZE (unless
    ``any_ifindex``), none shared modulo DEVMAP_SIZE."""
    big = {} if any_ifindex else {p: i for p, i in ports.items() if not 0 < i < DEVMAP_SIZE}
    if big:
        raise HarnessError(f"{switch}: ifindexes {big} not in 1..{DEVMAP_SIZE - 1} (NIKSS takes them modulo "
                           f"{DEVMAP_SIZE})")
    if len({i % DEVMAP_SIZE for i in ports.values()}) != len(ports):
        raise HarnessError(f"{switch}: two ports share an ifindex modulo {DEVMAP_SIZE}: {ports}")


def in_netns(netns: str | None, cmd: list[str], check: bool = True, **kw):
    """A command in network namespace ``netns`` (a path; None: this process's)."""
    return run((["nsenter", f"--net={netns}"] if netns else []) + cmd, check=check, **kw)


def nikss(netns: str | None, *args: str, check: bool = True):
    """``nikss-ctl ARGS`` in network namespace ``netns`` (a path; None: this process's)."""
    return in_netns(netns, ["nikss-ctl", *args], check=check)


def _start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/<pid>/stat): a PID is its owner only with the same."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@contextlib.contextmanager
def _locked():
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _record_path(pid: int) -> Path:
    return STATE / f"pipeline{pid}.json"


def records() -> list[dict]:
    """Every pipeline p4rotor loaded on this machine and has not unloaded: {id, switch, netns, ...}."""
    out = []
    for p in sorted(STATE.glob("pipeline*.json")) if STATE.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            out.append(json.loads(p.read_text()))
    return out


def _alive(rec: dict) -> bool:
    return _start_time(rec["owner"]) == rec["owner_start"]


@dataclasses.dataclass
class Pipeline:
    """One switch's NIKSS pipeline: ``ports`` {topology port: ifindex}, ``ifaces`` {port: name}."""

    id: int
    switch: str
    netns: str
    ifaces: dict[int, str] = dataclasses.field(default_factory=dict)
    ports: dict[int, int] = dataclasses.field(default_factory=dict)
    attached: list[str] = dataclasses.field(default_factory=list)  # interfaces add-port took
    mtus: dict[str, int] = dataclasses.field(default_factory=dict)  # {interface: MTU} with BRIDGE_ROOM

    @classmethod
    def load(cls, switch: str, obj: Path, netns: str, ifaces: dict[int, str], holder: int | None = None,
             any_ifindex: bool = False, same_id: int | None = None,
             mtus: dict[str, int] | None = None) -> "Pipeline":
        """Load ``obj`` as a new pipeline and attach ``ifaces`` (interfaces of ``netns``) as ports.
        ``holder``: a process in the switch's namespace; the namespace is then first named
        ``netns`` (``netns_path``: a name of ours under /var/run/netns, deleted with the pipeline).
        ``any_ifindex``: ifindexes need only differ modulo 256 (not be below it).
        ``same_id``: this id or none (a switch restarted: its controller knows it by its id).
        ``mtus``: the MTUs the ports must have, as the first load left them (``Pipeline.mtus``;
        None: each link's MTU + ``BRIDGE_ROOM``), so a restart does not add the room again.
        Every port is brought up (after it is attached) if it is not.
        On a failure whatever was done is undone before the error is raised."""
        ensure_bpffs()
        me = None
        try:
            with _locked():
                used = {r["id"] for r in records()}
                for attempt in range(10):
                    if same_id is not None and (same_id in used or (BPFFS / f"pipeline{same_id}").exists()):
                        raise HarnessError(f"{switch}: pipeline {same_id} was taken while the switch was down")
                    pid = same_id if same_id is not None else next(
                        i for i in range(FIRST_ID, 1 << 30) if i not in used and not (BPFFS / f"pipeline{i}").exists())
                    me = cls(pid, switch, netns, dict(ifaces))
                    me._write_record(obj)  # from here on the id is ours, and a killed run's id is found again
                    try:
                        # Ctrl-C or SIGTERM waits until the naming and the load are done: a
                        # nikss-ctl killed halfway leaves its maps pinned at the top of the bpffs,
                        # where they would block every later load; and an interrupted
                        # subprocess.run waits only 0.25 s for its child before it kills it without
                        # waiting, so a slow `ip netns attach` could name the namespace after the
                        # unload below looked for the name (CI found one left behind).
                        with signals_held():
                            if holder is not None and attempt == 0:
                                run(["ip", "netns", "attach", Path(netns).name, str(holder)])
                            _load_locked(pid, netns, Path(obj))
                        break
                    except HarnessError as ex:
                        # A NIKSS user outside this lock took the id since it was chosen: the next one.
                        if "already exists" not in str(ex) or attempt == 9 or same_id is not None:
                            raise
                        _record_path(pid).unlink(missing_ok=True)
                        used.add(pid)
            _add_ports(me, netns)
            check_port_map(switch, me.ports, any_ifindex)
            me.mtus = _ports_up_with_room(netns, list(ifaces.values()), mtus)
        except BaseException:
            if me is not None:
                me.unload()
            raise
        return me

    def _write_record(self, obj: Path) -> None:
        me = os.getpid()
        _record_path(self.id).write_text(json.dumps({"id": self.id, "switch": self.switch, "netns": self.netns,
                                                     "object": str(obj),
                                                     "ifaces": {str(p): n for p, n in self.ifaces.items()},
                                                     "owner": me, "owner_start": _start_time(me)}))

    def unload(self) -> list[str]:
        """del-port every port, unload, remove the pins and the record; what failed, as text.
        Ctrl-C and SIGTERM wait until it is done (half an unload leaves pins nobody owns)."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            return _unload(self.id, self.netns, list(self.attached))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _map_names(obj: Path) -> set[str]:
    """The maps a program's object file declares (its ``.maps.<name>`` sections)."""
    try:
        return {m.decode() for m in re.findall(rb"\.maps\.([A-Za-z0-9_]+)", Path(obj).read_bytes())}
    except OSError:
        return set()


def _stray_pins(obj: Path) -> list[Path]:
    """Top-level pins named after a map of ``obj``: a load's, not yet (or never) moved away."""
    return [BPFFS / m for m in sorted(_map_names(obj)) if (BPFFS / m).exists() and not (BPFFS / m).is_dir()]


def _load_locked(pid: int, netns: str, obj: Path, wait: float = 5.0) -> None:
    """``pipeline load`` (the caller holds the lock), leaving no top-level pin of its own behind.
    Pins already there (another tool's load under way, or one that died) are waited for, then
    refused: this load would take their maps over."""
    deadline = time.monotonic() + wait
    while (there := _stray_pins(obj)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if there:
        raise HarnessError(f"pins {', '.join(map(str, there))} left by another NIKSS load: a new pipeline "
                           "would share those maps (remove them if no load is under way)")
    try:
        nikss(netns, "pipeline", "load", "id", str(pid), str(obj))
    finally:
        for p in _stray_pins(obj):
            p.unlink(missing_ok=True)


# What a switch's port must take beyond its link's MTU: the kernel checks a frame an XDP program
# redirects against the target's MTU before the egress program (the port's devmap program) runs,
# and until then the frame carries the PSA programs' bridged header (24 bytes,
# p4src/psa/include/metadata.p4).  The link's MTU stays the peer's and the ToR's MTU check's.
BRIDGE_ROOM = 32


def _ports_up_with_room(netns: str, ifaces: list[str], want: dict[str, int] | None) -> dict[str, int]:
    """Each of ``ifaces`` up, with its MTU in ``want`` (None: its link's + ``BRIDGE_ROOM``): one
    ``ip`` to read them all, one batch for what differs (nothing on a restart, whose ports stayed
    up and kept theirs).  A process per interface and setting was ~0.1 s of a rotor's restart."""
    links = {l["ifname"]: l for l in json.loads(in_netns(netns, ["ip", "-j", "link", "show"]).stdout)}
    missing = [n for n in ifaces if n not in links]
    if missing:
        raise HarnessError(f"no interface {', '.join(missing)} in {netns}")
    target = {n: (want[n] if want and n in want else int(links[n]["mtu"]) + BRIDGE_ROOM) for n in ifaces}
    batch = "".join(f"link set dev {n} mtu {m}\n" for n, m in target.items() if int(links[n]["mtu"]) != m)
    batch += "".join(f"link set dev {n} up\n" for n in ifaces if "UP" not in links[n].get("flags", []))
    if batch:
        in_netns(netns, ["ip", "-batch", "-"], input=batch)
    return target


def _add_ports(me: "Pipeline", netns: str) -> None:
    """``add-port`` every interface of ``me``, one nikss-ctl each, at once: each attaches its own
    interface's programs and writes its own DEVMAP cell, and the eight a rotor has took ~40 ms
    one after another, a fifth of a 0.2 s cycle.  Each port that was attached is recorded, so an
    unload after a failure detaches exactly those."""
    def add(item):
        port, name = item
        return port, name, nikss(netns, "add-port", "pipe", str(me.id), "dev", name, check=False)

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(me.ifaces) or 1) as pool:
        done = list(pool.map(add, sorted(me.ifaces.items())))
    errors = []
    for port, name, r in done:
        if r.returncode != 0:
            errors.append(f"{name}: {r.stderr.strip() or r.stdout.strip()}")
            continue
        me.attached.append(name)
        try:
            me.ports[port] = int(json.loads(r.stdout)["port_id"])
        except (ValueError, KeyError, TypeError):
            errors.append(f"{name}: unexpected output {r.stdout.strip()!r}")
    if errors:
        raise HarnessError(f"{me.switch}: nikss-ctl add-port {'; '.join(errors)}")


def netns_path(switch: str) -> str:
    """A name for a switch's namespace, unique on the machine while this process lives, so the
    controller can enter it (``nsenter --net=/var/run/netns/NAME``) and a killed run's is found."""
    return str(NETNS_DIR / f"p4r{os.getpid()}-{switch}")


def _ours(netns: str) -> bool:
    return Path(netns).parent == NETNS_DIR and re.fullmatch(r"p4r\d+-.+", Path(netns).name) is not None


def _unload(pid: int, netns: str, ifaces: list[str]) -> list[str]:
    errors = []
    ns = netns if os.path.exists(netns) else None  # a dead run's unnamed namespace went with its shell
    pins = BPFFS / f"pipeline{pid}"
    if pins.exists():
        for name in ifaces if ns else ():
            r = nikss(ns, "del-port", "pipe", str(pid), "dev", name, check=False)
            if r.returncode != 0:
                errors.append(f"del-port {name}: {r.stderr.strip()}")
        r = nikss(ns, "pipeline", "unload", "id", str(pid), check=False)
        if r.returncode != 0:
            errors.append(f"pipeline unload {pid}: {r.stderr.strip()}")
    if pins.exists():  # what nikss-ctl left (or could not unload): the pins hold the programs and maps
        shutil.rmtree(pins, ignore_errors=True)
        if pins.exists():
            errors.append(f"pins left in {pins}")
    if _ours(netns) and os.path.exists(netns):  # the name holds the namespace (and its links) alive
        r = run(["ip", "netns", "delete", Path(netns).name], check=False)
        if r.returncode != 0:
            errors.append(f"ip netns delete {Path(netns).name}: {r.stderr.strip()}")
    _record_path(pid).unlink(missing_ok=True)
    return errors


def clean_stale(say) -> None:
    """Unload the pipelines of runs that died without unloading them (their owner is gone)."""
    with _locked():
        stale = [r for r in records() if not _alive(r)]
        for r in stale:
            say(f"[run] unloading pipeline {r['id']} ({r['switch']}) left by a run that died (pid {r['owner']})")
            _unload(r["id"], r["netns"], list(r.get("ifaces", {}).values()))  # some never attached: no matter
            for p in _stray_pins(Path(r.get("object", ""))):  # it died loading
                p.unlink(missing_ok=True)


def leftovers(switches: list[str] | None = None) -> list[str]:
    """Pipelines p4rotor loaded (of these switches; None: any) that this process or a dead one
    owns, and their pins: another live emulation's are its own business."""
    out = []
    for r in records():
        if (switches is None or r["switch"] in switches) and (r["owner"] == os.getpid() or not _alive(r)):
            out.append(f"pipeline {r['id']} ({r['switch']}, owner pid {r['owner']}"
                       f"{'' if _alive(r) else ', dead'})")
            if (BPFFS / f"pipeline{r['id']}").exists():
                out.append(f"pins {BPFFS / ('pipeline' + str(r['id']))}")
    for ns in sorted(NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else ():
        m = re.fullmatch(r"p4r(\d+)-(.+)", ns.name)
        if m and (switches is None or m[2] in switches) and (int(m[1]) == os.getpid() or not Path(f"/proc/{m[1]}").exists()):
            out.append(f"network namespace {ns.name}")
    return out


def write_switch_map(path: Path, pipelines: list[tuple[Pipeline, str, Path]]) -> None:
    """The controller's view of the switches (FAB_CONTRACT / docs/targets.md): per switch its
    pipeline id, namespace, program and {topology port: PSA port}.  ``pipelines``: (pipeline,
    program name, object file)."""
    path.write_text(json.dumps({"switches": {
        p.switch: {"pipeline": p.id, "netns": p.netns, "program": prog, "object": str(obj.resolve()),
                   "ports": {str(k): v for k, v in sorted(p.ports.items())}}
        for p, prog, obj in pipelines}}, indent=1))


def attach_xdp_pass(netns: str, iface: str, obj: Path) -> None:
    """A plain XDP_PASS program on a host's end of a switch link: a veth takes the frames a switch
    XDP_REDIRECTs into its peer only when that end runs XDP.  Loaded in a mount namespace of its
    own with a bpffs of its own: iproute2's loader makes directories (tc/globals) in the bpffs it
    finds, and the machine's must keep only what its owners put there; an attached program needs
    no pin.  Entered by ``nsenter --net`` only (a Mininet node's mount namespace has no bpffs)."""
    with_private_bpffs(netns, 'exec ip link set dev "$0" xdp obj "$1" sec xdp', iface, str(obj))


def with_private_bpffs(netns: str, script: str, *args: str) -> None:
    """``sh -c script args`` in network namespace ``netns`` (a path) and a mount namespace of its
    own with a fresh bpffs: iproute2's loaders (ip, tc) leave nothing in the machine's."""
    in_netns(netns, ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     f"mount -t bpf bpf {BPFFS} && {script}", *args])


def leftover_pipelines() -> list[str]:
    """Pipelines in p4rotor's id range still pinned that nobody alive owns, or this process does
    (none once every switch closed); another live process's pipelines are its own business."""
    others = {r["id"] for r in records() if r["owner"] != os.getpid() and _alive(r)}
    out = []
    for p in BPFFS.glob("pipeline*") if BPFFS.is_dir() else ():
        with contextlib.suppress(ValueError):
            i = int(p.name[len("pipeline"):])
            if i >= FIRST_ID and i not in others:
                out.append(p.name)
    return sorted(out)


# -- one switch outside an emulation (tests, benches) ---------------------------------------------
mount_bpffs = ensure_bpffs


def pass_xdp(netns: str, iface: str, obj: Path) -> None:
    """XDP_PASS on ``iface`` of the named namespace ``netns`` (``attach_xdp_pass``)."""
    attach_xdp_pass(str(NETNS_DIR / netns), iface, obj)


class EbpfSwitch:
    """A NIKSS pipeline with ``ifaces`` (interfaces of the named namespace ``netns``) as its ports:
    ``pipeline`` (its id) and ``ports`` {logical port: ifindex} once started; ``close()`` unloads."""

    def __init__(self, name: str, netns: str, obj: Path, ifaces: dict[int, str]):
        self.name = name
        self.netns = netns
        self.obj = Path(obj)
        self.ifaces = dict(ifaces)
        self.pipeline: int | None = None
        self.ports: dict[int, int] = {}
        self._p: Pipeline | None = None

    def start(self) -> "EbpfSwitch":
        if not self.obj.is_file():
            raise HarnessError(f"{self.name}: {self.obj} not found: run 'make build-ebpf'")
        # Ports need only differ modulo 256 here (a bench's namespace numbers them as it likes).
        self._p = Pipeline.load(self.name, self.obj, str(NETNS_DIR / self.netns), self.ifaces, any_ifindex=True)
        self.pipeline, self.ports = self._p.id, dict(self._p.ports)
        return self

    def close(self) -> None:
        if self._p is not None:
            errors = self._p.unload()
            self._p, self.pipeline = None, None
            if errors:
                raise HarnessError(f"{self.name}: " + "; ".join(errors))


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
        with signals_held():
            if sw is not None:
                sw.close()
            ns.close()
