"""Rotor entities and control packets as plain values (pure functions of the schedule).

The ToR's entities are in ``tor.py``; both are written with ``write_batched``.  Times are
microseconds up to here: the builders convert each time they write with the target's
record (``target=``, target.py; BMv2 by default, whose unit is the microsecond).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import finsy as fy
from finsy.p4entity import P4ValueSetMember  # not exported at finsy's top level (0.30)
from finsy.proto import p4r

from .. import p4 as dp
from ..schedule import Rotor, Schedule
from .errors import ControllerError
from .target import BMV2, Target

WRITE_BATCH = 500
TS_MASK = (1 << dp.TIMESTAMP_BITS) - 1  # BMv2's absolute times (target.BMV2.time_bits)


def default_port_map(racks: int) -> dict[int, int]:
    """Rack i is wired to rotor port i+1 unless a topology says otherwise (docs/addressing.md)."""
    return {i: i + 1 for i in range(racks)}



def circuit_entries(rotor: Rotor, port_map: dict[int, int]) -> list[fy.P4TableEntry]:
    out = []
    for mi, m in enumerate(rotor.matchings):
        for i, j in enumerate(m):
            if j is None:
                continue
            out.append(fy.P4TableEntry(
                dp.T_CIRCUIT,
                match=fy.P4TableMatch(matching=mi, in_port=port_map[i]),
                action=fy.P4TableAction(dp.A_CONNECT, port=port_map[j]),
            ))
    return out


def port_mtu_entries(link_mtus: dict[int, int], table: str = dp.T_PORT_MTU,
                     action: str = dp.A_MTU_LIMIT) -> list[fy.P4TableEntry]:
    """The egress MTU check: each port's longest frame is its link's MTU plus the Ethernet header;
    a longer frame is dropped and counted (DropCause.MTU) instead of vanishing in the link."""
    return [fy.P4TableEntry(table, match=fy.P4TableMatch(port=port),
                            action=fy.P4TableAction(action, max_frame_bytes=mtu + dp.ETHERNET_HEADER_BYTES))
            for port, mtu in sorted(link_mtus.items())]


@dataclasses.dataclass(frozen=True)
class LinkLoss:
    """Optical loss on one direction of one rotor link: frames entering the rotor on ``port``
    (``direction="in"``) or leaving it there (``"out"``) are lost with probability ``rate``, in
    every slot or only while matching ``matching`` is live ([Zhuo19 §3]: per link, mostly one-way)."""

    port: int
    direction: str
    rate: float
    matching: int | None = None


def loss_entries(losses: Sequence[LinkLoss]) -> list[fy.P4TableEntry]:
    """The rotor's optical_loss tables: P(loss) = threshold / 2^32 (rate 1 -> 0xFFFFFFFF)."""
    out = []
    for x in losses:
        if x.direction not in ("in", "out"):
            raise ControllerError(f"loss direction {x.direction!r}: 'in' or 'out'")
        if not 0.0 <= x.rate <= 1.0:
            raise ControllerError(f"loss rate {x.rate!r} outside 0..1")
        match = {"port": x.port}
        if x.matching is not None:
            match["matching"] = (x.matching, 0xFFFF)
        out.append(fy.P4TableEntry(dp.T_LOSS_IN if x.direction == "in" else dp.T_LOSS_OUT,
                                   match=fy.P4TableMatch(**match),
                                   action=fy.P4TableAction(dp.A_LOSSY, threshold_=min(0xFFFFFFFF, round(x.rate * 2**32))),
                                   priority=2 if x.matching is not None else 1))
    return out


