"""Workloads as data: CDF files, sampling, Poisson arrivals at a load, size scaling, flow lists, CLI."""

import json
import math
import random
import statistics
from pathlib import Path

import pytest

from p4rotor import cli
from p4rotor.workload import cdf as C
from p4rotor.workload import flowlist as FL
from p4rotor.workload import generate as G
from p4rotor.workload import scale as SC

REPO = Path(__file__).resolve().parents[2]
WEBSEARCH_PKTS = [(6, 0), (6, .15), (13, .2), (19, .3), (33, .4), (53, .53), (133, .6), (667, .7),
                  (1333, .8), (3333, .9), (6667, .97), (20000, 1)]      # NetSys/simulator py/CDF_dctcp.txt
DATAMINING_PKTS = [(1, 0), (1, .5), (2, .6), (3, .7), (7, .8), (267, .9), (2107, .95), (66667, .99),
                   (666667, 1)]                                         # py/CDF_datamining.txt


@pytest.fixture
def keep_signals(monkeypatch):
    """cli.main() installs process-wide SIGPIPE/SIGTERM handlers: not in pytest's process."""
    import signal

    monkeypatch.setattr(signal, "signal", lambda *a: None)


def one_line(ex) -> str:
    msg = str(ex.value)
    assert "\n" not in msg
    return msg


# ---- CDF files --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,pkts", [("websearch", WEBSEARCH_PKTS), ("datamining", DATAMINING_PKTS)])
def test_shipped_cdfs_are_the_published_points_in_bytes(name, pkts):
    c = C.shipped(name)
    assert list(zip(c.sizes, c.probs)) == [(p * 1460, q) for p, q in pkts]
    assert c.source == f"topologies/workloads/{name}.cdf"
    head = (REPO / "topologies" / "workloads" / f"{name}.cdf").read_text().split("\n", 3)[:3]
    assert ("DCTCP" if name == "websearch" else "VL2") in " ".join(head)
    # the pHost simulator's mean: sum of freq x (size + previous size) / 2, in packets x 1460
    mean = sum((q1 - q0) * (s0 + s1) / 2 for (s0, q0), (s1, q1) in zip(pkts, pkts[1:])) * 1460
    assert c.mean() == pytest.approx(mean)


def test_opera_variants_load():
    for name in ("websearch-opera", "datamining-opera"):
        c = C.shipped(name)
        assert c.probs[-1] == 1 and len(c.sizes) > 10


def test_unknown_workload_is_one_line():
    with pytest.raises(C.WorkloadError) as ex:
        C.shipped("hadoop")
    assert "unknown workload 'hadoop'" in one_line(ex) and "websearch" in str(ex.value)


@pytest.mark.parametrize("text,needle,line", [
    ("100 0\n50 0.5\n200 1\n", "not monotone: size 50 after 100", 2),
    ("100 0\n150 0.6\n200 0.5\n300 1\n", "not monotone: cumulative probability 0.5 after 0.6", 3),
    ("100 0\n200 0.9\n", "must end at cumulative probability 1, ends at 0.9", 2),
    ("# c\n100 0\n200 x\n300 1\n", "not a number", 3),
    ("100 0 7\n200 1\n", "expected 'size_bytes cumulative_probability', got 3", 1),
    ("-5 0\n200 1\n", "size -5 must be a finite number >= 0", 1),
    ("100 0\ninf 1\n", "size inf", 2),
    ("100 0\n200 1.5\n", "cumulative probability 1.5 must lie in [0, 1]", 2),
])
def test_bad_cdf_is_one_line_naming_file_and_line(tmp_path, text, needle, line):
    f = tmp_path / "my.cdf"
    f.write_text(text)
    with pytest.raises(C.WorkloadError) as ex:
        C.load(f)
    msg = one_line(ex)
    assert msg.startswith(f"{f}:{line}: ") and needle in msg


