"""gRPC reconnects to a restarted switch within a slot cycle, not after gRPC's growing backoff.

A restarted switch should be re-installed within a slot cycle of listening again, but gRPC's
channel retries a lost connection after 1 s, then 1.6 s, 2.6 s ... (its default backoff), and
finsy builds its channel with fixed options and no way to add one.  So the options finsy
passes gain a constant 20 ms reconnect backoff (a refused connect to a switch that is down
costs nothing: 50 a second).  Measured on BMv2 (issue #17, docs/faults.md): a rotor restarted
0.3 s after it died was re-installed 1.54 s after its restart with gRPC's backoff; with 100 ms
growing 1.6x per attempt (ceiling 1 s) its ready handler still began 290-355 ms after it
listened again (the attempts had spread to 0.26, 0.52, 0.93 s); at a constant 100 ms, 30-65
ms; at 20 ms, the numbers docs/faults.md gives for the default plan.
"""

from __future__ import annotations

RECONNECT_BACKOFF_MS = 20


def reconnect_sooner() -> None:
    """Patch finsy's gRPC options once (idempotent) with the constant reconnect backoff."""
    from finsy import grpcutil

    if getattr(grpcutil.GRPCOptions.to_native, "_p4rotor", False):
        return
    native = grpcutil.GRPCOptions.to_native

    def to_native(self):
        out = [(k, v) for k, v in native(self) if k != "grpc.max_reconnect_backoff_ms"]
        return out + [("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                      ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                      ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS)]

    to_native._p4rotor = True  # type: ignore[attr-defined]
    grpcutil.GRPCOptions.to_native = to_native
