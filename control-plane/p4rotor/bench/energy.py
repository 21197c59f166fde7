"""The energy accounting's per-frame loop: the Python reading vs the compiled one, side by side.

Both read the same generated frames of one link (two channels, a rotor's nights) under each
reactive policy (always on, TOS's L0s, TRS's L1) and must give the same outcome; the row is
their frames per second and the ratio.  Then, when the checkout holds it, a whole committed FCT
point (results/fct/datamining-0.4) accounted with the compiled loop: the time ``experiment fct``
now spends on its energy line.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..energy import account as AC
from ..energy import activity as A
from ..energy import fast as F
from ..energy import model as M
from ..energy import states as ST

RUN = Path(__file__).resolve().parents[3] / "results" / "fct" / "datamining-0.4"


def _frames(n: int, seed: int = 1) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """A busy link's frames: bursts in 900 us days of 1 ms slots, gaps of every length."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.choice([0.12, 1.2, rng.uniform(0, 40), rng.uniform(100, 3000)])
        out.append((t, rng.choice([0.12, 1.2]), rng.randrange(2)))
    a = np.array([f[0] for f in out])
    return out, a, np.array([f[1] for f in out]), np.array([f[2] for f in out], dtype=np.intc)


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def run_energy(quick: bool, say: Callable[[str], None] = print, n: int | None = None) -> dict:
    """The rows (``n`` frames: by default 2x10^5 quick, else 10^6) and, not quick, the whole run."""
    model = M.load()
    cls = model.classes["rotor-port"]
    n = n or (200_000 if quick else 1_000_000)
    frames, a, d, ch = _frames(n)
    horizon = frames[-1][0] + 1000.0
    dark = ST.Dark(0.0, 1000.0, 100.0)
    rows = []
    for name, state in (("always on", None), ("TOS (L0s)", cls.states["L0s"]), ("TRS (L1)", cls.states["L1"])):
        want, py_s = _timed(lambda: ST.reactive(frames, 2, horizon, state, dark))
        if F.engine() == "compiled":
            got, c_s = _timed(lambda: F.reactive(a, d, ch, 2, horizon, state, dark))
            same = all(x == y for x, y in zip(want, got, strict=True))
        else:
            c_s, same = None, None
        rows.append({"policy": name, "frames": n, "python_s": round(py_s, 3),
                     "compiled_s": None if c_s is None else round(c_s, 4),
                     "python_fps": round(n / py_s), "compiled_fps": None if c_s is None else round(n / c_s),
                     "ratio": None if c_s is None else round(py_s / c_s, 1), "same": same})
        say(f"[bench]   {name}: {n} frames, Python {py_s:.2f} s, compiled "
            f"{'-' if c_s is None else f'{c_s:.3f} s ({py_s / c_s:.0f}x)'}, same outcome: {same}")
    res: dict = {"engine": F.engine(), "rows": rows, "run": None}
    if not quick and F.engine() == "compiled" and (RUN / "fct.json").exists():
        t0 = time.perf_counter()
        act = A.from_fct_run(RUN, "opera")
        frames_n = sum(len(AC.frames(act, p)[0]) for p in act.ports.values())
        AC.account(act, model)
        wall = time.perf_counter() - t0
        res["run"] = {"path": "results/fct/datamining-0.4", "mode": "opera", "frames": frames_n,
                      "wall_s": round(wall, 1)}
        say(f"[bench]   results/fct/datamining-0.4 (opera): {frames_n} frames accounted in {wall:.0f} s")
    return res
