"""FCT results beside Opera's paper, bucket by bucket (workload/paper.py, ``workload table --paper``)."""

from __future__ import annotations

import json

import pytest

from p4rotor.cli import main
from p4rotor.workload import paper as P
from p4rotor.workload.cdf import WorkloadError

DOC = {"source": {"paper": "[Opera20] Figures 7 and 9", "repo": "opera-sim", "commit": "c09861386c21"},
       "points": [
           {"workload": "websearch", "load": 0.1, "network": "opera",
            "buckets": [{"class": "low-latency", "bucket": "<100KB", "flows": 100, "fct_mean_us": 100.0,
                         "fct_p99_us": 300.0}]},
           {"workload": "datamining", "load": 0.1, "network": "clos-3to1", "variant": "no-prio",
            "buckets": [{"class": "low-latency", "bucket": "<100KB", "flows": 9, "fct_mean_us": 1.0, "fct_p99_us": 2.0}]},
           {"workload": "datamining", "load": 0.1, "network": "clos-3to1", "variant": "ideal-prio",
            "buckets": [{"class": "low-latency", "bucket": "<100KB", "flows": 7, "fct_mean_us": 10.0,
                         "fct_p99_us": 20.0}]}]}


def _run(workload, load, modes):
    per = {"low-latency": {"<100KB": {"flows": 50, "unfinished": 0, "fct_mean_s": 0.004, "fct_p99_s": 0.015,
                                      "slowdown_mean": 1.5, "slowdown_p99": 3.0}},
           "bulk": {">10MB": {"flows": 2, "unfinished": 0, "fct_mean_s": 6.0, "fct_p99_s": 9.0,
                              "slowdown_mean": 2.0, "slowdown_p99": 3.0}}}
    return {"workload": workload, "load": load, "flows": 52, "dilation": 100.0,
            "modes": {m: {"classes": per, "unfinished": 0} for m in modes}}


def test_a_run_beside_the_papers_network_in_real_time_and_a_point_it_lacks_said():
    lines = P.table([("ws10", _run("websearch", 0.1, ["opera", "rotornet"])),
                     ("dm10", _run("datamining", 0.1, ["packet-switch"]))], DOC, "paper.json")
    rows = [ln for ln in lines if ln.startswith("| ws10") or ln.startswith("| dm10")]
    # 4 ms wall at dilation 100 is 40 µs of the real system; the paper's Opera took 100 µs.
    assert "| ws10 | opera | low-latency <100KB | 50 | 40.0 | 150 | opera | 100 | 100 | 300 | 0.40 |" in rows
    assert "| ws10 | opera | bulk >10MB | 2 | 60,000 | 90,000 | opera | - | - | - | - |" in rows
    assert any("rotornet | all" in r and "not in the authors' published outputs" in r for r in rows)
    # The packet switch beside the 3:1 Clos's solid line (priority queueing), not its dashed one.
    assert "| dm10 | packet-switch | low-latency <100KB | 50 | 40.0 | 150 | clos-3to1 | 7 | 10.0 | 20.0 | 4.00 |" in rows
    assert "[Opera20]" in lines[0] and "c098613" in lines[0]


def test_the_table_command_adds_the_paper_and_refuses_a_bad_paper_file_in_one_line(tmp_path, capsys):
    f = tmp_path / "ws10" / "fct.json"
    f.parent.mkdir()
    f.write_text(json.dumps(_run("websearch", 0.1, ["opera"])))
    p = tmp_path / "paper.json"
    p.write_text(json.dumps(DOC))
    assert main(["workload", "table", str(f), "--paper", str(p)]) == 0
    assert "| ws10 | opera | low-latency <100KB | 50 | 40.0" in capsys.readouterr().out
    p.write_text(json.dumps({"points": [{"workload": "websearch"}]}))
    with pytest.raises(SystemExit) as ex:
        main(["workload", "table", str(f), "--paper", str(p)])
    err = capsys.readouterr().err.strip()
    assert ex.value.code == 2 and "\n" not in err and "not the paper's points" in err
    with pytest.raises(WorkloadError):
        P.paper_points({"points": 3}, "x")
