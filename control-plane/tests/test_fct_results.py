"""fct.json results judged and put together: the bulk bound (workload/bound.py), issue #14's
checks (workload/checks.py), compare, table and merge (workload/results.py), and their
``p4rotor workload`` commands."""

from __future__ import annotations

import json

import pytest

from p4rotor.cli import main
from p4rotor.workload import bound as B
from p4rotor.workload import fct as F
from p4rotor.workload import results as RS
from p4rotor.workload.checks import checks
from p4rotor.workload.generate import Flow


def _fct_result(flows=20, scale=1.0, unfinished=0, outlier=1.0):
    """An fct.json as the experiment writes it (the parts compare reads): per-flow FCTs scaled by
    ``scale``, one flow of the low-latency bucket by ``outlier`` more (a TCP timeout)."""
    def bucket(fcts):
        return {"flows": len(fcts), "unfinished": 0, "fct_mean_s": sum(fcts) / len(fcts),
                "fct_p50_s": sorted(fcts)[len(fcts) // 2], "fct_p99_s": max(fcts),
                "slowdown_mean": 2.0, "slowdown_p99": 5.0, "slowdown_min": 1.0}
    ll = [0.1 + i / 100 for i in range(15)]
    bk = [2.0 + i for i in range(4)]
    rn = [0.4 + i / 50 for i in range(19)]
    a_ll = [x * scale * (outlier if i == 0 else 1) for i, x in enumerate(ll)]
    per = [[i, "low-latency", "<100KB", x] for i, x in enumerate(a_ll)]
    per += [[100 + i, "bulk", "100KB-10MB", x * scale] for i, x in enumerate(bk)]
    return {"flows": flows, "modes": {
        "opera": {"unfinished": unfinished, "per_flow": per, "classes": {
            "low-latency": {"<100KB": bucket(a_ll)},
            "bulk": {"100KB-10MB": bucket([x * scale for x in bk])}}},
        "rotornet": {"unfinished": 0, "per_flow": [[i, "bulk", "<100KB", x * scale] for i, x in enumerate(rn)],
                     "classes": {"bulk": {"<100KB": bucket([x * scale for x in rn])}}}}}


def test_workload_table_names_each_rows_run_and_is_the_same_every_time(tmp_path, capsys, monkeypatch):
    """Two runs of one workload and load: every row of the table and of the checks below it names
    its run (the directory its fct.json is in, never a path), and the same results print the same
    bytes, from wherever they are read."""
    a = dict(_fct_result(), workload="datamining", load=0.01)
    paths = []
    for name in ("datamining-0.01", "datamining-0.01-rerun"):
        p = tmp_path / "results" / name / "fct.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps(a))
        paths.append(str(p))
    assert main(["workload", "table", *paths]) == 0
    out = capsys.readouterr().out
    rows = [x for x in out.splitlines() if x.startswith("| ")]
    assert rows[0].startswith("| run | workload | load | flows |")
    checks_at = next(i for i, x in enumerate(rows) if x.startswith("| run | workload | load | check |"))
    for part in (rows[2:checks_at], rows[checks_at + 2:]):
        assert part and all(x.startswith(("| datamining-0.01 | ", "| datamining-0.01-rerun | ")) for x in part)
        assert any(x.startswith("| datamining-0.01-rerun | ") for x in part)
    assert str(tmp_path) not in out
    assert main(["workload", "table", *paths]) == 0
    assert capsys.readouterr().out == out
    monkeypatch.chdir(tmp_path / "results")
    assert main(["workload", "table", "datamining-0.01/fct.json", "datamining-0.01-rerun/fct.json"]) == 0
    assert capsys.readouterr().out == out


def _write_list(path, flows, meta=None):
    from p4rotor.workload import flowlist

    flowlist.write(path, flows, meta or {})


def test_compare_same_list_within_noise_and_small_buckets_not_judged():
    res = RS.compare(_fct_result(), _fct_result(scale=1.1))
    assert res["same"], res["differences"]
    # One flow hitting a 1 s timeout moves the mean a lot, the flow-by-flow median not at all.
    res = RS.compare(_fct_result(), _fct_result(outlier=30.0))
    assert res["same"], res["differences"]
    row = next(r for r in res["rows"] if r["class"] == "low-latency")
    assert row["ratio"] == pytest.approx(1.0) and row["fct_mean_s"][1] > 1.5 * row["fct_mean_s"][0]
    judged = {(r["mode"], r["class"], r["bucket"]): r["judged"] for r in res["rows"]}
    assert judged[("opera", "bulk", "100KB-10MB")] is False   # 4 flows: shown, not judged
    assert judged[("opera", "low-latency", "<100KB")] is True


def test_compare_names_what_differs():
    res = RS.compare(_fct_result(), _fct_result(scale=1.5, unfinished=2))
    assert not res["same"]
    assert "opera: 0 vs 2 unfinished" in res["differences"]
    assert "opera low-latency <100KB: median FCT ratio (flow by flow) 1.50" in res["differences"]
    assert "not one flow list" in " ".join(RS.compare(_fct_result(), _fct_result(flows=21))["differences"])


def test_compare_judges_the_means_only_when_asked():
    """A replay 4 % slower passes a 5 % bound on the means, 6 % slower fails it, with the bucket
    named; one 1 s timeout moves a mean past it though the median holds; unasked, means are
    shown (``mean_ratio``), not judged; a bucket of too few flows is not judged either."""
    res = RS.compare(_fct_result(), _fct_result(scale=1.04), mean_tolerance=0.05)
    assert res["same"], res["differences"]
    row = next(r for r in res["rows"] if r["class"] == "low-latency")
    assert row["mean_ratio"] == pytest.approx(1.04)
    res = RS.compare(_fct_result(), _fct_result(scale=1.06), mean_tolerance=0.05)
    assert not res["same"]
    assert "opera low-latency <100KB: mean FCT ratio 1.060 (within 5% asked)" in res["differences"]
    assert not any("bulk 100KB-10MB" in d for d in res["differences"])   # 4 flows: not judged
    assert RS.compare(_fct_result(), _fct_result(scale=1.06))["same"]
    assert not RS.compare(_fct_result(), _fct_result(outlier=30.0), mean_tolerance=0.05)["same"]
    with pytest.raises(ValueError):
        RS.compare(_fct_result(), _fct_result(), mean_tolerance=0.0)


def test_workload_compare_cli(tmp_path, capsys):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_fct_result()))
    b.write_text(json.dumps(_fct_result(scale=0.9)))
    c.write_text(json.dumps(_fct_result(scale=2.0)))
    assert main(["workload", "compare", str(a), str(b)]) == 0
    assert "same within noise" in capsys.readouterr().out
    assert main(["workload", "compare", str(a), str(c)]) == 1
    assert "different: " in capsys.readouterr().out
    assert main(["workload", "compare", str(a), str(b), "--mean-tolerance", "0.05"]) == 1
    assert "mean FCT ratio 0.900" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ex:
        main(["workload", "compare", str(a), str(b), "--mean-tolerance", "-1"])
    assert ex.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit) as ex:
        main(["workload", "compare", str(a), str(tmp_path / "bad.json")])
    assert ex.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_workload_table_of_a_sweep(tmp_path, capsys):
    """Several runs as one markdown table; an unstable mode says so instead of slowdowns."""
    a = dict(_fct_result(), workload="websearch", load=0.1)
    b = dict(_fct_result(), workload="datamining", load=0.4)
    b["modes"]["rotornet"].update(stable=False, stability={"rise_bytes": 123456.0})
    rows = RS.table([("ws", a), ("dm", b)])
    assert rows[0].startswith("| run | workload | load |") and len(rows) == 2 + 3 + 2 + 1
    assert "| ws | websearch | 0.1 | 20 | opera | low-latency <100KB (15) | 0 | 2.0 | 5.0 |" in rows[2]
    assert any("| dm | datamining | 0.4 | 20 | rotornet | all | 0 | **unstable**: pending bytes climb 123456 B" in r
               for r in rows)
    pa = tmp_path / "websearch-0.1" / "fct.json"
    pa.parent.mkdir()
    pa.write_text(json.dumps(a))
    assert main(["workload", "table", str(pa)]) == 0
    assert "| websearch-0.1 | websearch | 0.1 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ex:
        main(["workload", "table", str(tmp_path / "missing.json")])
    assert ex.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_bulk_bound_is_bytes_at_the_duty_cycled_rate_plus_the_wait():
    """Issue #14: bulk FCT <= size / (rate x duty cycle) + (matchings + 1) slots at low load."""
    bps, duty, wait = 1e6, 0.5, 0.3
    assert B.bulk_bound_s(1400, bps, duty, wait) == pytest.approx(8 * 1442 / 0.5e6 + 0.3)
    assert B.bulk_bound_s(1, bps, duty, wait) == pytest.approx(8 * 43 / 0.5e6 + 0.3)  # one frame at least
    fast = F.Done(Flow(0, "a", "b", 14_000, 0.0), "bulk", 0, int(0.2e9))
    slow = F.Done(Flow(1, "a", "b", 14_000, 0.0), "bulk", 0, int(2e9))
    short = F.Done(Flow(2, "a", "b", 100, 0.0), "low-latency", 0, int(5e9))  # not bulk: not judged
    res = B.bulk_bound_check([fast, slow, short, F.Done(Flow(3, "a", "b", 1, 0.0), "bulk", 0, None)], bps, duty, wait)
    bound = B.bulk_bound_s(14_000, bps, duty, wait)
    assert (res["flows"], res["within"]) == (2, 1) and res["worst_ratio"] == pytest.approx(2 / bound)
    assert "pair_capacity" not in res


