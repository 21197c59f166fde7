"""RotorLB, RotorNet's decentralised indirection ([McGuinness21 §2.5.1]): algorithm, fluid model, CLI.

``core`` is the algorithm on queue values (no I/O, no clock) so that a host
agent and the slot-level model run the very same code; ``model`` drives it
over a Schedule; ``cli`` wires ``p4rotor model rotorlb``.
"""

from .core import (Chunk, Direct, FabricState, Offer, RackQueues, SlotReport, accept, add_local,
                   headroom, make_offer, phase1, phase3, run_slot, store)

__all__ = ["Chunk", "Direct", "FabricState", "Offer", "RackQueues", "SlotReport", "accept",
           "add_local", "headroom", "make_offer", "phase1", "phase3", "run_slot", "store"]
