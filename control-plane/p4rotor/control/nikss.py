"""The eBPF target's adapter: the controller's entities written into a NIKSS pipeline.

On eBPF a switch is a PSA program the kernel runs (p4src/psa, compiled by p4c-ebpf) and NIKSS
loads; the emulation loads it and attaches its ports (fabric/nikss.py), the controller only
writes entries.  The entity builders stay what they are for BMv2 (finsy ``P4TableEntry`` values
with the same P4Info names); this adapter turns each into a ``nikss-ctl`` call on the pipeline:

- names: P4Info ``RotorIngress.circuit.circuit`` is NIKSS ``RotorIngress_circuit_circuit``; the
  ToR's MTU check is at ingress on this target (``MOVED``);
- ports: PSA ports are ifindexes, the entities' ports are the topology's logical ports; the
  fields in ``PORT_KEYS`` and ``PORT_PARAMS`` are translated with the switch's port map;
- the clock's phase table: PSA-eBPF has no range match, and a range as ternary prefixes costs up
  to 62 entries and a lookup per mask; the program divides the phase by a grain every bound is
  a multiple of and looks the quotient up exactly: the adapter writes each range entry once per
  grain it covers (``GRAIN_KEYED``) and adds the grain (the greatest common divisor of the
  bounds and the cycle; a rotor's is its slot) to the config (``configure``'s ``grain``);
- times: in the EBPF target's units (target.py), as every target's.

``nikss-ctl`` costs a process per entry (docs/targets.md has the rate): enough for a rotor's
few hundred entries, not for a large ToR's routes; by default a switch writes its exact tables
and default actions on the pipeline's pinned maps in-process (nikss_maps.py), the rest through
``nikss-ctl``.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterable, Sequence

import finsy as fy

from .errors import ControllerError

NIKSS_CTL = "nikss-ctl"
# p4c-ebpf's ternary lookup walks a table's masks in a loop the verifier follows to its bound
# (128 by default: ~80 ms of BPF_PROG_LOAD per egress program, most of a rotor's restart).  The
# programs are built with ``--max-ternary-masks 2`` (Makefile), which holds what the entity
# builders write (a field matched exactly or not at all); any other mask is refused here, since
# NIKSS would take it and the program would never look it up.
TERNARY_MASKS = 2
# (table, key field) holding a port; (action, parameter) holding a port.
PORT_KEYS = {("RotorIngress.circuit.circuit", "in_port"), ("RotorEgress.optical_loss.loss_in", "port"),
             ("RotorEgress.optical_loss.loss_out", "port"), ("TorIngress.port_mtu.port_mtu", "port"),
             *((f"{k}Egress.port_sleep.{t}", "port") for k in ("Rotor", "Tor") for t in ("sleep_in", "sleep_out"))}
PORT_PARAMS = {("RotorIngress.circuit.connect", "port"), ("TorIngress.routing.deliver", "port"),
               ("TorIngress.routing.via", "port"), ("TorIngress.routing.via_vlb", "port")}
# Tables whose v1model range key is the phase in grains on PSA-eBPF, and the config action that
# gets the grain; a cycle holds at most MAX_GRAINS.
GRAIN_KEYED = {"RotorIngress.slot_state.clock_phase", "TorIngress.slot_state.clock_phase"}
CONFIGURE = {"RotorIngress.slot_state.configure", "TorIngress.slot_state.configure"}
MAX_GRAINS = 1 << 16
# Counters indexed by a port (their indices are translated back to logical ports).
PORT_COUNTERS = ("rx_port_counter", "tx_port_counter", "link_in_counter", "link_in_loss_counter",
                 "link_out_counter", "link_out_loss_counter")
# Controls that moved on PSA-eBPF: the ToR checks the MTU at ingress, before the redirect (the
# kernel drops a frame redirected to a veth it does not fit before the egress program runs).
MOVED = {"TorEgress.port_mtu.": "TorIngress.port_mtu."}
# The contract's counter names (v1model's, top level) -> where the PSA program keeps them.
COUNTERS = {"drop_counter": "{Kind}Ingress.drop_counter", "egress_drop_counter": "{Kind}Egress.egress_drop_counter",
            "rx_port_counter": "{Kind}Ingress.rx_port_counter", "tx_port_counter": "{Kind}Egress.tx_port_counter",
            **{c: "RotorEgress.optical_loss." + c for c in ("link_in_counter", "link_in_loss_counter",
                                                            "link_out_counter", "link_out_loss_counter")},
            "slot_rx_counter": "{Kind}Ingress.slot_rx.slot_rx_counter",
            "slot_tx_counter": "{Kind}Egress.slot_tx.slot_tx_counter",
            "slot_rx_ll_counter": "{Kind}Ingress.slot_rx_ll.slot_rx_ll_counter",
            "slot_tx_ll_counter": "{Kind}Egress.slot_tx_ll.slot_tx_ll_counter"}
# Counters indexed by (slot position, port) (p4/program.py energy_cell): the port part is translated.
SLOT_PORT_COUNTERS = ("slot_rx_counter", "slot_tx_counter", "slot_rx_ll_counter", "slot_tx_ll_counter")
# Drop counters by cause: the ingress's and the egress's (PSA counters live in a control).
DROP_COUNTERS = (COUNTERS["drop_counter"], COUNTERS["egress_drop_counter"])
# Every frame an egress control counts still carries the bridged header in front (24 bytes:
# p4src/psa/include/metadata.p4): PSA counts a frame's bytes as they are, so the bytes of a
# counter kept at egress are read less that much per packet.
BRIDGED_BYTES = 24
# The contract's counters the PSA programs lack: the CPU path's (no PacketOut on NIKSS).
ABSENT_COUNTERS = ("ctrl_counter",)
# A table the PSA rotor lacks: its MTU check.  A frame it carries left a ToR that checked it
# against the uplink's MTU, the rotor links' MTU as long as every rotor link has the same one;
# entries that say so are not written, different MTUs on one rotor are refused.
ROTOR_MTU = "RotorEgress.port_mtu.port_mtu"


class NikssError(ControllerError):
    pass


def nikss_name(p4info_name: str) -> str:
    return p4info_name.replace(".", "_")


def counter_name(p4info_name: str, kind: str) -> str:
    """Where the PSA program (``kind`` "Rotor" or "Tor") keeps the contract's counter."""
    return COUNTERS.get(p4info_name, p4info_name).format(Kind=kind)


