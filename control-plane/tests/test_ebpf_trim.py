"""scripts/ebpf_trim.py: what p4c-ebpf's C makes every pipeline load pay for and the program
never uses is taken out (a CRC table's initialisation when nothing calls a CRC, the port
DEVMAP's BTF types); output it does not recognise is refused in one line, the file untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ebpf_trim.py"
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build")) / "ebpf"

DEVMAP = ("REGISTER_TABLE(tx_port, BPF_MAP_TYPE_DEVMAP, u32, struct bpf_devmap_val, 256)\n"
          "BPF_ANNOTATE_KV_PAIR(tx_port, u32, struct bpf_devmap_val)\n")
CRC_DEF = "void crc32_update(u32 * reg, const u8 * data, u16 data_size, const u32 poly) {\n}\n"
INIT = """SEC("xdp/map-initializer")
int map_initializer() {
    int ret_5 = BPF_MAP_UPDATE_ELEM(a, &ebpf_zero, &value_6, BPF_ANY);

    u32 lookup_tbl_key = 0;
    struct lookup_tbl_val* lookup_tbl_value = BPF_MAP_LOOKUP_ELEM(crc_lookup_tbl, &lookup_tbl_key);
    if (lookup_tbl_value != NULL){
        for (u16 i = 0; i <= 255; i++){
            lookup_tbl_value->table[i] = i;
        }
    }
    return 0;
}
"""


def trim(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess, str]:
    f = tmp_path / "p.c"
    f.write_text(text)
    r = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True)
    return r, f.read_text()


def test_an_unused_crc_table_and_the_devmaps_btf_are_taken_out(tmp_path):
    r, out = trim(tmp_path, DEVMAP + CRC_DEF + INIT)
    assert r.returncode == 0, r.stderr
    assert "REGISTER_TABLE(tx_port" not in out and "__uint(key_size, sizeof(u32));" in out
    assert "lookup_tbl_value" not in out and "int ret_5" in out and out.rstrip().endswith("return 0;\n}")


def test_a_crc_the_program_calls_keeps_its_table(tmp_path):
    r, out = trim(tmp_path, DEVMAP + CRC_DEF + INIT + "int f() { crc32_update(&r, d, 4, 0); }\n")
    assert r.returncode == 0, r.stderr
    assert "lookup_tbl_value->table[i] = i;" in out and "REGISTER_TABLE(tx_port" not in out


@pytest.mark.parametrize("text", [CRC_DEF + INIT, DEVMAP + CRC_DEF + INIT.replace("    u32 lookup_tbl_key", "    u64 k")])
def test_output_it_does_not_recognise_is_refused_and_left_as_it_was(tmp_path, text):
    r, out = trim(tmp_path, text)
    assert r.returncode == 2 and out == text
    assert len(r.stderr.strip().splitlines()) == 1 and "p4c-ebpf 1.2.4.2" in r.stderr


def test_the_built_programs_are_trimmed():
    for prog in ("rotor", "tor"):
        c = BUILD / f"{prog}.c"
        if not c.exists():
            pytest.skip(f"SKIPPED: {c} not built (make build-ebpf; needs p4c-ebpf)")
        text = c.read_text()
        assert "scripts/ebpf_trim.py): sizes" in text and "lookup_tbl_value" not in text, prog
