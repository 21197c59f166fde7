"""Property-based fuzz of the light commands' flags (issue #56): each command with some of its
numeric flags replaced by junk, huge, negative, non-finite or merely unusual values, in-process.
Each case must keep tests/fuzz_cli.py's contract.

Valid values are drawn small (a few racks, a few flows, a cycle or two), so a case that is
accepted runs in milliseconds: how long a large valid input may run is bounded by the work limits
in p4rotor/inputs.py, which test_fuzz_cli.py checks against the published fabric sizes.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_cli import SCALE, check, examples, files, _guard  # noqa: F401 (fixtures, found by name)

SETTINGS = dict(deadline=None, database=None, derandomize=SCALE <= 1, print_blob=True,
                suppress_health_check=list(HealthCheck))



JUNK = ["", " ", "-", "x", "0x10", "1_0", "1e8", "1e999", "-1e999", "nan", "NaN", "inf", "-inf", "Infinity",
        "9" * 5000, "-" + "9" * 5000, "1" + "0" * 25, "1e308", "-1e308", "4.9e-324", "-0", "0.0", "\u0665",
        "\uff15", "1.5", "-1", "0", "2**10", "None", "[]", "--", "1,5"]


def _out_of_range(v: float) -> bool:
    """Negative or above every limit (10^13): a junk number is never a large valid one, whose run
    time the work limits bound (minutes), not this fuzz's per-case time limit."""
    return not 0 <= v <= 10 ** 13


def junk() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(JUNK), st.integers(-10 ** 30, 10 ** 30).filter(_out_of_range).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).filter(_out_of_range).map(repr),
                     st.text(max_size=8))


