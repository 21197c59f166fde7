"""FCT analysis (workload/fct.py), the short-flow process (host/flows.py) over loopback, and the
fct experiment's bad input (refused before any switch starts)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from p4rotor.cli import main
from p4rotor.host.flows import Flows
from p4rotor.workload import fct as F
from p4rotor.workload.generate import Flow, wire_bytes


def _done(size, fct_s, cls="bulk", start=0):
    return F.Done(Flow(0, "a", "b", size, 0.0), cls, start, None if fct_s is None else start + int(fct_s * 1e9))


def test_ideal_is_wire_bytes_at_the_access_rate():
    assert F.ideal_fct_s(1460, 8e6) == pytest.approx(8 * (1460 + 54) / 8e6)
    assert F.ideal_fct_s(1, 8e6) == pytest.approx(8 * 55 / 8e6)  # one packet at least


def test_buckets_are_in_real_system_bytes():
    assert F.bucket_of(50_000, 1.0) == "<100KB"
    assert F.bucket_of(50_000, 0.01) == "100KB-10MB"   # 5 MB in the real system
    assert F.bucket_of(200_000, 0.01) == ">10MB"


def test_summary_counts_unfinished_and_slowdown():
    access = 8e6
    ideal = F.ideal_fct_s(10_000, access)
    done = [_done(10_000, 2 * ideal), _done(10_000, 4 * ideal), _done(10_000, None),
            _done(500, 3 * F.ideal_fct_s(500, access), cls="low-latency")]
    s = F.summarize(done, access, 1.0)
    b = s["bulk"]["<100KB"]
    assert b["flows"] == 3 and b["unfinished"] == 1
    assert b["slowdown_mean"] == pytest.approx(3.0)
    assert b["slowdown_min"] == pytest.approx(2.0) and b["slowdown_below_1"] == 0
    assert b["slowdown_p50"] in (pytest.approx(2.0), pytest.approx(4.0))  # nearest rank
    assert s["low-latency"]["<100KB"]["slowdown_mean"] == pytest.approx(3.0)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_short_flows_over_loopback_complete_and_log(tmp_path):
    """Sender and receiver in one process on 127.0.0.1: every flow's bytes arrive, the receiver
    logs done_ns after the start, the sender logs the answer; a refused connection is an error."""
    now = time.time_ns()
    flows = [{"id": i, "dst": "127.0.0.1", "size": s, "start_ns": now + 100_000_000 + i * 10_000_000}
             for i, s in enumerate([1, 1460, 100_000, 2_000_000])]
    runner = Flows(flows, port=_free_port(), dscp=46, rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=now + 3_000_000_000)

    async def go():
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        deadline = time.monotonic() + 10
        while len((tmp_path / "tx.jsonl").read_text().splitlines()) < len(flows) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(go())
    rx = {r["id"]: r for r in map(json.loads, (tmp_path / "rx.jsonl").read_text().splitlines())}
    tx = {r["id"]: r for r in map(json.loads, (tmp_path / "tx.jsonl").read_text().splitlines())}
    assert set(rx) == set(tx) == {0, 1, 2, 3}
    for f in flows:
        assert rx[f["id"]]["bytes"] == f["size"]
        assert rx[f["id"]]["done_ns"] >= f["start_ns"]
        # the kernel's stamp of the last byte's arrival: after the start, not after the read
        assert f["start_ns"] <= rx[f["id"]]["rx_ns"] <= rx[f["id"]]["done_ns"]
        assert tx[f["id"]]["error"] is None and tx[f["id"]]["ack_ns"] >= rx[f["id"]]["done_ns"]
        assert tx[f["id"]]["retrans"] == 0 and rx[f["id"]]["retrans"] == 0  # TCP_INFO read: nothing lost here
        assert tx[f["id"]]["dsack"] == 0

    refused = Flows([{"id": 9, "dst": "127.0.0.1", "size": 10, "start_ns": time.time_ns()}], port=_free_port(),
                    rx_log=tmp_path / "rx2.jsonl", tx_log=tmp_path / "tx2.jsonl", end_ns=time.time_ns() + 10**9)
    asyncio.run(refused._send_one({"id": 9, "dst": "127.0.0.1", "size": 10, "start_ns": 0}))
    refused.tx.close()
    refused.rx.close()
    rec = json.loads((tmp_path / "tx2.jsonl").read_text())
    assert rec["error"] and rec["ack_ns"] is None  # unfinished, and says why


def test_a_flows_arrival_is_the_kernels_stamp_not_when_the_receiver_got_a_cpu(tmp_path):
    """FCT ends when the last byte reached the receiving host (rx_ns, SO_TIMESTAMPNS), not when
    the receiver's process read it: a receiver busy for 0.3 s still logs the arrival."""
    import socket

    from p4rotor.host.flows import HEADER, arrival_ns

    runner = Flows([], port=_free_port(), dscp=46, rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=0)

    async def go():
        lst = runner.listener()
        c = socket.create_connection(("127.0.0.1", runner.port), timeout=5)
        conn, _ = await asyncio.get_running_loop().sock_accept(lst)
        c.sendall(HEADER.pack(7, 1000) + bytes(1000))
        sent = time.time_ns()
        time.sleep(0.3)  # the receiver is busy: the bytes wait in its socket
        serve = asyncio.create_task(runner._serve_one(conn))
        c.setblocking(False)
        assert await asyncio.get_running_loop().sock_recv(c, 1) == b"\x01"  # the answer
        # The sender's FIN only now: sent earlier it would merge into the data's buffer, and
        # the kernel stamps a merged buffer with its last segment's arrival.
        c.shutdown(socket.SHUT_WR)
        await serve
        c.close()
        lst.close()
        return sent

    sent = asyncio.run(go())
    runner.rx.close()
    runner.tx.close()
    rec = json.loads((tmp_path / "rx.jsonl").read_text())
    assert rec["id"] == 7 and rec["bytes"] == 1000
    assert rec["rx_ns"] - sent < 50_000_000 and rec["done_ns"] - sent >= 300_000_000
    assert arrival_ns(rec) == rec["rx_ns"]
    assert arrival_ns({"done_ns": 5}) == 5 and arrival_ns({"rx_ns": None, "done_ns": 5}) == 5  # older logs


def test_the_receivers_side_of_a_flow_rides_the_flows_class(tmp_path):
    """The listening socket carries the DSCP, and Linux hands it to every accepted connection:
    the SYN-ACK, the ACKs and the answer ride the low-latency class like the data (unmarked, they
    rode bulk, and a lost SYN-ACK cost TCP's 1 s initial timeout)."""
    import socket

    runner = Flows([], port=_free_port(), dscp=46, rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=0)
    lst = runner.listener()
    try:
        assert lst.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 46 << 2
        with socket.create_connection(("127.0.0.1", runner.port), timeout=5):
            lst.setblocking(True)
            conn, _ = lst.accept()
            with conn:
                assert conn.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 46 << 2
    finally:
        lst.close()
        runner.rx.close()
        runner.tx.close()


@pytest.mark.parametrize("args,msg", [(["--load", "1.5"], "load must be"),
                                      (["--load", "0"], "load must be"),
                                      (["--workload", "nosuch-file.cdf"], "cannot read"),
                                      (["--cutoff", "-1"], "--cutoff"),
                                      (["--modes", "opera,ideal"], "unknown mode 'ideal'"),
                                      (["--modes", "opera,opera"], "at most once"),
                                      (["--modes", ","], "at least one"),
                                      (["--epsilon-us", "900"], "--epsilon-us"),
                                      (["--switch-cpus", "4096"], "--switch-cpus: CPU list '4096'"),
                                      (["--switch-cpus", "one"], "is not a CPU number"),
                                      (["--warm-switches", "0"], "--warm-switches: warm period 0 ms is out of range"),
                                      (["--warm-switches", "fast"], "is not a number of ms"),
                                      (["--share-circuits", "yes"], "--share-circuits 'yes': must be")])
