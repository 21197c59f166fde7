"""The reactive policies' per-frame loop on arrays, compiled when it can be.

:func:`reactive` is ``states.reactive`` for frames held as arrays (arrival, duration, channel).
It calls ``linkstate_reactive`` of build/liblinkstate.so (control-plane/native/linkstate.c,
built by ``make native``), whose arithmetic is the Python's operation by operation; without the
library it runs the Python loop, 12-16 times slower per frame (a Data Mining run's ~10^8
frames: minutes instead of seconds).  Which one ran is :func:`engine`'s answer.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

import numpy as np

from .. import cliutil
from .states import Dark, Outcome, State
from .states import reactive as py_reactive

LIB_NAME = "liblinkstate.so"


def _candidates() -> list[Path]:
    env = os.environ.get("P4ROTOR_LINKSTATE")
    if env:
        return [Path(env)]
    return cliutil.built(LIB_NAME)


@functools.lru_cache(maxsize=None)
def _lib():
    """The compiled loop, or None ($P4ROTOR_LINKSTATE=none forces the Python one)."""
    if os.environ.get("P4ROTOR_LINKSTATE") == "none":
        return None
    for p in _candidates():
        if p.is_file():
            try:
                lib = ctypes.CDLL(str(p))
            except OSError:
                continue
            f = lib.linkstate_reactive
            dbl, pd = ctypes.c_double, ctypes.POINTER(ctypes.c_double)
            f.argtypes = [ctypes.c_long, pd, pd, ctypes.POINTER(ctypes.c_int), ctypes.c_int, dbl,
                          ctypes.c_int, dbl, dbl, dbl, ctypes.c_int, dbl, dbl, dbl,
                          pd, pd, ctypes.POINTER(ctypes.c_long)]
            f.restype = ctypes.c_int
            return f
    return None


def engine() -> str:
    """"compiled" or "python": what :func:`reactive` runs on this machine."""
    return "compiled" if _lib() is not None else "python"


def reactive(a: np.ndarray, d: np.ndarray, ch: np.ndarray, channels: int, horizon_us: float,
             state: State | None, dark: Dark | None = None) -> list[Outcome]:
    """``states.reactive`` over frames ``a[i], d[i], ch[i]`` (read in that order)."""
    f = _lib()
    if f is None:
        frames = list(zip(a.tolist(), d.tolist(), ch.tolist()))
        return py_reactive(frames, channels, horizon_us, state, dark)
    a = np.ascontiguousarray(a, dtype=np.float64)
    d = np.ascontiguousarray(d, dtype=np.float64)
    ch = np.ascontiguousarray(ch, dtype=np.intc)
    out = np.zeros(4 * channels, dtype=np.float64)
    asleep, wakes = ctypes.c_double(), ctypes.c_long()
    pd = ctypes.POINTER(ctypes.c_double)
    rc = f(len(a), a.ctypes.data_as(pd), d.ctypes.data_as(pd), ch.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
           channels, float(horizon_us),
           int(state is not None), *((state.runway_us, state.enter_cost_us, state.wake_cost_us)
                                     if state is not None else (0.0, 0.0, 0.0)),
           int(dark is not None), *((dark.offset_us, dark.period_us, dark.length_us)
                                    if dark is not None else (0.0, 0.0, 0.0)),
           out.ctypes.data_as(pd), ctypes.byref(asleep), ctypes.byref(wakes))
    if rc != 0:
        raise MemoryError("linkstate_reactive: out of memory or a channel out of range")
    name = "L0" if state is None else state.name
    slept = asleep.value
    res = []
    for c in range(channels):
        n, delayed, added, worst = out[4 * c:4 * c + 4].tolist()
        res.append(Outcome({"L0": horizon_us - slept, **({name: slept} if state is not None else {})},
                           frames=int(n), delayed=int(delayed), added_delay_us=added, max_delay_us=worst,
                           wakes=wakes.value if state is not None else 0))
    return res
