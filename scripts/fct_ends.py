"""One-packet TCP flows of an fct run, with the FCT ending at either end of the receiver
(docs/experiments.md, "FCT to the receiving host").  A diagnostic, not a test.

The fct experiment's FCT ends when a flow's last byte reached the receiving host (the kernel's
receive stamp, ``rx_ns`` in the receivers' logs, since 2026-11-26); before, it ended when the
receiving process read it (``done_ns``).  Runs made since record both, so both are read here from
the same flows: the one-packet flows alone (the slowdown's floor: the fastest of them) and the
run's own one-packet flows (emulated size at most one MSS), per fabric mode.

    .venv/bin/python scripts/fct_ends.py RUN [RUN ...]
"""

from __future__ import annotations

import json
import statistics as st
import sys
from pathlib import Path

MSS = 1460


def _starts(d: Path) -> dict[int, int]:
    out = {}
    for f in d.glob("tx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            out[r["id"]] = r["issued_ns"]
    return out


def _fcts(d: Path, ids: set[int] | None) -> dict[str, list[float]]:
    """ms per flow, to the kernel's stamp and to the receiver's read (flows with both only)."""
    starts = _starts(d)
    stamp, read = [], []
    for f in d.glob("rx-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r.get("rx_ns") is None or r["id"] not in starts or (ids is not None and r["id"] not in ids):
                continue
            stamp.append((r["rx_ns"] - starts[r["id"]]) / 1e6)
            read.append((r["done_ns"] - starts[r["id"]]) / 1e6)
    return {"stamp": stamp, "read": read}


def report(run: Path) -> None:
    flows = json.loads((run / "flows.json").read_text())["flows"]
    one = {f["id"] for f in flows if f["size"] <= MSS}
    alone = _fcts(run / "alone", None)
    if not alone["stamp"]:
        print(f"{run}: no receive stamps in alone/ (a run from before 2026-11-26)")
        return
    print(f"{run}: one-packet flows alone: {len(alone['stamp'])}")
    for mode in ("opera", "rotornet", "packet-switch"):
        d = run / mode
        if not d.is_dir():
            continue
        got = _fcts(d, one)
        if not got["stamp"]:
            continue
        for end in ("stamp", "read"):
            floor, xs, a = min(alone[end]), got[end], alone[end]
            label = "the receiving host (kernel stamp)" if end == "stamp" else "the receiver's read"
            print(f"  {mode}, FCT to {label}: "
                  f"{len(xs)} flows, median {st.median(xs):.2f} ms, mean {st.mean(xs):.2f} ms; "
                  f"floor alone {floor:.2f} ms (alone: median {st.median(a):.2f}, mean over floor "
                  f"{st.mean(a) / floor:.2f}); mean / floor {st.mean(xs) / floor:.2f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for a in argv:
        report(Path(a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