def test_bulk_is_also_judged_apart_for_flows_alone_at_their_racks():
    """A bulk flow sharing its source or destination rack with another bulk flow at the same time
    is contended; alone otherwise (the bound is one flow's)."""
    bps, duty, wait = 1e6, 0.5, 0.3
    rack = {"a0": 0, "a1": 0, "b0": 1, "c0": 2, "d0": 3}
    bulk = [F.Done(Flow(0, "a0", "b0", 14_000, 0.0), "bulk", 0, int(0.2e9)),   # alone, within
            F.Done(Flow(1, "a1", "c0", 14_000, 0.3), "bulk", 0, int(2e9)),     # from rack 0 after flow 0
            F.Done(Flow(2, "d0", "c0", 14_000, 1.0), "bulk", 0, int(2e9)),     # to rack 2 with flow 1: both contended
            F.Done(Flow(3, "d0", "b0", 14_000, 5.0), "bulk", 0, int(2e9)),     # alone, above the bound
            F.Done(Flow(4, "c0", "d0", 14_000, 9.0), "low-latency", 0, int(5e9)),  # not bulk: no contention
            F.Done(Flow(5, "b0", "a1", 14_000, 6.0), "bulk", 0, None)]         # unfinished: runs to the end
    res = B.bulk_bound_check(bulk, bps, duty, wait, rack_of=rack)
    assert (res["alone_at_racks"]["flows"], res["alone_at_racks"]["within"]) == (2, 1)
    assert res["contended"]["flows"] == 2
    assert "alone at their racks 1/2" in B.rack_alone_numbers(res)
    # alone in the whole fabric: flow 0 only (flow 3 overlaps the unfinished flow 5, elsewhere)
    assert (res["alone_in_fabric"]["flows"], res["alone_in_fabric"]["within"]) == (1, 1)
    assert res["beside_another"]["flows"] == 3
    assert "alone in the fabric 1/1" in B.rack_alone_numbers(res)
    assert "alone_at_racks" not in B.bulk_bound_check(bulk, bps, duty, wait)
    assert B.rack_alone_numbers({}) == ""


