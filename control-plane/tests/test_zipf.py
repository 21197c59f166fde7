"""A Zipf hot spot over destination racks (workload/hotspot.py, ``--zipf``): the distribution
against its hand-computed weights, reproducible from the seed, the default workload unchanged
byte for byte, bad input one line and exit 2 with nothing written, the setting carried into
fct.json and a replayed list, and the labels of the tables that read it."""

from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path

import pytest

from fuzz_cli import check, energy_fct_doc, energy_flows_doc, fct_doc, _guard  # noqa: F401 (fixture, found by name)
from p4rotor.cli import main
from p4rotor.workload import cdf as C
from p4rotor.workload import flowlist
from p4rotor.workload import generate as G
from p4rotor.workload import hotspot as Z
from p4rotor.workload import results as RS
from p4rotor.workload import scale as SC
from p4rotor.workload.generate import Flow

HOSTS = G.grid_hosts(8, 2)
RACK = {h.name: h.rack for h in HOSTS}


def _gen(n: int, seed: int = 1, zipf: float | None = None, **kw) -> G.Workload:
    return G.generate(HOSTS, C.shipped("websearch"), access_bps=50.7e6, load=0.1, seed=seed, flows=n, zipf=zipf, **kw)


def test_the_weights_are_one_over_rank_to_the_a():
    """8 racks, A = 0.8: H = sum 1/k^0.8 (k = 1..8) = 3.2342; the hottest rack 1/H = 0.309, and
    0.301 of the flows when its own hosts (1/8 of the sources) cannot send there."""
    w = Z.weights(range(8), 0.8, seed=1)
    ranks = Z.ranks(range(8), seed=1)
    assert sorted(ranks.values()) == list(range(1, 9))
    h = sum(k ** -0.8 for k in range(1, 9))
    assert h == pytest.approx(3.2342, abs=1e-4)
    for r, k in ranks.items():
        assert w[r] == pytest.approx(k ** -0.8 / h)
    hottest = min(ranks, key=ranks.get)
    assert w[hottest] == pytest.approx(0.3092, abs=1e-4)
    shares = Z.rack_shares(w, {r: 1 / 8 for r in range(8)})
    assert sum(shares.values()) == pytest.approx(1)
    assert shares[hottest] == pytest.approx(0.3008, abs=1e-4)
    assert 8 * shares[hottest] == pytest.approx(2.41, abs=0.01)  # its downlinks: 2.41x the offered load


def test_200k_draws_meet_the_weights_and_never_the_source_rack():
    wl = _gen(200_000, seed=5, zipf=0.8)
    hot = wl.meta["zipf_hotspot"]
    w = {int(r): v for r, v in hot["weights"].items()}
    expected = {int(r): v for r, v in hot["expected_rack_shares"].items()}
    assert wl.meta["zipf"] == 0.8 and hot["racks_hottest_first"][0] == max(w, key=w.get)
    assert expected == pytest.approx(Z.rack_shares(w, {r: 1 / 8 for r in range(8)}))
    per_src: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    dst_hosts: collections.Counter = collections.Counter()
    src_hosts: collections.Counter = collections.Counter()
    for f in wl.flows:
        assert RACK[f.src] != RACK[f.dst]
        per_src[RACK[f.src]][RACK[f.dst]] += 1
        dst_hosts[f.dst] += 1
        src_hosts[f.src] += 1
    n = len(wl.flows)
    total = sum(per_src.values(), collections.Counter())
    for r in range(8):
        assert total[r] / n == pytest.approx(expected[r], abs=0.01)
        # given the source's rack: the weights without it, renormalised
        cond = Z.destination_weights(w, r)
        got = per_src[r]
        assert got[r] == 0
        for d, p in cond.items():
            assert got[d] / sum(got.values()) == pytest.approx(p, abs=0.01)
        # a host uniform within its rack
        a, b = dst_hosts[f"h{r}x0"], dst_hosts[f"h{r}x1"]
        assert a / (a + b) == pytest.approx(0.5, abs=0.01)
    for h in HOSTS:  # sources stay uniform
        assert src_hosts[h.name] / n == pytest.approx(1 / 16, abs=0.01)
    # the arrival rate is the uniform workload's
    assert wl.meta["flows_per_s_per_host"] == _gen(10).meta["flows_per_s_per_host"]