def test_bad_input_refused_before_anything_starts(tmp_path, capsys, args, msg):
    """Exit 2 and one line; no fabric: the build directory does not even exist."""
    with pytest.raises(SystemExit) as ex:
        main(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"),
              "--output", str(tmp_path / "out"), *args])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err
    assert not (tmp_path / "out").exists()


def test_slowdown_divides_by_the_pairs_alone_fct():
    """A flow's alone FCT is its host pair's one-packet FCT (measured) + its bytes at the access rate."""
    access = 8e6
    near = F.Done(Flow(0, "a", "b", 1000, 0.0), "low-latency", 0, 10_000_000, alone_s=0.004)
    far = F.Done(Flow(1, "a", "c", 1000, 0.0), "low-latency", 0, 10_000_000, alone_s=0.009)
    ser = F.ideal_fct_s(1000, access)
    assert near.slowdown(access) == pytest.approx(0.010 / (0.004 + ser))
    assert far.slowdown(access) == pytest.approx(0.010 / (0.009 + ser))
    assert F.Done(Flow(2, "a", "b", 1, 0.0), "bulk", 0, None).slowdown(access) is None


# ------------------------------------------------------------------ replay (issue #14)

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


def test_compare_same_list_within_noise_and_small_buckets_not_judged():
    res = F.compare(_fct_result(), _fct_result(scale=1.1))
    assert res["same"], res["differences"]
    # One flow hitting a 1 s timeout moves the mean a lot, the flow-by-flow median not at all.
    res = F.compare(_fct_result(), _fct_result(outlier=30.0))
    assert res["same"], res["differences"]
    row = next(r for r in res["rows"] if r["class"] == "low-latency")
    assert row["ratio"] == pytest.approx(1.0) and row["fct_mean_s"][1] > 1.5 * row["fct_mean_s"][0]
    judged = {(r["mode"], r["class"], r["bucket"]): r["judged"] for r in res["rows"]}
    assert judged[("opera", "bulk", "100KB-10MB")] is False   # 4 flows: shown, not judged
    assert judged[("opera", "low-latency", "<100KB")] is True


def test_compare_names_what_differs():
    res = F.compare(_fct_result(), _fct_result(scale=1.5, unfinished=2))
    assert not res["same"]
    assert "opera: 0 vs 2 unfinished" in res["differences"]
    assert "opera low-latency <100KB: median FCT ratio (flow by flow) 1.50" in res["differences"]
    assert "not one flow list" in " ".join(F.compare(_fct_result(), _fct_result(flows=21))["differences"])


def test_workload_compare_cli(tmp_path, capsys):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_fct_result()))
    b.write_text(json.dumps(_fct_result(scale=0.9)))
    c.write_text(json.dumps(_fct_result(scale=2.0)))
    assert main(["workload", "compare", str(a), str(b)]) == 0
    assert "same within noise" in capsys.readouterr().out
    assert main(["workload", "compare", str(a), str(c)]) == 1
    assert "different: " in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit) as ex:
        main(["workload", "compare", str(a), str(tmp_path / "bad.json")])
    assert ex.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_workload_table_of_a_sweep(tmp_path, capsys):
    """Several runs as one markdown table; an unstable mode says so instead of slowdowns."""
    a = dict(_fct_result(), workload="websearch", load=0.1)
    b = dict(_fct_result(), workload="datamining", load=0.4)
    b["modes"]["rotornet"].update(stable=False, stability={"rise_bytes": 123456.0})
    rows = F.table([a, b])
    assert rows[0].startswith("| workload | load |") and len(rows) == 2 + 3 + 2 + 1
    assert "| websearch | 0.1 | 20 | opera | low-latency <100KB (15) | 0 | 2.0 | 5.0 |" in rows[2]
    assert any("| datamining | 0.4 | 20 | rotornet | all | 0 | **unstable**: pending bytes climb 123456 B" in r
               for r in rows)
    pa = tmp_path / "a.json"
    pa.write_text(json.dumps(a))
    assert main(["workload", "table", str(pa)]) == 0
    assert "| websearch | 0.1 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ex:
        main(["workload", "table", str(tmp_path / "missing.json")])
    assert ex.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def _write_list(path, flows, meta=None):
    from p4rotor.workload import flowlist

    flowlist.write(path, flows, meta or {})


@pytest.mark.parametrize("flows,meta,msg", [
    ([Flow(0, "h0x0", "nobody", 100, 0.0)], {}, "host 'nobody' is not in this fabric"),
    ([Flow(0, "h0x0", "h0x0", 100, 0.0)], {}, "src and dst are the same host"),
    ([Flow(0, "h0x0", "h1x0", 100, 0.0)], {"scaling": {"factor": 123.0}}, "sizes scaled by 123"),
])
def test_a_flow_list_that_cannot_replay_here_is_refused_before_anything_starts(tmp_path, capsys, flows, meta, msg):
    _write_list(tmp_path / "flows.json", flows, meta)
    with pytest.raises(SystemExit) as ex:
        main(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"),
              "--output", str(tmp_path / "out"), "--flow-list", str(tmp_path / "flows.json")])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
    assert not (tmp_path / "out").exists()


def test_bulk_bound_is_bytes_at_the_duty_cycled_rate_plus_the_wait():
    """Issue #14: bulk FCT <= size / (rate x duty cycle) + (matchings + 1) slots at low load."""
    bps, duty, wait = 1e6, 0.5, 0.3
    assert F.bulk_bound_s(1400, bps, duty, wait) == pytest.approx(8 * 1442 / 0.5e6 + 0.3)
    assert F.bulk_bound_s(1, bps, duty, wait) == pytest.approx(8 * 43 / 0.5e6 + 0.3)  # one frame at least
    fast = F.Done(Flow(0, "a", "b", 14_000, 0.0), "bulk", 0, int(0.2e9))
    slow = F.Done(Flow(1, "a", "b", 14_000, 0.0), "bulk", 0, int(2e9))
    short = F.Done(Flow(2, "a", "b", 100, 0.0), "low-latency", 0, int(5e9))  # not bulk: not judged
    res = F.bulk_bound_check([fast, slow, short, F.Done(Flow(3, "a", "b", 1, 0.0), "bulk", 0, None)], bps, duty, wait)
    bound = F.bulk_bound_s(14_000, bps, duty, wait)
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
    res = F.bulk_bound_check(bulk, bps, duty, wait, rack_of=rack)
    assert (res["alone_at_racks"]["flows"], res["alone_at_racks"]["within"]) == (2, 1)
    assert res["contended"]["flows"] == 2
    assert "alone at their racks 1/2" in F.rack_alone_numbers(res)
    # alone in the whole fabric: flow 0 only (flow 3 overlaps the unfinished flow 5, elsewhere)
    assert (res["alone_in_fabric"]["flows"], res["alone_in_fabric"]["within"]) == (1, 1)
    assert res["beside_another"]["flows"] == 3
    assert "alone in the fabric 1/1" in F.rack_alone_numbers(res)
    assert "alone_at_racks" not in F.bulk_bound_check(bulk, bps, duty, wait)
    assert F.rack_alone_numbers({}) == ""


def test_bulk_is_also_judged_at_its_rack_pairs_rotorlb_capacity():
    """The issue's bound lets one flow use all K uplinks; RotorLB's model gives most rack pairs of
    the default Opera 8 x 4 3.5 of them (relays drain one slot per cycle each), a few 4: a flow at
    the model's rate is outside the first bound and within the second."""
    from p4rotor import schedule as S
    from p4rotor.experiments.fct import pair_shares
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
    at_model = F.bulk_bound_s(f.size, bps * 0.875, duty, wait) * 0.99
    d = F.Done(f, "bulk", 0, int(at_model * 1e9))
    res = F.bulk_bound_check([d], bps, duty, wait, share=share)
    assert res["within"] == 0 and res["pair_capacity"]["within"] == 1 and res["pair_capacity"]["shares"] == [0.875]


def test_modes_default_to_all_three_in_order():
    from p4rotor.experiments.fct import parse_modes

    assert parse_modes(None) == ("opera", "rotornet", "packet-switch")
    assert parse_modes("packet-switch, opera") == ("packet-switch", "opera")