def test_bulk_is_also_judged_at_its_rack_pairs_rotorlb_capacity():
    """The issue's bound lets one flow use all K uplinks; RotorLB's model gives most rack pairs of
    the default Opera 8 x 4 3.5 of them (relays drain one slot per cycle each), a few 4: a flow at
    the model's rate is outside the first bound and within the second."""
    from p4rotor import schedule as S
    from p4rotor.workload.plane import pair_shares
    from p4rotor.schedule import topology as TP

    sched = S.generate_opera(8, 4, 1000, 100)
    topo = TP.generate(sched, "schedule.json", hosts_per_rack=1)
    hosts = [h.name for k in topo.racks for h in k.hosts]
    flows = [Flow(i, a, b, 1_000_000, 0.0) for i, (a, b) in enumerate((x, y) for x in hosts for y in hosts if x != y)]
    share = pair_shares(sched, flows, {h.name: k.id for k in topo.racks for h in k.hosts})
    assert sorted(set(share.values())) == [0.875, 1.0]
    assert sum(v == 0.875 for v in share.values()) == 48
    bps, duty, wait = 1e6, 0.5, 0.3
    f = next(fl for fl in flows if share[fl.id] == 0.875)
    at_model = B.bulk_bound_s(f.size, bps * 0.875, duty, wait) * 0.99
    d = F.Done(f, "bulk", 0, int(at_model * 1e9))
    res = B.bulk_bound_check([d], bps, duty, wait, share=share)
    assert res["within"] == 0 and res["pair_capacity"]["within"] == 1 and res["pair_capacity"]["shares"] == [0.875]


def _checked(r):
    return {name: (ok, numbers) for name, ok, numbers in checks(r)}


def test_checks_judge_the_issues_criteria_on_one_run():
    """At most 1 % of slowdowns below 1 (calibrated runs only), flat pending bytes, and at 1 % load the low-latency mean <= 2 without loss
    and bulk within its bound; RotorNet's one-packet flows against Opera's (sizes <= MSS only)."""
    r = dict(_fct_result(), workload="websearch", load=0.01, calibration={"fabric": {}})
    r["modes"]["opera"]["per_flow"] = [f + [100] for f in r["modes"]["opera"]["per_flow"]]
    r["modes"]["rotornet"]["per_flow"] = [[i, "bulk", "<100KB", 2.0, 100] for i in range(19)]
    r["modes"]["rotornet"]["per_flow"].append([99, "bulk", "<100KB", 0.001, 50_000])  # not one packet
    r["modes"]["opera"]["bulk_bound"] = {"flows": 4, "within": 4, "worst_ratio": 0.8, "median_ratio": 0.5}
    c = _checked(r)
    assert c["opera: slowdowns below 1 <= 1% (calibrated ideal)"][0] is True
    assert c["opera: pending bytes flat"][0] is True
    assert c["opera: low-latency mean slowdown <= 2 under both denominators, no loss (at 1 % load)"][0] is True
    assert c["opera: bulk within the low-load bound"][0] is True
    ok, numbers = c["rotornet one-packet flows >= 10x opera's"]
    assert ok is True and "19 flows" in numbers  # 2.0 s vs ~0.17 s
    # At 10 % load the low-load criteria are not judged; more than 1 % below 1 fails.
    r["load"] = 0.1
    r["modes"]["opera"]["classes"]["bulk"]["100KB-10MB"]["slowdown_min"] = 0.9
    for per in r["modes"]["opera"]["classes"].values():
        for v in per.values():
            v["slowdown_below_1"] = 0
    c = _checked(r)
    assert c["opera: low-latency mean slowdown <= 2 under both denominators, no loss (at 1 % load)"][0] is None
    assert c["opera: bulk within the low-load bound"][0] is None
    assert c["opera: slowdowns below 1 <= 1% (calibrated ideal)"][0] is True  # least 0.90, but none counted below 1
    r["modes"]["opera"]["classes"]["bulk"]["100KB-10MB"]["slowdown_below_1"] = 2
    ok, numbers = _checked(r)["opera: slowdowns below 1 <= 1% (calibrated ideal)"]
    assert ok is False and numbers.startswith("2 of ") and numbers.endswith("least 0.90")
    # A run from before the calibrated ideal is not judged on it.
    ok, numbers = _checked(dict(r, calibration={}))["opera: slowdowns below 1 <= 1% (calibrated ideal)"]
    assert ok is None and "not judged" in numbers
    rows = RS.checks_table([("websearch-0.01", r)])
    assert rows[0].startswith("| run | workload | load | check |") and any("**FAIL**" in x for x in rows)
    assert all(x.startswith("| websearch-0.01 | websearch | 0.1 | ") for x in rows[2:])


