"""Every file the CLI reads, fed garbage: a one-line error and exit 2, never a traceback.

Seeded (reproducible): for each kind of input file, mutations of a valid file — random bytes,
non-UTF-8 text, truncated JSON, values replaced by wrong types, huge and negative numbers — are
given to the command that reads it, in-process.  A failure names the seed and mutation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.cli import main
from p4rotor.schedule import topology as TP

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261123
CASES_PER_KIND = 40


def _valid_files(tmp: Path) -> dict[str, Path]:
    sched = S.generate_opera(8, 4, 1000, 100)
    sp = tmp / "schedule.json"
    sp.write_text(sched.dumps())
    topo = TP.generate(sched, str(sp), hosts_per_rack=1)
    tp = tmp / "topology.json"
    tp.write_text(topo.dumps())
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"version": 1, "faults": [
        {"kind": "loss", "start_us": 0, "end_us": 2000000, "rotor": "rotor0", "port": 3, "direction": "out",
         "rate": 0.01},
        {"kind": "switch-crash", "start_us": 1000000, "switch": "rotor1", "restart_after_us": 300000}]}))
    flows = tmp / "flows.json"
    assert main(["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks", "4", "--access-mbps", "10",
                 "--flows", "20", "-o", str(flows)]) in (0, None)
    matrices = tmp / "matrices.json"
    matrices.write_text(json.dumps([[[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]]]))
    cdf = tmp / "my.cdf"
    cdf.write_text((ROOT / "topologies/workloads/websearch.cdf").read_text())
    return {"schedule": sp, "topology": tp, "plan": plan, "flows": flows, "matrices": matrices, "cdf": cdf}


def _command(kind: str, f: Path, files: dict[str, Path], tmp: Path) -> list[str]:
    return {
        "schedule": ["schedule", "check", str(f)],
        "topology": ["routes", "--topology", str(f)],
        "plan": ["faults", "check", "--topology", str(files["topology"]), str(f)],
        "flows": ["workload", "show", str(f)],
        "matrices": ["model", "rotorlb", "--racks", "4", "--matrices", str(f), "-o", str(tmp / "m.json")],
        "cdf": ["workload", "generate", "--cdf", str(f), "--load", "0.1", "--racks", "4", "--access-mbps", "10", "--flows", "20",
                "-o", str(tmp / "out.json")],
    }[kind]


WEIRD = [None, True, -1, 0, 10**30, -10**30, 1e308, "x", "", [], {}, [1, "a"], {"a": 1}, 0.5, "\u00e9\u0000"]


def _mutate_json(value, rng: random.Random):
    """Replace one randomly chosen value somewhere in the document by a weird one."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        k = rng.choice(list(value))
        return {**value, k: _mutate_json(value[k], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return value[:i] + [_mutate_json(value[i], rng)] + value[i + 1:]
    return rng.choice(WEIRD)


def _mutations(data: bytes, rng: random.Random):
    yield "random bytes", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    yield "empty", b""
    yield "latin-1 text", data.decode(errors="replace").replace("e", "\u00e9", 3).encode("latin-1", "replace")
    yield "bad UTF-8 byte", data[: len(data) // 2] + b"\xff\xfe" + data[len(data) // 2:]
    yield "truncated", data[: rng.randrange(1, max(2, len(data)))]
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if doc is not None:
        for _ in range(CASES_PER_KIND):
            yield "wrong type", json.dumps(_mutate_json(doc, rng)).encode()
        yield "a list, not an object", b"[]"
        yield "a number", b"1e999"
    else:  # line-based (CDF)
        lines = data.decode().splitlines()
        for _ in range(CASES_PER_KIND // 2):
            i = rng.randrange(len(lines))
            bad = rng.choice(["nan nan", "1e999 0.5", "-5 0.5", "10 2", "x y", "1", "", "5 0.5 7"])
            yield "bad line", "\n".join(lines[:i] + [bad] + lines[i + 1:]).encode()


@pytest.mark.parametrize("kind", ["schedule", "topology", "plan", "flows", "matrices", "cdf"])
def test_garbage_input_is_one_line_error_exit_2(kind, tmp_path, capsys):
    files = _valid_files(tmp_path)
    capsys.readouterr()
    rng = random.Random(f"{SEED}-{kind}")
    data = files[kind].read_bytes()
    for n, (what, content) in enumerate(_mutations(data, rng)):
        f = tmp_path / f"fuzz-{kind}-{n}"
        f.write_bytes(content)
        try:
            code = main(_command(kind, f, files, tmp_path))
        except SystemExit as ex:
            code = ex.code
        except Exception as ex:  # a traceback for the user: the bug this test exists for
            pytest.fail(f"{kind}, {what} (case {n}, seed {SEED}): {type(ex).__name__}: {ex}\n"
                        f"input: {content[:200]!r}")
        err = capsys.readouterr().err.strip()
        if code in (0, None):  # the mutation happened to keep the file valid
            continue
        assert code == 2, f"{kind}, {what} (case {n}): exit {code}, stderr {err!r}"
        assert len(err.splitlines()) == 1 and err.startswith("p4rotor: error:"), \
            f"{kind}, {what} (case {n}): not a one-line error: {err!r}\ninput: {content[:200]!r}"
