#!/usr/bin/env python3
"""Trim what p4c-ebpf's C makes every pipeline load pay for and the program never uses.

A restarted eBPF switch is back only once its pipeline is loaded again (docs/faults.md), and
two pieces of p4c-ebpf's boilerplate cost a rotor's load a third of its time:

* ``map_initializer`` fills a 2 048-word CRC-32 table whether or not the program has a CRC hash
  or checksum; the verifier follows its 256 x 8 and 256 x 7 loops (~25 ms of BPF_PROG_LOAD).
  Removed when nothing calls ``crc16_update`` or ``crc32_update``.
* ``tx_port``, the port DEVMAP, is declared with BTF key and value types, which the kernel does
  not take for a DEVMAP: the first create fails (ENOTSUPP), freeing it waits for an RCU grace
  period (10-30 ms), and libbpf creates it again without BTF.  Declared here with sizes only,
  as the retry creates it.

Usage: ebpf_trim.py FILE.c (rewritten in place).  Output that is not what p4c-ebpf 1.2.4.2
writes (the pin in docs/toolchain.md) is refused in one line, exit 2, and the file is left as
it was: the build stops rather than load a program trimmed by guess.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DEVMAP_BTF = ("REGISTER_TABLE(tx_port, BPF_MAP_TYPE_DEVMAP, u32, struct bpf_devmap_val, 256)\n"
              "BPF_ANNOTATE_KV_PAIR(tx_port, u32, struct bpf_devmap_val)\n")
DEVMAP_SIZES = """// p4rotor (scripts/ebpf_trim.py): sizes, not BTF types, which a DEVMAP does not take.
struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP);
    __uint(key_size, sizeof(u32));
    __uint(value_size, sizeof(struct bpf_devmap_val));
    __uint(max_entries, 256);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} tx_port SEC(".maps");
"""
CRC_INIT = re.compile(r"\n    u32 lookup_tbl_key = 0;\n    struct lookup_tbl_val\* lookup_tbl_value = "
                      r"BPF_MAP_LOOKUP_ELEM\(crc_lookup_tbl, &lookup_tbl_key\);\n.*?\n    }\n(?=    return 0;\n})",
                      re.S)
CRC_NOTE = "\n    // p4rotor (scripts/ebpf_trim.py): no CRC-32 table, nothing calls crc16/crc32_update.\n"


def trim(src: str) -> str:
    if src.count(DEVMAP_BTF) != 1:
        raise ValueError("no tx_port DEVMAP declared as p4c-ebpf 1.2.4.2 declares it")
    out = src.replace(DEVMAP_BTF, DEVMAP_SIZES)
    calls = len(re.findall(r"\bcrc(?:16|32)_update\s*\(", out)) - len(re.findall(r"\bvoid crc(?:16|32)_update\s*\(", out))
    if calls == 0:
        out, n = CRC_INIT.subn(CRC_NOTE, out)
        if n != 1:
            raise ValueError("no CRC table initialisation in map_initializer as p4c-ebpf 1.2.4.2 writes it")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: ebpf_trim.py FILE.c", file=sys.stderr)
        return 2
    path = Path(argv[1])
    try:
        path.write_text(trim(path.read_text()))
    except (OSError, ValueError) as ex:
        print(f"ebpf_trim.py: {path}: {ex}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