def test_the_low_load_bound_is_judged_on_the_flows_alone_in_the_fabric():
    """The bound is one flow's at its host's whole access rate: at 1 % load a run is judged on its
    bulk flows that had the fabric to themselves, every flow shown beside; not judged when none
    had; a run from before the split is judged on every flow."""
    r = dict(_fct_result(), workload="datamining", load=0.01)
    bb = {"flows": 141, "within": 122, "worst_ratio": 1.64, "median_ratio": 0.69,
          "alone_in_fabric": {"flows": 86, "within": 86, "worst_ratio": 0.97, "median_ratio": 0.66}}
    r["modes"]["opera"]["bulk_bound"] = bb
    ok, numbers = _checked(r)["opera: bulk within the low-load bound"]
    assert ok is True and numbers.startswith("alone in the fabric (judged: the bound is one flow's) 86/86")
    assert "shown, not judged: every flow 122/141" in numbers
    bb["alone_in_fabric"].update(within=85, worst_ratio=1.04)
    assert _checked(r)["opera: bulk within the low-load bound"][0] is False
    bb["alone_in_fabric"] = {"flows": 0, "within": 0, "worst_ratio": None, "median_ratio": None}
    ok, numbers = _checked(r)["opera: bulk within the low-load bound"]
    assert ok is None and numbers.startswith("no bulk flow had the fabric to itself")
    del bb["alone_in_fabric"]
    assert _checked(r)["opera: bulk within the low-load bound"][0] is False  # every flow, 122/141
    r["load"] = 0.1
    assert _checked(r)["opera: bulk within the low-load bound"][0] is None


@pytest.mark.parametrize("stability, stable, verdict", [
    ({"capacity": {"stable": True}, "why": "within RotorLB's capacity: ..."}, True, True),
    ({"capacity": {"stable": False}, "why": "past RotorLB's capacity: ..."}, False, None),  # a finding
    ({"capacity": {"stable": True}, "why": "the fabric falls behind RotorLB: ..."}, False, False),
    ({"why": "no bulk flows: nothing queued at the agents"}, True, True),
    ({"rise_bytes": 5.0}, True, True),  # a result from before the model's check: the trend
])
def test_checks_pending_bytes_by_the_models_verdict(stability, stable, verdict):
    r = dict(_fct_result(), workload="datamining", load=0.1)
    r["modes"]["opera"].update(stable=stable, stability=stability)
    ok, numbers = _checked(r)["opera: pending bytes flat"]
    assert ok is verdict and (numbers == stability.get("why") or "trend 5 B" in numbers)


def test_pending_bytes_numbers_say_the_bulk_offered_against_the_agents_ceiling():
    """Two hosts (1 rack of 2), 30 MB of bulk over 10 s: 12 Mb/s a host, against every circuit's
    agent rate (40 Mb/s of frames) for 0.5 of a slot, of 1368 of each 1442 wire bytes."""
    r = dict(_fct_result(), workload="datamining", load=0.4, access_mbps=50.0, agent_rate=880.0, hosts_per_rack=2,
             calibration={"fabric": {"fingerprint": {"racks": 1}}})
    m = r["modes"]["opera"]
    m.update(stable=False, stability={"capacity": {"stable": False}, "why": "past RotorLB's capacity"},
             arrivals_s=10.0, bulk_bound={"flows": 0, "bulk_mbps": 40.0, "duty": 0.5},
             per_flow=[[0, "bulk", ">10MB", 1.0, 20_000_000], [1, "bulk", ">10MB", None, 10_000_000],
                       [2, "low-latency", "<100KB", 0.01, 1460]])
    ok, numbers = _checked(r)["opera: pending bytes flat"]
    ceiling = 40.0 * 0.5 * 1368 / 1442
    assert ok is None and numbers == (
        f"past RotorLB's capacity; capacity: bulk offered 12.00 Mb/s a host (0.240 of the access rate), the "
        f"agents' ceiling {ceiling:.2f} Mb/s ({ceiling / 50:.3f}: every circuit at 880 frames/s for 0.50 of a "
        f"slot), offered/ceiling {12 / ceiling:.2f} before RotorLB's relays")


def test_table_rejudges_older_runs_by_their_flow_list(tmp_path, capsys):
    """An fct.json from before sizes and arrivals were kept: the flows.json beside it gives the
    one-packet flows and the last arrival (pending bytes that climb while flows arrive and fall
    in the drain are unstable)."""
    r = dict(_fct_result(), workload="websearch", load=0.1)
    r["modes"]["rotornet"]["pending_bytes"] = [[t, 1000.0 * t if t <= 10 else 1000.0 * (20 - t)] for t in range(21)]
    r["modes"]["rotornet"]["stable"] = True
    (tmp_path / "fct.json").write_text(json.dumps(r))
    _write_list(tmp_path / "flows.json", [Flow(i, "a", "b", 100, float(min(i, 10))) for i in range(19)]
                + [Flow(100 + i, "a", "b", 10**6, 1.0) for i in range(4)])
    assert main(["workload", "table", str(tmp_path / "fct.json")]) == 0
    out = capsys.readouterr().out
    assert "| rotornet | all | 0 | **unstable**" in out
    assert "rotornet one-packet flows >= 10x opera's | " in out


