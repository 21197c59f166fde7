"""The target record (control/target.py): conversions, device config, ports, modes, and a Tofino
controller run against the fake P4Runtime server with the TNA rotor's P4Info (data/tna/)."""

from __future__ import annotations

import asyncio
import math
import struct
import subprocess
import sys
from pathlib import Path

import finsy as fy
import pytest
from finsy.proto import p4r

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.control.status import read_status
from p4rotor.control.target import pack_tofino_config, unpack_tofino_config

from fake_p4rt import FakeSwitch

DATA = Path(__file__).parent / "data"
P4INFO = DATA / "rotor.p4info.txtpb"
MASK32 = (1 << 32) - 1
T = C.TOFINO


def units(us: float) -> int:
    """us -> 1024-ns units, half up (Python's round() would round half to even)."""
    return math.floor(us * 1000 / 1024 + 0.5)


TNA = DATA / "tna"   # the TNA programs' P4Info (bf-p4c; make fixtures-tofino)


def _drop_block(text: str, kind: str, name: str) -> str:
    """``text`` without the top-level ``kind { ... }`` block whose preamble names ``name``."""
    out, i = [], 0
    while True:
        j = text.find(kind + " {", i)
        if j < 0:
            return "".join(out) + text[i:]
        depth, k = 0, j
        while True:
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        block = text[j:k + 1]
        out.append(text[i:j])
        if f'name: "{name}"' not in block:
            out.append(block)
        i = k + 1


def tofino_p4info(tmp_path: Path, *, value_sets: bool = True, egress_drops: bool = True,
                  name: str = "rotor.p4info.txtpb") -> Path:
    """The TNA rotor's P4Info, less its value sets or its egress drop counter if asked."""
    text = (TNA / "rotor.p4info.txtpb").read_text()
    if not value_sets:
        for vs in ("RotorIngressParser.cpu_port", "RotorIngressParser.clock_port"):
            text = _drop_block(text, "value_sets", vs)
    if not egress_drops:
        text = _drop_block(text, "counters", "egress_drop_counter")
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def tofino_build(tmp_path):
    """A bf-p4c output directory: build/tofino/rotor/pipe/{tofino.bin,context.json}."""
    out = tmp_path / "build" / "tofino" / "rotor"
    (out / "pipe").mkdir(parents=True)
    (out / "pipe" / "tofino.bin").write_bytes(b"\x00\x01BIN\xff")
    (out / "pipe" / "context.json").write_text('{"program_name": "rotor"}')
    return out


# ------------------------------------------------------------------ conversions

def test_bmv2_is_the_identity_in_microseconds():
    b = C.BMV2
    assert b.to_units(123_456) == 123_456 and b.duration_units(20_000) == 20_000
    assert b.to_units(-5) == (-5) & C.TS_MASK  # 48-bit two's complement, as before
    assert b.reported_to_us(7_000_123) == 7_000_123 and isinstance(b.reported_to_us(5), int)
    with pytest.raises(C.ControllerError, match="cycle"):
        b.duration_units(1 << 32, "cycle")


def test_tofino_units_are_1024_ns_rounded_and_wrap_at_32_bits():
    assert T.to_units(1024) == 1000
    assert T.to_units(1000) == 977          # 976.5625
    assert T.to_units(0.512) == 1           # half a unit rounds up
    assert T.to_units(0.511) == 0
    assert T.to_units(-1.024) == MASK32     # an offset can be negative: two's complement
    period_us = (1 << 32) * 1024 // 1000    # 2^32 units: the counter wraps (~73 min)
    assert T.to_units(period_us + 2.048) == T.to_units(2.048) == 2
    # exact for large values (no float rounding): 10^12 us = 976562500000 units
    assert T.to_units(10**12) == 976_562_500_000 & MASK32


def test_tofino_durations_never_wrap():
    top = MASK32 * 1024 / 1000               # the longest duration: 2^32-1 units
    assert T.duration_units(top) == MASK32
    with pytest.raises(C.ControllerError) as ei:
        T.duration_units(top + 1.024, "cycle")
    msg = str(ei.value)
    assert "cycle" in msg and "tofino" in msg and "\n" not in msg
    with pytest.raises(C.ControllerError, match="night"):
        T.duration_units(-1, "night")


def test_reported_timestamps():
    assert T.reported_to_us(1_500) == 1.5    # Tofino reports ns
    assert C.BMV2.reported_to_us(1_500) == 1_500


