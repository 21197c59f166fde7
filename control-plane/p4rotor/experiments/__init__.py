"""Experiments on an emulated fabric (``p4rotor experiment NAME``): JSON + PNG under results/.

``runner`` launches fabrics and runs probe processes in hosts; one module per experiment.
"""

from . import connectivity, duty_cycle, faults, fct, low_latency, rotorlb, shuffle

EXPERIMENTS = {"connectivity": connectivity.connectivity, "duty-cycle": duty_cycle.duty_cycle,
               "low-latency": low_latency.low_latency, "shuffle": shuffle.shuffle, "rotorlb": rotorlb.rotorlb,
               "fct": fct.fct, "faults": faults.faults}