def test_low_latency_loss_is_judged_on_retransmitted_segments():
    """A lost segment costs TCP a timeout and the flow still finishes: "no loss" at 1 % load needs
    zero segments lost, when the run logged them -- resent, less those the receiver reported as
    duplicates (a tail-loss probe resends the last segment whether or not it was lost)."""
    def run(retrans, dsack=None, done_ns=None):
        dsack = dsack or [None] * len(retrans)
        done_ns = done_ns or [4_000_000] * len(retrans)
        done = [F.Done(Flow(i, "a", "b", 1000, 0.0), "low-latency", 0, done_ns[i], alone_s=0.004, extra_s=0.0,
                       retrans=retrans[i], dsack=dsack[i]) for i in range(len(retrans))]
        return {"load": 0.01, "flows": len(done), "modes": {"opera": {
            "classes": F.summarize(done, 5e6, 1.0), "unfinished": 0, "stable": True}}}

    def verdict(r):
        return next((ok, nums) for name, ok, nums in checks(r) if name.startswith("opera: low-latency"))

    ok, nums = verdict(run([0, 0, 0]))
    assert ok is True and "0 segments lost in 0 flows (0 resent" in nums
    ok, nums = verdict(run([0, 2, 1]))
    assert ok is False and "3 segments lost in 2 flows" in nums
    ok, nums = verdict(run([0, 1, 1], dsack=[0, 1, 1]))  # two probes, both copies of what arrived
    assert ok is True and "0 segments lost in 0 flows (2 resent, 2 of them reported as duplicates)" in nums
    assert "0 flows waited for a retransmission timeout" in nums
    # A resend that took a timeout (FCT 4 ms alone, 200 ms here) yet proved a duplicate: a lost ACK
    # or data held past the timeout -- shown beside the fabric's drops, not judged as loss.
    ok, nums = verdict(run([0] * 59 + [1], dsack=[0] * 59 + [1], done_ns=[4_000_000] * 59 + [204_000_000]))
    assert ok is True and "0 segments lost" in nums and "1 flows waited for a retransmission timeout" in nums
    ok, nums = verdict(run([0, 2, 1], dsack=[0, 1, None]))  # no report: counted as lost
    assert ok is False and "2 segments lost in 2 flows" in nums
    ok, nums = verdict(run([None, None, None]))  # an older run: judged on unfinished flows only, and says so
    assert ok is True and "not logged" in nums
    # An older fct.json (resent logged, no DSACKs): every resent segment counts as lost.
    old = run([0, 1, 0])
    for v in old["modes"]["opera"]["classes"]["low-latency"].values():
        v.pop("segments_lost"), v.pop("duplicates_reported"), v.pop("flows_losing")
        v["flows_retransmitting"] = 1
    assert verdict(old)[0] is False


def test_fabric_drops_during_a_run_are_the_counters_difference_and_shown_in_the_loss_check():
    from p4rotor.experiments.fct.mode import drop_delta

    before = {"rotor0": {"NIGHT": 3, "STALE": 0}, "tor1": {"NO_ROUTE": 2}}
    after = {"rotor0": {"NIGHT": 5, "STALE": 0}, "tor1": {"NO_ROUTE": 2}, "tor2": {"STALE": 1}}
    assert drop_delta(before, after) == {"total": {"NIGHT": 2, "STALE": 1},
                                         "by_switch": {"rotor0": {"NIGHT": 2}, "tor2": {"STALE": 1}}}
    done = [F.Done(Flow(0, "a", "b", 1000, 0.0), "low-latency", 0, 4_000_000, alone_s=0.004, extra_s=0.0,
                   retrans=0, dsack=0)]
    res = {"load": 0.01, "flows": 1, "modes": {"opera": {
        "classes": F.summarize(done, 5e6, 1.0), "unfinished": 0, "stable": True,
        "switch_drops": {"total": {}, "by_switch": {}, "kernel": {}}}}}
    [(ok, nums)] = [(ok, nums) for name, ok, nums in checks(res) if name.startswith("opera: low-latency")]
    assert ok is True and nums.endswith("; the fabric dropped nothing")
    res["modes"]["opera"]["switch_drops"] = drop_delta(before, after) | {"kernel": {"h0:eth0 rx": 4}}
    [nums] = [nums for name, ok, nums in checks(res) if name.startswith("opera: low-latency")]
    assert nums.endswith("; the fabric dropped NIGHT 2, STALE 1, the kernel 4 on the links")


