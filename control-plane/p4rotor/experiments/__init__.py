"""Experiments on an emulated fabric (``p4rotor experiment NAME``): JSON + PNG under results/.

``runner`` launches fabrics and runs probe processes in hosts; one module per experiment
(``fct``: a package of them, experiments/fct/__init__.py).
"""

from . import apps, connectivity, duty_cycle, faults, low_latency, rotorlb, shuffle
from .fct import run as fct_run

EXPERIMENTS = {"connectivity": connectivity.connectivity, "duty-cycle": duty_cycle.duty_cycle,
               "low-latency": low_latency.low_latency, "shuffle": shuffle.shuffle, "rotorlb": rotorlb.rotorlb,
               "fct": fct_run.fct, "faults": faults.faults, "apps": apps.apps}
