"""The light commands' input gate (p4rotor/inputs.py), issue #56: every malformed input found by
hand is refused in one line with exit 2 (the regression list), and a property-based fuzz of the
files these commands read finds no traceback, hang or second line (tests/fuzz_cli.py: the
contract).  Flags are fuzzed in test_fuzz_cli_flags.py.  ``make fuzz`` runs many more cases."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuzz_cli import check, fct_doc, files, _guard  # noqa: F401 (fixtures, found by name)
from p4rotor import inputs as I
from p4rotor import schedule as S



# ---- the regression list: every failure of issue #56 -----------------------------------------------
def _schedule_doc(**top) -> dict:
    d = json.loads(S.generate_opera(4, 3, 1200, 100).dumps())
    d.update(top)
    return d


def _coprime_rotors() -> dict:
    """18 rotors whose matching counts are the first 18 primes: they repeat together after ~1e21 slots."""
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61]
    return {"version": 1, "kind": "custom", "racks": 2, "slot_us": 1000, "reconfig_us": 0,
            "rotors": [{"name": f"r{i}", "offset_us": 0, "matchings": [[1, 0]] * p} for i, p in enumerate(primes)]}


def _flows_doc(**flow) -> dict:
    f = {"id": 0, "src": "h0x0", "dst": "h1x0", "size": 1460, "start": 0.0}
    f.update(flow)
    return {"version": 1, "flows": [f, {"id": 1, "src": "h1x0", "dst": "h0x0", "size": 1460, "start": 0.5}]}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _fct_list_mode() -> dict:
    d = fct_doc()
    d["modes"]["opera"] = [1, 2]
    return d


BIG = "1" + "0" * 5000  # a 5 000-digit integer: over Python's 4 300-digit conversion limit

# (id, {file name: content (str, dict: JSON, None: a FIFO, Path: that path)}, argv with {name} for files)
REGRESSIONS = [
    ("5000-digit slot_us, check", {"s.json": json.dumps(_schedule_doc()).replace('"slot_us": 1200', f'"slot_us": {BIG}')},
     ["schedule", "check", "{s.json}"]),
    ("5000-digit slot_us, show", {"s.json": json.dumps(_schedule_doc()).replace('"slot_us": 1200', f'"slot_us": {BIG}')},
     ["schedule", "show", "{s.json}"]),
    ("5000-digit slot_us, model", {"s.json": json.dumps(_schedule_doc()).replace('"slot_us": 1200', f'"slot_us": {BIG}')},
     ["model", "rotorlb", "--schedule", "{s.json}", "--density", "2"]),
    ("5000-digit size, workload show", {"f.json": json.dumps(_flows_doc()).replace("1460", BIG, 1)},
     ["workload", "show", "{f.json}"]),
    ("5000-digit size, workload stability", {"f.json": json.dumps(_flows_doc()).replace("1460", BIG, 1)},
     ["workload", "stability", "{f.json}"]),
    ("5000-digit number, workload compare", {"a.json": json.dumps(fct_doc()).replace("0.01", BIG, 1)},
     ["workload", "compare", "{a.json}", "{a.json}"]),
    ("5000-digit number, workload table", {"a.json": json.dumps(fct_doc()).replace("0.01", BIG, 1)},
     ["workload", "table", "{a.json}"]),
    ("5000-digit rate, faults check", {"p.json": '{"version": 1, "faults": [{"kind": "loss", "start_us": ' + BIG
                                                 + ', "rotor": "rotor0", "port": 1, "direction": "out", "rate": 0.1}]}'},
     ["faults", "check", "{p.json}", "--topology", "{topology}"]),
    ("5000-digit matrices, model", {"m.json": f"[[[0, {BIG}]]]"},
     ["model", "rotorlb", "--racks", "4", "--matrices", "{m.json}"]),
    ("50 MB of digits", {"s.json": "7" * 50_000_000}, ["schedule", "check", "{s.json}"]),
    ("deep JSON, workload show", {"f.json": _nested(100_000)}, ["workload", "show", "{f.json}"]),
    ("deep JSON, workload stability", {"f.json": _nested(100_000)}, ["workload", "stability", "{f.json}"]),
    ("deep JSON, workload compare", {"a.json": _nested(100_000)}, ["workload", "compare", "{a.json}", "{a.json}"]),
    ("deep JSON, workload table", {"a.json": _nested(100_000)}, ["workload", "table", "{a.json}"]),
    ("JSON 40 deep, schedule", {"s.json": json.dumps(_schedule_doc(kind=json.loads(_nested(40))))},
     ["schedule", "check", "{s.json}"]),
    ("offset_us 10**400, check", {"s.json": json.dumps(_schedule_doc()).replace('"offset_us": 0', f'"offset_us": {10 ** 400}')},
     ["schedule", "check", "{s.json}"]),
    ("offset_us 10**400, show", {"s.json": json.dumps(_schedule_doc()).replace('"offset_us": 0', f'"offset_us": {10 ** 400}')},
     ["schedule", "show", "{s.json}"]),
    ("offset_us 10**400, model", {"s.json": json.dumps(_schedule_doc()).replace('"offset_us": 0', f'"offset_us": {10 ** 400}')},
     ["model", "rotorlb", "--schedule", "{s.json}", "--density", "2"]),
    ("CDF size 1e308", {"c.cdf": "1460 0\n1e308 1\n"},
     ["workload", "generate", "--cdf", "{c.cdf}", "--load", "0.1", "--racks", "4", "--access-mbps", "10",
      "--flows", "20", "-o", "{out.json}"]),
    ("flow start 1e308, show", {"f.json": _flows_doc(start=1e308)}, ["workload", "show", "{f.json}"]),
    ("flow start 1e308, stability", {"f.json": _flows_doc(start=1e308)}, ["workload", "stability", "{f.json}"]),
    ("flow start 1e308, csv", {"f.csv": "id,src,dst,size,start\n0,h0x0,h1x0,1460,1e308\n"},
     ["workload", "show", "{f.csv}"]),
    ("modes.opera a list, compare", {"a.json": _fct_list_mode()}, ["workload", "compare", "{a.json}", "{a.json}"]),
    ("modes.opera a list, table", {"a.json": _fct_list_mode()}, ["workload", "table", "{a.json}"]),
    ("/dev/zero as a schedule", {"s.json": Path("/dev/zero")}, ["schedule", "check", "{s.json}"]),
    ("/dev/zero as a flow list", {"f.json": Path("/dev/zero")}, ["workload", "show", "{f.json}"]),
    ("/dev/zero as a CDF", {"c.cdf": Path("/dev/zero")},
     ["workload", "generate", "--cdf", "{c.cdf}", "--load", "0.1", "--racks", "4", "--access-mbps", "10",
      "--flows", "20", "-o", "{out.json}"]),
    ("FIFO as a schedule", {"s.json": None}, ["schedule", "show", "{s.json}"]),
    ("FIFO as a flow list", {"f.json": None}, ["workload", "show", "{f.json}"]),
    ("FIFO as a topology", {"t.json": None}, ["faults", "check", "{plan}", "--topology", "{t.json}"]),
    ("FIFO as matrices", {"m.json": None}, ["model", "rotorlb", "--racks", "4", "--matrices", "{m.json}"]),
    ("FIFO as fct.json", {"a.json": None}, ["workload", "table", "{a.json}"]),
    ("-o missing dir, schedule generate", {}, ["schedule", "generate", "opera", "--racks", "4", "--rotors", "3",
                                               "--slot-us", "1200", "-o", "{missing}/s.json"]),
    ("-o missing dir, faults generate", {}, ["faults", "generate", "--topology", "{topology}", "-o", "{missing}/p.json"]),
    ("-o missing dir, faults monitor", {}, ["faults", "monitor", "--topology", "{topology}", "--plan", "{plan}",
                                            "--threshold", "0.001", "-o", "{missing}/s.json"]),
    ("-o missing dir, faults optimise", {}, ["faults", "optimise", "--topology", "{topology}", "--plan", "{plan}",
                                             "--threshold", "0.001", "-o", "{missing}/s.json"]),
    ("--output missing dir, faults compare-corropt", {}, ["faults", "compare-corropt", "--topology", "{topology}",
                                                          "--output", "{missing}"]),
    ("-o missing dir, model", {}, ["model", "rotorlb", "--racks", "4", "--density", "2", "-o", "{missing}/m.json"]),
    ("-o missing dir, workload generate", {}, ["workload", "generate", "--workload", "websearch", "--load", "0.1",
                                               "--racks", "4", "--access-mbps", "10", "--flows", "20",
                                               "-o", "{missing}/f.json"]),
    ("--plot into a missing dir", {}, ["schedule", "show", "{schedule}", "--plot", "{missing}/p.png"]),
    ("18 coprime rotors, check", {"s.json": _coprime_rotors()}, ["schedule", "check", "{s.json}"]),
    ("18 coprime rotors, show", {"s.json": _coprime_rotors()}, ["schedule", "show", "{s.json}"]),
    ("18 coprime rotors, model", {"s.json": _coprime_rotors()},
     ["model", "rotorlb", "--schedule", "{s.json}", "--density", "1"]),
    ("--count 1e8", {}, ["model", "rotorlb", "--racks", "8", "--density", "4", "--count", "100000000"]),
    ("--count 1e8 as written", {}, ["model", "rotorlb", "--racks", "8", "--density", "4", "--count", "1e8"]),
    ("--measure-cycles 1e12", {}, ["model", "rotorlb", "--racks", "8", "--density", "4",
                                   "--measure-cycles", "1000000000000"]),
    ("model work over the limit", {}, ["model", "rotorlb", "--racks", "4000", "--density", "4"]),
    ("slot_us 10**30", {"s.json": json.dumps(_schedule_doc()).replace('"slot_us": 1200', f'"slot_us": {10 ** 30}')},
     ["schedule", "check", "{s.json}"]),
    ("slot_us 10**15", {"s.json": _schedule_doc(slot_us=10 ** 15)}, ["schedule", "check", "{s.json}"]),
    ("offset_us 10**15", {"s.json": json.dumps(_schedule_doc()).replace('"offset_us": 0', f'"offset_us": {10 ** 15}')},
     ["schedule", "show", "{s.json}"]),
    ("flow size 10**300", {"f.json": json.dumps(_flows_doc()).replace("1460", str(10 ** 300), 1)},
     ["workload", "show", "{f.json}"]),
    ("flow size 10**15", {"f.json": _flows_doc(size=10 ** 15)}, ["workload", "show", "{f.json}"]),
    ("NaN in JSON", {"f.json": json.dumps(_flows_doc()).replace("0.5", "NaN")}, ["workload", "show", "{f.json}"]),
    ("--flows over the limit", {}, ["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks", "4",
                                    "--access-mbps", "10", "--flows", str(I.MAX_FLOWS + 1), "-o", "{out.json}"]),
    ("--duration over the limit", {}, ["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks",
                                       "4", "--access-mbps", "10", "--duration", "1e300", "-o", "{out.json}"]),
    ("--access-mbps 1e300", {}, ["workload", "show", "{flows}", "--access-mbps", "1e300"]),
    ("model: a rack pair that never meets", {"s.json": {"version": 1, "kind": "rotornet", "racks": 4, "slot_us": 1000,
                                                 "reconfig_us": 0, "rotors": [{"name": "r0", "offset_us": 0, "matchings":
                                                                               [[1, 0, 3, 2], [2, 3, 0, 1]]}]}},
     ["model", "rotorlb", "--schedule", "{s.json}", "--density", "12", "--count", "1"]),
    ("a file name with a newline", {}, ["schedule", "check", "{missing}/a\nb.json"]),
    ("--hosts 10**30", {}, ["workload", "show", "{flows}", "--hosts", str(10 ** 30)]),
]


def _materialise(d: Path, inputs: dict, argv: list[str], files: dict[str, Path]) -> tuple[list[str], list[Path]]:
    names = {k: str(v) for k, v in files.items()}
    names["missing"] = str(d / "no-such-dir")
    names["out.json"] = str(d / "out.json")
    for name, content in inputs.items():
        p = d / name
        if content is None:
            os.mkfifo(p)
        elif isinstance(content, Path):
            p = content
        else:
            p.write_text(content if isinstance(content, str) else json.dumps(content))
        names[name] = str(p)
    argv = [_fill(a, names) for a in argv]
    outs = [Path(a) for a in argv if a.startswith(names["missing"]) or a == names["out.json"]]
    return argv, outs


def _fill(arg: str, names: dict[str, str]) -> str:
    for k, v in names.items():
        arg = arg.replace("{" + k + "}", v)
    return arg


@pytest.mark.parametrize("what,inputs,argv", REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_regression_refused_in_one_line(what, inputs, argv, files, tmp_path):
    argv, outs = _materialise(tmp_path, inputs, argv, files)
    check(argv, tuple(outs), refused=True)


@pytest.mark.parametrize("argv", [
    ["schedule", "check", "{schedule}"], ["schedule", "show", "{schedule}", "--slices"],
    ["model", "rotorlb", "--schedule", "{rotornet}", "--matrices", "{matrices}", "-o", "{out.json}"],
    ["workload", "show", "{flows}"], ["workload", "show", "{csv}"],
    ["workload", "compare", "{fct}", "{fct}"], ["workload", "table", "{fct}"],
    ["faults", "check", "{plan}", "--topology", "{topology}"],
    ["faults", "monitor", "--topology", "{topology}", "--plan", "{plan}", "--threshold", "0.001"],
    ["faults", "generate", "--topology", "{topology}", "-o", "{out.json}"],
    ["faults", "optimise", "--topology", "{topology}", "--plan", "{plan}", "--threshold", "0.001", "-o", "{out.json}"],
    ["workload", "generate", "--cdf", "{cdf}", "--load", "0.1", "--racks", "4", "--access-mbps", "10",
     "--flows", "20", "-o", "{out.json}"],
], ids=lambda a: " ".join(a[:2]))
def test_valid_inputs_still_accepted(argv, files, tmp_path):
    argv, outs = _materialise(tmp_path, {}, argv, files)
    check(argv, tuple(outs), refused=False)
    assert all(o.is_file() for o in outs)


@pytest.mark.parametrize("kind,racks,rotors,slot", [("opera", 108, 6, 1200), ("rotornet", 128, 4, 1000)])
def test_published_sizes_within_the_limits(kind, racks, rotors, slot, tmp_path):
    """Opera 108x6 and RotorNet 128x4 pass the schedule gate, and their RotorLB model with the
    default 8 matrices and 24 cycles is under the model's work limit."""
    s = S.generate(kind, racks, rotors, slot, 100)
    p = tmp_path / "s.json"
    p.write_text(s.dumps())
    assert S.load(p) == s
    from p4rotor.rotorlb.model import cycle_slots

    assert 8 * 24 * cycle_slots(s) * (racks ** 2 + I.SLOT_OVERHEAD) <= I.MAX_MODEL_WORK


def test_a_100000_flow_list_is_accepted(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("id,src,dst,size,start\n" + "".join(f"{i},h{i % 8}x0,h{(i + 1) % 8}x0,{1460 + i},{i * 0.001:.9f}\n"
                                                      for i in range(100_000)))
    check(["workload", "show", str(p)], refused=False)