def test_bulk_is_also_judged_against_rotorlb_alone():
    """``rotorlb_alone``: each bulk flow's FCT alone in the model, as the agents run the fabric
    (one plane per host) and with the rack's hosts sharing its circuits; the check counts who meets
    the issue's bound either way and how far the measured FCT is from the model's."""
    from p4rotor.workload.plane import rotorlb_alone, stability_plane

    sched, plane = stability_plane(100.0, 2)
    alone = rotorlb_alone(sched, plane, 2)
    hosts = sorted(plane.where)
    a, b = next((x, y) for x in hosts for y in hosts if plane.where[x][0] == 0 and plane.where[y][0] == 1)
    big = Flow(0, a, b, 100 * plane.unit_bytes, 0.0)
    planes_s, rack_s, frames_bound_s = alone(big)
    assert rack_s < planes_s  # the host's link, not the plane's 3.5 uplinks, is the bottleneck
    assert frames_bound_s == pytest.approx((100 / 4 + 3) * plane.slot_s)
    assert alone(big) == (planes_s, rack_s, frames_bound_s)  # memoised
    bps, duty, wait = 4 * 100 * 1442 * 8, 0.5, 0.3
    d = F.Done(big, "bulk", 0, int((planes_s + 0.05) * 1e9))
    res = B.bulk_bound_check([d], bps, duty, wait, model=alone, slot_s=plane.slot_s)["rotorlb_alone"]
    assert res["model_within"] == 0 and res["rack_shared_within"] == res["rack_shared_within_frames"] == 1
    assert res["excess_slots_median"] == pytest.approx(0.5) and res["within_one_slot"] == 1
    assert res["median_ratio"] == pytest.approx((planes_s + 0.05) / planes_s)
    assert res["per_flow"] == [[0, big.size, pytest.approx(planes_s + 0.05), round(planes_s, 6), round(rack_s, 6),
                                round(B.bulk_bound_s(big.size, bps, duty, wait), 6)]]
    assert res["compared_with"] == "plane_per_host"
    # A run made with --share-circuits is compared with the model as it ran: the rack's hosts sharing.
    shared = B.bulk_bound_check([d], bps, duty, wait, model=alone, slot_s=plane.slot_s, shared=True)["rotorlb_alone"]
    assert shared["compared_with"] == "rack_shared"
    assert shared["median_ratio"] == pytest.approx((planes_s + 0.05) / rack_s)
    assert shared["excess_slots_median"] == pytest.approx((planes_s + 0.05 - rack_s) / plane.slot_s)


def test_above_bound_keeps_the_slow_bulk_flows_and_how_they_went():
    """The bulk flows above the bound, worst first, with whether another bulk flow ran meanwhile
    and what the agents said of each (``bulk_paths``); flows within it and unfinished ones are
    not kept."""
    bps, duty, wait = 1e6, 0.5, 0.3
    b = B.bulk_bound_s(100_000, bps, duty, wait)

    def done(i, start_s, fct_s, cls="bulk"):
        f = Flow(i, f"h{i}x0", "h9x0", 100_000, start_s)
        return F.Done(f, cls, int(start_s * 1e9), None if fct_s is None else int((start_s + fct_s) * 1e9))

    runs = [done(0, 0.0, 1.1 * b), done(1, 0.5, 0.9 * b), done(2, 100.0, 1.3 * b), done(3, 200.0, None),
            done(4, 300.0, 5 * b, "low-latency")]
    paths = {2: {"resent": 0, "relayed": 40, "worst_relay_slots": 12}}
    above = B.above_bound(runs, paths, bulk_bps=bps, duty=duty, wait_s=wait, model=None, slot_s=0.025)
    assert [a["id"] for a in above] == [2, 0]
    assert above[0]["ratio"] == pytest.approx(1.3, abs=1e-3) and above[0]["worst_relay_slots"] == 12
    assert above[0]["beside_another"] is False  # flow 3, unfinished, started after it ended
    assert above[1]["beside_another"] is True and "relayed" not in above[1]


def _mode_run(d, mode, fct_s, flows, **top):
    from p4rotor.workload import flowlist

    d.mkdir()
    flowlist.write(d / "flows.json", flows, {"workload": "datamining", "load": 0.01})
    r = {"workload": "datamining", "load": 0.01, "flows": len(flows), "hosts_per_rack": 2, "access_mbps": 5.768,
         "dilation": 100.0, "scaling_factor": 0.05768, "default_cutoff_bytes": 144200.0,
         "alone_one_packet_s": {"floor": 0.002, "from": str(d)}, "verdict": "x",
         "modes": {mode: {"cutoff_bytes": 0.0 if mode == "rotornet" else 144200.0, "unfinished": 0,
                          "per_flow": [[f.id, "bulk" if mode == "rotornet" else "low-latency", "<100KB", fct_s,
                                        f.size] for f in flows]}}}
    r.update(top)
    (d / "fct.json").write_text(json.dumps(r))
    return d