def test_cdf_empty_unreadable_and_not_utf8(tmp_path):
    f = tmp_path / "e.cdf"
    f.write_text("# only a comment\n\n")
    with pytest.raises(C.WorkloadError) as ex:
        C.load(f)
    assert "no points" in one_line(ex)
    with pytest.raises(C.WorkloadError) as ex:
        C.load(tmp_path / "missing.cdf")
    assert "cannot read" in one_line(ex)
    f.write_bytes(b"100 0\n200 1 \xff\n")
    with pytest.raises(C.WorkloadError) as ex:
        C.load(f)
    assert one_line(ex) == f"{f}:2: not UTF-8 text (byte 0xff)"


def test_cdf_accepts_commas_comments_and_rounding(tmp_path):
    f = tmp_path / "ok.cdf"
    f.write_text("# mine\n100,0\n200, 0.333333333  # trailing\n\n300\t0.9999999999\n")
    c = C.load(f)
    assert c.sizes == (100, 200, 300) and c.probs[-1] == 1.0


# ---- sampling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["websearch", "datamining"])
def test_sampling_matches_the_cdf(name):
    c = C.shipped(name)
    rng = random.Random(7)
    n = 20000
    xs = sorted(c.sample(rng) for _ in range(n))
    # KS-style: the empirical CDF against F at every point and between points
    grid = set(c.sizes) | {(a + b) / 2 for a, b in zip(c.sizes, c.sizes[1:])}
    import bisect
    worst = max(abs(bisect.bisect_right(xs, x) / n - c.cdf(x)) for x in grid)
    assert worst < 1.63 / math.sqrt(n)  # the 1% KS critical value
    assert statistics.fmean(xs) == pytest.approx(c.mean(), rel=0.15)  # heavy tails: loose


def test_quantile_and_cdf_are_inverse():
    c = C.shipped("websearch")
    assert c.quantile(0.0) == c.quantile(0.1) == 8760  # the mass on the first size
    for u in (0.16, 0.25, 0.5, 0.77, 0.95, 0.999):
        assert c.cdf(c.quantile(u)) == pytest.approx(u)
    assert c.cdf(8759) == 0 and c.cdf(8760) == 0.15 and c.cdf(1e12) == 1


def test_mean_packets_is_exact():
    c = C.Cdf((100.0, 100.0, 5000.0), (0.0, 0.2, 1.0))
    mss = 1460
    # brute force: 0.2 on 100 B (1 packet) + 0.8 uniform on [100, 5000]
    n = 200000
    bf = 0.2 + 0.8 * statistics.fmean(math.ceil((100 + (k + 0.5) * 4900 / n) / mss) for k in range(n))
    assert c.mean_packets(mss) == pytest.approx(bf, rel=1e-4)


# ---- scaling ----------------------------------------------------------------------------------

def test_scaling_factor_from_rates_dilation_and_cycles():
    s = SC.for_emulation(100e6, 100, 2000, 10e9)
    assert s.factor == pytest.approx(1.0) and s.emulated_cycle_bytes == pytest.approx(2.5e6)
    assert SC.for_emulation(25e6, 100, 2000, 10e9).factor == pytest.approx(0.25)
    # a real system with a longer cycle (Opera, 108 racks: 10.8 ms) than the emulated 8-rack one
    assert SC.for_emulation(100e6, 100, 2000, 10e9, real_cycle_us=10800).factor == pytest.approx(2 / 10.8)
    with pytest.raises(C.WorkloadError):
        SC.for_emulation(0, 100, 2000, 10e9)


