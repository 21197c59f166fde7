"""FCT analysis (workload/fct.py: records, slowdowns, the alone curve and envelope, the alone by
path) and the short-flow process (host/flows.py) over loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest

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


def _run_until_logged(runner, tx_log, n: int) -> None:
    """Run ``runner`` until its sender has logged ``n`` flows (10 s at most), then stop it."""
    async def go():
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        deadline = time.monotonic() + 10
        while len(tx_log.read_text().splitlines()) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(go())


def test_short_flows_over_loopback_complete_and_log(tmp_path, stamping):
    """Sender and receiver in one process on 127.0.0.1: every flow's bytes arrive, the receiver
    logs done_ns after the start, the sender logs the answer; a refused connection is an error."""
    now = time.time_ns()
    flows = [{"id": i, "dst": "127.0.0.1", "size": s, "start_ns": now + 100_000_000 + i * 10_000_000}
             for i, s in enumerate([1, 1460, 100_000, 2_000_000])]
    runner = Flows(flows, port=_free_port(), dscp=46, rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=now + 3_000_000_000)
    _run_until_logged(runner, tmp_path / "tx.jsonl", len(flows))
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


def test_each_flow_has_its_primer_before_it_logged_apart(tmp_path):
    """With ``primer_ns`` a one-byte flow to the same destination goes that long before each flow
    (host/flows.py: a warm sender and receiver whatever the load); primers are logged, both
    ends, to the primer log only: the flow logs hold the flows and nothing else."""
    from p4rotor.host.flows import PRIMER_BIT

    now = time.time_ns()
    flows = [{"id": i, "dst": "127.0.0.1", "size": s, "start_ns": now + 200_000_000 + i * 50_000_000}
             for i, s in enumerate([1, 3000])]
    runner = Flows(flows, port=_free_port(), rx_log=tmp_path / "rx.jsonl", tx_log=tmp_path / "tx.jsonl",
                   end_ns=now + 3_000_000_000, primer_ns=20_000_000, primer_log=tmp_path / "primers.jsonl")
    _run_until_logged(runner, tmp_path / "tx.jsonl", len(flows))
    tx = {r["id"]: r for r in map(json.loads, (tmp_path / "tx.jsonl").read_text().splitlines())}
    rx = {r["id"]: r for r in map(json.loads, (tmp_path / "rx.jsonl").read_text().splitlines())}
    assert set(tx) == set(rx) == {0, 1}
    primers = [json.loads(line) for line in (tmp_path / "primers.jsonl").read_text().splitlines()]
    sent = {r["id"]: r for r in primers if r["side"] == "tx"}
    got = {r["id"]: r for r in primers if r["side"] == "rx"}
    assert set(sent) == set(got) == {0 | PRIMER_BIT, 1 | PRIMER_BIT}
    for f in flows:
        p = sent[f["id"] | PRIMER_BIT]
        assert p["error"] is None and got[f["id"] | PRIMER_BIT]["bytes"] == 1
        # issued at or after its time, answered before its flow began
        assert f["start_ns"] - 20_000_000 <= p["issued_ns"] and p["ack_ns"] <= tx[f["id"]]["issued_ns"]


def test_a_flow_waits_for_its_late_primer(tmp_path):
    """A primer that is not answered when its flow is due (a late timer, a slow path) holds the
    flow back: the flow is issued after the primer's answer, never beside it."""
    runner = Flows([], port=_free_port(), rx_log=tmp_path / "rx", tx_log=tmp_path / "tx", end_ns=0,
                   primer_ns=1000, primer_log=tmp_path / "p")

    async def go():
        slow = asyncio.create_task(asyncio.sleep(0.2))  # stands in for a primer still under way
        t0 = time.time_ns()
        await runner._send_one({"id": 5, "dst": "127.0.0.1", "size": 1, "start_ns": t0}, slow)
        return t0

    t0 = asyncio.run(go())
    runner.tx.close()
    rec = json.loads((tmp_path / "tx").read_text())
    assert rec["id"] == 5 and rec["issued_ns"] - t0 >= 190_000_000 and rec["error"]  # nobody listens
    assert not (tmp_path / "p").read_text()  # a flow's own record goes to the flow log only


