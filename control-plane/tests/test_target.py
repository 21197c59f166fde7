"""The target record (control/target.py): conversions, device config, ports, modes, and a Tofino
controller run against the fake P4Runtime server (with the v1model P4Info fixtures: the TNA
programs keep the same names)."""

from __future__ import annotations

import math
import struct

import pytest

from p4rotor import control as C
from p4rotor.control.target import pack_tofino_config, unpack_tofino_config

MASK32 = (1 << 32) - 1
T = C.TOFINO


def units(us: float) -> int:
    """us -> 1024-ns units, half up (Python's round() would round half to even)."""
    return math.floor(us * 1000 / 1024 + 0.5)


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
    with pytest.raises(C.ControllerError) as ei:
        C.get_target("foo")
    assert str(ei.value) == "unknown target 'foo' (bmv2 or tofino)"


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
