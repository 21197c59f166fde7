"""Flow completion times on the Opera fabric: Opera's two classes vs RotorNet (all bulk).

Method: [Gao20 §5.4] (pHost) — Poisson arrivals at a load, slowdown = FCT / FCT alone, mean and
p99 per size bucket.  Opera's split ([McGuinness21 §2.6]): a flow below the cutoff (default: one
cycle's bytes at the access rate) goes over the low-latency class with the kernel's TCP (DSCP 46,
host/flows.py); a flow at or above it is bulk for the RotorLB agents (host/agent.py, direct or
two-hop).  ``cutoff 0`` puts every flow on RotorLB: RotorNet.

The default Opera fabric (8 racks x 2 hosts, 4 rotors; ``hosts_per_rack``), an agent in every
host, every host's sending shaped to the access rate (``HEADROOM x rotors x agent rate x agent
frame``: an agent sends on every live circuit at once), agent frames first (hosts.py:
``shape_hosts``).  Flow sizes are scaled so size / cycle capacity is the real system's (10 Gb/s,
workload/scale.py).  One flow list (``flows.json``, replayable) runs once per mode.

Modules: ``run`` (the experiment: every mode on one flow list), ``options`` (its choices),
``hosts`` (shaping the hosts, starting the short-flow processes), ``calibrate`` (flows alone),
``mode`` (one mode's run), ``packet_switch`` (the baseline) and ``report`` (fct.json, fct.png).
Judging a finished run again needs no fabric: workload/judge.py, workload/paths.py.
"""
