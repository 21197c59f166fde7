"""Route computation against hand-checked small schedules; the Opera rules."""

import json

import networkx as nx
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.schedule import routes as R
from p4rotor import schedule as S
from p4rotor.schedule import topology as TP


def four_racks():
    # Two rotors, one matching each, no stagger: rotor a pairs 0-1, 2-3; rotor b pairs 0-2, 1-3.
    return S.from_json({"version": 1, "racks": 4, "slot_us": 100, "reconfig_us": 10, "rotors": [
        {"name": "a", "offset_us": 0, "matchings": [[1, 0, 3, 2]]},
        {"name": "b", "offset_us": 50, "matchings": [[2, 3, 0, 1]]}]})


def test_four_racks_hand_checked():
    s = four_racks()
    rs = R.compute(s)
    # slices: [0,10) a dark, [10,50) both, [50,60) b dark, [60,100) both
    assert [(x.slice.start_us, x.slice.end_us) for x in rs] == [(0, 10), (10, 50), (50, 60), (60, 100)]
    assert [x.live_mask for x in rs] == [0b10, 0b11, 0b01, 0b11]
    both = rs[1].hops
    # direct where a circuit exists
    assert both[(0, 1, R.TCLASS_BULK)] == R.Hop(rotor=0, next_rack=1, path=(0, 1))
    assert both[(0, 2, R.TCLASS_BULK)] == R.Hop(rotor=1, next_rack=2, path=(0, 2))
    # 0 -> 3: no direct circuit; VLB through 1 (a) or 2 (b): (0+3) % 2 = 1 -> candidates[1] = 2
    h = both[(0, 3, R.TCLASS_BULK)]
    assert h.vlb and h.next_rack == 2 and h.rotor == 1 and h.path == (0, 2, 3)
    assert (0, 3, R.TCLASS_BULK_TRANSIT) not in both, "transit is direct only"
    ll = both[(0, 3, R.TCLASS_LOW_LATENCY)]
    assert ll.path in ((0, 1, 3), (0, 2, 3)) and len(ll.path) == 3
    # slice with rotor a dark: only b's circuits; 0 -> 1 has no direct, no 2-hop now
    dark = rs[0].hops
    assert (0, 1, R.TCLASS_BULK) not in dark
    assert (0, 2, R.TCLASS_BULK) in dark and dark[(0, 2, R.TCLASS_BULK)].rotor == 1
    assert all(h.rotor == 1 for h in dark.values()), "dark uplink never used"


def test_epsilon_excludes_rotor_about_to_go_dark():
    s = four_racks()
    rs = R.compute(s, epsilon_us=5)
    # slice [10,50): b goes dark at 50 (< 50+5): low-latency may not use b
    assert rs[1].ll_rotors == [0]
    assert all(h.rotor == 0 for (a, b, c), h in rs[1].hops.items() if c == R.TCLASS_LOW_LATENCY)
    # bulk still may (live for the whole slice)
    assert any(h.rotor == 1 for (a, b, c), h in rs[1].hops.items() if c == R.TCLASS_BULK)


@pytest.mark.parametrize("racks,rotors,slot,night,eps", [(8, 4, 1000, 100, 50), (16, 4, 2000, 200, 100)])
def test_opera_rules(racks, rotors, slot, night, eps):
    s = S.generate_opera(racks, rotors, slot, night)
    rs = R.compute(s, epsilon_us=eps)
    for sr in rs:
        for (a, b, c), h in sr.hops.items():
            # never a dark uplink
            assert sr.live_mask >> h.rotor & 1
            if c == R.TCLASS_LOW_LATENCY:
                # the circuit does not reconfigure within the slice (nor within epsilon after it)
                assert not R.dark_intervals(s, h.rotor, sr.slice.start_us, sr.slice.end_us + eps)
                assert h.rotor in sr.ll_rotors
        g = R.circuit_graph(s, sr.slice, sr.ll_rotors)
        if sr.ll_diameter is not None:
            assert sr.ll_diameter == nx.diameter(g)
            for (a, b, c), h in sr.hops.items():
                if c == R.TCLASS_LOW_LATENCY:
                    assert len(h.path) - 1 <= sr.ll_diameter
                    assert h.path[0] == a and h.path[-1] == b
                    # every hop of the path is a live low-latency circuit
                    assert all(g.has_edge(x, y) for x, y in zip(h.path, h.path[1:]))
            # every pair has a low-latency route
            assert sum(1 for k in sr.hops if k[2] == R.TCLASS_LOW_LATENCY) == racks * (racks - 1)