def test_clamping_to_one_packet_and_its_share():
    s = SC.Scaling(0.25)
    assert s.size(1460) == 1460 and s.clamps(1460)        # would be 365 B: one packet instead
    assert s.size(4000) == 1460 and s.clamps(4000)
    assert s.size(100) == 100 and s.clamps(100)           # already under a packet: kept as is
    assert s.size(8000) == 2000 and not s.clamps(8000)
    dm = C.shipped("datamining")
    # clamped iff size < 1460 / 0.25 = 5840: F(5840) = 0.7 + 0.1 x (5840 - 4380) / (10220 - 4380)
    assert s.clamped_share(dm) == pytest.approx(0.725)
    assert SC.Scaling(1.0).clamped_share(dm) == 0 and SC.Scaling(2.0).size(1460) == 2920
    assert s.clamped_share(C.shipped("websearch")) == 0  # 8760 x 0.25 > 1460
    # the scaled CDF is the distribution of the scaled sizes
    scaled = s.cdf(dm)
    rng = random.Random(3)
    xs = [s.exact(dm.sample(rng)) for _ in range(20000)]
    assert sum(x <= 1460 for x in xs) / len(xs) == pytest.approx(scaled.cdf(1460), abs=0.01)
    assert scaled.cdf(1460) == pytest.approx(0.725)


# ---- arrivals ---------------------------------------------------------------------------------

def hosts8x2():
    return G.grid_hosts(8, 2)


def test_grid_hosts_are_the_topology_generators():
    from p4rotor import schedule as S
    from p4rotor.schedule import topology as TP

    topo = TP.generate(S.generate_rotornet(4, 1, 1000, 0), "s.json", hosts_per_rack=3)
    assert G.topology_hosts(topo) == G.grid_hosts(4, 3)


def test_poisson_rate_inter_rack_and_deterministic():
    c = C.shipped("websearch")
    hosts = hosts8x2()
    w = G.generate(hosts, c, access_bps=100e6, load=0.5, seed=11, flows=20000)
    lam = w.meta["flows_per_s_per_host"]
    assert lam == pytest.approx(0.5 * 100e6 / (8 * G.mean_wire_bytes(c)))
    rate = len(w.flows) / w.meta["duration_s"] / len(hosts)
    assert rate == pytest.approx(lam, rel=0.03)
    gaps = [b.start - a.start for a, b in zip(w.flows, w.flows[1:])]
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.05)  # exponential
    rack = {h.name: h.rack for h in hosts}
    assert all(rack[f.src] != rack[f.dst] for f in w.flows)
    per_src = [sum(f.src == h.name for f in w.flows) for h in hosts]
    assert max(per_src) / min(per_src) < 1.2
    assert [f.id for f in w.flows] == list(range(20000))
    assert all(a.start <= b.start for a, b in zip(w.flows, w.flows[1:]))
    again = G.generate(hosts, c, access_bps=100e6, load=0.5, seed=11, flows=20000)
    assert again.flows == w.flows
    other = G.generate(hosts, c, access_bps=100e6, load=0.5, seed=12, flows=200)
    assert other.flows != w.flows[:200]


def test_duration_mode_keeps_arrivals_in_the_window():
    w = G.generate(hosts8x2(), C.shipped("datamining"), access_bps=100e6, load=0.3, seed=1, duration_s=50)
    assert w.meta["duration_s"] == 50 and all(f.start < 50 for f in w.flows)
    expected = 50 * 16 * w.meta["flows_per_s_per_host"]
    assert abs(len(w.flows) - expected) < 4 * math.sqrt(expected)


def test_offered_load_matches_the_target():
    # a light-tailed CDF pins the load tightly; websearch (heavy-tailed) within a few %
    light = C.Cdf((500.0, 20000.0), (0.0, 1.0), "light")
    for c, n, tol in ((light, 20000, 0.02), (C.shipped("websearch"), 40000, 0.05)):
        w = G.generate(hosts8x2(), c, access_bps=50e6, load=0.6, seed=5, flows=n)
        got = G.offered_load(w.flows, 16, 50e6, w.meta["duration_s"])
        assert got == pytest.approx(0.6, rel=tol)


