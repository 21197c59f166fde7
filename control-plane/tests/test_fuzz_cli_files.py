"""Property-based fuzz of the files the light commands read (issue #56): valid small files,
mutated by hypothesis (values replaced by values of other types, huge or non-finite numbers,
deep nesting, keys dropped, bytes cut or garbled, lines replaced), given to every command that
reads them, in-process.  Each case must keep tests/fuzz_cli.py's contract.

The default run is derandomised (the same cases every time, within ``make test``'s budget);
``make fuzz`` (P4ROTOR_FUZZ_EXAMPLES) runs many more, random ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_cli import SCALE, check, examples, files, _guard  # noqa: F401 (fixtures, found by name)

SETTINGS = dict(deadline=None, database=None, derandomize=SCALE <= 1, print_blob=True,
                suppress_health_check=list(HealthCheck))



# ---- values to put where a valid one was -----------------------------------------------------
RAW = "\u0000raw:"  # a string value standing for raw JSON text (numbers json.dumps cannot write)
RAW_TEXT = ["1" + "0" * 5000, "-" + "9" * 4400, "1" + "0" * 25, "1e400", "-1e400", "1e308", "NaN", "Infinity",
            "-Infinity", "[" * 50 + "]" * 50, "{" + '"a":' * 0 + "}", "4.9e-324", "-0", "0.0"]

leaf = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-10 ** 25, max_value=10 ** 25),
    st.sampled_from([0, 1, -1, 2, 3, 7, 2 ** 31, 2 ** 63, 10 ** 9, 10 ** 12, 10 ** 13, 10 ** 19]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["rotor0", "rotor1", "tor0", "h0x0", "h1x0", "loss", "opera", "custom", "rotornet", "in", "out",
                     "bulk", "small", "websearch"]),
    st.sampled_from(RAW_TEXT).map(lambda t: RAW + t),
)
weird = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                     max_leaves=8)


def _dumps(doc) -> str:
    text = json.dumps(doc)
    for t in RAW_TEXT:
        text = text.replace(json.dumps(RAW + t), t)
    return text


def _paths(v, at=()):
    yield at
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:6]):  # the first few entries of a long list are enough
            yield from _paths(x, at + (i,))


def _replace(doc, at, new):
    if not at:
        return new
    head, rest = at[0], at[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, new)}
    out = list(doc)
    out[head] = _replace(doc[head], rest, new)
    return out


def _drop(doc, at):
    if len(at) == 1:
        if isinstance(doc, dict):
            return {k: v for k, v in doc.items() if k != at[0]}
        return doc[:at[0]] + doc[at[0] + 1:]
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[at[0]] = _drop(doc[at[0]], at[1:])
    return out


@st.composite
def mutated_json(draw, text: str) -> bytes:
    """A valid JSON document with 1-3 values replaced or dropped; sometimes its bytes garbled."""
    doc = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        at = draw(st.sampled_from(paths))
        if at and draw(st.integers(0, 4)) == 0:
            doc = _drop(doc, at)
        else:
            doc = _replace(doc, at, draw(weird))
    data = _dumps(doc).encode()
    return _garble(draw, data)


def _garble(draw, data: bytes) -> bytes:
    how = draw(st.integers(0, 9))
    if how == 0 and data:  # cut short
        return data[:draw(st.integers(0, len(data) - 1))]
    if how == 1:  # a byte changed (maybe not UTF-8)
        i = draw(st.integers(0, max(0, len(data) - 1)))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if how == 2:
        return draw(st.binary(max_size=64))
    return data


@st.composite
def mutated_lines(draw, text: str) -> bytes:
    """A line-based file (CDF, CSV flow list) with 1-3 lines replaced, added or dropped."""
    lines = text.splitlines()
    token = st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e308", "1e999", "-5", "0", "1", "0.5", "2", "x", "",
                                       "1" + "0" * 5000, "h0x0", "h0x0", "h9x9", "1e-320", "10e12"]),
                      st.integers(-10 ** 20, 10 ** 20).map(str), st.floats().map(repr), st.text(max_size=6))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines)))
        sep = draw(st.sampled_from([" ", ",", "\t", ", "]))
        new = sep.join(draw(st.lists(token, min_size=0, max_size=6)))
        op = draw(st.integers(0, 2))
        if op == 0 and i < len(lines):
            lines[i] = new
        elif op == 1:
            lines.insert(i, new)
        elif i < len(lines):
            del lines[i]
    return _garble(draw, ("\n".join(lines) + "\n").encode())


def _commands(kind: str, f: str, v: dict[str, Path], out: str) -> list[list[str]]:
    sched = ["schedule", "check", f], ["schedule", "show", "--slices", f]
    model = ["model", "rotorlb", "--schedule", f, "--density", "2", "--count", "1", "--warmup-cycles", "1",
             "--measure-cycles", "2", "-o", out]
    gen = ["workload", "generate", "--load", "0.1", "--racks", "4", "--access-mbps", "10", "--flows", "20", "-o", out]
    return {
        "schedule": [*sched, model],
        "rotornet": [*sched, model],
        "topology": [["faults", "check", str(v["plan"]), "--topology", f],
                     ["faults", "generate", "--topology", f, "-o", out],
                     ["faults", "monitor", "--topology", f, "--plan", str(v["plan"]), "--threshold", "0.001", "-o", out],
                     ["faults", "optimise", "--topology", f, "--plan", str(v["plan"]), "--threshold", "0.001", "-o", out],
                     ["faults", "compare-corropt", "--topology", f, "--sets", "1", "--output", _dir(out)]],
        "plan": [["faults", "check", f, "--topology", str(v["topology"])],
                 ["faults", "monitor", "--topology", str(v["topology"]), "--plan", f, "--threshold", "0.001"],
                 ["faults", "optimise", "--topology", str(v["topology"]), "--plan", f, "--threshold", "0.001"]],
        "flows": [["workload", "show", f]],
        "csv": [["workload", "show", f]],
        "matrices": [["model", "rotorlb", "--racks", "4", "--matrices", f, "--warmup-cycles", "1",
                      "--measure-cycles", "2", "-o", out]],
        "cdf": [gen[:2] + ["--cdf", f] + gen[2:]],
        "fct": [["workload", "compare", f, str(v["fct"])], ["workload", "compare", f, f],
                ["workload", "table", f, str(v["fct"])], ["workload", "redivide", f, "--calibration", str(v["calibration"])]],
        "fct_cal": [["workload", "redivide", f, "--calibration", str(v["calibration"])]],
        "calibration": [["workload", "redivide", str(v["fct_cal"]), "--calibration", f]],
        "power": [["energy", str(v["energy_run"]), "--model", f, "--modes", "opera"]],
        # the run's files are written into a run directory under their own names (_fuzz)
        "energy_fct": [["energy", str(Path(f).parent), "--modes", "opera"]],
        "energy_flows": [["energy", str(Path(f).parent), "--modes", "rotornet"]],
        "energy_rotorlb": [["energy", str(Path(f).parent)]],
    }[kind]


# (file kind, its strategy, cases in the default run)
KINDS = [("schedule", mutated_json, 1500), ("rotornet", mutated_json, 400), ("topology", mutated_json, 800),
         ("plan", mutated_json, 800), ("flows", mutated_json, 1000), ("csv", mutated_lines, 600),
         ("matrices", mutated_json, 500), ("cdf", mutated_lines, 500), ("fct", mutated_json, 800),
         ("fct_cal", mutated_json, 300), ("calibration", mutated_json, 300),
         ("power", mutated_json, 300), ("energy_fct", mutated_json, 200), ("energy_flows", mutated_json, 200),
         ("energy_rotorlb", mutated_json, 200)]


def _dir(out: str) -> str:
    """``faults compare-corropt --output``: a directory (made by ``_fuzz``) beside ``out``."""
    return str(Path(out).with_suffix(".d"))


def _fuzz(kind: str, content: bytes, which: int, files: dict[str, Path], d: Path) -> None:
    import shutil

    suffix = {"csv": ".csv", "cdf": ".cdf"}.get(kind, ".json")
    f = d / f"fuzz-{kind}{suffix}"
    if kind in ("energy_fct", "energy_flows"):  # a run directory: the mutated file beside a valid one
        run = d / "run"
        run.mkdir(exist_ok=True)
        for name in ("fct", "flows"):
            (run / f"{name}.json").write_bytes(files[f"energy_{name}"].read_bytes())
        f = run / f"{kind.split('_')[1]}.json"
    elif kind == "energy_rotorlb":  # a rotorlb run: its rotorlb.json alone
        (d / "lb").mkdir(exist_ok=True)
        f = d / "lb" / "rotorlb.json"
    f.write_bytes(content)
    out = d / "out.json"
    cmds = _commands(kind, str(f), files, str(out))
    argv = cmds[which % len(cmds)]
    outs: tuple[Path, ...] = (out,) if str(out) in argv else ()
    if _dir(str(out)) in argv:
        Path(_dir(str(out))).mkdir()
        outs = tuple(Path(_dir(str(out))) / n for n in ("optimiser.json", "table.md", "run.json"))
    try:
        check(argv, outs)
    finally:
        out.unlink(missing_ok=True)
        shutil.rmtree(_dir(str(out)), ignore_errors=True)


def _make(kind: str, strategy, n: int):
    @settings(max_examples=examples(n), **SETTINGS)
    @given(data=st.data(), which=st.integers(0, 4))
    def test(files, tmp_path, data, which):
        content = data.draw(strategy(files[kind].read_text()), label=f"{kind} file")
        _fuzz(kind, content, which, files, tmp_path)
    test.__name__ = f"test_fuzz_{kind}_file"
    test.__doc__ = f"Mutated {kind} files: the contract holds for every command that reads one."
    return test


for _kind, _strategy, _n in KINDS:
    globals()[f"test_fuzz_{_kind}_file"] = _make(_kind, _strategy, _n)


@settings(max_examples=examples(40), **SETTINGS)
@given(data=st.data())
def test_fuzz_stability_flow_list(files, tmp_path, data):
    """``workload stability`` runs the RotorLB model on a flow list (~0.5 s each): fewer cases."""
    content = data.draw(mutated_json(files["flows"].read_text()))
    f = tmp_path / "flows.json"
    f.write_bytes(content)
    check(["workload", "stability", str(f)])


@settings(max_examples=examples(150), **SETTINGS)
@given(doc=weird, kind=st.sampled_from(["schedule", "topology", "plan", "flows", "matrices", "fct", "power",
                                        "energy_fct", "energy_rotorlb"]))
def test_fuzz_any_json_document(files, tmp_path, doc, kind):
    """Any JSON document at all (not a mutation of a valid one) in place of each kind of file."""
    _fuzz(kind, _dumps(doc).encode(), 0, files, tmp_path)


def test_default_case_count():
    """The default run (``make test``) fuzzes at least 10 000 cases, the regressions aside."""
    total = sum(n for _, _, n in KINDS) + 40 + 150
    from test_fuzz_cli_flags import FLAG_CASES

    assert total + FLAG_CASES >= 10_000, total + FLAG_CASES