def test_multihop_beyond_two():
    # 8-rack opera has slices whose low-latency paths need 3+ hops
    s = S.generate_opera(8, 4, 1000, 100)
    rs = R.compute(s, epsilon_us=50)
    assert max(len(h.path) - 1 for sr in rs for h in sr.hops.values()) >= 3


def test_describe_mentions_paths():
    s = four_racks()
    text = R.describe(s, R.compute(s), 1, src=0)
    assert "rack   0 ->   3 bulk" in text and "vlb" in text and "path 0-2-3" in text


# ---------------------------------------------------------------- topology

def test_topology_generate_roundtrip(tmp_path):
    s = S.generate_opera(8, 4, 1000, 100)
    (tmp_path / "s.json").write_text(s.dumps())
    t = TP.generate(s, "s.json", hosts_per_rack=2)
    p = tmp_path / "t.json"
    p.write_text(t.dumps())
    t2 = TP.load(p)
    assert t2.to_json() == t.to_json()
    assert t2.racks[3].hosts[1].ip == "10.0.3.2"
    assert t2.racks[3].tor.uplinks == {"rotor0": 1, "rotor1": 2, "rotor2": 3, "rotor3": 4}


def test_link_mtus_by_port():
    """Every link says its MTU: uplinks and rotor ports carry a host frame plus the fabric header."""
    t = TP.generate(S.generate_opera(8, 4, 1000, 100), "s.json", hosts_per_rack=2)
    assert t.tor_link_mtus(t.racks[2]) == {1: TP.FABRIC_MTU, 2: TP.FABRIC_MTU, 3: TP.FABRIC_MTU, 4: TP.FABRIC_MTU,
                                           11: TP.HOST_MTU, 12: TP.HOST_MTU}
    assert set(t.rotor_link_mtus(t.rotors[0]).values()) == {TP.FABRIC_MTU}
    assert TP.FABRIC_MTU >= TP.HOST_MTU + dp.FABRIC_HEADER_BYTES
    ents = C.port_mtu_entries(t.tor_link_mtus(t.racks[2]))
    assert {e.match["port"]: e.action.args["max_frame_bytes"] for e in ents}[11] == TP.HOST_MTU + 14


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d["racks"][1]["tor"].update(device_id=d["racks"][0]["tor"]["device_id"]), "device id"),
    (lambda d: d["racks"][1]["tor"].update(grpc_port=d["rotors"][0]["grpc_port"]),
     "gRPC port 50101 used by rotor0 and tor1"),
    (lambda d: d["racks"][0]["hosts"][0].update(ip="10.9.9.9"), "outside its rack prefix"),
    (lambda d: d["racks"][0]["hosts"][0].update(port=1), "a port is used twice"),
    (lambda d: d["rotors"][0]["ports"].pop("3"), "ports must map every rack"),
    (lambda d: d["racks"][0]["tor"]["uplinks"].pop("rotor1"), "uplinks must name every rotor"),
    (lambda d: d.update(version=3), "unknown topology version"),
    (lambda d: d["racks"][0]["hosts"][0].update(port=254), "254 is the clock port"),
    (lambda d: d["rotors"][0]["ports"].update({"0": 255}), "outside 1..253"),
    (lambda d: d["link_mtu"].update(fabric=1500), "cannot carry a full-size host frame"),
    (lambda d: d["link_mtu"].update(host="1500"), "link_mtu.host must be an integer"),
    (lambda d: d["link_mtu"].update(fabric=100000), "link_mtu.fabric must be an integer in 576..9216"),
    (lambda d: d.update(link_mtu={"hosts": 1500}), "link_mtu must be"),
])
def test_topology_bad(tmp_path, mutate, msg):
    s = S.generate_opera(8, 4, 1000, 100)
    (tmp_path / "s.json").write_text(s.dumps())
    d = TP.generate(s, "s.json").to_json()
    mutate(d)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TP.TopologyError, match=msg):
        TP.load(p)


def test_path_clock_names_the_low_latency_hops_of_the_slice_at_a_moment():
    """Slices [0,10) a dark, [10,50) both live, ...: racks 0 and 3 have no direct circuit, so two
    hops whenever a path exists; 0-1 is direct only while rotor a is live; times wrap."""
    s = four_racks()
    clock = R.PathClock(s, R.compute(s))
    assert clock.slice_at(0).index == 0 and clock.slice_at(49.9).index == 1 and clock.slice_at(100).index == 0
    assert clock.hops(20, 0, 1) == 1 and clock.hops(20, 0, 3) == 2
    assert clock.hops(5, 0, 2) == 1          # a dark: b's circuit 0-2 only
    assert clock.hops(5, 0, 1) is None       # ... and nothing reaches rack 1 from 0 but over a
    assert clock.hops(120, 0, 1) == clock.hops(20, 0, 1)