def test_reproducible_from_the_seed():
    a, b = _gen(2000, seed=11, zipf=0.8), _gen(2000, seed=11, zipf=0.8)
    assert a.flows == b.flows and a.meta == b.meta
    assert _gen(2000, seed=12, zipf=0.8).flows != a.flows
    hottest = {min(Z.ranks(range(8), s).items(), key=lambda x: x[1])[0] for s in range(1, 21)}
    assert len(hottest) > 1  # the permutation follows the seed


# Digests of the default workloads, taken from the generator before --zipf existed: the default
# path draws the same random numbers in the same order, so every list made before is made again.
DEFAULT_FLOWS = {"websearch": "ce89c7575be8d579f8bd7960579df96c73e5b9cd96831de386a7af54c91f4534",
                 "datamining": "49f8cab5cc5dd65827caff60f45e9f22f23ae57fed609eb515eb941145d6df63"}
DEFAULT_META = {"websearch": "69e7d26bb192ea41236e9c859c0943c89aa40e9ac9c6ee58cb8a92b8b07c08c1",
                "datamining": "2a7700856294f1aa63a13d89b358190e436e59149e244e735cb1fc6926453a70"}
DEFAULT_FILE = "2f380765802f51669b36dd4745d90a79f20cd486bda2564ac8fd1a8c3f38f438"


def _sha(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("name", ["websearch", "datamining"])
@pytest.mark.parametrize("zipf", [{}, {"zipf": None}])
def test_the_default_workload_is_unchanged(name, zipf):
    wl = G.generate(HOSTS, C.shipped(name), access_bps=50.7e6, load=0.1, seed=7, flows=2000,
                    scaling=SC.Scaling(0.51, SC.MSS), name=name, **zipf)
    assert hashlib.sha256(json.dumps([[f.id, f.src, f.dst, f.size, f.start] for f in wl.flows]).encode()
                          ).hexdigest() == DEFAULT_FLOWS[name]
    assert _sha(wl.meta) == DEFAULT_META[name] and "zipf" not in wl.meta


def test_the_default_cli_file_is_unchanged_byte_for_byte(tmp_path):
    out = tmp_path / "flows.json"
    check(["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks", "8", "--access-mbps",
           "50.7", "--flows", "500", "--seed", "3", "-o", str(out)], refused=False)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == DEFAULT_FILE


def test_the_cli_writes_and_shows_the_hot_spot(tmp_path, capsys):
    out = tmp_path / "flows.json"
    check(["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks", "8", "--access-mbps",
           "50.7", "--flows", "500", "--zipf", "0.8", "-o", str(out)], refused=False)
    flows, meta = flowlist.read(out)
    assert meta["zipf"] == 0.8 and len(meta["zipf_hotspot"]["racks_hottest_first"]) == 8
    assert main(["workload", "show", str(out)]) == 0
    assert "destinations Zipf 0.8 over racks (hottest rack" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-0.5", "x", "nan", "inf", "-inf", "10.5", "1e400", ""])
def test_bad_zipf_is_one_line_exit_2_nothing_written(tmp_path, value):
    out = tmp_path / "flows.json"
    _, err = check(["workload", "generate", "--workload", "websearch", "--load", "0.1", "--racks", "8",
                    "--access-mbps", "50.7", "--flows", "50", "--zipf", value, "-o", str(out)], (out,), refused=True)
    assert "--zipf" in err
    res = tmp_path / "fct"
    _, err = check(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"), "--output", str(res),
                    "--zipf", value], (res,), refused=True)
    assert "--zipf" in err


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), 11, "0.8", True])
def test_generate_refuses_a_bad_exponent(value):
    with pytest.raises(C.WorkloadError, match="--zipf must be a number in"):
        _gen(10, zipf=value)


def test_only_fct_takes_zipf(tmp_path):
    _, err = check(["experiment", "apps", "--zipf", "0.8", "--output", str(tmp_path / "x")], refused=True)
    assert "takes no --zipf" in err


