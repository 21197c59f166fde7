"""``p4rotor workload redivide``: a finished run's flows over another calibration (workload/redivide.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from p4rotor.cli import main
from p4rotor.workload import ideal as I
from p4rotor.workload import redivide as RD
from p4rotor.workload.cdf import WorkloadError

FP = {"emulation": "fabric", "target": "ebpf", "racks": 8, "hosts_per_rack": 2, "rotors": 4, "slot_us": 100000,
      "night_us": 10000, "dilation": 100.0, "epsilon_us": 150.0, "access_bps": 5.77e6}


def _cal(base_1: float = 0.7e-3) -> I.Calibration:
    one = [("1-1", base_1 + i * 1e-5, i % 2) for i in range(200)] + [("2-2", 0.9e-3 + i * 1e-5, i % 2) for i in range(200)]
    sized = [("1-1", n * 1448, 0.7e-3 + (n - 1) * 2e-3, r) for n in (1, 2, 5, 10) for r in range(2)]
    return I.calibration_from(one, sized, 5.77e6, FP)


def _run(cal: I.Calibration) -> dict:
    # 1-1 flows of one packet at 0.65, 0.69, 0.71 ... ms: two of them below the base of 0.7 ms
    per = [[i, "low-latency", "<100KB", (0.65 + 0.02 * i) * 1e-3, 100, "1-1"] for i in range(10)]
    per += [[10, "low-latency", "<100KB", None, 100, "2-2"], [11, "bulk", ">10MB", 30.0, 20_000_000, "none"]]
    return {"workload": "datamining", "load": 0.4, "calibration": {"fabric": cal.to_json()},
            "modes": {"opera": {"per_flow": per}}}


def _row(rows, cls, bucket):
    (r,) = [r for r in rows if r["class"] == cls and r["bucket"] == bucket]
    return r


def test_the_run_over_its_own_calibration_is_the_run_and_a_lower_base_counts_fewer_below_1():
    own = _cal()
    rows = RD.redivide(_run(own), {"fabric": own}, "run", "same")
    r = _row(rows, "low-latency", "<100KB")
    assert (r["flows"], r["finished"]) == (11, 10)
    assert r["own"] == r["other"] and r["own"]["below_1"] == 3   # 0.65, 0.67, 0.69 ms under 0.7 ms
    lower = _cal(0.6e-3)  # a quieter boot: the 1-1 base 0.6 ms
    r = _row(RD.redivide(_run(own), {"fabric": lower}, "run", "lower"), "low-latency", "<100KB")
    assert r["other"]["below_1"] == 0
    assert r["other"]["slowdown_mean"] == pytest.approx(r["own"]["slowdown_mean"] * 0.7 / 0.6)
    assert _row(rows, "bulk", ">10MB")["own"]["below_1"] == 0


def test_rows_without_a_path_class_or_another_fabric_are_refused(tmp_path):
    run = _run(_cal())
    old = json.loads(json.dumps(run))
    old["modes"]["opera"]["per_flow"] = [f[:5] for f in old["modes"]["opera"]["per_flow"]]
    with pytest.raises(WorkloadError, match="no path class"):
        RD.redivide(old, {"fabric": _cal()}, "old", "cal")
    other = dataclasses.replace(_cal(), fingerprint=dict(FP, dilation=50.0))
    with pytest.raises(WorkloadError, match="dilation"):
        RD.redivide(run, {"fabric": other}, "run", "cal")
    with pytest.raises(WorkloadError, match="mode packet-switch has no calibration"):
        RD.redivide(dict(run, modes={"packet-switch": run["modes"]["opera"]}), {"fabric": _cal()}, "run", "cal")
    # A mode the other file has no calibration for is said and skipped; none at all is refused.
    both = dict(run, calibration={"fabric": _cal().to_json(), "packet-switch": _cal().to_json()},
                modes={"opera": run["modes"]["opera"], "packet-switch": run["modes"]["opera"]})
    rows = RD.redivide(both, {"fabric": _cal()}, "run", "cal")
    assert "packet-switch: not divided again: cal has no packet-switch calibration" in RD.lines(rows)
    assert any(r["mode"] == "opera" and r.get("bucket") == "<100KB" for r in rows)
    with pytest.raises(WorkloadError, match="no calibration for any mode"):
        RD.redivide(both, {"other": _cal()}, "run", "cal")


def test_the_command_prints_both_shares_and_refuses_in_one_line(tmp_path, capsys):
    f, c = tmp_path / "fct.json", tmp_path / "calibration.json"
    f.write_text(json.dumps(_run(_cal())))
    c.write_text(json.dumps({"fabric": _cal(0.6e-3).to_json()}))
    assert main(["workload", "redivide", str(f), "--calibration", str(c)]) == 0
    out = capsys.readouterr().out
    assert "opera: below 1 with its own calibration 3 of 11 (27.27 %), with the other 0 of 11 (0.00 %)" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"fabric": {"base_s": {}}}))
    with pytest.raises(SystemExit) as ex:
        main(["workload", "redivide", str(f), "--calibration", str(bad)])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a calibration" in err
