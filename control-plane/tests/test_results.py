"""results/ holds the canonical runs the docs cite, and its tables are generated from them.

Each check reads the committed files only: a table spliced by hand, a result no doc cites, a run
folder without its provenance or a results/ tree that grew past its budget fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
BUDGET_BYTES = 20_000_000


def tracked(path: str) -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", path], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / p for p in out.stdout.split("\0") if p]


def run_folders() -> list[Path]:
    """Every folder that holds a run's tracked files (results/ itself holds bench.json; a
    generated table.md is not a run)."""
    return sorted({p.parent for p in tracked("results") if p.exists() and p.name != "table.md"} - {RESULTS})


def test_results_stay_under_their_budget():
    size = sum(p.stat().st_size for p in tracked("results") if p.exists())
    assert size < BUDGET_BYTES, f"results/ holds {size / 1e6:.1f} MB of tracked files (budget {BUDGET_BYTES / 1e6:.0f} MB)"


def test_every_run_folder_says_how_it_was_made():
    missing = []
    for d in run_folders():
        own = d / "run.json"
        up = d.parent / "run.json"  # results/scale/run.json covers its fabric sizes
        f = own if own.exists() or d.parent == RESULTS else up
        if not f.exists():
            missing.append(str(d.relative_to(ROOT)))
            continue
        run = json.loads(f.read_text())
        for key in ("command", "results_commit", "wall_time"):
            assert key in run, f"{f.relative_to(ROOT)}: no {key!r}"
    assert not missing, f"run folders without run.json: {missing}"


def test_every_run_folder_is_cited_by_the_docs():
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    uncited = [str(d.relative_to(ROOT)) for d in run_folders() if str(d.relative_to(ROOT)) not in docs]
    assert not uncited, f"results folders no doc cites: {uncited}"


def test_fct_table_is_generated_from_the_canonical_runs():
    table = RESULTS / "fct" / "table.md"
    runs = sorted(str(p.relative_to(ROOT)) for p in (RESULTS / "fct").glob("*/fct.json"))
    paper = ["--paper", "results/fct/opera-nsdi20/buckets.json"]  # as make fct-sweep writes it
    out = subprocess.run([sys.executable, "-m", "p4rotor", "workload", "table", *runs, *paper], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == table.read_text(), "results/fct/table.md differs from `p4rotor workload table` (make fct-sweep)"


def test_performance_doc_bench_block_is_generated_from_bench_json(tmp_path):
    from p4rotor.bench.report import update_doc

    doc = ROOT / "docs" / "performance.md"
    copy = tmp_path / "performance.md"
    copy.write_text(doc.read_text())
    update_doc(copy, json.loads((RESULTS / "bench.json").read_text()), "p4rotor bench")
    assert copy.read_text() == doc.read_text(), "docs/performance.md's bench block differs from results/bench.json"


def test_rotorlb_tables_are_generated_from_their_runs():
    from p4rotor.experiments.rotorlb import table_md

    for table in sorted(RESULTS.glob("rotorlb*/table.md")):
        res = json.loads((table.parent / "rotorlb.json").read_text())
        assert table.read_text() == table_md(res), f"{table.relative_to(ROOT)}: not what rotorlb.json makes"


def test_corropt_optimiser_table_is_generated_from_its_run_and_shown_in_the_docs():
    from p4rotor.faults.corropt_compare import table

    d = RESULTS / "faults-corropt" / "optimiser"
    doc = json.loads((d / "optimiser.json").read_text())
    assert (d / "table.md").read_text() == table(doc), f"{d / 'table.md'}: not what optimiser.json makes"
    assert table(doc) in (ROOT / "docs" / "faults.md").read_text(), "docs/faults.md does not show the generated table"
    assert all(g["summary"][f"{w}_violations_total"] == 0 for g in doc["groups"] for w in ("checker", "optimiser"))


def test_faults_load_tables_are_generated_from_their_runs_and_shown_in_the_docs():
    from p4rotor.experiments.faults_load import load_table

    tables = sorted(RESULTS.glob("faults-load*/table.md"))
    assert tables
    for t in tables:
        res = json.loads((t.parent / "faults.json").read_text())
        assert t.read_text() == load_table(res), f"{t.relative_to(ROOT)}: not what faults.json makes"
        assert load_table(res) in (ROOT / "docs" / "faults.md").read_text(), \
            f"docs/faults.md does not show {t.relative_to(ROOT)}"


def test_apps_table_is_generated_from_its_run_and_shown_in_the_docs():
    from p4rotor.experiments.apps import table_md

    d = RESULTS / "apps-ebpf"
    res = json.loads((d / "apps.json").read_text())
    assert (d / "table.md").read_text() == table_md(res), f"{d / 'table.md'}: not what apps.json makes"
    assert table_md(res) in (ROOT / "docs" / "rotorlb.md").read_text(), "docs/rotorlb.md does not show it"
