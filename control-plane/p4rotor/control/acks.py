"""Signal mode, measured: when the pipeline applied each acked slot change (the bench's and
``p4rotor control --ack-every``'s report), from the controller's record of acks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .runtime import Controller


def _acks(ctl: "Controller", windows):
    for rt in ctl.runtimes.values():
        if rt.offset is None:
            continue
        for a in rt.acks:
            if windows is None or any(lo <= a[0] <= hi for lo, hi in windows):
                yield rt, a


def ack_delays_us(ctl: "Controller", since: str = "scheduled",
                  windows: Sequence[tuple[int, int]] | None = None) -> list[float]:
    """Signal mode: when the pipeline applied each acked slot change, after its scheduled
    boundary (``since="scheduled"``: the boundary error) or after the controller sent it
    (``since="sent"``: the transport delay alone), in us.

    The pipeline's timestamp is local: the offset measured by time probes at start maps it
    to common time (clock port: within its proven bracket; PacketOut: within RTT/2).
    ``windows``: only changes scheduled within these (wall ns) intervals.
    """
    out = []
    for rt, (scheduled, sent, _recv, local) in _acks(ctl, windows):
        ref = scheduled if since == "scheduled" else sent
        d = local + rt.offset.offset_us - (ref - ctl.tb.ref_ns) / 1000
        if ctl.signal.timed and since == "scheduled":
            # A timed change is applied at its start time, or on arrival if later.
            d = max(0.0, d)
        out.append(d)
    return out


def timed_margins_us(ctl: "Controller", windows: Sequence[tuple[int, int]] | None = None) -> list[float]:
    """Timed changes: how long before its start time each acked change reached the
    pipeline (negative: it arrived late and was applied on arrival)."""
    return [(s - ctl.tb.ref_ns) / 1000 - (local + rt.offset.offset_us)
            for rt, (s, _sent, _recv, local) in _acks(ctl, windows)]