def _range_pieces(lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi] as P4Runtime ranges BMv2's server accepts.

    PI refuses a range whose low is 0 and whose high is all-ones in its bytes (255, 65535, ...)
    as a badly written "don't care"; split such a range so neither piece looks like one.
    """
    if lo == 0 and hi > 0 and (hi + 1) & hi == 0:
        return [(0, 0), (1, hi)]
    return [(lo, hi)]


def phase_entries(spans: Sequence[tuple[int, int]], table: str = dp.T_CLOCK_PHASE,
                  action: str = dp.A_CLOCK_SLOT, egress_guard_us: int = 0,
                  target: Target = BMV2) -> list[fy.P4TableEntry]:
    """Clock mode: range entries covering each [start, end) of the cycle -> its index.

    ``egress_guard_us``: the egress re-check closes each day this much before its end
    (``slot_end`` is what the re-check compares with), for frames a software switch still
    transmits after its egress pipeline ran.  Each bound converts on its own (into the
    target's units), so the ranges still tile the cycle."""
    out = []
    for i, (lo_us, hi_us) in enumerate(spans):
        lo = target.duration_units(lo_us, "slot start")
        hi = target.duration_units(hi_us, "slot end")
        end = target.duration_units(hi_us - egress_guard_us, "slot end")
        out += [fy.P4TableEntry(table, match=fy.P4TableMatch(phase=piece),
                                action=fy.P4TableAction(action, index=i, slot_start=lo, slot_end=end),
                                priority=1)
                for piece in _range_pieces(lo, hi - 1)]
    return out


def check_egress_guard(sched: Schedule, egress_guard_us: int) -> None:
    if not 0 <= egress_guard_us < sched.day_us:
        raise ControllerError(f"egress guard {egress_guard_us} us must be >= 0 and shorter than the day "
                              f"({sched.day_us} us)")


def clock_phase_entries(sched: Schedule, rotor: Rotor, egress_guard_us: int = 0,
                        target: Target = BMV2) -> list[fy.P4TableEntry]:
    check_egress_guard(sched, egress_guard_us)
    return phase_entries([(m * sched.slot_us, (m + 1) * sched.slot_us) for m in range(len(rotor.matchings))],
                         egress_guard_us=egress_guard_us, target=target)


def slot_config_entry(mode: int, count: int, cycle_us: int, night_us: int, *, offset_us: int = 0,
                      epoch_us: int = 0, generation: int = 1, table: str = dp.T_CONFIG,
                      action: str = dp.A_CONFIGURE, target: Target = BMV2) -> fy.P4TableEntry:
    """The slot config (a default action).  ``offset`` and ``epoch_us`` are absolute times (they
    wrap to the target's width); ``cycle`` and ``night`` durations.  All in the target's units:
    the parameter names keep their "us" from BMv2."""
    return fy.P4TableEntry(
        table, is_default_action=True,
        action=fy.P4TableAction(action, mode=mode, num_matchings=count, offset=target.to_units(offset_us),
                                epoch_us=target.to_units(epoch_us),
                                cycle=target.duration_units(cycle_us, "cycle"),
                                night=target.duration_units(night_us, "night"),
                                gen=generation & 0xFFFF))


def config_entry(sched: Schedule, rotor: Rotor, mode: int, *, offset_us: int = 0,
                 epoch_us: int = 0, generation: int = 1, target: Target = BMV2) -> fy.P4TableEntry:
    return slot_config_entry(mode, len(rotor.matchings), sched.cycle_us(rotor), sched.reconfig_us,
                             offset_us=offset_us, epoch_us=epoch_us, generation=generation, target=target)


def rotor_entities(sched: Schedule, rotor: Rotor, port_map: dict[int, int], mode: int, *,
                   offset_us: int = 0, epoch_us: int = 0, generation: int = 1,
                   egress_guard_us: int = 0, link_mtus: dict[int, int] | None = None,
                   target: Target = BMV2) -> list[Any]:
    """Everything one rotor switch needs, as INSERT/MODIFY updates, config last.
    ``link_mtus``: {port: MTU of its link} from the topology (none: no egress MTU check)."""
    missing = [i for i in range(sched.racks) if i not in port_map]
    if missing:
        raise ControllerError(f"rotor {rotor.name}: no port for racks {missing}")
    ents: list[Any] = [+e for e in circuit_entries(rotor, port_map)]
    ents += [+e for e in port_mtu_entries(link_mtus or {})]
    if mode == dp.MODE_CLOCK:
        ents += [+e for e in clock_phase_entries(sched, rotor, egress_guard_us, target)]
    # The config goes last: the rotor starts switching only when its circuits exist.
    ents.append(~config_entry(sched, rotor, mode, offset_us=offset_us, epoch_us=epoch_us,
                              generation=generation, target=target))
    return ents


def set_slot_packet(slot: int, index: int, night: bool = False, *, seq: int = 0, ack: bool = False,
                    at_us: int | None = None, night_us: int = 0, target: Target = BMV2) -> fy.P4PacketOut:
    """OP_SET_SLOT.  Immediate (``at_us`` None): the switch moves when the packet arrives.
    Timed: slot ``slot`` starts at common time ``at_us`` with a night of ``night_us``; the
    switch holds it (one pending change) and applies it by its own clock (``at`` and
    ``night_us`` go out in the target's units)."""
    flags = (dp.FLAG_NIGHT if night else 0) | (dp.FLAG_ACK if ack else 0)
    if at_us is not None:
        if at_us < 0 or not 0 <= night_us < 1 << 32:
            raise ControllerError(f"bad timed slot change: at {at_us} us, night {night_us} us")
        flags = (flags & ~dp.FLAG_NIGHT) | dp.FLAG_AT
    return fy.P4PacketOut(b"", opcode=dp.OP_SET_SLOT, flags=flags, index=index,
                          slot=slot & 0xFFFFFFFF, seq=seq & 0xFFFFFFFF,
                          at=target.to_units(at_us or 0),
                          night_us=target.duration_units(night_us, "night") if at_us is not None else 0)


@dataclasses.dataclass(slots=True)
class PortValueSetEntry(fy.P4ValueSetEntry):
    """A parser value set of ports, holding ``port`` alone.  bf-p4c's P4Info declares a
    ``value_set<PortId_t>`` without its match field (only its size); P4Runtime's member is then
    the one exact field, id 1, as p4c declares it for BMv2."""

    port: int = 0

    def encode(self, schema: fy.P4Schema) -> p4r.Entity:
        vs = schema.value_sets[self.value_set_id]
        if list(vs.match):
            return fy.P4ValueSetEntry(self.value_set_id, members=self.members).encode(schema)
        value = self.port.to_bytes(max(1, (self.port.bit_length() + 7) // 8), "big")
        member = p4r.ValueSetMember(match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=value))])
        return p4r.Entity(value_set_entry=p4r.ValueSetEntry(value_set_id=vs.id, members=[member]))


