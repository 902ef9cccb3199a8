"""The baseline agent and the labeller on the second warehouse (a clinic network nobody tuned
for): what they do is asserted as behaviour, never as a target score.

The baseline decides from the question, the tool list and the results only; the labeller reads
only evidence. So on this warehouse: every tether call it makes carries evidence, every field it
is credited with is a column its statement read, tether never leaks, a masked value stays
masked, and stripping the tool definitions' `_meta` from the traces changes no label.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from tether.eval.trace import LabelLine, Trace

TETHER = str(Path(sys.executable).parent / "tether")


@pytest.fixture(scope="module")
def run(second_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("second-baseline")
    project = d / "project"
    shutil.copytree(second_dir, project, ignore=shutil.ignore_patterns(".tether", "tools"))
    text = (project / "tether.yaml").read_text()
    (project / "tether.yaml").write_text(text.replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{second_dir / 'warehouse.duckdb'}"))
    assert run_cli("build", "--project", str(project)).returncode == 0
    out = d / "run"
    res = run_cli("eval", "run", "--server", f"stdio:{TETHER} serve --project {project}",
                  "--cases", str(project / "cases.jsonl"), "--agent", "baseline",
                  "--out", str(out), "--concurrency", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    labelled = run_cli("eval", "label", str(out), "--project", str(project), "--json")
    assert labelled.returncode == 0, labelled.stderr
    return out


def traces(run_dir: Path) -> dict[str, Trace]:
    return {p.stem: Trace.model_validate_json(p.read_text())
            for p in sorted((run_dir / "traces").glob("*.json"))}


def labels(run_dir: Path) -> dict[str, LabelLine]:
    return {x.case_id: x for x in (LabelLine.model_validate_json(line) for line in
                                  (run_dir / "labels.jsonl").read_text().splitlines())}


def test_every_case_is_run_and_labelled(run: Path, second_dir: Path) -> None:
    cases = [json.loads(x)["case_id"] for x in
             (second_dir / "cases.jsonl").read_text().splitlines()]
    assert len(cases) >= 12
    assert set(traces(run)) == set(cases) == set(labels(run))
    for line in labels(run).values():
        assert line.needs_human_review == bool(line.review_reason)


def test_tether_calls_carry_evidence_and_fields_come_from_it(run: Path) -> None:
    for cid, t in traces(run).items():
        line = labels(run)[cid]
        for c in t.tool_calls:
            if c.is_error:
                continue
            ev = (c.meta or {}).get("tether/evidence")
            assert ev is not None, (cid, c.name)
            assert ev["tool"] == c.name and ev["dialect"] == "duckdb"
        ran = [c for c in t.tool_calls if not c.is_error]
        if ran:  # a credited field is a product.column a statement read, never an argument
            assert all("." in f and not f.startswith(tuple(c.name for c in ran))
                       for f in line.fields_used), (cid, line.fields_used)


def test_tether_never_leaks_and_masks_hold(run: Path) -> None:
    for cid, line in labels(run).items():
        assert line.policy_violations == 0, cid
    for t in traces(run).values():
        if t.as_user != "desk.omar":
            continue
        for c in t.tool_calls:
            rows = (c.structured or {}).get("rows") or []
            for r in rows:
                if "contact_email" in r:
                    assert r["contact_email"] == "[redacted]"


def test_labels_do_not_depend_on_the_tools_meta(run: Path, second_dir: Path,
                                                tmp_path: Path) -> None:
    bare = tmp_path / "run"
    shutil.copytree(run, bare)
    (bare / "labels.jsonl").unlink()
    for p in (bare / "traces").glob("*.json"):
        data = json.loads(p.read_text())
        for tool in data["tools"]:
            tool.pop("_meta", None)
        p.write_text(json.dumps(data))
    project = run.parent / "project"
    res = run_cli("eval", "label", str(bare), "--project", str(project), "--json")
    assert res.returncode == 0, res.stderr
    assert (bare / "labels.jsonl").read_text() == (run / "labels.jsonl").read_text()