def _replay(tmp_path: Path, capsys, meta: dict, *args: str) -> str:
    flowlist.write(tmp_path / "flows.json", [Flow(0, "h0x0", "h1x0", 100, 0.0)], meta)
    with pytest.raises(SystemExit) as ex:
        main(["experiment", "fct", "--quick", "--build-dir", str(tmp_path / "no-build"),
              "--output", str(tmp_path / "out"), "--flow-list", str(tmp_path / "flows.json"), *args])
    assert ex.value.code == 2 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


@pytest.mark.parametrize("meta,says", [({}, "records no hot spot"), ({"zipf": 1.2}, "records Zipf 1.2")])
def test_zipf_beside_a_flow_list_must_be_the_lists(tmp_path, capsys, meta, says):
    assert says in _replay(tmp_path, capsys, meta, "--zipf", "0.8")


def test_a_replayed_list_keeps_its_hot_spot(tmp_path):
    from p4rotor.experiments.fct.options import replayed

    wl = _gen(50, zipf=0.8)
    flowlist.write(tmp_path / "hot.json", wl.flows, wl.meta)
    assert replayed(str(tmp_path / "hot.json"), HOSTS, 1.0).meta["zipf"] == 0.8
    assert replayed(str(tmp_path / "hot.json"), HOSTS, 1.0, 0.8).meta["zipf"] == 0.8
    flowlist.write(tmp_path / "flat.json", _gen(50).flows, _gen(50).meta)
    assert replayed(str(tmp_path / "flat.json"), HOSTS, 1.0).meta["zipf"] is None


@pytest.mark.parametrize("bad", [-1, 0, "0.8", 11])
def test_a_flow_lists_zipf_is_checked_on_reading(tmp_path, bad):
    flowlist.write(tmp_path / "f.json", [Flow(0, "h0x0", "h1x0", 100, 0.0)], {"zipf": bad})
    with pytest.raises(C.WorkloadError, match="meta.zipf"):
        flowlist.read(tmp_path / "f.json")


def test_fct_json_records_zipf_and_the_verdict_names_it(tmp_path):
    from p4rotor.experiments.fct.report import report

    for z, tail in ((0.8, "load 0.1, Zipf 0.8, 0 flows"), (None, "load 0.1, 0 flows")):
        d = tmp_path / str(z)
        d.mkdir()
        res = report({}, G.Workload([], {"workload": "websearch", "load": 0.1, "zipf": z}), 5e6, 0.5, 1e3, 100.0, d)
        assert json.loads((d / "fct.json").read_text())["zipf"] == z and tail in res["verdict"]


def test_the_fct_tables_label_a_zipf_point():
    hot, flat, old = dict(fct_doc(), zipf=0.8), dict(fct_doc(), zipf=None), fct_doc()
    rows = RS.table([("hot", hot), ("flat", flat), ("old", old)])
    assert "| hot | websearch | 0.1, Zipf 0.8 |" in rows[2]
    assert all("| websearch | 0.1 | 3 |" in r for r in rows if r.startswith(("| flat", "| old")))
    assert any("| 0.1, Zipf 0.8 |" in r for r in RS.checks_table([("hot", hot)]))
    assert not RS.compare(hot, old)["same"] and RS.compare(flat, old)["same"]
    with pytest.raises(C.WorkloadError, match="zipf"):
        RS.merge([("a", hot), ("b", dict(old, modes={"packet-switch": old["modes"]["opera"]}))])


def test_the_energy_table_labels_a_zipf_point(tmp_path):
    from p4rotor.energy.report import _point

    run = tmp_path / "hot"
    run.mkdir()
    (run / "fct.json").write_text(json.dumps(dict(energy_fct_doc(), zipf=0.8)))
    (run / "flows.json").write_text(json.dumps(energy_flows_doc()))
    out = tmp_path / "out"
    out.mkdir()
    check(["energy", str(run), "--output", str(out)], refused=False)
    table = (out / "table.md").read_text()
    assert "| websearch 10 %, Zipf 0.8 | opera |" in table
    assert [p["zipf"] for p in json.loads((out / "energy.json").read_text())["points"]] == [0.8, 0.8]
    # results made before the key (or with it null) keep their label
    assert _point({"workload": "websearch", "load": 0.1, "run": "x"}) == "websearch 10 %"
    assert _point({"workload": "websearch", "load": 0.1, "zipf": None, "run": "x"}) == "websearch 10 %"