def test_merge_puts_each_sessions_mode_in_one_result(tmp_path, capsys):
    flows = [Flow(i, "h0x0", "h1x0", 1460, i * 0.5) for i in range(12)]
    a = _mode_run(tmp_path / "a", "opera", 0.004, flows)
    b = _mode_run(tmp_path / "b", "rotornet", 0.150, flows)
    (a / "run.json").write_text(json.dumps({"command": "p4rotor experiment fct A", "wall_s": 60.0}))
    (a / "activity-opera.json").write_text("{}")
    (a / "fct.png").write_bytes(b"png")
    assert main(["workload", "merge", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    assert "opera from" in capsys.readouterr().out
    r = json.loads((tmp_path / "ab" / "fct.json").read_text())
    assert sorted(r["modes"]) == ["opera", "rotornet"] and r["flows"] == 12 and "verdict" not in r
    # What each run measured of its own fabric stays with it, not at the top.
    assert "alone_one_packet_s" not in r
    assert r["merged_from"][str(b)]["alone_one_packet_s"]["from"] == str(b)
    assert (tmp_path / "ab" / "flows.json").read_text() == (a / "flows.json").read_text()
    # How the folder was made: both sources' run.json (one had none), a mode's activity, its plots.
    assert json.loads((tmp_path / "ab" / "run.json").read_text())["merged_from"] == [
        {"run": str(a), "modes": ["opera"], "run_json": {"command": "p4rotor experiment fct A", "wall_s": 60.0}},
        {"run": str(b), "modes": ["rotornet"], "run_json": None}]
    assert (tmp_path / "ab" / "activity-opera.json").read_text() == "{}"
    assert (tmp_path / "ab" / "fct-opera.png").read_bytes() == b"png"
    assert not (tmp_path / "ab" / "fct-rotornet.png").exists()
    # The cross-mode check now has both modes: 150 ms against 4 ms.
    rn = [c for c in checks(r) if c[0].startswith("rotornet one-packet")]
    assert rn and rn[0][1] is True


def test_merge_takes_some_modes_of_a_merged_point_to_replace_one_run_again(tmp_path, capsys):
    """A point merged from two sessions, its opera run again: ``POINT:rotornet,packet-switch``
    takes the other modes, with the run that made them (its calibration, run.json, plots); the
    old opera is gone.  A mode the run lacks, or no mode after the colon: one line, exit 2."""
    flows = [Flow(i, "h0x0", "h1x0", 1460, i * 0.5) for i in range(12)]
    a = _mode_run(tmp_path / "a", "opera", 0.004, flows, calibration={"fabric": {"base_s": {"1-1": 0.001}}})
    b = _mode_run(tmp_path / "b", "rotornet", 0.150, flows, calibration={"fabric": {"base_s": {"1-1": 0.002}}})
    (a / "run.json").write_text(json.dumps({"command": "A", "wall_s": 60.0, "code_commit": "c1"}))
    (b / "run.json").write_text(json.dumps({"command": "B", "wall_s": 90.0, "code_commit": "c1"}))
    (b / "paths.png").write_bytes(b"rn")
    assert main(["workload", "merge", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    new = _mode_run(tmp_path / "new", "opera", 0.003, flows, calibration={"fabric": {"base_s": {"1-1": 0.0005}}})
    (new / "run.json").write_text(json.dumps({"command": "N", "wall_s": 30.0, "code_commit": "c2"}))
    capsys.readouterr()
    out = tmp_path / "point"
    assert main(["workload", "merge", str(new), f"{tmp_path / 'ab'}:rotornet", "-o", str(out)]) == 0
    r = json.loads((out / "fct.json").read_text())
    assert sorted(r["modes"]) == ["opera", "rotornet"]
    assert r["modes"]["opera"]["per_flow"][0][3] == 0.003  # the new run's
    assert r["modes"]["opera"]["calibration"]["base_s"]["1-1"] == 0.0005
    assert r["modes"]["rotornet"]["calibration"]["base_s"]["1-1"] == 0.002
    assert sorted(r["merged_from"]) == sorted([str(new), str(b)])  # the run that made rotornet, not the merge
    run = json.loads((out / "run.json").read_text())
    assert [(m["run"], m["modes"], m["run_json"]["command"]) for m in run["merged_from"]] == [
        (str(new), ["opera"], "N"), (str(b), ["rotornet"], "B")]
    assert run["wall_s"] == 120.0 and run["code_commit"] is None  # two commits: no one commit
    assert (out / "paths-rotornet.png").read_bytes() == b"rn"
    for bad, msg in ((f"{tmp_path / 'ab'}:packet-switch", "has no mode packet-switch"), (f"{tmp_path / 'ab'}:", "no mode after")):
        with pytest.raises(SystemExit) as ex:
            main(["workload", "merge", str(new), bad, "-o", str(tmp_path / "bad")])
        assert ex.value.code == 2 and msg in capsys.readouterr().err
        assert not (tmp_path / "bad").exists()


def test_merge_keeps_each_sources_calibration_with_its_modes_and_the_checks_judge_them(tmp_path, capsys):
    """Two sessions each calibrated their own idle fabric: a merged point's modes keep the one
    they were divided by (and where it was measured), so below-1 is still judged per mode."""
    flows = [Flow(i, "h0x0", "h1x0", 1460, i * 0.5) for i in range(12)]
    cal = {"fabric": {"base_s": {"1-1": 0.001}, "held_out": {"all": {"flows": 10, "below_1": 1}}, "fingerprint": {}}}
    cal_b = {"fabric": {"base_s": {"1-1": 0.002}, "held_out": {"all": {"flows": 20, "below_1": 0}}, "fingerprint": {}}}
    a = _mode_run(tmp_path / "a", "opera", 0.004, flows, calibration=cal)
    b = _mode_run(tmp_path / "b", "rotornet", 0.150, flows, calibration=cal_b,
                  calibration_machine={"same_boot": False}, calibration_file="x/calibration.json")
    for d in (a, b):  # a class summary, as a run writes it, for the below-1 check
        r = json.loads((d / "fct.json").read_text())
        for m in r["modes"].values():
            m["classes"] = {"low-latency": {"<100KB": {"flows": 12, "unfinished": 0, "slowdown_min": 1.2,
                                                       "slowdown_below_1": 0, "slowdown_mean": 1.5}}}
        (d / "fct.json").write_text(json.dumps(r))
    assert main(["workload", "merge", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    capsys.readouterr()
    r = json.loads((tmp_path / "ab" / "fct.json").read_text())
    assert "calibration" not in r and "calibration_machine" not in r
    assert r["modes"]["opera"]["calibration"] == cal["fabric"] and r["modes"]["rotornet"]["calibration"] == cal_b["fabric"]
    below = {c[0].split(":")[0]: c for c in checks(r) if "below 1" in c[0]}
    assert below["opera"][1] is True and "held out of the calibration: 1 of 10" in below["opera"][2]
    assert below["rotornet"][1] is True and "0 of 20" in below["rotornet"][2]
    assert "another boot" in below["rotornet"][2] and "another boot" not in below["opera"][2]


@pytest.mark.parametrize("case, needle", [
    ("other list", "not runs of one flow list"),
    ("same mode", "mode 'opera' is also in"),
    ("other load", "load is 0.1"),
    ("output used", "exists and is not an empty directory"),
    ("no fct.json", "no fct.json"),
])
def test_merge_bad_input_one_line_exit2_nothing_written(tmp_path, capsys, case, needle):
    flows = [Flow(i, "h0x0", "h1x0", 1460, i * 0.5) for i in range(4)]
    a = _mode_run(tmp_path / "a", "opera", 0.004, flows)
    other = flows[:3] if case == "other list" else flows
    b = _mode_run(tmp_path / "b", "opera" if case == "same mode" else "rotornet", 0.15, other,
                  **({"load": 0.1} if case == "other load" else {}))
    if case == "no fct.json":
        (b / "fct.json").unlink()
    out = tmp_path / "ab"
    if case == "output used":
        out.mkdir()
        (out / "x").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["workload", "merge", str(a), str(b), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and needle in err and "\n" not in err, err
    assert not (out / "fct.json").exists()


def test_a_calibration_from_another_boot_is_said_beside_the_below_1_share(tmp_path):
    """The idle fabric's speed differs between boots and machines: a run says when the calibration
    it divided by was measured elsewhere, and a file that does not record it says so too."""
    import json as _json

    from p4rotor.experiments.fct.denominators import calibration_machine, machine

    here = machine()
    assert here["boot_id"] and here["cpus"] >= 1
    f = tmp_path / "calibration.json"
    f.write_text(_json.dumps({"fabric": {"measured": {"machine": here}}}))
    assert calibration_machine(str(f))["same_boot"] is True
    f.write_text(_json.dumps({"fabric": {"measured": {"machine": dict(here, boot_id="another")}}}))
    assert calibration_machine(str(f))["same_boot"] is False
    f.write_text(_json.dumps({"fabric": {"measured": {"commit": "x"}}}))
    assert calibration_machine(str(f))["same_boot"] is None and calibration_machine(None)["same_boot"] is None
    r = dict(_fct_result(), workload="datamining", load=0.4, calibration_file=str(f))
    below = next(k for k in _checked(r) if "below 1" in k)
    for same, says in ((True, None), (False, "measured on another boot or machine"),
                       (None, "does not say on which machine")):
        r["calibration_machine"] = {"same_boot": same}
        numbers = _checked(r)[below][1]
        assert (says in numbers) if says else ("machine" not in numbers and "boot" not in numbers)


def test_a_fabric_that_left_its_schedule_fails_its_check():
    """Frames looping (HOP_LIMIT) or many caught by a rotor's night (a switch clock off the
    schedule's grid) fail the mode's schedule check; a few night drops pass; the packet switch
    and runs without the counters are not judged."""
    def run(**modes):
        return {"flows": 10000, "load": 0.25, "modes": modes}

    def kept(r, mode):
        got = [c for c in checks(r) if c[0].startswith(f"{mode}: the fabric kept its schedule")]
        return got[0][1:] if got else None

    healthy = {"switch_drops": {"total": {"NIGHT": 32, "NO_ROUTE": 46298}, "by_switch": {"rotor2": {"NIGHT": 15}}}}
    off_grid = {"switch_drops": {"total": {"NIGHT": 212517, "HOP_LIMIT": 12388},
                                 "by_switch": {"rotor1": {"NIGHT": 212491}, "tor2": {"HOP_LIMIT": 12388}}}}
    looped = {"switch_drops": {"total": {"HOP_LIMIT": 1}, "by_switch": {"tor0": {"HOP_LIMIT": 1}}}}
    ok, why = kept(run(opera=healthy), "opera")
    assert ok is True and "most at rotor2: 15" in why
    ok, why = kept(run(opera=off_grid), "opera")
    assert ok is False and "NIGHT 212517" in why and "rotor1: 212491" in why and "HOP_LIMIT 12388" in why
    assert kept(run(rotornet=looped), "rotornet")[0] is False
    assert kept(run(opera={"switch_drops": {"total": {}, "by_switch": {}}}), "opera")[0] is True  # nothing dropped
    assert kept(run(**{"packet-switch": looped}), "packet-switch") is None
    assert kept(run(opera={}), "opera") is None