def port_value_set_entries(schema: fy.P4Schema, ports: Sequence[tuple[str, int]]) -> list[fy.P4ValueSetEntry]:
    """One parser value set per (name, port), holding that port alone (target.port_value_sets).
    Value sets take MODIFY only: writing one replaces whatever it held."""
    out = []
    for name, port in ports:
        fields = list(schema.value_sets[name].match)
        members = [P4ValueSetMember({fields[0].name: port})] if fields else []
        out.append(PortValueSetEntry(name, members=members, port=port))
    return out


def time_probe_packet(seq: int) -> fy.P4PacketOut:
    return fy.P4PacketOut(b"", opcode=dp.OP_TIME_PROBE, flags=0, index=0, slot=0, seq=seq & 0xFFFFFFFF,
                          at=0, night_us=0)


async def write_batched(sw: fy.Switch, updates: Sequence[Any], batch: int = WRITE_BATCH) -> None:
    """Write updates in batches; raise one ControllerError listing every failed update."""
    for i in range(0, len(updates), batch):
        chunk = updates[i:i + batch]
        try:
            await sw.write(chunk)
        except fy.P4ClientError as ex:
            fails = [f"#{i + idx}: {err.canonical_code.name} {err.message}"
                     for idx, err in sorted(ex.details.items())]
            raise ControllerError(f"{sw.name}: write failed ({ex.code.name})",
                                  fails or [ex.message]) from None