def ebpf_contract(contract: dict) -> dict:
    """The contract (p4/program.py) as the PSA programs meet it: the clock's phase table keyed by
    grains and its config given the grain, the ToR's MTU check at ingress, no rotor MTU table."""
    out = {}
    for table, (keys, actions) in contract.items():
        if table == ROTOR_MTU:
            continue
        if table in GRAIN_KEYED:
            keys = ("phase_grains",)
        actions = {_moved(a): (params + ("grain",) if a in CONFIGURE else params) for a, params in actions.items()}
        out[_moved(table)] = (keys, actions)
    return out


def _moved(name: str) -> str:
    for old, new in MOVED.items():
        if name.startswith(old):
            return new + name[len(old):]
    return name


Runner = Callable[[Sequence[str]], str]


def cli_runner(netns: str | None = None) -> Runner:
    """Run ``nikss-ctl`` (in the network namespace ``netns``, by nsenter: ``ip netns exec`` would
    hide the BPF file system) and return its standard output; NikssError with its message."""
    exe = shutil.which(NIKSS_CTL)
    if exe is None:
        raise NikssError(f"{NIKSS_CTL} not found: the eBPF target needs NIKSS (docs/toolchain.md)")
    prefix = ["nsenter", f"--net=/var/run/netns/{netns}"] if netns else []

    def run(args: Sequence[str]) -> str:
        r = subprocess.run([*prefix, exe, *args], capture_output=True, text=True)
        if r.returncode != 0:
            msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise NikssError(f"{NIKSS_CTL} {' '.join(args[:6])}: {msg[-1] if msg else f'exit {r.returncode}'}")
        return r.stdout
    return run


