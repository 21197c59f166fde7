"""The compiled per-frame loop (native/linkstate.c through energy/fast.py) gives the Python
loop's numbers (energy/states.py), frame sets of every kind; and the accounting over arrays
(energy/account.py) gives what the tuple-by-tuple reading gave."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4rotor.energy import account as AC
from p4rotor.energy import activity as A
from p4rotor.energy import fast as F
from p4rotor.energy import model as M
from p4rotor.energy import states as ST

from test_energy_cli import _run

needs_lib = pytest.mark.skipif(F.engine() != "compiled",
                               reason="build/liblinkstate.so not built (make native): the energy loop's compiled form")

MODEL = M.load()


def _frames(rng: random.Random, n: int, channels: int, slot: float) -> list[tuple[float, float, int]]:
    """Bursts, gaps longer and shorter than every runway, frames on night edges, equal arrivals."""
    out, t = [], rng.uniform(0, slot)
    for _ in range(n):
        t += rng.choice([0.0, rng.uniform(0, 2), rng.uniform(0, 60), rng.uniform(50, 3 * slot)])
        if rng.random() < 0.1:  # exactly at a night's edge
            t = float(round(t / slot) * slot)
        out.append((t, rng.choice([0.12, 1.2, rng.uniform(0.05, 30)]), rng.randrange(channels)))
    return sorted(out)


def _same(x: ST.Outcome, y: ST.Outcome) -> None:
    assert (x.frames, x.delayed, x.wakes) == (y.frames, y.delayed, y.wakes)
    assert x.added_delay_us == y.added_delay_us and x.max_delay_us == y.max_delay_us
    assert x.time_us == y.time_us


@needs_lib
@pytest.mark.parametrize("seed", range(12))
def test_compiled_loop_is_the_python_loop(seed):
    rng = random.Random(seed)
    cls = MODEL.classes[rng.choice(list(MODEL.classes))]
    slot = rng.choice([200.0, 1000.0])
    channels = rng.choice([1, 2])
    frames = _frames(rng, rng.randrange(0, 3000), channels, slot)
    horizon = (frames[-1][0] if frames else 0) + rng.uniform(0, 5000)
    dark = rng.choice([None, ST.Dark(rng.uniform(0, 50), slot, rng.choice([0.0, 10.0, 100.0]))])
    a = np.array([f[0] for f in frames], dtype=float)
    d = np.array([f[1] for f in frames], dtype=float)
    ch = np.array([f[2] for f in frames], dtype=np.intc)
    for state in (None, cls.states["L0s"], cls.states["L1"]):
        want = ST.reactive(frames, channels, horizon, state, dark)
        got = F.reactive(a, d, ch, channels, horizon, state, dark)
        for x, y in zip(want, got, strict=True):
            _same(x, y)


@needs_lib
def test_no_frames_sleeps_the_whole_run():
    st = MODEL.classes["tor-uplink"].states["L1"]
    e = np.zeros(0)
    (got,) = F.reactive(e, e, np.zeros(0, dtype=np.intc), 1, 5000.0, st)
    (want,) = ST.reactive([], 1, 5000.0, st)
    _same(want, got)


def _python_account(act, model):
    """account() as it read frames before the arrays: tuples, the Python loop."""
    import p4rotor.energy.fast as fast

    saved = fast._lib
    fast._lib = lambda: None
    try:
        return AC.account(act, model)
    finally:
        fast._lib = saved


@needs_lib
@pytest.mark.parametrize("mode", ["opera", "rotornet"])
def test_account_is_the_same_either_way(tmp_path, mode):
    act = A.from_fct_run(_run(tmp_path / "run"), mode)
    got, want = AC.account(act, MODEL), _python_account(act, MODEL)
    for pol in AC.POLICIES:
        g, w = got["policies"][pol], want["policies"][pol]
        assert g["energy_j"] == pytest.approx(w["energy_j"], rel=1e-12)
        assert g["delay"] == pytest.approx(w["delay"], rel=1e-12)
    assert got["utilisation"] == pytest.approx(want["utilisation"], rel=1e-12)


def test_frames_are_evenly_spaced_in_each_window(tmp_path):
    """One slot's frames on an uplink: inside its day, evenly spaced; an overloaded slot back to back."""
    act = A.from_fct_run(_run(tmp_path / "run"), "opera")
    s = act.schedule
    port = next(p for p in act.ports.values() if p.cls == "tor-uplink" and p.bins)
    port.bins.clear()
    port.add(3, 4, 4 * 1500)
    port.add(5, 2, 10 ** 9)  # far more than a day carries
    a, d = AC.frames(act, port)
    start = s.rotors[port.rotor].offset_us + 3 * s.slot_us + s.reconfig_us
    step = (s.slot_us - s.reconfig_us) / 4
    assert a[:4].tolist() == pytest.approx([start + i * step for i in range(4)])
    assert len(a) == 6 and a[5] - a[4] == pytest.approx(d[4])


def test_bench_section_measures_both_and_renders():
    """The bench's rows at a small size: both loops ran, the outcome is the same, the table
    renders and merges like the other sections."""
    from p4rotor.bench import energy as BE
    from p4rotor.bench import report, run

    res = BE.run_energy(quick=True, say=lambda s: None, n=3000)
    assert [r["policy"] for r in res["rows"]] == ["always on", "TOS (L0s)", "TRS (L1)"]
    if F.engine() == "compiled":
        assert all(r["same"] and r["compiled_s"] is not None for r in res["rows"])
    doc = {"machine": {"cores": 2, "python": "3", "kernel": "k"}, "started": "s", "rate_pps": 1, "energy": res}
    md = report.markdown(doc)
    assert "### The energy accounting's per-frame loop" in md and "| TRS (L1) | 3000 |" in md
    merged = run.merge_results({"started": "old"}, dict(doc, started="new"), {"energy"}, "p4rotor bench --only energy")
    assert merged["energy"] == res