# -- adoption: what a switch holds against what this controller would write -----------------

# The slot config's parameters that belong to one controller run, not to the schedule: the clock
# offset it measured, the epoch (its common time) and the generation.  Everything else must match.
RUN_FIELDS = frozenset({"offset", "epoch_us", "gen"})
_MODE_NAMES = {dp.MODE_UNCONFIGURED: "unconfigured", dp.MODE_SIGNAL: "signal", dp.MODE_CLOCK: "clock"}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """``compare_installed``'s answer.  ``same``: the switch holds exactly the wanted entries and
    config but for RUN_FIELDS; ``reason``: one line saying what differs ("" when same);
    ``clock``: the installed slot config's parameters (target units), None without one."""

    same: bool
    reason: str
    clock: dict[str, int] | None
    entries: int  # table entries and defaults compared (wanted)


def _canonical(e: fy.P4TableEntry, schema: fy.P4Schema) -> tuple[tuple, tuple | None]:
    """(key, value) of a table entry in one canonical form, whoever built it: a builder's value or
    one decoded from a Read.  Both go through finsy's encoder (canonical P4Runtime bytes).
    key: (table, default?, match fields, priority); value: (action, ((param, int), ...)) or None."""
    pb = e.encode_entry(schema)
    table = schema.tables[pb.table_id]
    key = (table.name, pb.is_default_action,
           tuple(sorted(m.SerializeToString(deterministic=True) for m in pb.match)), pb.priority)
    if not pb.HasField("action"):
        return key, None
    if pb.action.WhichOneof("type") != "action":  # indirect: compared as its bytes
        return key, ("<indirect>", ((pb.action.SerializeToString(deterministic=True), 0),))
    a = schema.actions[pb.action.action.action_id]
    names = {p.id: p.name for p in a.params}
    params = tuple(sorted((names.get(p.param_id, str(p.param_id)), int.from_bytes(p.value, "big"))
                          for p in pb.action.action.params))
    return key, (a.name, params)


def _short(table: str) -> str:
    return table.rsplit(".", 1)[-1]


def _run_free(value: tuple | None) -> tuple | None:
    """A slot config's value without its run fields (a default action with an epoch_us)."""
    if value is None:
        return None
    name, params = value
    if not any(p == "epoch_us" for p, _ in params):
        return value
    return name, tuple((p, v) for p, v in params if p not in RUN_FIELDS)


def _describe_default(table: str, have: tuple | None, want: tuple) -> str:
    if have is None:
        return f"{_short(table)}: no default action read"
    if have[0] != want[0]:
        return f"{_short(table)}: {_short(have[0])} installed, {_short(want[0])} wanted"
    h, w = dict(_run_free(have)[1]), dict(_run_free(want)[1])
    diffs = []
    for p in sorted(set(h) | set(w)):
        if h.get(p) != w.get(p):
            hv, wv = h.get(p), w.get(p)
            if p == "mode":
                hv, wv = _MODE_NAMES.get(hv, hv), _MODE_NAMES.get(wv, wv)
            diffs.append(f"{p} {hv} installed, {wv} wanted")
    return f"{_short(table)}: " + "; ".join(diffs)