def _checked(r):
    return {name: (ok, numbers) for name, ok, numbers in F.checks(r)}


def test_checks_judge_the_issues_criteria_on_one_run():
    """Slowdown >= 1, flat pending bytes, and at 1 % load the low-latency mean <= 2 without loss
    and bulk within its bound; RotorNet's one-packet flows against Opera's (sizes <= MSS only)."""
    r = dict(_fct_result(), workload="websearch", load=0.01)
    r["modes"]["opera"]["per_flow"] = [f + [100] for f in r["modes"]["opera"]["per_flow"]]
    r["modes"]["rotornet"]["per_flow"] = [[i, "bulk", "<100KB", 2.0, 100] for i in range(19)]
    r["modes"]["rotornet"]["per_flow"].append([99, "bulk", "<100KB", 0.001, 50_000])  # not one packet
    r["modes"]["opera"]["bulk_bound"] = {"flows": 4, "within": 4, "worst_ratio": 0.8, "median_ratio": 0.5}
    c = _checked(r)
    assert c["opera: every slowdown >= 1"][0] is True
    assert c["opera: pending bytes flat"][0] is True
    assert c["opera: low-latency mean slowdown <= 2, no loss (at 1 % load)"][0] is True
    assert c["opera: bulk within the low-load bound"][0] is True
    ok, numbers = c["rotornet one-packet flows >= 10x opera's"]
    assert ok is True and "19 flows" in numbers  # 2.0 s vs ~0.17 s
    # At 10 % load the low-load criteria are not judged; a slowdown below 1 fails.
    r["load"] = 0.1
    r["modes"]["opera"]["classes"]["bulk"]["100KB-10MB"]["slowdown_min"] = 0.9
    c = _checked(r)
    assert c["opera: low-latency mean slowdown <= 2, no loss (at 1 % load)"][0] is None
    assert c["opera: bulk within the low-load bound"][0] is None
    assert c["opera: every slowdown >= 1"] == (False, "least 0.90")
    for per in r["modes"]["opera"]["classes"].values():  # a run that counted them says how many
        for v in per.values():
            v["slowdown_below_1"] = 0
    r["modes"]["opera"]["classes"]["bulk"]["100KB-10MB"]["slowdown_below_1"] = 2
    ok, numbers = _checked(r)["opera: every slowdown >= 1"]
    assert ok is False and numbers.startswith("least 0.90, 2 of ") and numbers.endswith(" below 1")
    rows = F.checks_table([r])
    assert rows[0].startswith("| workload | load | check |") and any("**FAIL**" in x for x in rows)


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


def test_the_bulk_bounds_duty_is_what_the_agents_send_in():
    """Whole frames per window (day less guards, less the agents' slack) over a slot's frames."""
    from p4rotor import schedule as S
    from p4rotor.experiments.fct import agent_duty

    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100)  # slot 100 ms, day 90 ms
    assert agent_duty(ds, 100, 10_000) == pytest.approx(0.5)  # 5 frames of a 70 ms window, 10 per slot
    assert agent_duty(ds, 1000, 0) == pytest.approx(0.72)    # 72 of 90 ms


def test_alone_rounds_meet_every_pair_in_another_phase_of_the_hyperperiod():
    """56 pairs 100 ms apart are 28 hyperperiods of 200 ms exactly: without the shift every
    round met each pair in the same slice."""
    from p4rotor.experiments.fct import alone_round_ns

    period = 200_000_000
    r = alone_round_ns(56, 100_000_000, 8, period)
    assert sorted((k * r) % period for k in range(8)) == [k * period // 8 for k in range(8)]
    assert alone_round_ns(56, 100_000_000, 4, None) == 5_600_000_000


def test_a_low_latency_flow_counts_from_when_its_sender_began_it(tmp_path):
    """The sender's timer fired late: the FCT starts at issued_ns (never before the plan), and
    the lag is reported; a flow without a tx record keeps its planned start."""
    from p4rotor.experiments.fct import issued_starts, start_lag

    (tmp_path / "tx-h0.jsonl").write_text(
        json.dumps({"id": 1, "start_ns": 1000, "issued_ns": 8_001_000}) + "\n"
        + json.dumps({"id": 2, "start_ns": 2000, "issued_ns": 1500}) + "\n")  # a clock a hair behind
    planned = {1: 1000, 2: 2000, 3: 3000}
    got = issued_starts(planned, tmp_path, ["h0", "h1"])
    assert got == {1: 8_001_000, 2: 2000, 3: 3000}
    lag = start_lag(planned, got)
    assert lag["max_ms"] == 8.0 and lag["flows"] == 3 and lag["p50_ms"] == 0.0


def test_switches_run_realtime_only_when_asked_and_allowed(monkeypatch):
    """``realtime``: chrt --rr execs the switch (its PID stays the switch's); not allowed, or not
    asked: nice -10 as before."""
    from p4rotor.fabric import switch as SW

    monkeypatch.setattr(SW, "realtime_allowed", lambda: True)
    cmd = SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True)
    assert cmd[:3] == ["chrt", "--rr", str(SW.SWITCH_RT_PRIORITY)] and cmd[3] == "simple_switch_grpc"
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090)[:3] == ["nice", "-n", "-10"]
    monkeypatch.setattr(SW, "realtime_allowed", lambda: False)
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True)[:3] == ["nice", "-n", "-10"]


def test_switches_pinned_to_cpus_only_when_asked(monkeypatch):
    """``cpus``: taskset execs the priority prefix, which execs the switch (the PID stays the
    switch's); without it the command is as before."""
    from p4rotor.fabric import switch as SW

    monkeypatch.setattr(SW, "realtime_allowed", lambda: True)
    cmd = SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True, cpus="1")
    assert cmd[:6] == ["taskset", "-c", "1", "chrt", "--rr", str(SW.SWITCH_RT_PRIORITY)]
    assert cmd[6] == "simple_switch_grpc"
    assert SW.bmv2_command(1, {1: "a"}, 50051, 9090, realtime=True, cpus=None)[0] == "chrt"


def test_switch_cpus_auto_none_or_a_checked_list():
    """``--switch-cpus``: auto = the upper half of this machine's CPUs, none (the default) = anywhere."""
    import os

    from p4rotor.experiments.fct import switch_cpu_choice
    from p4rotor.fabric.cpu import default_switch_cpus

    assert switch_cpu_choice("none") is None and switch_cpu_choice(None) is None
    assert switch_cpu_choice("auto") == default_switch_cpus()
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) >= 2:
        assert switch_cpu_choice(str(mine[-1])) == str(mine[-1])


def test_alone_spread_is_the_mean_over_the_fastest():
    """The emulator's own spread: one-packet flows alone, their mean over the fastest (what a flow
    alone scores on average as its slowdown against the floor)."""
    from p4rotor.experiments.fct import alone_spread

    sp = alone_spread([0.004, 0.002, 0.003, 0.003])
    assert sp["samples"] == 4 and sp["min_s"] == 0.002 and sp["mean_s"] == pytest.approx(0.003)
    assert sp["mean_over_min"] == pytest.approx(1.5) and sp["median_s"] == pytest.approx(0.003)
    assert alone_spread([]) == {"samples": 0}


def test_warm_switches_auto_on_off_or_a_checked_period():
    """``--warm-switches``: auto (the default) = on at a load of 5 % or less, off above or when the
    load is unknown (a user's own list); on = every 2 ms; off; else a period in ms."""
    from p4rotor.experiments.fct import WARM_MAX_LOAD, warm_choice
    from p4rotor.workload.cdf import WorkloadError

    assert WARM_MAX_LOAD == 0.05
    assert warm_choice("auto", 0.01) == 2.0 and warm_choice(None, 0.05) == 2.0
    assert warm_choice("auto", 0.1) is None and warm_choice("auto", None) is None
    assert warm_choice("off", 0.01) is None
    assert warm_choice("on", 0.4) == 2.0
    assert warm_choice("5", None) == 5.0 and warm_choice("0.5", 0.1) == 0.5
    for bad in ("0", "-2", "nan", "inf", "2000", "warm"):
        with pytest.raises(WorkloadError, match="--warm-switches"):
            warm_choice(bad, 0.01)