class NikssSwitch:
    """One eBPF switch (a loaded NIKSS pipeline): writes entities, reads counters.  ``runner``:
    what executes the nikss-ctl commands (default: ``nikss_maps.map_runner`` over ``cli_runner()``)."""

    def __init__(self, name: str, pipeline: int, p4info: Path, ports: dict[int, int],
                 runner: Runner | None = None):
        self.name = name
        self.pipeline = pipeline
        self.schema = fy.P4Schema(p4info)
        self.ports = dict(ports)                          # logical -> ifindex
        self.logical = {v: k for k, v in self.ports.items()}
        if runner is None:
            from .nikss_maps import map_runner
            runner = map_runner(pipeline, cli_runner())
        self.run = runner
        self.entries_written = 0
        self.grain = 0                                    # of the clock's phase (units)
        self._tables: dict[str, tuple] = {}
        self._actions: dict[str, tuple] = {}

    # -- writes -------------------------------------------------------------------------
    def _port(self, logical: int, what: str) -> int:
        try:
            return self.ports[logical]
        except KeyError:
            raise NikssError(f"{self.name}: {what} names port {logical}, which is not attached "
                             f"(ports {sorted(self.ports)})") from None

    def commands(self, entity: fy.P4TableEntry, op: str = "add") -> list[list[str]]:
        """The nikss-ctl argument lists that write ``entity`` (op: add, update or delete)."""
        if not isinstance(entity, fy.P4TableEntry):
            raise NikssError(f"{self.name}: the eBPF target cannot write {type(entity).__name__}")
        table, fields = self._table(str(entity.table_id))
        pipe = ["pipe", str(self.pipeline), nikss_name(table)]
        data: list[str] = []
        if entity.action is not None:
            aname, params = self._action(str(entity.action.name))
            args = entity.action.args
            if aname in CONFIGURE:
                args = dict(args, grain=self._grain_for(args))
            for pname, is_port in params:
                v = args[pname]
                if is_port:
                    v = self._port(v, f"action {aname}")
                data.append(str(v))
            action = ["action", "name", nikss_name(aname)]
        else:
            action = []
        params = ["data", *data] if data else []
        if entity.is_default_action:
            return [["table", "default", "set", *pipe, *action, *params]]
        keys: list[list[str]] = [[]]
        if table in GRAIN_KEYED:
            lo, hi = entity.match["phase"]
            g = self.grain
            if not g or lo % g or (hi + 1) % g:
                raise NikssError(f"{self.name}: phase range {lo}..{hi} is not in grains of {g}")
            keys = [[str(q)] for q in range(lo // g, (hi + 1) // g)]
        match = entity.match or {}
        for fname, kind, bitwidth, is_port in () if table in GRAIN_KEYED else fields:
            v = match.get(fname)
            if is_port and v is not None:
                v = self._port(v, f"table {table}")
            if kind == "LPM":               # finsy: "10.0.1.0/24" or (value, length)
                if isinstance(v, str):
                    net = ipaddress.ip_network(v, strict=False)
                    v = (int(net.network_address), net.prefixlen)
                alts = [f"{v[0]}/{v[1]}"]
            elif kind == "EXACT":
                if isinstance(v, str):      # an IPv4 address: NIKSS takes numbers
                    v = int(ipaddress.ip_address(v))
                alts = [str(v)]
            elif kind == "TERNARY":
                full = (1 << bitwidth) - 1
                if v is None:
                    alts = ["0^0"]
                elif isinstance(v, tuple):
                    if v[1] not in (0, full):
                        raise NikssError(f"{self.name}: {table}.{fname} mask {v[1]:#x}: the eBPF programs "
                                         f"look up {TERNARY_MASKS} masks per ternary field, none or every bit")
                    alts = [f"{v[0]}^{v[1]}"]
                else:
                    alts = [f"{v}^{full}"]
            else:
                raise NikssError(f"{self.name}: {kind} key {table}.{fname} is not supported on eBPF")
            keys = [k + [a] for k in keys for a in alts]
        # The exact grain table takes no priority.
        prio = ["priority", str(entity.priority)] if entity.priority and table not in GRAIN_KEYED else []
        if op == "delete":
            return [["table", "delete", *pipe, "key", *k] for k in keys]
        return [["table", op, *pipe, *action, "key", *k, *params, *prio] for k in keys]

    def _table(self, p4info_name: str) -> tuple[str, list[tuple[str, str, int, bool]]]:
        """(the eBPF program's table name, its key fields as (name, match kind, width, a port?)),
        looked up once per table: a ToR writes tens of thousands of entries."""
        hit = self._tables.get(p4info_name)
        if hit is None:
            table = _moved(p4info_name)
            try:
                t = self.schema.tables[table]
            except Exception:
                raise NikssError(f"{self.name}: table {table} is not in the eBPF program") from None
            hit = self._tables[p4info_name] = (table, [(f.name, f.match_type.name, f.bitwidth,
                                                        (table, f.name) in PORT_KEYS) for f in t.match_fields])
        return hit

    def _action(self, p4info_name: str) -> tuple[str, list[tuple[str, bool]]]:
        """(the eBPF program's action name, its parameters as (name, a port?)), once per action."""
        hit = self._actions.get(p4info_name)
        if hit is None:
            act = self.schema.actions[_moved(p4info_name)]
            hit = self._actions[p4info_name] = (act.name, [(p.name, (act.name, p.name) in PORT_PARAMS)
                                                           for p in act.params])
        return hit

    def _grain_for(self, args: dict) -> int:
        if args["cycle"] % self.grain or args["cycle"] // self.grain > MAX_GRAINS:
            raise NikssError(f"{self.name}: a cycle of {args['cycle']} units is not up to {MAX_GRAINS} grains of "
                             f"{self.grain}")
        return self.grain

    def _find_grain(self, updates: list) -> None:
        """The grain of the phase entries and config in ``updates`` (kept for a later config)."""
        g = 0
        for u in updates:
            if isinstance(u, fy.P4TableEntry) and str(u.table_id) in GRAIN_KEYED and u.match:
                lo, hi = u.match["phase"]
                g = math.gcd(g, lo, hi + 1)
            elif isinstance(u, fy.P4TableEntry) and u.action is not None and str(u.action.name) in CONFIGURE:
                g = math.gcd(g, u.action.args["cycle"])
        if g:
            self.grain = math.gcd(g, self.grain) if self.grain else g

    def _skip_rotor_mtu(self, updates: list) -> list:
        """The rotor's MTU entries, checked (one MTU for every link) and left out (``ROTOR_MTU``)."""
        limits = {}
        for u in updates:
            if isinstance(u, fy.P4TableEntry) and str(u.table_id) == ROTOR_MTU and u.action is not None:
                limits[u.match["port"]] = dict(u.action.args).get("max_frame_bytes")
        if len(set(limits.values())) > 1:
            raise NikssError(f"{self.name}: rotor links with different MTUs {limits}: the eBPF rotor has no MTU "
                             "check of its own (docs/targets.md)")
        return [u for u in updates if not (isinstance(u, fy.P4TableEntry) and str(u.table_id) == ROTOR_MTU)]

    def write(self, updates: Iterable[object], over: bool = False) -> None:
        """Write finsy updates (``+entity`` insert, ``-entity`` delete, ``~entity`` modify).  Two
        entities that become the same entry (one slot's range in two pieces) are written once.
        ``over``: an insert of an entry the table holds already updates it (a controller writing
        again what a switch it did not clear holds)."""
        updates = self._skip_rotor_mtu(list(updates))
        self._find_grain(updates)
        done = set()
        for u in updates:
            kind = getattr(u, "_update_type", None)
            kind_name = getattr(kind, "name", "INSERT")
            op = {"INSERT": "add", "MODIFY": "update", "DELETE": "delete"}.get(kind_name, "add")
            for args in self.commands(u, op):
                if tuple(args) in done:
                    continue
                done.add(tuple(args))
                try:
                    self.run(args)
                except NikssError as ex:
                    if not (over and op == "add" and "File exists" in str(ex)):
                        raise
                    self.run(["table", "update", *args[2:]])
                self.entries_written += 1

    def clear(self) -> None:
        """Every keyed table emptied and each config back to its parameterless action (the switch
        stops switching until a new config comes, as after a P4Runtime clear)."""
        pipe = ["pipe", str(self.pipeline)]
        for t in self.schema.tables:
            if list(t.match_fields):
                self.run(["table", "delete", *pipe, nikss_name(t.name)])
            elif t.const_default_action is None:
                bare = [self.schema.actions[a.name] for a in t.actions]
                bare = [a for a in bare if not list(a.params)]
                if bare:
                    self.run(["table", "default", "set", *pipe, nikss_name(t.name), "action", "name",
                              nikss_name(bare[0].name)])
        self.grain = 0

    def close(self) -> None:
        """Close what the runner holds open (the map runner's map descriptors)."""
        close = getattr(self.run, "close", None)
        if close is not None:
            close()

    # -- reads --------------------------------------------------------------------------
    def counter(self, name: str) -> dict[int, tuple[int, int]]:
        """{index: (packets, bytes)} of the counter ``name`` (P4 name, dots or underscores), only
        cells that counted; a port counter's indices are logical ports."""
        nname = nikss_name(name)
        out = json.loads(self.run(["counter", "get", "pipe", str(self.pipeline), nname]))
        cells = {}
        for e in out[nname]["entries"]:
            idx = int(e["key"]["field0"], 16)
            v = e["value"]
            pk, by = int(v.get("packets", "0x0"), 16), int(v.get("bytes", "0x0"), 16)
            if "Egress_" in nname and "bytes" in v:
                by -= pk * BRIDGED_BYTES
            if pk or by:
                if nname.endswith(PORT_COUNTERS):
                    idx = self.logical.get(idx, idx)
                elif nname.endswith(SLOT_PORT_COUNTERS):
                    idx = self._slot_cell(idx)
                cells[idx] = (pk, by)
        return cells

    def slot_cells(self, name: str, cells: list[int], bpffs: Path | None = None) -> dict[int, tuple[int, int]]:
        """{cell: (packets, bytes)} of a per-slot counter at the listed (logical) cells only,
        looked up in its pinned map: nikss-ctl would print all 65 536 cells each time.  PSA's
        PACKETS_AND_BYTES cell is {u64 bytes; u64 packets}."""
        from ..p4 import ENERGY_PORT_BITS, MAX_PORTS, energy_cell
        from .bpf_maps import BPFFS, lookup_array

        phys = {}
        for c in cells:
            port = c & (MAX_PORTS - 1)
            phys[energy_cell(c >> ENERGY_PORT_BITS, self.ports.get(port, port))] = c
        pin = Path(bpffs or BPFFS) / f"pipeline{self.pipeline}" / "maps" / nikss_name(name)
        out = {}
        for k, raw in lookup_array(pin, list(phys)).items():
            by, pk = int.from_bytes(raw[0:8], "little"), int.from_bytes(raw[8:16], "little")
            if "Egress_" in nikss_name(name):
                by -= pk * BRIDGED_BYTES
            out[phys[k]] = (pk, by)
        return out

    @functools.cached_property
    def _logical_by_low_bits(self) -> dict[int, int]:
        """{an ifindex's low bits (a per-slot cell's port part): logical port}."""
        from ..p4 import MAX_PORTS

        return {ifx & (MAX_PORTS - 1): p for ifx, p in self.logical.items()}

    def _slot_cell(self, idx: int) -> int:
        """A per-slot counter's cell with its port part (the ifindex's low bits) made logical."""
        from ..p4 import ENERGY_PORT_BITS, MAX_PORTS, energy_cell

        port = idx & (MAX_PORTS - 1)
        return energy_cell(idx >> ENERGY_PORT_BITS, self._logical_by_low_bits.get(port, port))

    @property
    def kind(self) -> str:
        return "Tor" if any(t.name.startswith("TorIngress.") for t in self.schema.tables) else "Rotor"

    def drops(self) -> dict[int, int]:
        """Frames dropped, by cause (ingress and egress summed)."""
        out: dict[int, int] = {}
        for c in DROP_COUNTERS:
            for cause, (pk, _) in self.counter(c.format(Kind=self.kind)).items():
                out[cause] = out.get(cause, 0) + pk
        return out
