"""The regression suite reruns after each publication (tether check, review approve) with the
replay agent, and a case whose labels flip holds the exit at 11."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import copy_project, run_cli
from tether.config import load_project
from tether.demo.drift import apply
from tether.drift.publish import build

TETHER = str(Path(sys.executable).parent / "tether")
KEEP = ("active-emea-fy27q1", "backlog-now", "paid-orders-count")


def test_suite_replays_after_each_publication_and_flags_flips(demo_dir: Path,
                                                              tmp_path: Path) -> None:
    d = copy_project(demo_dir, tmp_path / "proj")
    # drift steps write to the warehouse: this test works on its own copy of it
    (d / "warehouse.duckdb").write_bytes((demo_dir / "warehouse.duckdb").read_bytes())
    text = (d / "tether.yaml").read_text().replace(f"duckdb:///{demo_dir / 'warehouse.duckdb'}",
                                                   "duckdb:///warehouse.duckdb")
    (d / "tether.yaml").write_text(text)
    build(load_project(d))
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(ln + "\n" for ln in (demo_dir / "cases.jsonl").read_text()
                             .splitlines() if json.loads(ln)["case_id"] in KEEP))
    suite = d / "suite"
    assert run_cli("eval", "run", "--server", f"stdio:{TETHER} serve --project {d}", "--cases",
                   str(cases), "--agent", "baseline", "--out", str(suite)).returncode == 0
    assert run_cli("eval", "label", str(suite), "--project", str(d)).returncode == 0
    before = {json.loads(ln)["case_id"]: json.loads(ln)
              for ln in (suite / "labels.jsonl").read_text().splitlines()}
    assert before["active-emea-fy27q1"]["grounded"] is True
    (d / "tether.yaml").write_text((d / "tether.yaml").read_text()
                                   + "\neval: {regression_suite: suite}\n")
    # an additive change publishes at once; the suite replays and nothing flips
    apply(d, "on-hold")
    res = run_cli("check", "--project", str(d), "--json")
    assert res.returncode == 10, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["regression"]["cases"] == len(KEEP) and report["regression"]["flipped"] == []
    # finance redefines "active"; once approved, the suite's active case no longer matches the
    # definition its gold names: the flip holds the exit at 11 and names the case
    apply(d, "redefine-active")
    assert run_cli("check", "--project", str(d)).returncode == 11
    res = run_cli("review", "approve", "1", "--as", "fin.ana", "--project", str(d))
    assert res.returncode == 11, res.stdout + res.stderr
    assert "1 flipped" in res.stdout and "active-emea-fy27q1" in res.stdout
    replayed = next((d / ".tether" / "regression").glob("publication-*/labels.jsonl"))
    assert replayed.is_file()
    items = json.loads(run_cli("ci", "--project", str(d), "--json").stdout)
    assert items[11]["status"] == "holds", items[11]  # context-CI item 12


def test_a_suite_that_is_not_a_run_folder_is_a_clear_error(demo_dir: Path, tmp_path: Path) -> None:
    d = copy_project(demo_dir, tmp_path / "bad")
    build(load_project(d))
    (d / "tether.yaml").write_text((d / "tether.yaml").read_text()
                                   + "\neval: {regression_suite: nowhere}\n")
    res = run_cli("check", "--project", str(d))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "regression_suite 'nowhere' is not a labelled run folder" in res.stderr
    assert "tether eval label" in res.stderr and "Traceback" not in res.stderr