# ---------------------------------------------------------------- device config

def test_tofino_device_config_packing_parses_back():
    blob = pack_tofino_config("rotor", b"BIN", b"{}")
    assert blob == b"\x05\x00\x00\x00rotor" b"\x03\x00\x00\x00BIN" b"\x02\x00\x00\x00{}"
    assert unpack_tofino_config(blob) == ("rotor", b"BIN", b"{}")
    with pytest.raises(ValueError, match="truncated"):
        unpack_tofino_config(blob[:-1])
    with pytest.raises(ValueError, match="after"):
        unpack_tofino_config(blob + b"x")


def test_pipeline_files_and_blob(tofino_build, tmp_path):
    build = tofino_build.parents[1]
    assert T.pipeline_files(build, "rotor") == (build / "tofino" / "rotor.p4info.txtpb", tofino_build)
    blob = T.p4blob(tofino_build)
    assert isinstance(blob, bytes)  # finsy takes bytes for p4blob: nothing written next to the build
    name, binary, ctx = unpack_tofino_config(blob)
    assert (name, binary, ctx) == ("rotor", b"\x00\x01BIN\xff", b'{"program_name": "rotor"}')
    # the packed layout, field by field
    (n,) = struct.unpack_from("<I", blob, 0)
    assert blob[4:4 + n] == b"rotor"
    (tofino_build / "pipe" / "context.json").unlink()
    with pytest.raises(C.ControllerError, match="context.json not found.*bf-p4c"):
        T.p4blob(tofino_build)
    # BMv2: the JSON file itself, unchanged
    assert C.BMV2.pipeline_files(build, "tor") == (build / "tor.p4info.txtpb", build / "tor.json")
    (build / "tor.json").write_text("{}")
    assert C.BMV2.p4blob(build / "tor.json") == build / "tor.json"
    with pytest.raises(C.ControllerError, match="make build"):
        C.BMV2.p4blob(build / "rotor.json")


# ------------------------------------------------------------------ names, ports

def test_get_target():
    assert C.get_target("bmv2") is C.BMV2 and C.get_target("tofino") is C.TOFINO
    assert C.get_target("ebpf") is C.EBPF
    with pytest.raises(C.ControllerError) as ei:
        C.get_target("foo")
    assert str(ei.value) == "unknown target 'foo' (bmv2, tofino or ebpf)"


def test_ports():
    assert T.cpu_port == 320 and T.clock_port is None
    assert T.with_ports(cpu_port=192).cpu_port == 192
    assert T.with_ports(clock_port=5).clock_port == 5
    assert C.BMV2.with_ports(cpu_port=255, clock_port=254) == C.BMV2
    with pytest.raises(C.ControllerError, match="fixed in the P4 program"):
        C.BMV2.with_ports(cpu_port=320)
    with pytest.raises(C.ControllerError, match="0..511"):
        T.with_ports(cpu_port=600)


def test_port_value_sets_from_the_p4info():
    assert T.port_value_sets("rotor", ["RotorIngressParser.cpu_port"]) == [("RotorIngressParser.cpu_port", 320)]
    assert T.port_value_sets("tor", ["TorIngressParser.cpu_port", "RotorIngressParser.cpu_port"]) == \
        [("TorIngressParser.cpu_port", 320)]
    # a compiler that qualifies the name with the pipeline still matches
    assert T.port_value_sets("rotor", ["pipe.RotorIngressParser.cpu_port"]) == \
        [("pipe.RotorIngressParser.cpu_port", 320)]
    assert T.port_value_sets("rotor", []) == []  # no value set: nothing written
    t = T.with_ports(clock_port=7)
    assert t.port_value_sets("rotor", ["RotorIngressParser.cpu_port", "RotorIngressParser.clock_port"]) == \
        [("RotorIngressParser.cpu_port", 320), ("RotorIngressParser.clock_port", 7)]
    with pytest.raises(C.ControllerError, match="no value set RotorIngressParser.clock_port"):
        t.port_value_sets("rotor", ["RotorIngressParser.cpu_port"])
    assert C.BMV2.port_value_sets("rotor", ["RotorIngressParser.cpu_port"]) == []  # fixed in P4


# ------------------------------------------------------------------ entities