def test_generated_scaling_counts_clamped_flows():
    s = SC.for_emulation(25e6, 100, 2000, 10e9)
    w = G.generate(hosts8x2(), C.shipped("datamining"), access_bps=25e6, load=0.4, seed=2, flows=20000,
                   scaling=s)
    sc = w.meta["scaling"]
    assert sc["expected_clamped_share"] == pytest.approx(0.725)
    assert sc["clamped_share"] == pytest.approx(0.725, abs=0.01)
    assert min(f.size for f in w.flows) == 1460
    assert max(f.size for f in w.flows) <= 973333820 * 0.25 + 1
    # the load is set from the scaled sizes: offered load still on target (light part of the list)
    assert w.meta["mean_size_bytes"] == pytest.approx(s.cdf(C.shipped("datamining")).mean())


@pytest.mark.parametrize("kw,needle", [
    (dict(load=0.0), "load must be > 0 and < 1"),
    (dict(load=1.0), "load must be > 0 and < 1"),
    (dict(load=-0.2), "load must be > 0 and < 1"),
    (dict(flows=None), "not both"),
    (dict(duration_s=1.0), "not both"),
    (dict(flows=0), "flow count must be"),
])
def test_generate_bad_arguments(kw, needle):
    args = dict(access_bps=1e6, load=0.5, seed=1, flows=10)
    args.update(kw)
    with pytest.raises(C.WorkloadError) as ex:
        G.generate(hosts8x2(), C.shipped("websearch"), **args)
    assert needle in one_line(ex)


def test_one_rack_has_no_inter_rack_pairs():
    with pytest.raises(C.WorkloadError) as ex:
        G.generate([G.Host("a", "1", 0), G.Host("b", "2", 0)], C.shipped("websearch"),
                   access_bps=1e6, load=0.5, seed=1, flows=3)
    assert "at least 2 racks" in one_line(ex)


# ---- flow lists -------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", ["json", "csv"])
def test_flow_list_round_trip(tmp_path, suffix):
    w = G.generate(hosts8x2(), C.shipped("websearch"), access_bps=1e8, load=0.5, seed=4, flows=500)
    p = tmp_path / f"f.{suffix}"
    FL.write(p, w.flows, w.meta)
    flows, meta = FL.read(p)
    assert flows == w.flows
    if suffix == "json":
        assert meta == json.loads(json.dumps(w.meta))
        assert json.loads(p.read_text())["columns"] == ["id", "src", "dst", "size", "start"]
    else:
        assert meta == {} and p.read_text().splitlines()[0] == "id,src,dst,size,start"


@pytest.mark.parametrize("name,text,needle", [
    ("a.csv", "id,src,dst,size\n", "a.csv:1: the header must be id,src,dst,size,start"),
    ("a.csv", "id,src,dst,size,start\n0,a,b,10,0.1\n0,a,c,10,0.2\n", "a.csv:3: id 0 already used"),
    ("a.csv", "id,src,dst,size,start\n0,a,a,10,0.1\n", "a.csv:2: src and dst are the same host"),
    ("a.csv", "id,src,dst,size,start\n0,a,b,0,0.1\n", "a.csv:2: size must be >= 1"),
    ("a.csv", "id,src,dst,size,start\n0,a,b,1.5,0.1\n", "a.csv:2: size must be an integer"),
    ("a.csv", "id,src,dst,size,start\n0,a,b,5,-1\n", "a.csv:2: start must be a finite number"),
    ("a.csv", "id,src,dst,size,start\n0,a,b,5\n", "a.csv:2: expected 5 columns"),
    ("a.json", "{", "a.json: bad JSON at line 1"),
    ("a.json", '{"version": 1, "flows": [{"id": 0, "src": "a", "dst": "b", "size": 5}]}',
     "a.json: flow 0: missing start"),
    ("a.json", '{"version": 1, "flows": [{"id": 0, "src": "a", "dst": "b", "size": "5", "start": 0}]}',
     "a.json: flow 0: id, size and start must be JSON numbers"),
    ("a.json", '{"version": 2, "flows": []}', "a.json: expected"),
    ("a.txt", "", "a.txt: a flow list is .json or .csv, not '.txt'"),
])
def test_bad_flow_list_is_one_line(tmp_path, name, text, needle):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(C.WorkloadError) as ex:
        FL.read(p)
    msg = one_line(ex)
    assert msg.startswith(str(tmp_path) + "/") and needle in msg