def compare_installed(schema: fy.P4Schema, want: Sequence[Any], have: Sequence[Any]) -> Comparison:
    """Does a switch hold exactly what this controller would install?  A pure function.

    ``want``: the role's entities (as written: updates, config last); ``have``: what a Read
    returned (every table entry, and the default entry of each table whose default ``want``
    sets).  Table entries only: value sets and registers are not compared.  Entries must match
    one to one (key and action); an installed entry nothing in ``want`` has counts against
    adoption too ("not ours").  Default actions must match but for RUN_FIELDS of the slot config.
    """
    wanted: dict[tuple, tuple | None] = {}
    for e in want:
        if isinstance(e, fy.P4TableEntry):
            k, v = _canonical(e, schema)
            wanted[k] = v
    held: dict[tuple, tuple | None] = {}
    clock = None
    for e in have:
        if not isinstance(e, fy.P4TableEntry) or not e.table_id:
            continue
        k, v = _canonical(e, schema)
        held[k] = v
        if k[1] and v is not None and any(p == "epoch_us" for p, _ in v[1]):
            clock = dict(v[1])
    problems: list[str] = []
    tables = sorted({k[0] for k in wanted} | {k[0] for k in held if not k[1]})
    for t in tables:
        wk = {k: v for k, v in wanted.items() if k[0] == t and not k[1]}
        hk = {k: v for k, v in held.items() if k[0] == t and not k[1]}
        missing = sum(1 for k in wk if k not in hk)
        extra = sum(1 for k in hk if k not in wk)
        differ = sum(1 for k in wk if k in hk and hk[k] != wk[k])
        parts = []
        if wk and missing == len(wk):
            parts.append(f"all {missing} entries missing")
        else:
            if differ:
                parts.append(f"{differ} of {len(wk)} entries differ")
            if missing:
                parts.append(f"{missing} missing")
        if extra:
            parts.append(f"{extra} not ours")
        if parts:
            problems.append(f"{_short(t)}: " + ", ".join(parts))
    for k, v in wanted.items():
        if k[1] and _run_free(held.get(k)) != _run_free(v):
            problems.append(_describe_default(k[0], held.get(k), v))
    return Comparison(same=not problems, reason="; ".join(problems), clock=clock, entries=len(wanted))


def diff_entities(schema: fy.P4Schema, old: Sequence[Any], new: Sequence[Any]) -> list[fy.P4TableEntry]:
    """The table updates that turn a switch holding ``old`` into one holding ``new`` (both as a
    role builds them), without a clear: a pure function.  Entries ``new`` adds are inserted and
    entries whose action changed are modified first, then entries ``new`` lacks are deleted, so a
    key that stays is never without an entry.  Defaults are modified when they differ, never
    deleted.  Equal entries (the slot config, built from the same run fields) are not written."""
    def table_map(ents):
        out = {}
        for e in ents:
            if isinstance(e, fy.P4TableEntry):
                k, v = _canonical(e, schema)
                out[k] = (e, v)
        return out

    have, want = table_map(old), table_map(new)
    ups: list[fy.P4TableEntry] = []
    for k, (e, v) in want.items():
        if k not in have:
            ups.append(~dataclasses.replace(e) if k[1] else +dataclasses.replace(e))
        elif have[k][1] != v:
            ups.append(~dataclasses.replace(e))
    for k, (e, _) in have.items():
        if k not in want and not k[1]:
            ups.append(-dataclasses.replace(e))
    return ups


def sleep_entries(kind: str, plan: dict[int, dict[str, Sequence[int]]]) -> list[fy.P4TableEntry]:
    """The predictive policy's sleep plan for one switch (``kind`` "rotor" or "tor"): per port,
    the slot positions (a rotor: matchings; a ToR: slices) in which it sleeps, receiving
    (``"in"``) and transmitting (``"out"``).  A frame through a sleeping port is dropped and
    counted as SLEEPING (p4src/shared/control/port_energy.p4)."""
    t = dp.sleep_tables("Rotor" if kind == "rotor" else "Tor")
    out = []
    for port, dirs in sorted(plan.items()):
        for d in ("in", "out"):
            for slot in sorted(set(dirs.get(d, ()))):
                out.append(fy.P4TableEntry(t[d], match=fy.P4TableMatch(port=port, slot=slot),
                                           action=fy.P4TableAction(t["action"])))
    return out