def test_entities_in_tofino_units():
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    r = s.rotors[0]
    ents = C.rotor_entities(s, r, C.default_port_map(4), dp.MODE_CLOCK, offset_us=-5_000_000,
                            epoch_us=(1 << 33), egress_guard_us=100, target=T)
    cfg = ents[-1].action.args
    assert cfg["offset"] == units(-5_000_000) & MASK32
    assert cfg["epoch_us"] == units(1 << 33) & MASK32
    assert cfg["cycle"] == 58_594 and cfg["night"] == 1953  # 60000 us, 2000 us
    phases = sorted((e.match["phase"], e.action.args) for e in ents if e.table_id == dp.T_CLOCK_PHASE)
    assert [p for p, _ in phases] == [(0, 19530), (19531, 39062), (39063, 58593)]  # tiles the cycle
    assert [a["slot_start"] for _, a in phases] == [0, 19531, 39063]
    assert [a["slot_end"] for _, a in phases] == [19434, 38965, 58496]  # (hi - 100 us) / 1.024


def test_tor_route_until_in_tofino_units():
    from p4rotor.schedule import topology as TP
    from p4rotor.schedule import routes as R

    s = S.generate_opera(8, 4, 1000, 100)
    topo = TP.generate(s, "schedule.json", hosts_per_rack=1)
    routes = R.compute(s)
    rack = topo.racks[0]
    us = C.tor_entities(topo, rack, routes, dp.MODE_CLOCK)
    units = C.tor_entities(topo, rack, routes, dp.MODE_CLOCK, target=T)
    assert len(us) == len(units)
    n = 0
    for a, b in zip(us, units):
        if a.table_id == dp.T_ROUTE:
            assert b.action.args["until"] == T.duration_units(a.action.args["until"])
            n += 1
    assert n > 0
    assert units[-1].action.args["cycle"] == T.duration_units(s.hyperperiod_us)


def test_timed_packet_out_in_tofino_units():
    p = C.set_slot_packet(3, 1, at_us=(1 << 40), night_us=2_048, target=T)
    assert p.metadata["at"] == T.to_units(1 << 40) < 1 << 32
    assert p.metadata["night_us"] == 2000


# ------------------------------------------------------------------ modes

def test_tofino_refuses_signal_mode(tmp_path, tofino_build):
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    with pytest.raises(C.ControllerError, match="target tofino has no signal mode"):
        C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="signal", target=T,
                          p4info=tofino_p4info(tmp_path), p4blob=tofino_build)


def test_tofino_needs_its_egress_drop_counter(tmp_path, tofino_build):
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    with pytest.raises(C.ControllerError, match="counter egress_drop_counter missing"):
        C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", 1)], mode="clock", target=T,
                          p4info=tofino_p4info(tmp_path, egress_drops=False), p4blob=tofino_build)


def test_clock_iface_needs_a_clock_port_on_tofino(tmp_path, tofino_build):
    s = S.generate_rotornet(4, 1, 20_000, 2_000)
    spec = C.SwitchSpec("rotor0", "127.0.0.1", 1, clock_iface="veth0")
    with pytest.raises(C.ControllerError, match="--clock-port"):
        C.RotorController(s, [spec], mode="clock", target=T,
                          p4info=tofino_p4info(tmp_path), p4blob=tofino_build)


# ------------------------------------------------------------------ CLI

def cli(*args):
    return subprocess.run([sys.executable, "-m", "p4rotor.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args,needle", [
    (["--target", "foo"], "unknown target 'foo' (bmv2, tofino or ebpf)"),
    (["--target", "tofino", "--mode", "signal"], "target tofino has no signal mode"),
    (["--cpu-port", "320"], "cpu port of target bmv2 is fixed"),
])
def test_cli_target_errors_are_one_line(tmp_path, args, needle):
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_rotornet(4, 1, 1000, 100).dumps())
    r = cli("control", "--schedule", str(sched), "--switch", "rotor0=127.0.0.1:50051",
            "--build-dir", str(tmp_path), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_cli_tofino_defaults_to_clock_mode_and_finds_its_build(tmp_path):
    """--target tofino alone: clock mode, and the missing bf-p4c output is what stops it."""
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_rotornet(4, 1, 1000, 100).dumps())
    (tmp_path / "tofino").mkdir()
    tofino_p4info(tmp_path / "tofino")
    r = cli("control", "--schedule", str(sched), "--switch", "rotor0=127.0.0.1:50051",
            "--build-dir", str(tmp_path), "--target", "tofino")
    assert r.returncode == 2
    assert "tofino/rotor/pipe/tofino.bin not found" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------ against the fake