# ---- the CLI ----------------------------------------------------------------------------------

def test_cli_generate_and_show(tmp_path, capsys, keep_signals):
    out = tmp_path / "flows.json"
    assert cli.main(["workload", "generate", "--workload", "datamining", "--load", "0.4", "--racks", "4",
                     "--hosts-per-rack", "2", "--access-mbps", "25", "--flows", "3000", "--seed", "3",
                     "-o", str(out)]) == 0
    o = capsys.readouterr()
    assert "wrote" in o.err and "offered load" in o.out and "clamped to one packet" in o.out
    doc = json.loads(out.read_text())
    assert len(doc["flows"]) == 3000 and doc["meta"]["scaling"]["factor"] == pytest.approx(0.25)
    assert doc["meta"]["scaling"]["cycle_us"] == 2000 and len(doc["meta"]["hosts"]) == 8
    assert cli.main(["workload", "show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "flows 3000, hosts 8" in shown and "p99" in shown and "x0.25" in shown
    csv = tmp_path / "flows.csv"
    assert cli.main(["workload", "generate", "--cdf", str(REPO / "topologies/workloads/websearch.cdf"),
                     "--load", "0.5", "--topology", str(REPO / "topologies/opera8-topo.json"),
                     "--access-mbps", "100", "--duration", "20", "--no-scale", "-o", str(csv)]) == 0
    capsys.readouterr()
    flows, _ = FL.read(csv)
    assert flows and {f.src for f in flows} <= {f"h{r}x{h}" for r in range(8) for h in range(2)}
    assert cli.main(["workload", "show", str(csv), "--access-mbps", "100", "--duration", "20"]) == 0
    assert "offered load" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["--workload", "websearch", "--load", "0"], "--load must be > 0 and < 1"),
    (["--workload", "websearch", "--load", "1"], "--load must be > 0 and < 1"),
    (["--workload", "websearch", "--load", "1.5"], "--load must be > 0 and < 1"),
    (["--workload", "hadoop", "--load", "0.5"], "unknown workload 'hadoop'"),
    (["--cdf", "BAD", "--load", "0.5"], "not monotone"),
    (["--cdf", "SHORT", "--load", "0.5"], "must end at cumulative probability 1"),
    (["--workload", "websearch", "--load", "0.5", "--access-mbps", "0"], "--access-mbps must be > 0"),
])
def test_cli_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, keep_signals, args, needle):
    (tmp_path / "bad.cdf").write_text("100 0\n50 1\n")
    (tmp_path / "short.cdf").write_text("100 0\n200 0.8\n")
    args = [str(tmp_path / "bad.cdf") if a == "BAD" else str(tmp_path / "short.cdf") if a == "SHORT" else a
            for a in args]
    if "--access-mbps" not in args:
        args += ["--access-mbps", "100"]
    out = tmp_path / "o.json"
    with pytest.raises(SystemExit) as ex:
        cli.main(["workload", "generate", *args, "--racks", "4", "--flows", "10", "-o", str(out)])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("p4rotor: error: ") and needle in err[0]
    assert not out.exists()


def test_cli_show_bad_file(tmp_path, capsys, keep_signals):
    p = tmp_path / "x.csv"
    p.write_text("id,src,dst,size,start\n0,a,b,-3,0\n")
    with pytest.raises(SystemExit) as ex:
        cli.main(["workload", "show", str(p)])
    assert ex.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"p4rotor: error: {p}:2: size must be >= 1 byte, got -3"]