def test_share_circuits_auto_on_at_low_load_off_above():
    """``--share-circuits``: auto (the default) = the rack's hosts share its circuits at a load of
    1 % or less, a plane per host above or when the load is unknown; on (the bare flag); off."""
    from p4rotor.experiments.fct import SHARE_MAX_LOAD, share_choice
    from p4rotor.workload.cdf import WorkloadError

    assert SHARE_MAX_LOAD == 0.01
    assert share_choice("auto", 0.01) and share_choice(None, 0.01) and share_choice(True, 0.4)
    assert not share_choice("auto", 0.05) and not share_choice("auto", 0.1) and not share_choice(None, None) and not share_choice(False, 0.01)
    assert share_choice("on", 0.4) and not share_choice("off", 0.01)
    with pytest.raises(WorkloadError, match="--share-circuits"):
        share_choice("1", 0.01)


def test_the_alone_curve_is_the_fastest_measured_per_size_and_never_falls():
    """htb let 3 frames through as fast as one: a 3-frame flow's alone is its pair's one-packet
    alone plus what was measured at 3 frames, not its bytes at the access rate."""
    from p4rotor.workload.scale import MSS

    c = F.AloneCurve.from_samples([(3 * MSS, 0.004), (3 * MSS, -0.001), (10 * MSS, 0.020), (10 * MSS, 0.015),
                                   (5 * MSS, 0.010), (40 * MSS, 0.060)], access_bps=5e6)
    assert c.points == ((MSS, 0.0), (3 * MSS, 0.0), (5 * MSS, 0.010), (10 * MSS, 0.015), (40 * MSS, 0.060))
    # Between two calibrated sizes, the smaller one's (the step below), not a line over htb's steps.
    assert c.extra_s(100) == 0.0 and c.extra_s(4 * MSS) == 0.0 and c.extra_s(7 * MSS) == 0.010
    assert c.extra_s(10 * MSS) == 0.015 and c.extra_s(40 * MSS) == 0.060
    assert c.tail_bps == pytest.approx(8 * (wire_bytes(40 * MSS) - wire_bytes(10 * MSS)) / 0.045)
    assert c.extra_s(80 * MSS) == pytest.approx(0.060 + 8 * (wire_bytes(80 * MSS) - wire_bytes(40 * MSS)) / c.tail_bps)
    d = F.Done(Flow(1, "a", "b", 4 * MSS, 0.0), "low-latency", 0, 10_000_000, alone_s=0.005, extra_s=c.extra_s(6 * MSS))
    assert d.slowdown(5e6) == pytest.approx(10 / 15)
    slow = F.AloneCurve.from_samples([(10 * MSS, 0.5)], access_bps=5e6)  # slower than the access rate
    assert slow.tail_bps == 5e6, "the tail is never slower than the access rate"


def test_the_alone_curve_is_the_lower_envelope_no_sample_beats_it():
    """A smaller flow alone never takes longer than a bigger one: a 7-frame flow seen faster than
    every 5-frame one bounds the 5-frame alone too; the curve is never above a sample."""
    import random

    from p4rotor.workload.scale import MSS

    c = F.AloneCurve.from_samples([(5 * MSS, 0.012), (7 * MSS, 0.008), (10 * MSS, 0.016)], access_bps=5e6)
    assert c.points == ((MSS, 0.0), (5 * MSS, 0.008), (7 * MSS, 0.008), (10 * MSS, 0.016))
    rng = random.Random(3)
    samples = [(n * MSS, n * 0.002 + rng.uniform(-0.004, 0.02)) for n in (2, 3, 4, 5, 7, 10, 14, 20) for _ in range(8)]
    c = F.AloneCurve.from_samples(samples, access_bps=5e6)
    assert all(c.extra_s(size) <= max(0.0, extra) + 1e-12 for size, extra in samples)
    assert [e for _, e in c.points] == sorted(e for _, e in c.points)


def test_calibration_flows_meet_every_phase_of_the_hyperperiod():
    """300 ms apart at a 200 ms hyperperiod, calibration flows met 2 phases; now 16."""
    from p4rotor.experiments.fct import phase_gap_ns

    period = 200_000_000
    gap = phase_gap_ns(300_000_000, period)
    assert gap >= 300_000_000 and gap == 312_500_000
    assert len({(k * gap) % period for k in range(16)}) == 16
    for p in (200_000_000, 150_000_000, 1_100_000):
        g = phase_gap_ns(30_000_000, p)
        assert g >= 30_000_000 and len({(k * g) % p for k in range(16)}) == 16
    assert phase_gap_ns(300_000_000, None) == 300_000_000