def tofino_run(p4info: Path, blob: Path, boot_us: int, **kw):
    async def main():
        fake = await FakeSwitch(p4info, boot_us=boot_us, tick_ns=1).start()
        fake.counters = kw.pop("counters", {})
        s = S.generate_rotornet(4, 1, 20_000, 2_000)
        ctl = C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode="clock",
                                target=kw.pop("target", T), p4info=p4info, p4blob=blob, lead_s=0.2, **kw)
        try:
            await ctl.run(duration=0.3)
        finally:
            await fake.stop()
        return fake, ctl

    return asyncio.run(main())


def test_tofino_clock_run_writes_units_and_the_cpu_port(tmp_path, tofino_build):
    # Booted ~83 min ago: the switch's 1024-ns counter has wrapped its 32 bits already.
    boot_us = 5_000_000_000
    p4info = tofino_p4info(tmp_path)
    fake, ctl = tofino_run(p4info, tofino_build, boot_us)
    schema = fy.P4Schema(p4info)
    rt = ctl.runtimes["rotor0"]

    # The CPU port's value set, written (MODIFY) before the first time probe went out.
    assert fake.value_set_writes() == [(p4r.Update.MODIFY, "RotorIngressParser.cpu_port", [320])]
    first_probe = next(i for i, (k, _) in enumerate(fake.log) if k == "packet")
    first_vs = next(i for i, (k, u) in enumerate(fake.log)
                    if k == "write" and u.entity.WhichOneof("entity") == "value_set_entry")
    assert first_vs < first_probe
    assert not [v for _, v in fake.packet_outs if v["opcode"] == dp.OP_SET_SLOT]

    # The config: absolute times in 1024-ns units masked to 32 bits, durations scaled.
    cfg = fy.P4TableEntry.decode(fake.updates_for(dp.T_CONFIG)[-1].entity, schema).action.args
    off = rt.offset.offset_us
    assert cfg["offset"] == units(off) & MASK32
    assert cfg["epoch_us"] == units(ctl.t0_common_us) & MASK32
    assert cfg["cycle"] == 58_594 and cfg["night"] == 1953 and cfg["mode"] == dp.MODE_CLOCK
    # The offset, applied as the TNA program does (bits [41:10] of the ns timestamp, plus the
    # offset, mod 2^32), gives common time in units: within the probe's uncertainty.
    wall = ctl.tb.wall_ns(1_000_000)
    local_units = (fake.local_ticks(wall) >> 10) & MASK32
    err = ((local_units + cfg["offset"] - T.to_units(1_000_000) + (1 << 31)) & MASK32) - (1 << 31)
    assert abs(err) <= (rt.offset.rtt_us / 2 + 1000) / 1.024, err
    expect_us = fake.started_us - boot_us - ctl.tb.ref_ns // 1000
    assert abs(off - expect_us) <= rt.offset.rtt_us / 2 + 1000

    # The clock_phase ranges, scaled: they still tile the 58594-unit cycle.
    spans = sorted(fy.P4TableEntry.decode(u.entity, schema).match["phase"]
                   for u in fake.updates_for(dp.T_CLOCK_PHASE))
    assert spans == [(0, 19530), (19531, 39062), (39063, 58593)]


def test_tofino_without_the_value_set_writes_none(tmp_path, tofino_build):
    fake, ctl = tofino_run(tofino_p4info(tmp_path, value_sets=False), tofino_build, 5_000_000)
    assert fake.value_set_writes() == []
    assert fake.updates_for(dp.T_CONFIG), "installed all the same"


def test_tofino_drop_counters_sum_ingress_and_egress(tmp_path, tofino_build):
    status = tmp_path / "status.json"
    D = dp.DropCause
    fake, ctl = tofino_run(tofino_p4info(tmp_path), tofino_build, 5_000_000,
                           status_file=status, counters_every=0.05,
                           counters={"drop_counter": {D.NIGHT: 3, D.STALE: 1},
                                     "egress_drop_counter": {D.STALE: 2, D.MTU: 4},
                                     "rx_port_counter": {1: 20}, "tx_port_counter": {2: 5}})
    sw = read_status(status)["switches"]["rotor0"]
    assert sw["drops"] == {"NIGHT": 3, "STALE": 3, "MTU": 4}
    assert sw["unaccounted"] == 20 - 5 - 10


