"""experiments/fault_loss.py: every bulk frame a run lost and every TCP byte a reset lost is
placed in exactly one fault, outside every fault, between faults, or not placed — never twice,
never dropped from the count; a connection that ended as planned is no fault's loss."""

from __future__ import annotations

from types import SimpleNamespace as NS

from p4rotor.experiments.fault_loss import bulk_by_fault, fault_windows, place, relay_span_ns, tcp_by_fault

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


def test_bulk_by_fault_places_gaps_gives_a_killed_receivers_pairs_to_its_kill_and_counts_the_rest():
    wins = [(100, 200), (300, 400)]
    summaries = [
        {"rack": 3, "bulk_gaps": [[0, 1, 5, 110, 150], [0, 1, 2, 250, 260], [0, 7 << 60, 9, 110, 120],
                                  [5, 1, 3, 110, 120]]},  # origin 5's old incarnation: said apart
        {"rack": 5, "bulk_gaps": [[2, 1, 40, 0, 350]]},  # the restarted receiver: what the old one had
        {"rack": 4, "bulk_gaps": [[1, 1, 1, 280, 290]], "bulk_gaps_dropped": 0},
    ]
    pairs = {"0->3": {"lost": 8, "flows": [1]}, "2->5": {"lost": 11, "flows": [1]}, "1->4": {"lost": 1, "flows": [1]},
             "5->0": {"lost": 0, "flows": [1 + (1 << 20)]}}
    out = bulk_by_fault(summaries, pairs, {5: 1}, wins, 0, lambda fl: fl < 1 << 60)
    # 0->3: 5 in the first fault, 2 outside both, 1 after the receiver's last frame; 2->5 is the
    # kill's (fault 1) whole; the stream flow's gap is not bulk; 1->4's is outside
    assert out["per_fault"] == [5, 11] and out["outside_faults"] == 3 and out["between_faults"] == 0
    assert out["before_first_fault"] == 0
    assert out["not_placed"] == 1 and out["gaps_not_recorded"] == 0 and out["of_killed_incarnations"] == 3
    # with the receiver's last arrival (flows_rx) and the run's end, that one is placed by its span
    summaries[0]["flows_rx"] = {"0:1": [300, 350]}
    out = bulk_by_fault(summaries, pairs, {5: 1}, wins, 0, lambda fl: fl < 1 << 60, end_ns=380)
    assert out["per_fault"] == [5, 12] and out["not_placed"] == 0 and out["after_last_frame"] == 1
    assert out["recorded"]
    assert sum(out["per_fault"]) + out["outside_faults"] + out["between_faults"] + out["not_placed"] == 8 + 11 + 1
    # summaries without the gaps (an rlbd before them): nothing placed, and said so
    assert not bulk_by_fault([{"rack": 3}], {"0->3": {"lost": 2, "flows": [1]}}, {}, wins, 0, bool)["recorded"]


def test_a_frame_held_at_a_relay_is_lost_up_to_the_longest_relay_wait_after_its_gap():
    # 1->4's gap closed at 290, before the second fault began: held at a relay the fault then lost;
    # one that overlaps a window stays there, however close the next one begins
    wins = [(100, 200), (300, 400)]
    assert place([(150, 290, 2), (205, 210, 1)], wins, 30) == ([2, 0], 1, 0)
    summaries = [{"rack": 4, "bulk_gaps": [[1, 1, 1, 280, 290]], "relay_delay_slots": {"0": 5, "2": 1}},
                 {"rack": 2, "bulk_gaps": [], "relay_delay_slots": {"1": 3}}]
    assert relay_span_ns(summaries, 1e-8) == 30  # 2 slots of 10 ns waited at most, plus one
    out = bulk_by_fault(summaries, {"1->4": {"lost": 1, "flows": [1]}}, {}, wins, 0, lambda fl: True,
                        relay_span_ns(summaries, 1e-8))
    assert out["per_fault"] == [0, 1] and out["outside_faults"] == 0 and out["not_placed"] == 0


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
    # a client stopped before it reported: what it wrote is unknown, so neither lost nor duplicated
    stopped = tcp_by_fault([{"sent": None, "received": 40, "error": "stopped", "start_ns": 0, "end_ns": 1}], wins)
    assert stopped["received_more_than_written"] == 0 and stopped["received_by_runs_without_a_client_report"] == 40
    wide = tcp_by_fault([dict(runs[0], received_intervals=[(0, 1), (1 * S, 0)])], [(0, 2 * S), (2 * S + 1, 3 * S)])
    assert wide["between_faults"] == 600 and wide["per_fault"] == [0, 0]
