"""The TNA programs compile with bf-p4c (p4c's open Tofino back end) for Tofino 1 within its 12
stages, and their P4Info is the committed fixture (data/tna/, which test_target drives the
controller with).  Skipped, saying so, without bf-p4c (docs/tofino.md says how to build it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.control import tofino_report as TF
from p4rotor.p4 import tofino as TR

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "tna"
BF_P4C = os.environ.get("BF_P4C") or shutil.which("bf-p4c") or (
    "/opt/p4c-tofino/bin/bf-p4c" if Path("/opt/p4c-tofino/bin/bf-p4c").exists() else None)
needs_bf_p4c = pytest.mark.skipif(BF_P4C is None, reason="bf-p4c not found (PATH, /opt/p4c-tofino or "
                                  "$BF_P4C): the Tofino build is not tested here (docs/tofino.md)")
CONTRACTS = {"rotor": (dp.ROTOR_CONTRACT, dp.ROTOR_COUNTERS), "tor": (dp.TOR_CONTRACT, dp.TOR_COUNTERS)}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("tofino")
    for prog in CONTRACTS:
        r = subprocess.run([BF_P4C, "--target", "tofino", "--arch", "tna", "--verbose", "2",
                            "--p4runtime-force-std-externs", "--Wdisable=unused",
                            "--Wdisable=uninitialized-out-param", "--Wdisable=uninitialized-use",
                            "-o", str(out / prog), "--p4runtime-files", str(out / f"{prog}.p4info.txtpb"),
                            str(ROOT / "p4src" / "tna" / f"{prog}.p4")],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"bf-p4c {prog}.p4 failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return out


@needs_bf_p4c
@pytest.mark.parametrize("prog", sorted(CONTRACTS))
def test_tna_program_fits_tofino(compiled, prog):
    assert (compiled / prog / "pipe" / "tofino.bin").stat().st_size > 0
    s = TR.summarize(compiled / prog)
    assert 0 < s["stages"] <= TR.STAGES, s


@needs_bf_p4c
@pytest.mark.parametrize("prog", sorted(CONTRACTS))
def test_tna_p4info_is_the_committed_fixture(compiled, prog):
    built = (compiled / f"{prog}.p4info.txtpb").read_text()
    assert built == (DATA / f"{prog}.p4info.txtpb").read_text(), \
        f"data/tna/{prog}.p4info.txtpb is stale: run 'make fixtures-tofino'"
    contract, counters = CONTRACTS[prog]
    C.check_p4info(compiled / f"{prog}.p4info.txtpb", contract, counters + C.TOFINO.drop_counters)


def test_fit_table_counts_what_the_controller_writes():
    f = TF.fit(8, rotors=4)
    assert f["matchings"] == 2 and f["tables"]["circuit"]["entries"] == 16
    assert all(t["fits"] for t in f["tables"].values()) and f["cycle_fits"]
