"""experiments/fault_loss.py: every TCP byte a reset connection lost is placed in exactly one
fault, outside every fault, or over two — never twice, never dropped from the count; a
connection that ended as planned is no fault's loss, and one whose server got more than its
client wrote is said."""

from __future__ import annotations

from types import SimpleNamespace as NS

from p4rotor.experiments.fault_loss import fault_windows, place, tcp_by_fault

S = 1_000_000_000


def test_windows_run_from_a_fault_to_two_cycles_after_its_end_or_restart():
    faults = [NS(start_us=1000, end_us=2000, restart_after_us=None), NS(start_us=5000, end_us=None, restart_after_us=500),
              NS(start_us=9000, end_us=None, restart_after_us=None)]
    # dilation 100: 1000 us of schedule is 0.1 s of wall; a cycle of 0.2 s
    assert fault_windows(faults, 0, 100, 0.2) == [(S // 10, S // 5 + 2 * S // 5), (S // 2, S * 55 // 100 + 2 * S // 5),
                                                   (S * 9 // 10, S * 9 // 10 + 2 * S // 5)]
    # a fault that lasts past its plan's end (a restarted agent listening only at 3 s)
    assert fault_windows(faults, 0, 100, 0.2, {1: 3 * S})[1] == (S // 2, 3 * S + 2 * S // 5)


def test_a_span_goes_whole_to_the_one_window_it_overlaps_else_outside_or_between():
    wins = [(10, 20), (30, 40)]
    per, outside, between = place([(12, 15, 3), (19, 25, 2), (0, 5, 7), (18, 32, 4), (41, 50, 1)], wins)
    assert per == [5, 0] and outside == 8 and between == 4
    assert sum(per) + outside + between == 3 + 2 + 7 + 4 + 1


def test_tcp_bytes_lost_go_to_the_fault_a_connection_was_reset_in():
    # received_intervals: (start ns, bytes); its client's error comes at its end, long after the cut
    wins = [(0, 3 * S), (10 * S, 13 * S)]
    runs = [{"sent": 1000, "received": 400, "error": "reset", "start_ns": 0, "end_ns": 30 * S,
             "received_intervals": [(0, 100), (8 * S, 300), (9 * S, 0)]},     # cut in [9, 11] s: fault 1
            {"sent": 500, "received": 100, "error": None, "start_ns": 0, "end_ns": 6 * S},   # ended as planned
            {"sent": 50, "received": 20, "error": "reset", "start_ns": 4 * S, "end_ns": 7 * S,
             "received_intervals": [(4 * S, 20)]},                              # cut in [5, 7] s: outside
            {"sent": 70, "received": 0, "error": "reset", "start_ns": 2 * S, "end_ns": 9 * S},  # no byte: cut in [2, 4] s, fault 0
            {"sent": 10, "received": 12, "error": None, "start_ns": 0, "end_ns": 7 * S}]     # more than written
    out = tcp_by_fault(runs, wins)
    assert out["per_fault"] == [70, 600] and out["outside_faults"] == 30 and out["between_faults"] == 0
    assert out["in_flight_at_planned_ends"] == 400 and out["received_more_than_written"] == 2
    wide = tcp_by_fault([dict(runs[0], received_intervals=[(0, 1), (1 * S, 0)])], [(0, 2 * S), (2 * S + 1, 3 * S)])
    assert wide["between_faults"] == 600 and wide["per_fault"] == [0, 0]
