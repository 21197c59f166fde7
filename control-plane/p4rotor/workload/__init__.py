"""Workloads as data: flow-size CDFs, Poisson flow lists at a target load, size scaling.

``cdf`` reads and samples a flow-size CDF file (topologies/workloads/ ships Web Search and Data
Mining); ``generate`` draws Poisson arrivals between hosts of different racks; ``scale`` maps real
sizes to the emulation's (dilation, access rate); ``flowlist`` writes and reads the JSON/CSV flow
lists; ``cli`` is ``p4rotor workload``.  docs/workloads.md.
"""

from .cdf import WorkloadError

__all__ = ["WorkloadError"]  # the modules by name: from p4rotor.workload import generate as G