def test_bmv2_drop_counter_alone(tmp_path):
    """BMv2 reads drop_counter only (an egress_drop_counter there is not its)."""
    status = tmp_path / "status.json"
    blob = tmp_path / "rotor.json"
    blob.write_text("{}")
    D = dp.DropCause

    p4info = tmp_path / "rotor.p4info.txtpb"   # v1model's, with an egress_drop_counter added
    p4info.write_text(P4INFO.read_text() + '''
counters {
  preamble { id: 302000001 name: "egress_drop_counter" alias: "egress_drop_counter" }
  spec { unit: BOTH }
  size: 16
}
''')

    async def main():
        fake = await FakeSwitch(p4info).start()
        fake.counters = {"drop_counter": {D.NIGHT: 3}, "egress_drop_counter": {D.NIGHT: 2}}
        s = S.generate_rotornet(4, 1, 20_000, 2_000)
        ctl = C.RotorController(s, [C.SwitchSpec("rotor0", "127.0.0.1", fake.port)], mode="clock",
                                p4info=tmp_path / "rotor.p4info.txtpb", p4blob=blob, lead_s=0.2,
                                status_file=status, counters_every=0.05)
        try:
            await ctl.run(duration=0.2)
        finally:
            await fake.stop()

    asyncio.run(main())
    assert read_status(status)["switches"]["rotor0"]["drops"] == {"NIGHT": 3}


def test_tofino_starts_the_cycle_register_before_its_config(tmp_path, tofino_build):
    """TNA's clock (p4src/tna/include/control/slot_state.p4): cell gen & 1 of the cycle register
    holds the local time at which cycle 0 ends (epoch - offset + cycle, in units, wrapped),
    written before the config entry of that generation."""
    p4info = tofino_p4info(tmp_path)
    fake, ctl = tofino_run(p4info, tofino_build, 5_000_000_000)
    schema = fy.P4Schema(p4info)
    writes = [u for k, u in fake.log if k == "write"]
    reg = [i for i, u in enumerate(writes) if u.entity.WhichOneof("entity") == "register_entry"]
    cfg = [i for i, u in enumerate(writes) if u.entity.WhichOneof("entity") == "table_entry"
           and schema.tables[u.entity.table_entry.table_id].name == dp.T_CONFIG]
    assert len(reg) == 1 and cfg and reg[0] < cfg[-1]
    r = fy.P4RegisterEntry.decode(writes[reg[0]].entity, schema)
    a = fy.P4TableEntry.decode(writes[cfg[-1]].entity, schema).action.args
    assert schema.registers[r.register_id].name == "RotorIngress.slot_state.clock_cycle_end"
    assert r.index == a["gen"] & 1 and writes[reg[0]].type == p4r.Update.MODIFY
    assert r.data == (a["epoch_us"] - a["offset"] + a["cycle"]) & MASK32


def test_tofino_refuses_a_cycle_its_phase_key_cannot_hold():
    from p4rotor.control.target import clock_start_entities
    cfg = C.slot_config_entry(dp.MODE_CLOCK, 4, 70_000, 1_000, generation=3)
    cfg.action.args.update(cycle=T.duration_units(70_000))   # 68360 units > 2^16
    with pytest.raises(C.ControllerError, match="phase key holds 16 bits"):
        clock_start_entities(T, [cfg])
    assert clock_start_entities(C.BMV2, [cfg]) == []   # v1model restarts its clock itself


def test_tna_p4info_fixtures_keep_the_contract():
    """The TNA programs' P4Info (committed; rebuilt by make fixtures-tofino) has every name the
    controller writes, plus what the tofino target adds."""
    C.check_p4info(TNA / "rotor.p4info.txtpb", dp.ROTOR_CONTRACT, dp.ROTOR_COUNTERS + T.drop_counters)
    C.check_p4info(TNA / "tor.p4info.txtpb", dp.TOR_CONTRACT, dp.TOR_COUNTERS + T.drop_counters)
    for prog, kind in (("rotor", "Rotor"), ("tor", "Tor")):
        s = fy.P4Schema(TNA / f"{prog}.p4info.txtpb")
        assert {vs.name for vs in s.value_sets} == {f"{kind}IngressParser.cpu_port", f"{kind}IngressParser.clock_port"}
        assert s.registers[f"{kind}Ingress.slot_state.clock_cycle_end"].size == 2
        assert s.tables[f"{kind}Ingress.slot_state.clock_phase"].match_fields["phase"].bitwidth == T.phase_bits
