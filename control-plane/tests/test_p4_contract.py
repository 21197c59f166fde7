"""P4 and Python cannot disagree: the constants are generated from defines.p4 (and checked here),
the P4Info names the controller uses are checked against the rotor's and the ToR's P4Info."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.p4 import generate

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build"))
DEFINES = ROOT / "p4src" / "shared" / "defines.p4"
PROGRAMS = {"rotor": (dp.ROTOR_CONTRACT, dp.ROTOR_COUNTERS), "tor": (dp.TOR_CONTRACT, dp.TOR_COUNTERS),
            "oneswitch": (dp.ONE_CONTRACT, dp.ONE_COUNTERS)}


def test_constants_are_generated_from_the_p4():
    committed = (Path(dp.__file__).parent / "constants.py").read_text()
    assert generate.render(DEFINES) == committed, \
        "p4rotor/p4/constants.py is stale: run 'make constants' after editing p4src/shared/defines.p4"


def test_generator_reads_consts_and_defines():
    rows = generate.parse("const bit<8> FOO = 0x1F;  // why\n#define BAR 12\nconst bit<8> lower = 1;\n")
    assert rows == [("FOO", 31, "0x1F", "why"), ("BAR", 12, "12", "")]


def test_enums_follow_the_generated_indices():
    assert dp.DropCause.MTU == dp.DROP_MTU and dp.DropCause.NIGHT == dp.DROP_NIGHT
    assert len(dp.DropCause) <= dp.NUM_DROP_CAUSES and len(dp.CtrlCounter) <= dp.NUM_CTRL_COUNTERS


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_fixture_p4info_meets_the_contract(program):
    contract, counters = PROGRAMS[program]
    C.check_p4info(DATA / f"{program}.p4info.txtpb", contract, counters)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_built_p4info_meets_the_contract_and_matches_the_fixture(program):
    built = BUILD / f"{program}.p4info.txtpb"
    if not built.exists():
        pytest.skip(f"SKIPPED: {built} not built (make build; needs p4c)")
    contract, counters = PROGRAMS[program]
    C.check_p4info(built, contract, counters)
    assert built.read_text() == (DATA / f"{program}.p4info.txtpb").read_text(), \
        f"tests/data/{program}.p4info.txtpb is stale: copy {built} over it (make fixtures)"


def test_a_contract_mismatch_is_one_error_listing_each_problem(tmp_path):
    bad = tmp_path / "tor.p4info.txtpb"
    bad.write_text((DATA / "tor.p4info.txtpb").read_text().replace("TorIngress.routing.route", "TorIngress.routing.rte"))
    with pytest.raises(C.ControllerError, match="table TorIngress.routing.route missing"):
        C.check_p4info(bad, dp.TOR_CONTRACT, dp.TOR_COUNTERS)


@pytest.mark.parametrize("program", ["rotor", "tor"])
def test_ebpf_p4info_meets_the_contract_as_the_psa_programs_meet_it(program):
    """Target ebpf: the same contract through the adapter's differences (the phase keyed by grains,
    the ToR's MTU check at ingress, no rotor MTU table; counters found by name, not in the P4Info);
    the fixture, and build/ebpf when built, which must equal it."""
    from p4rotor.control.nikss import ebpf_contract

    contract, _ = PROGRAMS[program]
    fixture = DATA / f"ebpf-{program}.p4info.txtpb"
    C.check_p4info(fixture, ebpf_contract(contract), ())
    built = BUILD / "ebpf" / f"{program}.p4info.txtpb"
    if built.exists():
        C.check_p4info(built, ebpf_contract(contract), ())
        assert built.read_text() == fixture.read_text(), f"tests/data/ebpf-{program}.p4info.txtpb is stale"
    with pytest.raises(C.ControllerError, match="phase_grains"):
        C.check_p4info(fixture, contract, ())   # the v1model contract itself does not fit