def test_htbs_staircase_never_beats_the_step_below():
    """htb sends 5 segments as one burst, then a burst per ~8.5 ms: a straight line between 5 and 10
    calibrated segments lies above the 8-segment truth; the step below never does."""
    from p4rotor.experiments.fct import SEGMENT

    def staircase(n):  # extra s of an n-segment flow alone
        return 0.0085 * ((n - 1) // 5)

    cal = [(n * SEGMENT, staircase(n)) for n in (1, 2, 5, 10, 20)]
    c = F.AloneCurve.from_samples(cal, access_bps=5e6)
    for n in range(1, 21):
        assert c.extra_s(n * SEGMENT) <= staircase(n) + 1e-12, n


def test_alone_is_the_lower_envelope_of_every_fct_the_fabric_gave():
    """The run's own flows are measurements of the fabric too: one faster than every alone sample
    lowers the floor (and its size's alone), so no flow's slowdown is below 1; the account says
    how many flows' alone the run lowered and by how much."""
    import random

    from p4rotor.experiments.fct import SEGMENT

    rng = random.Random(7)
    cal = [(n * SEGMENT, 0.0031 + 0.0085 * ((n - 1) // 5) + rng.uniform(0, 0.003)) for n in (2, 5, 10, 20) for _ in range(4)]
    run = [(n * SEGMENT, 0.0029 + 0.0085 * ((n - 1) // 5) + rng.uniform(0, 0.01)) for n in range(1, 25) for _ in range(20)]
    floor, curve, info = F.alone_envelope(0.00305, cal, run, access_bps=5e6)
    assert floor == min(f for _, f in run) < 0.00305 and info["floor_set_by"] == "run"
    assert all(f / (floor + curve.extra_s(s)) >= 1 - 1e-9 for s, f in run)
    assert all(f / (floor + curve.extra_s(s)) >= 1 - 1e-9 for s, f in cal)
    assert info["run_flows_lowered"] > 0 and info["most_lowered_by"] > 1
    # A run slower than the alone samples changes nothing.
    slow = [(s, f + 1.0) for s, f in run]
    floor2, curve2, info2 = F.alone_envelope(0.00305, cal, slow, access_bps=5e6)
    assert floor2 == 0.00305 and info2["floor_set_by"] == "alone" and info2["run_flows_lowered"] == 0


def test_a_flow_on_the_envelope_has_slowdown_exactly_one():
    """A run flow that sets the envelope at its size is its own alone: floor + (FCT - floor) came
    back one ulp above the FCT in the 2000-flow run (5 of 538 flows "below 1", 0.9999999999999998)."""
    floor, fcts = 0.002214117, (0.029512923, 0.019673299, 0.020971724, 0.019814466)
    done = [F.Done(Flow(i, "a", "b", 20_000 + i, 0.0), "low-latency", 0, round(f * 1e9), alone_s=floor,
                   extra_s=f - floor) for i, f in enumerate(fcts)]
    assert [d.slowdown(5e6) for d in done] == [1.0] * len(done)
    per = F.summarize(done, 5e6, 1.0)["low-latency"]["<100KB"]
    assert per["slowdown_below_1"] == 0 and per["slowdown_min"] == 1.0
    # ... while a flow really faster than its alone is still below 1.
    assert F.Done(Flow(9, "a", "b", 20_000, 0.0), "low-latency", 0, 19_000_000, alone_s=floor,
                  extra_s=0.02 - floor).slowdown(5e6) == pytest.approx(0.95)


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
        return next((ok, nums) for name, ok, nums in F.checks(r) if name.startswith("opera: low-latency"))

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

def test_a_resent_syn_is_counted_by_tcp_info():
    """``tcp_info`` reads the kernel's own count: a listener whose accept queue is full drops a
    SYN, and the client's kernel sends it again after 1 s (no packet filter needed)."""
    import socket

    from p4rotor.host.flows import tcp_info

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)  # one pending connection; the SYNs of the others are dropped
    clients = []
    try:
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(listener.getsockname())
            except BlockingIOError:
                pass
            clients.append(c)
        time.sleep(1.5)
        infos = [tcp_info(c) for c in clients]
        assert infos[0]["retrans"] == 0 and infos[0]["dsack"] == 0
        assert all(i["retrans"] >= 1 for i in infos[1:]), infos
    finally:
        for c in clients + [listener]:
            c.close()
    assert tcp_info(None) == {}


def test_fabric_drops_during_a_run_are_the_counters_difference_and_shown_in_the_loss_check():
    from p4rotor.experiments.fct import drop_delta

    before = {"rotor0": {"NIGHT": 3, "STALE": 0}, "tor1": {"NO_ROUTE": 2}}
    after = {"rotor0": {"NIGHT": 5, "STALE": 0}, "tor1": {"NO_ROUTE": 2}, "tor2": {"STALE": 1}}
    assert drop_delta(before, after) == {"total": {"NIGHT": 2, "STALE": 1},
                                         "by_switch": {"rotor0": {"NIGHT": 2}, "tor2": {"STALE": 1}}}
    done = [F.Done(Flow(0, "a", "b", 1000, 0.0), "low-latency", 0, 4_000_000, alone_s=0.004, extra_s=0.0,
                   retrans=0, dsack=0)]
    res = {"load": 0.01, "flows": 1, "modes": {"opera": {
        "classes": F.summarize(done, 5e6, 1.0), "unfinished": 0, "stable": True,
        "switch_drops": {"total": {}, "by_switch": {}, "kernel": {}}}}}
    [(ok, nums)] = [(ok, nums) for name, ok, nums in F.checks(res) if name.startswith("opera: low-latency")]
    assert ok is True and nums.endswith("; the fabric dropped nothing")
    res["modes"]["opera"]["switch_drops"] = drop_delta(before, after) | {"kernel": {"h0:eth0 rx": 4}}
    [nums] = [nums for name, ok, nums in F.checks(res) if name.startswith("opera: low-latency")]
    assert nums.endswith("; the fabric dropped NIGHT 2, STALE 1, the kernel 4 on the links")


def test_the_fct_epsilon_costs_the_low_latency_class_no_path_length():
    """The fct default epsilon keeps frames further off a rotor's night at no cost in hops: at
    the default 8 x 4 every slice stays connected and the paths are those of epsilon 50."""
    from p4rotor import schedule as S
    from p4rotor.experiments.fct import EPSILON_US
    from p4rotor.schedule import routes as R

    s = S.generate_opera(8, 4, 1000, 100)

    def hops(eps):
        rs = R.compute(s, epsilon_us=eps)
        assert all(sr.ll_diameter is not None and len(sr.ll_rotors) >= 3 for sr in rs)
        return sum((sr.slice.end_us - sr.slice.start_us) * (len(h.path) - 1)
                   for sr in rs for (_, _, t), h in sr.hops.items() if t == 1)

    assert hops(EPSILON_US) == hops(50)
    with pytest.raises(AssertionError):
        hops(175)  # a slice with no low-latency path for some pair


def test_bulk_flows_whole_from_the_agents_progress(tmp_path):
    """A run ends early once every bulk flow's frames are at their destination: the agents'
    progress files, summed (a flow's frames may reach two agents of its rack over the run)."""
    import subprocess
    import sys

    from p4rotor.experiments.fct import _bulk_whole
    from p4rotor.fabric.agents import Agents

    (tmp_path / "agent-a.progress").write_text(json.dumps({"flows_rx": {"0:7": [3, 10], "1:8": [5, 20]}}))
    (tmp_path / "agent-b.progress").write_text(json.dumps({"flows_rx": {"0:7": 2}}))  # before 2026-11-26: counts
    (tmp_path / "agent-c.progress").write_text("{")  # being written: counts nothing
    idle = subprocess.Popen([sys.executable, "-c", "pass"])
    idle.wait()
    agents = Agents(tmp_path, procs=[("a", idle), ("b", idle), ("c", idle), ("d", idle)])
    got = agents.received()
    assert got == {"0:7": 5, "1:8": 5}
    assert agents.progress_of("a") == {"0:7": (3, 10), "1:8": (5, 20)} and agents.progress_of("c") == {}
    assert agents.progress_of("b") == {"0:7": (2, None)}
    assert _bulk_whole(got, {7: 5, 8: 6}) == 1
    assert _bulk_whole(got, {7: 5, 8: 5}) == 2
    assert _bulk_whole({}, {7: 1}) == 0


def test_drain_is_the_backlog_but_no_longer_than_the_arrivals_or_the_largest_flow():
    from p4rotor.experiments.fct import drain_after_arrivals

    # No bulk: ten cycles and 5 s.
    assert drain_after_arrivals([], 100.0, 0.8, 1000.0, 8) == pytest.approx(13.0)
    # A small backlog: every byte twice over one circuit per rack (2 * 8000 / 1000 / 8 = 2 s).
    assert drain_after_arrivals([4000, 4000], 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 2 + 5)
    # A large backlog after short arrivals: the arrivals' length bounds it ...
    assert drain_after_arrivals([1000] * 10_000, 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 100 + 5)
    # ... unless the largest flow alone takes longer on one circuit.
    assert drain_after_arrivals([1000] * 10_000 + [500_000], 100.0, 0.8, 1000.0, 8) == pytest.approx(8 + 500 + 5)
    # TCP flows (the packet switch carries every flow): twice the largest at the access rate.
    assert drain_after_arrivals([], 100.0, 0.8, 1000.0, 8, tcp_sizes=[10, 78_000], access_Bps=1000.0) \
        == pytest.approx(8 + 156 + 5)
    assert drain_after_arrivals([4000, 4000], 100.0, 0.8, 1000.0, 8, tcp_sizes=[3000], access_Bps=1000.0) \
        == pytest.approx(8 + 6 + 5)


def test_a_paced_sender_sends_no_faster_than_its_pace(tmp_path):
    """``pace_Bps`` (the experiment passes the access rate): the kernel paces the flow, so 3 MB at
    3 MB/s take >= 0.5 s even over loopback (unpaced: milliseconds; loopback's 64 KB segments
    let the first window out at once, hence the margin)."""
    now = time.time_ns()
    flows = [{"id": 0, "dst": "127.0.0.1", "size": 3_000_000, "start_ns": now + 50_000_000}]
    runner = Flows(flows, port=_free_port(), rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=now + 8_000_000_000, pace_Bps=3_000_000)

    async def go():
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        deadline = time.monotonic() + 5
        while not (tmp_path / "tx.jsonl").read_text() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(go())
    rx = json.loads((tmp_path / "rx.jsonl").read_text())
    tx = json.loads((tmp_path / "tx.jsonl").read_text())
    assert tx["error"] is None and rx["bytes"] == 3_000_000
    assert (rx["done_ns"] - tx["issued_ns"]) / 1e9 >= 0.5


def test_bulk_is_also_judged_against_rotorlb_alone():
    """``rotorlb_alone``: each bulk flow's FCT alone in the model, as the agents run the fabric
    (one plane per host) and with the rack's hosts sharing its circuits; the check counts who meets
    the issue's bound either way and how far the measured FCT is from the model's."""
    from p4rotor.experiments.fct import rotorlb_alone, stability_plane

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
    res = F.bulk_bound_check([d], bps, duty, wait, model=alone, slot_s=plane.slot_s)["rotorlb_alone"]
    assert res["model_within"] == 0 and res["rack_shared_within"] == res["rack_shared_within_frames"] == 1
    assert res["excess_slots_median"] == pytest.approx(0.5) and res["within_one_slot"] == 1
    assert res["median_ratio"] == pytest.approx((planes_s + 0.05) / planes_s)
    assert res["per_flow"] == [[0, big.size, pytest.approx(planes_s + 0.05), round(planes_s, 6), round(rack_s, 6),
                                round(F.bulk_bound_s(big.size, bps, duty, wait), 6)]]
    assert res["compared_with"] == "plane_per_host"
    # A run made with --share-circuits is compared with the model as it ran: the rack's hosts sharing.
    shared = F.bulk_bound_check([d], bps, duty, wait, model=alone, slot_s=plane.slot_s, shared=True)["rotorlb_alone"]
    assert shared["compared_with"] == "rack_shared"
    assert shared["median_ratio"] == pytest.approx((planes_s + 0.05) / rack_s)
    assert shared["excess_slots_median"] == pytest.approx((planes_s + 0.05 - rack_s) / plane.slot_s)


def test_bulk_plot_draws_what_the_check_kept(tmp_path):
    from p4rotor.experiments.fct import bulk_plot

    ra = {"per_flow": [[0, 200_000, 3.0, 2.9, 2.5, 2.8], [1, 900_000, 9.0, 8.8, 7.9, 8.0]]}
    assert bulk_plot({"modes": {"opera": {"bulk_bound": {"rotorlb_alone": ra}}}}, tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000
    # Runs before the check kept per-flow numbers (or with no bulk flows): nothing drawn.
    assert not bulk_plot({"modes": {"packet-switch": {}}}, tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


# --- workload merge: a point run a mode per session ---------------------------------------------

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
    assert main(["workload", "merge", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    assert "opera from" in capsys.readouterr().out
    r = json.loads((tmp_path / "ab" / "fct.json").read_text())
    assert sorted(r["modes"]) == ["opera", "rotornet"] and r["flows"] == 12 and "verdict" not in r
    # What each run measured of its own fabric stays with it, not at the top.
    assert "alone_one_packet_s" not in r
    assert r["merged_from"][str(b)]["alone_one_packet_s"]["from"] == str(b)
    assert (tmp_path / "ab" / "flows.json").read_text() == (a / "flows.json").read_text()
    # The cross-mode check now has both modes: 150 ms against 4 ms.
    rn = [c for c in F.checks(r) if c[0].startswith("rotornet one-packet")]
    assert rn and rn[0][1] is True


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


def test_a_dead_agents_whole_flows_finish_from_its_last_progress():
    """A flow its agent received whole finishes at its last frame, from the summary or, if the
    agent died before writing one, from its last progress file; a flow short of frames does not."""
    from p4rotor.experiments.fct import finished_bulk

    frames = {7: 3, 8: 5, 9: 2}
    summaries = [{"flows_rx": {"0:7": [3, 100], "1:8": [4, 200]}}]
    dead = [{"1:9": (2, 300), "1:8": (4, 250)}, {"0:9": (2, None)}]
    assert finished_bulk(summaries, dead, frames) == {7: 100, 9: 300}
    assert finished_bulk(summaries, [], frames) == {7: 100}


def test_agents_stop_shares_one_deadline_and_reports_an_agent_without_a_summary(tmp_path):
    """SIGTERMed agents get one deadline together (not a short one each, in turn); one that
    does not end by then is killed and listed in ``dead`` -- never a silent loss."""
    import signal
    import subprocess
    import sys
    import time

    from p4rotor.fabric.agents import Agents

    summary = json.dumps({"flows_rx": {}})
    well = subprocess.Popen([sys.executable, "-c",
                             "import signal, sys, time, pathlib\n"
                             "def bye(*_):\n"
                             f"    pathlib.Path(sys.argv[1]).write_text({summary!r}); sys.exit(0)\n"
                             "signal.signal(signal.SIGTERM, bye)\n"
                             "time.sleep(60)\n", str(tmp_path / "agent-well.json")], start_new_session=True)
    stuck = subprocess.Popen([sys.executable, "-c",
                              "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "time.sleep(60)\n"], start_new_session=True)
    time.sleep(0.5)  # both have set their handlers
    agents = Agents(tmp_path, procs=[("stuck", stuck), ("well", well)], where={"stuck": (0, 0), "well": (1, 0)})
    t = time.monotonic()
    got = agents.stop(timeout=1.0)
    assert time.monotonic() - t < 10
    assert [s["host"] for s in got] == ["well"]
    assert [d["host"] for d in agents.dead] == ["stuck"]
    assert agents.dead[0]["exit"] == -signal.SIGKILL


def test_path_offsets_are_each_paths_fastest_over_the_floor():
    assert F.path_offsets([("1-1", 0.0), ("2-2", 0.5e-3), ("2-2", 0.3e-3), (None, -1.0), ("3-3", -0.1)]) == \
        pytest.approx({"1-1": 0.0, "2-2": 0.3e-3, "3-3": 0.0}, abs=2e-9)


class _Keys:
    """PathKeys' interface on a table: (src rack, dst rack) -> path class, whatever the time."""

    def __init__(self, table, racks):
        self.table, self.racks = table, racks

    def __call__(self, a, b, t):
        return self.table.get((a, b))

    def of(self, d):
        return self(self.racks[d.flow.src], self.racks[d.flow.dst], d.start_ns)


def test_path_alone_is_each_paths_5th_percentile_not_its_one_luckiest_sample():
    """The fastest of hundreds is one draw from the noise's tail: 99 samples at 2-2.99 ms and one
    lucky 0.5 ms give the path an alone of 2.04 ms (the 5th), not 0.5 ms."""
    res = [("2-2", 2e-3 + i * 1e-5) for i in range(99)] + [("2-2", 0.5e-3), ("1-1", -1.0), (None, 0.0)]
    assert F.path_alone(res) == pytest.approx({"2-2": 2.04e-3, "1-1": 0.0})
    assert F.path_offsets(res)["2-2"] == pytest.approx(0.5e-3, abs=2e-9)


def test_a_flow_faster_than_its_paths_alone_is_its_own_alone_and_counted():
    """With the percentile, a few flows beat their path's alone: each is its own alone
    (slowdown exactly 1, never below) and counted; slower flows and unjudged ones are untouched."""
    fl = [F.Done(Flow(i, "a", "b", 100, 0.0), "low-latency", 0, int(t * 1e9), 0.0, 0.0)
          for i, t in enumerate((0.001, 0.004, 0.008))] + [F.Done(Flow(9, "a", "b", 10**6, 0.0), "bulk", 0, None)]
    out, lowered = F.with_path_alone(fl, 0.002, {"k": 0.002}, lambda d: "k", lambda d: d.cls == "low-latency")
    assert lowered == 1
    assert [d.slowdown(1e6) for d in out[:3]] == pytest.approx([1.0, 1.0, 2.0])
    assert out[0].slowdown(1e6) >= 1 and out[3] == fl[3]


def test_a_one_packet_flow_is_judged_against_the_alone_on_its_own_path():
    """Seed 001 §5.4's OPT(i): the flow alone in the network, which for Opera is on the path of
    the slice it starts in.  Racks 0-1 direct, 0-2 three hops: a 3-hop flow is no longer judged
    against the direct pair's alone; a run flow faster than the alone ones counts in its path's
    alone (no slowdown below 1); larger flows keep the size curve.  With two to four flows a
    path, its 5th percentile is its fastest."""
    from p4rotor.experiments.fct import alone_by_path, one_packet

    racks = {"a": 0, "b": 1, "c": 2}
    keys = _Keys({(0, 1): "1-1", (0, 2): "3-3"}, racks)
    floor = 0.002
    samples = [(0, 1, 0, 0.002), (0, 1, 0, 0.003), (0, 2, 0, 0.005), (0, 2, 0, 0.006)]
    done = [F.Done(Flow(1, "a", "b", 100, 0.0), "low-latency", 0, int(0.004e9), floor, 0.0),
            F.Done(Flow(2, "a", "c", 100, 0.0), "low-latency", 0, int(0.0045e9), floor, 0.0),  # beats alone
            F.Done(Flow(3, "a", "c", 100, 0.0), "low-latency", 0, int(0.009e9), floor, 0.0),
            F.Done(Flow(4, "a", "c", 50_000, 0.0), "low-latency", 0, int(0.05e9), floor, 0.01),
            F.Done(Flow(5, "a", "c", 50_000, 0.0), "bulk", 0, int(2e9))]
    offsets, info = alone_by_path(done, floor, samples, keys)
    assert offsets == pytest.approx({"1-1": 0.0, "3-3": 0.0025}, abs=2e-9)
    assert info["3-3"]["alone_s"] == info["3-3"]["fastest_s"] == pytest.approx(floor + 0.0025)
    assert {k: v for k, v in info["3-3"].items() if not k.endswith("fct_s") and k not in ("alone_s", "fastest_s")} == \
        {"offset_s": offsets["3-3"], "percentile": 5.0, "alone_samples": 2, "run_flows": 2,
         "fastest_offset_s": pytest.approx(0.0025, abs=2e-9)}
    assert info["3-3"]["alone_fct_s"]["p0"] == 0.005 and info["3-3"]["run_fct_s"]["p100"] == 0.009
    assert [one_packet(d) for d in done] == [True, True, True, False, False]
    judged = {d.flow.id: d.slowdown(1e6) for d in
              (__import__("dataclasses").replace(d, alone_s=floor + offsets.get(keys.of(d), 0.0))
               if one_packet(d) else d for d in done)}
    assert judged[1] == pytest.approx(2.0) and judged[2] == pytest.approx(1.0) and judged[2] >= 1
    assert judged[3] == pytest.approx(2.0)               # 9 ms on 3 hops, whose fastest took 4.5
    assert judged[4] == pytest.approx(0.05 / 0.012)      # the size curve, as before


def test_judge_by_path_keeps_the_strict_means_beside_the_percentile():
    """What fct.json keeps: the class's mean against each path's p5, the flows counted at 1, and
    the two stricter means (each path's fastest, any path's fastest), in that order of size."""
    from p4rotor.experiments.fct import judge_by_path

    racks = {"a": 0, "b": 1, "c": 2}
    keys = _Keys({(0, 1): "1-1", (0, 2): "3-3"}, racks)
    floor = 0.002
    samples = [(0, 1, 0, 0.002 + i * 1e-5) for i in range(40)] + [(0, 2, 0, 0.004 + i * 1e-5) for i in range(40)]
    done = [F.Done(Flow(i, "a", "bc"[i % 2], 100, 0.0), "low-latency", 0, int((0.003 + i * 1e-4) * 1e9), floor, 0.0)
            for i in range(20)] + [F.Done(Flow(99, "a", "b", 10**6, 0.0), "bulk", 0, int(2e9))]
    judged, info = judge_by_path(done, floor, samples, keys, done, 1e6, 1.0)
    assert info["alone_by_path"]["3-3"]["fastest_offset_s"] < info["alone_by_path"]["3-3"]["offset_s"]
    mean = F.class_mean(F.summarize(judged, 1e6, 1.0)["low-latency"])
    assert 1.0 <= mean <= info["low_latency_vs_fastest"] <= info["low_latency_vs_floor"]
    off = {k: v["offset_s"] for k, v in info["alone_by_path"].items()}
    faster = sum(d.fct_s < floor + off[keys.of(d)] for d in done[:20])
    assert info["low_latency_within_spread"] == faster > 0
    assert all(d.slowdown(1e6) >= 1 for d in judged[:20])
    assert judged[-1] == done[-1]


def test_workload_paths_judges_the_packet_switch_alike(tmp_path, capsys):
    """A packet-switch run (no fabric mode) is judged again the same way, on its one path: its
    one-packet flows against the 5th percentile of theirs through the switch; beside a fabric
    mode it is left as the run judged it (its own floor and curve are not in fct.json)."""
    run = tmp_path / "ps"
    for d in ("alone-packet-switch", "packet-switch"):
        (run / d).mkdir(parents=True)
    hosts = {f"h{k}x0": {"ip": f"10.0.{k}.1", "rack": k} for k in range(8)}
    (run / "flows.json").write_text(json.dumps({"version": 1, "columns": ["id", "src", "dst", "size", "start"],
                                                "meta": {"hosts": hosts},
                                                "flows": [{"id": i, "src": "h0x0", "dst": f"h{1 + i % 7}x0",
                                                           "size": 1000, "start": i * 0.1} for i in range(40)]}))
    # The run's flows take 1.0-1.39 ms, 40 alone 0.6-0.99 ms: the p5 of the 80 is 0.63-0.64 ms.
    (run / "packet-switch" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": i, "issued_ns": 10**9 * i}) + "\n"
                                                                 for i in range(40)))
    (run / "packet-switch" / "rx-h1x0.jsonl").write_text("".join(
        json.dumps({"id": i, "done_ns": 10**9 * i + 1_000_000 + i * 10_000}) + "\n" for i in range(40)))
    (run / "alone-packet-switch" / "flows-h0x0.json").write_text(json.dumps(
        [{"id": 100 + k, "dst": f"10.0.{1 + k % 7}.1", "size": 1, "start_ns": 0} for k in range(40)]))
    (run / "alone-packet-switch" / "tx-h0x0.jsonl").write_text("".join(
        json.dumps({"id": 100 + k, "issued_ns": k * 10**9}) + "\n" for k in range(40)))
    (run / "alone-packet-switch" / "rx-h1x0.jsonl").write_text("".join(
        json.dumps({"id": 100 + k, "done_ns": k * 10**9 + 600_000 + k * 10_000}) + "\n" for k in range(40)))
    bucket = {"flows": 40, "unfinished": 0, "slowdown_mean": 1.98, "slowdown_min": 1.67}
    fct = {"load": 0.01, "flows": 40, "access_mbps": 5.768, "scaling_factor": 0.05768,
           "alone_one_packet_s": {"floor": 0.0006}, "alone_curve": {"points": [[1460, 0.0]], "tail_mbps": 5.768},
           "modes": {"packet-switch": {"per_flow": [[i, "low-latency", "<100KB", 0.001, 1000] for i in range(40)],
                                       "classes": {"low-latency": {"<100KB": bucket}}}}}
    (run / "fct.json").write_text(json.dumps(fct))
    assert main(["workload", "paths", str(run), "--write"]) == 0
    out = capsys.readouterr().out
    assert "packet-switch: path switch: floor +0.04 ms (p5" in out
    m = json.loads((run / "fct.json").read_text())["modes"]["packet-switch"]
    alone = 0.0006 + m["alone_by_path"]["switch"]["offset_s"]
    assert m["low_latency_within_spread"] == 0 and 0.63e-3 <= alone <= 0.64e-3
    assert F.class_mean(m["classes"]["low-latency"]) == pytest.approx(sum((1.0 + i / 100) * 1e-3 / alone
                                                                          for i in range(40)) / 40)
    assert m["low_latency_vs_floor"] > F.class_mean(m["classes"]["low-latency"])
    fct["modes"]["rotornet"] = {}
    (run / "fct.json").write_text(json.dumps(fct))
    with pytest.raises(SystemExit):
        main(["workload", "paths", str(run)])
    assert "no Opera or packet-switch run" in capsys.readouterr().err


def test_workload_paths_rejudges_a_run_from_its_logs(tmp_path, capsys):
    """``p4rotor workload paths RUN``: the low-latency class of an earlier run against each path's
    fastest, from its files; a run without its logs is one line and exit 2."""
    from p4rotor import schedule as S

    ds = S.dilate(S.generate_opera(8, 4, 1000, 100), 100.0)
    run = tmp_path / "run1"
    for d in ("alone", "opera", "run"):
        (run / d).mkdir(parents=True)
    (run / "run" / "schedule.json").write_text(ds.dumps())
    (run / "run" / "status.json").write_text(json.dumps({"t0_ns": 0}))
    hosts = {f"h{k}x0": {"ip": f"10.0.{k}.1", "rack": k} for k in range(8)}
    (run / "flows.json").write_text(json.dumps({"version": 1, "columns": ["id", "src", "dst", "size", "start"],
                                                "meta": {"hosts": hosts},
                                                "flows": [{"id": i, "src": "h0x0", "dst": f"h{1 + i % 7}x0",
                                                           "size": 1000, "start": i * 0.1} for i in range(14)]}))
    t = [int(i * 0.1e9) for i in range(14)]
    (run / "opera" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": i, "issued_ns": t[i], "retrans": 0,
                                                                      "dsack": 0}) + "\n" for i in range(14)))
    (run / "opera" / "rx-h1x0.jsonl").write_text("".join(json.dumps({"id": i, "rx_ns": t[i] + 3_000_000,
                                                                      "done_ns": t[i] + 3_500_000, "retrans": 0}) + "\n"
                                                         for i in range(14)))
    (run / "alone" / "flows-h0x0.json").write_text(json.dumps([{"id": 100 + k, "dst": f"10.0.{k}.1", "size": 1,
                                                                "start_ns": 0} for k in range(1, 8)]))
    (run / "alone" / "tx-h0x0.jsonl").write_text("".join(json.dumps({"id": 100 + k, "issued_ns": k * 10**9})
                                                         + "\n" for k in range(1, 8)))
    (run / "alone" / "rx-h1x0.jsonl").write_text("".join(json.dumps({"id": 100 + k, "done_ns": k * 10**9 + 2_000_000})
                                                         + "\n" for k in range(1, 8)))
    bucket = {"flows": 14, "unfinished": 0, "slowdown_mean": 1.5, "slowdown_min": 1.0}
    (run / "fct.json").write_text(json.dumps({
        "load": 0.01, "flows": 14, "access_mbps": 5.768, "scaling_factor": 0.05768, "dilation": 100.0,
        "epsilon_us": 150.0, "alone_one_packet_s": {"floor": 0.002},
        "alone_curve": {"points": [[1460, 0.0]], "tail_mbps": 5.768},
        "modes": {"opera": {"per_flow": [[i, "low-latency", "<100KB", 0.003, 1000] for i in range(14)],
                            "classes": {"low-latency": {"<100KB": bucket}}}}}))
    assert main(["workload", "paths", str(run)]) == 0
    out = capsys.readouterr().out
    assert "on any path: 1.50" in out and "against the p5 of the one-packet FCTs on its own path" in out
    mean = float(out.split("pass: mean ")[1].split()[0])  # each flow against its own path's alone
    assert 1.0 <= mean <= 1.5
    assert main(["workload", "paths", str(run), "--write"]) == 0
    assert (run / "paths.png").stat().st_size > 0 and "paths.png" in capsys.readouterr().out
    r = json.loads((run / "fct.json").read_text())
    assert r["modes"]["opera"]["low_latency_vs_floor"] == pytest.approx(1.5)
    assert set(r["modes"]["opera"]["alone_by_path"]) <= {"1-1", "2-2", "3-3"}
    assert r["modes"]["opera"]["low_latency_within_spread"] >= 0
    assert mean <= r["modes"]["opera"]["low_latency_vs_fastest"] <= 1.5

    (run / "alone" / "rx-h1x0.jsonl").unlink()
    import shutil
    shutil.rmtree(run / "alone")
    with pytest.raises(SystemExit) as ex:
        main(["workload", "paths", str(run)])
    err = capsys.readouterr().err.strip()
    assert ex.value.code == 2 and "no alone" in err and "\n" not in err


def test_above_bound_keeps_the_slow_bulk_flows_and_how_they_went():
    """The bulk flows above the bound, worst first, with whether another bulk flow ran meanwhile
    and what the agents said of each (``bulk_paths``); flows within it and unfinished ones are
    not kept."""
    bps, duty, wait = 1e6, 0.5, 0.3
    b = F.bulk_bound_s(100_000, bps, duty, wait)

    def done(i, start_s, fct_s, cls="bulk"):
        f = Flow(i, f"h{i}x0", "h9x0", 100_000, start_s)
        return F.Done(f, cls, int(start_s * 1e9), None if fct_s is None else int((start_s + fct_s) * 1e9))

    runs = [done(0, 0.0, 1.1 * b), done(1, 0.5, 0.9 * b), done(2, 100.0, 1.3 * b), done(3, 200.0, None),
            done(4, 300.0, 5 * b, "low-latency")]
    paths = {2: {"resent": 0, "relayed": 40, "worst_relay_slots": 12}}
    above = F.above_bound(runs, paths, bulk_bps=bps, duty=duty, wait_s=wait, model=None, slot_s=0.025)
    assert [a["id"] for a in above] == [2, 0]
    assert above[0]["ratio"] == pytest.approx(1.3, abs=1e-3) and above[0]["worst_relay_slots"] == 12
    assert above[0]["beside_another"] is False  # flow 3, unfinished, started after it ended
    assert above[1]["beside_another"] is True and "relayed" not in above[1]


def test_plots_say_no_flow_finished_instead_of_failing(tmp_path):
    # A run whose every flow stayed unfinished (the agents starved, 2026-11-27) still gets its
    # fct.png: a log axis of nothing made matplotlib raise after fct.json was written.
    from p4rotor.experiments.fct import _plots

    f = Flow(0, "h0x0", "h2x0", 150_000, 0.0)
    runs = {"opera": {"done": [F.Done(f, "bulk", 0, None)], "pending": [(0.0, 150_000), (1.0, 150_000)]}}
    _plots(runs, 5.768e6, tmp_path)
    assert (tmp_path / "fct.png").stat().st_size > 1000


def test_bulk_paths_say_how_long_the_agents_loops_stood_still_while_a_flow_ran():
    """A flow's sender's longest loop stall while it ran, and any agent's, from the agents' pending
    samples (one a slot): a sample 0.6 s late over a flow is its stall; a flow after it has none;
    the run's agents together in ``agents_loops``."""
    from p4rotor.experiments.fct import agents_loops, bulk_paths, loop_stalls

    ms = 1_000_000
    regular = [(i * 100 * ms, 0, 0) for i in range(40)]
    stalled = [(t, 0, 0) for t, _, _ in regular if not 1000 * ms < t < 1700 * ms]  # 1.0 s -> 1.7 s: 600 ms late
    sender = {"flows_tx": {"5": [950 * ms, 1800 * ms, 3, 0, 0], "6": [2100 * ms, 2200 * ms, 3, 0, 0]},
              "pending": stalled, "loop_stalls": {"samples": 30, "over_50ms": 1, "worst_ms": 600.0, "worst_at_ns": 0},
              "gc": {"2": {"collections": 3, "total_ms": 9.0, "worst_ms": 4.0}}, "windows_open_max": 3}
    receiver = {"flows_rx": {"0:5": [3, 1900 * ms], "0:6": [3, 2300 * ms]},
                "flows_rx_via": {"0:5": [0, 0, 960 * ms, 0], "0:6": [0, 0, 2110 * ms, 0]}, "pending": regular}
    assert loop_stalls(sender) == [(1700 * ms, 600.0)] and loop_stalls(receiver) == []
    p = bulk_paths([sender, receiver], {5: 900 * ms, 6: 2000 * ms}, {5: 3, 6: 3})
    assert p[5]["sender_stall_ms"] == 600.0 and p[5]["worst_stall_ms"] == 600.0
    assert p[6]["sender_stall_ms"] == 0.0 and p[6]["worst_stall_ms"] == 0.0
    assert agents_loops([sender, receiver]) == {"agents": 1, "stalls_over_50ms": 1, "worst_stall_ms": 600.0,
                                                "full_collections": 3, "worst_full_collection_ms": 4.0,
                                                "windows_open_max": 3}
    assert agents_loops([receiver]) is None  # summaries from before: nothing to say
