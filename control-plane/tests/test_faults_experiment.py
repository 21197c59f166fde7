"""``p4rotor experiment faults``: the capture reader (synthetic pcap) and bad plans (exit 2, nothing started)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

from p4rotor import schedule as S
from p4rotor.experiments.frame_check import check_frames
from p4rotor.schedule import topology as TP
from p4rotor.control import fault_plan as FP
from p4rotor.faults.capture import LINKTYPE_LINUX_SLL2, read_rotor_frames
from p4rotor.experiments.faults import default_plan_path


def _pcap(records) -> bytes:
    """records: (ts_ns, ifindex, outgoing, payload) -> a nanosecond LINUX_SLL2 pcap."""
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 96, LINKTYPE_LINUX_SLL2)
    for ts, ifindex, outgoing, payload in records:
        sll2 = struct.pack("!HHIHBB8s", 0x0800, 0, ifindex, 1, 4 if outgoing else 0, 6, b"\0" * 8)
        pkt = sll2 + payload
        out += struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(pkt), len(pkt)) + pkt
    return out


def test_frames_are_paired_by_their_bytes_after_the_fabric_header(tmp_path):
    names = {10: "rotor0-eth1", 11: "rotor0-eth2", 12: "rotor0-eth3", 20: "tor0-eth1"}
    body_a, body_b = b"IPUDP-probe-a" * 3, b"IPUDP-probe-b" * 3
    recs = [
        (1_000, 10, False, b"FABHDR01" + body_a),   # in on port 1
        (1_500, 20, True, b"FABHDR01" + body_b),    # a ToR interface: ignored
        (2_000, 12, True, b"FABHDR99" + body_a),    # out on port 3 (fabric header rewritten)
        (3_000, 11, True, b"FABHDR01" + body_b),    # out, never seen coming in: not a pair
    ]
    f = tmp_path / "c.pcap"
    f.write_bytes(_pcap(recs))
    got = read_rotor_frames(f, names, {"rotor0": {0: 1, 1: 2, 2: 3}})
    assert [(r.in_port, r.out_port, r.rx_ns, r.send_ns) for r in got["rotor0"]] == [(1, 3, 2_000, 1_000)]


def test_a_frame_out_of_its_circuit_is_flagged():
    """The same judge the ptf/bench suites use: rack 0 <-> rack 2 only in matching 1."""
    s = S.from_json({"version": 1, "racks": 4, "slot_us": 1000, "reconfig_us": 100, "rotors": [
        {"name": "rotor0", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]}]})
    from p4rotor.host.traffic import Rx

    ports = {0: 1, 1: 2, 2: 3, 3: 4}
    t0 = 10**12
    ok = Rx(rx_ns=t0 + 1_500_000, out_port=3, in_port=1, seq=0, send_ns=0)     # slot 1, matching 1
    dark = Rx(rx_ns=t0 + 2_050_000, out_port=3, in_port=1, seq=0, send_ns=0)   # slot 2's night
    wrong = Rx(rx_ns=t0 + 1_500_000, out_port=1, in_port=1, seq=0, send_ns=0)  # no such circuit
    c = check_frames([ok, dark, wrong], s, s.rotors[0], ports, t0)
    assert (c.frames, c.stale, c.wrong_port) == (3, 1, 1)


def test_the_default_plan_validates_against_the_experiments_topology():
    topo = TP.generate(S.dilate(S.generate_opera(8, 4, 1000, 100), 100), "schedule.json", hosts_per_rack=1)
    plan = FP.load(default_plan_path(), topo)
    assert {f.kind for f in plan.faults} == {"link-down", "switch-crash", "controller-crash", "host-pause"}


def test_a_bad_plan_is_one_line_and_exit_2_before_anything_starts(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"version": 1, "faults": [{"kind": "switch-crash", "start_us": 5, "switch": "nope"}]}))
    r = subprocess.run([sys.executable, "-m", "p4rotor.cli", "experiment", "faults", "--plan", str(bad),
                        "--output", str(tmp_path / "out"), "--build-dir", str(tmp_path / "no-build")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "nope" in r.stderr
    assert not (tmp_path / "out").exists()


def test_drop_steps_survive_a_restarted_switch_and_a_missing_reading():
    from p4rotor.experiments.faults import drop_steps

    log = [(1, {"r": {"NIGHT": 5, "UNACCOUNTED": 3}}), (2, {"r": {"NIGHT": 7, "UNACCOUNTED": 9}}),
           (3, {}),                                       # the controller restarting: no reading
           (4, {"r": {"NIGHT": 2}}),                      # the switch restarted: counts from 0
           (5, {"r": {"NIGHT": 4, "STALE": 1}})]
    assert [inc for _, inc in drop_steps(log)] == [{}, {"NIGHT": 2}, {}, {"NIGHT": 2}, {"NIGHT": 2}]


def test_the_load_plan_validates_and_kills_an_agent():
    topo = TP.generate(S.dilate(S.generate_opera(8, 4, 1000, 100), 100), "schedule.json", hosts_per_rack=1)
    plan = FP.load(default_plan_path(frozenset({"bulk"})), topo)
    [kill] = [f for f in plan.faults if f.kind == "agent-kill"]
    assert kill.host == "h5x0" and kill.restart_after_us


import pytest  # noqa: E402


@pytest.mark.parametrize("args,msg", [
    (["--traffic", "bulk,udp"], "a comma-separated subset of bulk,tcp"),
    (["--traffic", "tcp"], "needs bulk too"),
    (["--plan", "LOAD"], "agent-kill faults need agents"),
])
def test_bad_traffic_is_one_line_and_exit_2_before_anything_starts(tmp_path, args, msg):
    args = [str(default_plan_path(frozenset({"bulk"}))) if x == "LOAD" else x for x in args]
    r = subprocess.run([sys.executable, "-m", "p4rotor.cli", "experiment", "faults", *args,
                        "--output", str(tmp_path / "out"), "--build-dir", str(tmp_path / "no-build")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and msg in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_bulk_account_counts_losses_by_cause_across_a_restart():
    """Rack 2's agent was killed and restarted (incarnation 1: flow 1 + 1 << 20): what it received
    before comes from its last progress file, what its predecessor made died with it.  Every rack
    also holds 70 frames of a stream: not bulk, not counted as held bulk."""
    from p4rotor.experiments.faults_load import bulk_account, reflow

    new = 1 + (1 << 20)

    def summ(rack, accepted, rx, dups=0, held=0, host=None, via=None, tx=None):
        return {"rack": rack, "host": host or f"h{rack}x0", "accepted": accepted, "flows_rx": rx, "duplicates": dups,
                "held_local": held + 70, "held_relay_by_origin": {}, "held_relay_bulk_by_origin": {},
                "held_local_by_flow": {f"{(rack + 3) % 4}:1": held, f"{(rack + 1) % 4}:{0xE0000009}": 70},
                "flows_rx_via": via or {}, "flows_tx": tx or {}}

    where = {f"h{r}x0": (r, 0) for r in range(4)}  # pairs r -> (r + 3) % 4
    d = {"where": where, "old_progress": {("h2x0", 0): {"3:1": [40, 0]}}, "summaries": [
        summ(0, {"1": 100}, {"1:1": [90, 0]}),                          # 1 -> 0: 10 lost
        summ(1, {"1": 100}, {f"2:{new}": [30, 0]}, via={f"2:{new}": [0, 0, 123, 0]}),
        summ(2, {str(new): 30}, {"3:1": [50, 0]}, tx={str(new): [7, 8, 30, 0, 0]}),
        summ(3, {"1": 100, str(0xE0000001): 9}, {"0:1": [100, 0], "2:1": [20, 0], f"0:{0xE0000001}": [9, 0]},
             held=5, via={"0:1": [0, 0, 1, 1], f"0:{0xE0000001}": [0, 0, 1, 4]}),  # 2:1: the killed one's
    ]}
    b = bulk_account(d, killed={2})
    assert b["pairs"]["0->3"]["lost"] == 0
    assert b["pairs"]["1->0"]["lost"] == 10 and "fabric" in b["pairs"]["1->0"]["cause"]
    # rack 3 -> 2 (the killed rack): 40 before the kill (progress file) + 50 after, 5 still held
    assert b["pairs"]["3->2"]["delivered"] == 90 and b["pairs"]["3->2"]["lost"] == 5
    assert "killed agent" in b["pairs"]["3->2"]["cause"] and b["lost_to_killed"] == 5
    assert b["pairs"]["2->1"] == {"made": 30, "delivered": 30, "flows": [new], "held": 0, "lost": 0, "cause": None}
    assert b["delivered_from_killed_incarnations"] == 20
    # a bulk frame's second copy is a duplicate (bulk is sent once); a resent stream frame's is not
    assert b["duplicates"] == 1 and b["stream_copies_dropped"] == 4 and "3->2" in b["pairs"]
    assert all(int(k.split("->")[0]) < 4 for k in b["pairs"]), "streams are not bulk pairs"
    assert reflow(d, "h2x0", 2, 1) == {"first_sent_ns": 7, "first_delivered_ns": 123}