def small_int(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(str)


def small_float(lo: float, hi: float) -> st.SearchStrategy[str]:
    return st.floats(lo, hi).map(repr)


# (command, the flags with a valid small value each, the fixed rest of argv; {name}: a valid file,
# {out}: the output path)
COMMANDS = [
    ("model", ["model", "rotorlb"], {"--racks": small_int(-2, 10), "--rotors": small_int(-1, 4),
                                     "--density": small_int(-1, 12), "--count": small_int(-1, 3),
                                     "--seed": small_int(-10 ** 20, 10 ** 20), "--warmup-cycles": small_int(-1, 3),
                                     "--measure-cycles": small_int(-1, 3)}, ["-o", "{out}"]),
    ("model-file", ["model", "rotorlb", "--schedule", "{rotornet}", "--matrices", "{matrices}"],
     {"--warmup-cycles": small_int(-1, 4), "--measure-cycles": small_int(-1, 4)}, ["-o", "{out}"]),
    ("schedule-generate", ["schedule", "generate", "rotornet"],
     {"--racks": small_int(-1, 12), "--rotors": small_int(-1, 4), "--slot-us": small_int(-1, 10 ** 10),
      "--reconfig-us": small_int(-1, 2000)}, ["-o", "{out}"]),
    ("workload-generate", ["workload", "generate", "--workload", "websearch"],
     {"--load": small_float(-0.5, 1.5), "--racks": small_int(-1, 8), "--hosts-per-rack": small_int(-1, 3),
      "--access-mbps": small_float(-1, 1e3), "--flows": small_int(-1, 50), "--seed": small_int(-10 ** 20, 10 ** 20),
      "--dilation": small_float(-1, 1e3), "--real-access-gbps": small_float(-1, 100),
      "--cycle-us": small_float(-1, 1e5), "--real-cycle-us": small_float(-1, 1e5), "--mss": small_int(-1, 9000),
      "--header-bytes": small_int(-1, 100)}, ["-o", "{out}"]),
    ("workload-generate-duration", ["workload", "generate", "--cdf", "{cdf}", "--racks", "4"],
     {"--load": small_float(0.01, 0.5), "--access-mbps": small_float(0.1, 10), "--duration": small_float(-1, 2)},
     ["-o", "{out}"]),
    ("workload-show", ["workload", "show", "{flows}"],
     {"--access-mbps": small_float(-1, 1e4), "--hosts": small_int(-1, 100), "--duration": small_float(-1, 100)}, []),
    ("workload-compare", ["workload", "compare", "{fct}", "{fct}"],
     {"--tolerance": small_float(-1, 20), "--min-flows": small_int(-1, 20)}, []),
    ("faults-generate", ["faults", "generate", "--topology", "{topology}"],
     {"--fraction": small_float(-0.5, 1.5), "--seed": small_int(-10 ** 20, 10 ** 20),
      "--start-us": small_int(-1, 10 ** 13), "--end-us": small_int(-1, 10 ** 13)}, ["-o", "{out}"]),
    ("faults-monitor", ["faults", "monitor", "--topology", "{topology}", "--plan", "{plan}"],
     {"--threshold": small_float(-0.5, 1.5)}, ["-o", "{out}"]),
    ("energy", ["energy", "{energy_run}"],
     {"--modes": st.sampled_from(["opera", "rotornet", "opera,rotornet", "packet-switch", ",", "opera,x"]),
      "--model": st.sampled_from(["{power}", "/nonexistent.json", "/dev/null", "/"])}, []),
    ("faults-optimise", ["faults", "optimise", "--topology", "{topology}", "--plan", "{plan}"],
     {"--threshold": small_float(-0.5, 1.5), "--max-links": small_int(-1, 3), "--max-work": small_int(-1, 100)},
     ["-o", "{out}"]),
]
CASES = {"model": 700, "model-file": 200, "schedule-generate": 300, "workload-generate": 700,
         "workload-generate-duration": 200, "workload-show": 300, "workload-compare": 200,
         "faults-generate": 300, "faults-monitor": 200, "energy": 60, "faults-optimise": 200}
FLAG_CASES = sum(CASES.values()) + 60 + 100 + 100


@st.composite
def flag_values(draw, flags: dict):
    """Each flag: left out, a valid small value, or junk (at least one flag is junk or out of range)."""
    out = []
    for flag, valid in flags.items():
        pick = draw(st.integers(0, 3))
        if pick == 0:
            continue
        out += [flag, draw(valid if pick < 3 else junk())]
    return out


def _fill(args: list[str], files: dict[str, Path], out: Path) -> list[str]:
    names = {**{k: str(v) for k, v in files.items()}, "out": str(out)}
    return [names.get(a[1:-1], a) if a.startswith("{") and a.endswith("}") else a for a in args]


def _make(name: str, head: list[str], flags: dict, tail: list[str]):
    @settings(max_examples=examples(CASES[name]), **SETTINGS)
    @given(values=flag_values(flags), to_dir=st.booleans())
    def test(files, tmp_path, values, to_dir):
        out = tmp_path / ("no-such-dir/out.json" if to_dir and tail else "out.json")
        argv = _fill(head, files, out) + _fill(values, files, out) + _fill(tail, files, out)
        try:
            check(argv, (out,) if tail else ())
        finally:
            out.unlink(missing_ok=True)
    test.__name__ = f"test_fuzz_{name.replace('-', '_')}_flags"
    test.__doc__ = f"p4rotor {' '.join(head[:2])}: fuzzed flags keep the contract."
    return test


for _name, _head, _flags, _tail in COMMANDS:
    globals()[f"test_fuzz_{_name.replace('-', '_')}_flags"] = _make(_name, _head, _flags, _tail)


@settings(max_examples=examples(60), **SETTINGS)
@given(hosts_per_rack=st.one_of(small_int(-1, 3), junk()))
def test_fuzz_stability_flags(files, hosts_per_rack):
    """``workload stability FILE --hosts-per-rack N`` (~0.5 s a case: fewer cases)."""
    check(["workload", "stability", str(files["flows"]), "--hosts-per-rack", hosts_per_rack])


@settings(max_examples=examples(100), **SETTINGS)
@given(values=flag_values({"--fraction": small_float(-0.5, 1.5), "--sets": small_int(-1, 2),
                           "--seed": small_int(-10 ** 20, 10 ** 20), "--threshold": small_float(-0.5, 1.5),
                           "--max-links": small_int(-1, 3), "--max-work": small_int(-1, 100)}),
       to_dir=st.booleans())
def test_fuzz_compare_corropt_flags(files, tmp_path, values, to_dir):
    """``faults compare-corropt``: its --output is a directory, where it writes three files."""
    import shutil

    d = tmp_path / ("no-such-dir" if to_dir else "cmp")
    if not to_dir:
        d.mkdir()
    try:
        check(["faults", "compare-corropt", "--topology", str(files["topology"]), *values, "--output", str(d)],
              tuple(d / n for n in ("optimiser.json", "table.md", "run.json")))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@settings(max_examples=examples(100), **SETTINGS)
@given(argv=st.lists(st.one_of(junk(), st.sampled_from(["-o", "--slices", "--plot", "--racks", "--flows",
                                                           "--count", "--density", "--", "-v"])), max_size=5),
       cmd=st.sampled_from([["schedule", "check"], ["schedule", "show"], ["model", "rotorlb"],
                            ["workload", "show"], ["workload", "generate"], ["workload", "compare"],
                            ["workload", "table"], ["workload", "stability"], ["faults", "check"],
                            ["faults", "monitor"], ["faults", "generate"], ["faults", "optimise"],
                            ["faults", "compare-corropt"]]))
def test_fuzz_argument_soup(tmp_path, cmd, argv):
    """Junk arguments in any order: argparse's refusals are one line too."""
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)  # a junk word may name an output file: it lands here
    try:
        check(cmd + argv)
    finally:
        os.chdir(cwd)