def test_primers_need_a_log(tmp_path):
    with pytest.raises(ValueError, match="primer log"):
        Flows([], rx_log=tmp_path / "rx", tx_log=tmp_path / "tx", end_ns=0, primer_ns=1000)


@pytest.fixture
def stamping():
    """Receive stamps on for the whole test, and already on: Linux turns them on for every
    socket when the first one asks, in a deferred work item, and off when the last one closes;
    a segment that comes in before the work ran has no stamp (seen when the test before closed
    the only stamping socket).  A run's listener asks seconds before its first flow."""
    import socket

    from p4rotor.host.flows import SO_TIMESTAMPNS

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    time.sleep(0.05)
    yield
    s.close()


def test_a_flows_arrival_is_the_kernels_stamp_not_when_the_receiver_got_a_cpu(tmp_path, stamping):
    """FCT ends when the last byte reached the receiving host (rx_ns, SO_TIMESTAMPNS), not when
    the receiver's process read it: a receiver busy for 0.3 s still logs the arrival."""
    import socket

    from p4rotor.host.flows import HEADER
    from p4rotor.workload.paths import arrival_ns

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


def test_slowdown_divides_by_the_pairs_alone_fct():
    """A flow's alone FCT is its host pair's one-packet FCT (measured) + its bytes at the access rate."""
    access = 8e6
    near = F.Done(Flow(0, "a", "b", 1000, 0.0), "low-latency", 0, 10_000_000, alone_s=0.004)
    far = F.Done(Flow(1, "a", "c", 1000, 0.0), "low-latency", 0, 10_000_000, alone_s=0.009)
    ser = F.ideal_fct_s(1000, access)
    assert near.slowdown(access) == pytest.approx(0.010 / (0.004 + ser))
    assert far.slowdown(access) == pytest.approx(0.010 / (0.009 + ser))
    assert F.Done(Flow(2, "a", "b", 1, 0.0), "bulk", 0, None).slowdown(access) is None


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


def test_htbs_staircase_never_beats_the_step_below():
    """htb sends 5 segments as one burst, then a burst per ~8.5 ms: a straight line between 5 and 10
    calibrated segments lies above the 8-segment truth; the step below never does."""
    from p4rotor.experiments.fct.calibrate import SEGMENT

    def staircase(n):  # extra s of an n-segment flow alone
        return 0.0085 * ((n - 1) // 5)

    cal = [(n * SEGMENT, staircase(n)) for n in (1, 2, 5, 10, 20)]
    c = F.AloneCurve.from_samples(cal, access_bps=5e6)
    for n in range(1, 21):
        assert c.extra_s(n * SEGMENT) <= staircase(n) + 1e-12, n


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


def test_a_calibration_whose_own_idle_flows_fail_says_so():
    """held_out over the criterion's 1 %: a warning line naming the share; within it: none."""
    from p4rotor.workload import ideal as I

    cal = I.Calibration({"1-1": 1e-3}, 1e-3, I.AloneCurve.from_samples([(2896, 1e-4)], 50e6), {}, {}, 1.0, {},
                        I.CURVE_METHOD, {"all": {"flows": 1600, "below_1": 68, "below_1_share": 0.0425}})
    w = I.held_out_warning(cal, "RUN/calibration.json")
    assert w.startswith("WARNING: RUN/calibration.json: 68 of 1600") and "4.2 %" in w and "\n" not in w
    ok = dataclasses.replace(cal, held_out={"all": {"flows": 1600, "below_1": 10, "below_1_share": 0.0063}})
    assert I.held_out_warning(ok, "x") is None and I.held_out_warning(dataclasses.replace(cal, held_out={}), "x") is None
