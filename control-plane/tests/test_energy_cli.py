"""``p4rotor energy``: the reconstruction keeps every byte, bad input is one line and exit 2 with
nothing written, and docs/energy.md's table is what results/energy/energy.json makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz_cli import check, energy_fct_doc, energy_flows_doc, _guard  # noqa: F401 (fixture, found by name)
from p4rotor.energy import account as AC
from p4rotor.energy import activity as A
from p4rotor.energy import model as M
from p4rotor.energy import rotorlb_run as RL
from p4rotor.energy.report import BEGIN, END, markdown

ROOT = Path(__file__).resolve().parents[2]


def _run(d: Path, fct: dict | None = None, flows: dict | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "fct.json").write_text(json.dumps(fct or energy_fct_doc()))
    (d / "flows.json").write_text(json.dumps(flows or energy_flows_doc()))
    return d


def test_reconstruction_keeps_every_byte(tmp_path):
    run = _run(tmp_path / "run")
    act = A.from_fct_run(run, "opera")
    fl = energy_flows_doc()
    wire = sum(f["size"] + -(-f["size"] // 1460) * 54 for f in fl["flows"])
    acks = sum(-(-(-(-f["size"] // 1460)) // 2) * 66 for f, p in zip(fl["flows"], energy_fct_doc()["modes"]["opera"]
                                                                   ["per_flow"]) if p[1] == "low-latency")
    up = sum(b[1] for p in act.ports.values() if p.cls == "host-link" and p.channel == 0 for b in p.bins.values())
    assert up == pytest.approx(wire + acks)
    # every rack-to-rack byte leaves a ToR uplink and arrives on a rotor port
    tx = sum(b[1] for p in act.ports.values() if p.cls == "tor-uplink" for b in p.bins.values())
    rx = sum(b[1] for p in act.ports.values() if p.cls == "rotor-port" for b in p.bins.values())
    assert tx == pytest.approx(rx) and tx >= wire + acks - 1e-6  # multi-hop paths cross more than one
    assert len(act.ports) == 16 * 2 + 8 * 4 * 2


def test_predictive_adds_no_delay_and_always_on_saves_nothing(tmp_path):
    res = AC.account(A.from_fct_run(_run(tmp_path / "run"), "rotornet"), M.load())
    p = res["policies"]
    assert p["always-on"]["saving"] == 0 and p["predictive"]["delay"]["frames_delayed"] == 0
    assert 0 < p["tos"]["saving"] < 1 and 0 < p["predictive"]["saving"] < 1
    assert p["tos"]["delay"]["frames_delayed"] > 0


def test_the_command_writes_json_table_and_plot(tmp_path):
    run = _run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    check(["energy", str(run), "--output", str(out)], refused=False)
    doc = json.loads((out / "energy.json").read_text())
    assert [p["mode"] for p in doc["points"]] == ["opera", "rotornet"]
    assert (out / "energy.png").stat().st_size > 0 and "| TOS saving |" in (out / "table.md").read_text()


def _model(tmp_path: Path, edit) -> Path:
    doc = json.loads((ROOT / "topologies" / "energy" / "lpi.json").read_text())
    edit(doc)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("edit,says", [
    (lambda d: d["classes"]["host-link"]["L1"].update(power_w=-0.1), "must be >= 0"),
    (lambda d: d["classes"]["rotor-port"]["L1"].update(exit_us=5000), "longer than the schedule's slot"),
    (lambda d: d["classes"]["tor-uplink"].update(L3={"power_w": 0}), "unknown state 'L3'"),
])
def test_bad_model_is_one_line_exit_2_nothing_written(tmp_path, edit, says):
    run = _run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    _, err = check(["energy", str(run), "--model", str(_model(tmp_path, edit)), "--output", str(out)],
                   (out / "energy.json", out / "table.md", out / "energy.png"), refused=True)
    assert says in err


def test_bad_runs_are_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    outs = (out / "energy.json",)
    conn = tmp_path / "conn"
    conn.mkdir()
    (conn / "connectivity.json").write_text("{}")
    _, err = check(["energy", str(conn), "--output", str(out)], outs, refused=True)
    assert "no per-flow or per-port activity" in err
    fct = energy_fct_doc()
    fct["modes"]["opera"]["per_flow"][0][3] = 1e12  # a flow that would run for 300 years
    _, err = check(["energy", str(_run(tmp_path / "long", fct)), "--output", str(out)], outs, refused=True)
    check(["energy", str(_run(tmp_path / "ok")), "--modes", "packet-switch"], refused=True)
    check(["energy", str(_run(tmp_path / "ok")), "--output", str(tmp_path / "missing")], refused=True)


def test_docs_table_is_generated_from_results():
    res = ROOT / "results" / "energy" / "energy.json"
    if not res.exists():
        pytest.skip("no results/energy/energy.json")
    doc = json.loads(res.read_text())
    text = (ROOT / "docs" / "energy.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN) + 1:text.index(END)]
    assert block == markdown(doc["points"], doc["model"]), "docs/energy.md's table differs from results/energy"
    assert (res.parent / "table.md").read_text() == block


def test_the_experiments_energy_lines(tmp_path):
    from p4rotor.energy.report import summary_for

    lines = summary_for(_run(tmp_path / "run"))
    assert [ln.split(";")[0] for ln in lines] == ["energy (opera", "energy (rotornet"]
    assert "predictive saves" in lines[0]
    assert summary_for(tmp_path / "nothing")[0].startswith("energy: not accounted")


def test_a_rotorlb_run_is_accounted_from_its_plan():
    run = ROOT / "results" / "rotorlb"
    if not (run / "rotorlb.json").exists():
        pytest.skip("no results/rotorlb")
    act = RL.from_run(run)
    res = AC.account(act, M.load())
    # the frames delivered in the measured windows, as the run counted them (each crosses >= 1 uplink)
    doc = json.loads((run / "rotorlb.json").read_text())
    H = 7 * doc["schedule"]["slot_us"] * doc["dilation"] / 1e6 * doc["cycles"]
    delivered = sum(r["rotorlb"]["throughput_fps"] * H for r in doc["rows"])
    down = sum(b[0] for p in act.ports.values() if p.cls == "rotor-port" for b in p.bins.values())
    assert down >= delivered * 0.999
    assert res["policies"]["predictive"]["saving"] >= res["policies"]["trs"]["saving"]


def test_a_small_rotorlb_run(tmp_path):
    from fuzz_cli import energy_rotorlb_doc

    d = tmp_path / "lb"
    d.mkdir()
    (d / "rotorlb.json").write_text(json.dumps(energy_rotorlb_doc()))
    code, err = check(["energy", str(d)], refused=False)
    bad = energy_rotorlb_doc()
    bad["rows"][0]["pairs"] = [[1, 1]]
    (d / "rotorlb.json").write_text(json.dumps(bad))
    check(["energy", str(d)], refused=True)
