"""An in-process fake P4Runtime server for controller tests (no switch needed).

It records every write and pipeline push, answers the rotor's control packets
like the pipeline does (time probes and acked slot changes come back as
PacketIns stamped with a fake switch clock), can fail chosen updates, can
claim another controller is primary, and answers counter reads from ``counters``.
It holds the table entries and default actions written (``tables``) and answers reads of
them as a switch does, and keeps the pipeline's cookie, so a second controller finds the
pipeline and state the first one left (adoption).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from finsy import P4Schema
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status
from google.protobuf import any_pb2

from p4rotor import p4 as dp


class FakeSwitch(p4r_grpc.P4RuntimeServicer):
    def __init__(self, p4info: Path, addr: str = "127.0.0.1:0", boot_us: int = 5_000_000,
                 fail_updates: set[int] | None = None, primary_election_id: int | None = None,
                 tick_ns: int = 1000):
        self.schema = P4Schema(p4info)
        self.addr = addr
        # Like BMv2: the switch clock counts microseconds from the process start (+ boot_us);
        # tick_ns=1: nanoseconds, like Tofino's (48 bits).
        self.boot_us = boot_us
        self.tick_ns = tick_ns
        self.counters: dict[str, dict[int, int]] = {}  # counter name -> index -> packets
        self.started_us = time.time_ns() // 1000
        self.fail_updates = fail_updates or set()
        self.primary_election_id = primary_election_id
        self.writes: list[p4r.Update] = []
        self.log: list[tuple[str, object]] = []  # ("write", Update) and ("packet", metadata) in order
        self.write_requests = 0
        self.pipelines = 0
        self.packet_outs: list[tuple[int, dict]] = []
        self.arbitrations = 0
        # (table id, default?, match fields, priority) -> TableEntry, as a switch holds them
        self.tables: dict[tuple, p4r.TableEntry] = {}
        self.cookie: int | None = None
        self._server: grpc.aio.Server | None = None
        self.port = 0
        out = self.schema.controller_packet_metadata["packet_out"]
        self._out_ids = {m.id: m.name for m in out.metadata}
        pin = self.schema.controller_packet_metadata["packet_in"]
        self._in_ids = {m.name: (m.id, m.bitwidth) for m in pin.metadata}

    async def start(self) -> "FakeSwitch":
        self._server = grpc.aio.server()
        p4r_grpc.add_P4RuntimeServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(self.addr)
        await self._server.start()
        return self

    async def stop(self) -> None:
        if self._server:
            await self._server.stop(None)
            self._server = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ---- helpers ----------------------------------------------------------
    def local_ticks(self, wall_ns: int | None = None) -> int:
        """The switch clock at ``wall_ns`` (now) in its own ticks, as a PacketIn reports it."""
        wall = time.time_ns() if wall_ns is None else wall_ns
        return ((wall - self.started_us * 1000 + self.boot_us * 1000) // self.tick_ns) & ((1 << 48) - 1)

    def _packet_in(self, **vals) -> p4r.StreamMessageResponse:
        md = []
        for name, (mid, bits) in self._in_ids.items():
            v = int(vals.get(name, 0))
            md.append(p4r.PacketMetadata(metadata_id=mid, value=v.to_bytes((bits + 7) // 8, "big")))
        return p4r.StreamMessageResponse(packet=p4r.PacketIn(payload=b"", metadata=md))

    def updates_for(self, table: str) -> list[p4r.Update]:
        tid = self.schema.tables[table].id
        return [u for u in self.writes if u.entity.table_entry.table_id == tid]

    def value_set_writes(self) -> list[tuple[int, str, list[int]]]:
        """(update type, value set name, member values) of every ValueSetEntry written."""
        out = []
        for u in self.writes:
            if u.entity.WhichOneof("entity") == "value_set_entry":
                e = u.entity.value_set_entry
                vals = [int.from_bytes(f.exact.value, "big") for m in e.members for f in m.match]
                out.append((u.type, self.schema.value_sets[e.value_set_id].name, vals))
        return out

    # ---- RPCs ---------------------------------------------------------------
    async def StreamChannel(self, request_iter, context):
        async for req in request_iter:
            kind = req.WhichOneof("update")
            if kind == "arbitration":
                self.arbitrations += 1
                arb = p4r.MasterArbitrationUpdate()
                arb.CopyFrom(req.arbitration)
                ours = req.arbitration.election_id.low
                if self.primary_election_id is not None and self.primary_election_id > ours:
                    arb.election_id.low = self.primary_election_id
                    arb.status.code = rpc_code.ALREADY_EXISTS
                else:
                    arb.status.code = rpc_code.OK
                yield p4r.StreamMessageResponse(arbitration=arb)
            elif kind == "packet":
                vals = {self._out_ids[m.metadata_id]: int.from_bytes(m.value, "big") for m in req.packet.metadata}
                self.packet_outs.append((time.time_ns(), vals))
                self.log.append(("packet", vals))
                op = vals.get("opcode")
                if op == dp.OP_TIME_PROBE or (op == dp.OP_SET_SLOT and vals.get("flags", 0) & dp.FLAG_ACK):
                    yield self._packet_in(**vals, timestamp=self.local_ticks())

    async def Capabilities(self, request, context):
        return p4r.CapabilitiesResponse(p4runtime_api_version="1.3.0")

    async def SetForwardingPipelineConfig(self, request, context):
        self.pipelines += 1
        self.writes.clear()
        self.tables.clear()
        self.cookie = request.config.cookie.cookie if request.config.HasField("cookie") else None
        return p4r.SetForwardingPipelineConfigResponse()

    async def GetForwardingPipelineConfig(self, request, context):
        cfg = p4r.ForwardingPipelineConfig()
        if self.cookie is not None:
            cfg.cookie.cookie = self.cookie
        return p4r.GetForwardingPipelineConfigResponse(config=cfg)

    @staticmethod
    def _key(e: p4r.TableEntry) -> tuple:
        return (e.table_id, e.is_default_action,
                tuple(sorted(m.SerializeToString(deterministic=True) for m in e.match)), e.priority)

    def _hold(self, u: p4r.Update) -> None:
        if u.entity.WhichOneof("entity") != "table_entry":
            return
        e = u.entity.table_entry
        k = self._key(e)
        if u.type == p4r.Update.DELETE or (e.is_default_action and not e.HasField("action")):
            self.tables.pop(k, None)  # deleted, or a default reset to the program's
        else:
            held = p4r.TableEntry()
            held.CopyFrom(e)
            self.tables[k] = held

    def _read_tables(self, want: p4r.TableEntry) -> list[p4r.Entity]:
        out = []
        for (tid, default, _, _), e in self.tables.items():
            if want.table_id and tid != want.table_id:
                continue
            if default != want.is_default_action:
                continue
            out.append(p4r.Entity(table_entry=e))
        return out

    async def Read(self, request, context):
        ents = []
        for e in request.entities:
            if e.WhichOneof("entity") == "table_entry":
                ents += self._read_tables(e.table_entry)
                continue
            if e.WhichOneof("entity") != "counter_entry":
                continue
            name = self.schema.counters[e.counter_entry.counter_id].name
            have = self.counters.get(name, {})
            if e.counter_entry.HasField("index"):  # one cell, zero if never counted (as BMv2)
                have = {e.counter_entry.index.index: have.get(e.counter_entry.index.index, 0)}
            for i, n in sorted(have.items()):
                ents.append(p4r.Entity(counter_entry=p4r.CounterEntry(
                    counter_id=e.counter_entry.counter_id, index=p4r.Index(index=i),
                    data=p4r.CounterData(packet_count=n, byte_count=64 * n))))
        yield p4r.ReadResponse(entities=ents)

    async def Write(self, request, context):
        self.write_requests += 1
        # fail_updates are indices within a request big enough to hold them
        n = len(request.updates)
        bad = {i for i in self.fail_updates if i < n} if n > max(self.fail_updates, default=-1) else set()
        if bad:
            details = []
            for i in range(len(request.updates)):
                err = p4r.Error(canonical_code=rpc_code.INVALID_ARGUMENT if i in bad else rpc_code.OK,
                                message="fake refusal" if i in bad else "")
                a = any_pb2.Any()
                a.Pack(err)
                details.append(a)
            status = rpc_status.Status(code=rpc_code.UNKNOWN, message="write failed", details=details)
            await context.abort_with_status(_RichStatus(status))
        self.writes.extend(request.updates)
        for u in request.updates:
            self._hold(u)
        self.log += [("write", u) for u in request.updates]
        return p4r.WriteResponse()


class _RichStatus(grpc.Status):
    def __init__(self, status):
        self.code = grpc.StatusCode.UNKNOWN
        self.details = status.message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


async def wait_for(pred, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
