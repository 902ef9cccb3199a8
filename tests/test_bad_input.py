"""Bad input to every JSON reader ends in one paragraph naming the input, never a traceback or an
HTTP 500: OpenLineage events (a file, stdin, `POST /api/v1/lineage`), dbt manifests and catalogs,
cases.jsonl and recorded traces nested 100,000 (or 500) levels deep; imports over the size and
edge caps; one wide OpenLineage event makes a layer proportional to it; an event dated after the
project clock is refused. Each test runs the real `tether` CLI or HTTP server on real files."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import copy_project, free_port, http_process, run_cli
from test_bad_files import GOOD_CASES, eval_run, good_run, one_paragraph, server  # noqa: F401
from tether.config import load_project
from tether.eval.cases import load_cases
from tether.layers.model import MAX_IMPORT_BYTES, MAX_LAYER_EDGES, layer_path
from tether.textfiles import MAX_JSON_DEPTH

TETHER = str(Path(sys.executable).parent / "tether")
DEEP = 100_000
"""Nested this deep, Python's own JSON parser raises RecursionError."""
MID = 500
"""Nested this deep, Python's JSON parser reads it, and pydantic, deepcopy or json.dumps then
fail somewhere later: tether refuses it at the door too."""
DEPTHS = pytest.mark.parametrize("depth", [DEEP, MID], ids=["100000", "500"])
SAYS_DEEP = f"more than {MAX_JSON_DEPTH} deep"
MANIFEST_V12 = "https://schemas.getdbt.com/dbt/manifest/v12.json"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def run_event(job: str, when: str, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    return {"eventType": "COMPLETE", "eventTime": when,
            "run": {"runId": "0190a1b2-0000-7000-8000-000000000001"},
            "job": {"namespace": "etl", "name": job}, "producer": "https://example.org/tests",
            "inputs": [{"namespace": "pg://lake", "name": n} for n in inputs],
            "outputs": [{"namespace": "duckdb://wh", "name": n} for n in outputs]}


def deep_event(depth: int) -> str:
    """One event line whose run facet is nested ``depth`` deep (as text: json.dumps could not
    write it)."""
    good = json.dumps(run_event("deep", "2026-01-01T00:00:00Z", ["lake.a"], ["lake.b"]))
    return good[:-1] + f', "facets": {{"x": {nested(depth)}}}}}'


def a_product(d: Path) -> tuple[str, str]:
    """(product, its table) of the project."""
    p = load_project(d)
    name = next(n for n, c in p.config.products.items() if c.table)
    return name, str(p.config.products[name].table)


@pytest.fixture
def proj(second_dir: Path, tmp_path: Path) -> Path:
    return copy_project(second_dir, tmp_path / "second")


@contextlib.contextmanager
def serving(d: Path) -> Iterator[tuple[str, str]]:
    """`tether serve --transport http` on a built project; (base URL, an admin token)."""
    assert run_cli("build", "--project", str(d)).returncode == 0
    res = run_cli("token", "add", "emitter", "--admin", "--project", str(d))
    assert res.returncode == 0, res.stderr
    port = free_port()
    with http_process([TETHER, "serve", "--project", str(d), "--transport", "http", "--port",
                       str(port)], port, timeout=60):
        yield f"http://127.0.0.1:{port}", res.stdout.strip()


@pytest.fixture(scope="module")
def http(second_dir: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Path, str, str]]:
    d = copy_project(second_dir, tmp_path_factory.mktemp("posted") / "second")
    with serving(d) as (base, token):
        yield d, base, token


# --- OpenLineage ---------------------------------------------------------------------------------


@DEPTHS
@pytest.mark.parametrize("form", ["lines", "array", "stdin"])
def test_deep_events_are_one_paragraph_naming_the_line(proj: Path, tmp_path: Path, depth: int,
                                                       form: str) -> None:
    good = json.dumps(run_event("ok", "2026-01-01T00:00:00Z", ["lake.a"], ["lake.b"]))
    if form == "array":
        text, shown, line = f"[\n{good},\n{deep_event(depth)}\n]\n", "events.json", 3
    else:
        text, shown, line = f"{good}\n{deep_event(depth)}\n", "events.jsonl", 2
    f = tmp_path / shown
    f.write_text(text)
    if form == "stdin":
        res = subprocess.run([TETHER, "import", "openlineage", "-", "--project", str(proj)],
                             input=text, capture_output=True, text=True, timeout=120)
        shown = "-"
    else:
        res = run_cli("import", "openlineage", str(f), "--project", str(proj))
    one_paragraph(res, 2, f"{shown}:{line}", SAYS_DEEP, "nothing was imported")
    assert not layer_path(proj, "openlineage").exists()


@DEPTHS
def test_deep_events_posted_are_a_400_naming_the_line(http: tuple[Path, str, str],
                                                      depth: int) -> None:
    d, base, token = http
    res = httpx.post(f"{base}/api/v1/lineage", content=deep_event(depth).encode(),
                     headers={"Authorization": f"Bearer {token}",
                              "Content-Type": "application/json"}, timeout=60)
    assert res.status_code == 400, res.text
    said = res.json()["error"]
    assert "POST /api/v1/lineage:1" in said and SAYS_DEEP in said
    assert not layer_path(d, "openlineage").exists()


def test_an_event_dated_after_the_clock_is_refused(proj: Path, tmp_path: Path) -> None:
    """second's clock is 2026-03-15T12:00:00Z; five minutes of skew are allowed."""
    _, table = a_product(proj)
    now = run_event("load", "2026-03-15T12:04:00Z", ["lake.raw"], [f"main.{table}"])
    f = tmp_path / "events.jsonl"
    f.write_text(json.dumps(now) + "\n")
    assert run_cli("import", "openlineage", str(f), "--project", str(proj)).returncode == 0
    before = layer_path(proj, "openlineage").read_bytes()
    future = run_event("load", "2999-01-01T00:00:00Z", ["lake.other"], [f"main.{table}"])
    f.write_text(json.dumps(now) + "\n" + json.dumps(future) + "\n")
    one_paragraph(run_cli("import", "openlineage", str(f), "--project", str(proj)), 2,
                  "events.jsonl:2", "2999-01-01T00:00:00Z", "after the project's clock",
                  "2026-03-15T12:00:00+00:00", "5 minutes")
    assert layer_path(proj, "openlineage").read_bytes() == before


def test_a_job_pinned_in_the_future_by_an_older_layer_is_superseded(proj: Path,
                                                                    tmp_path: Path) -> None:
    """A layer written before the clock check may hold a job dated 2999: a real event wins."""
    product, table = a_product(proj)
    f = tmp_path / "events.jsonl"
    f.write_text(json.dumps(run_event("load", "2026-01-01T00:00:00Z", ["lake.old"],
                                      [f"main.{table}"])) + "\n")
    assert run_cli("import", "openlineage", str(f), "--project", str(proj)).returncode == 0
    path = layer_path(proj, "openlineage")
    layer = json.loads(path.read_text())
    layer["jobs"]["etl/load"]["event_time"] = "2999-01-01T00:00:00Z"
    path.write_text(json.dumps(layer))
    f.write_text(json.dumps(run_event("load", "2026-02-01T00:00:00Z", ["lake.new"],
                                      [f"main.{table}"])) + "\n")
    assert run_cli("import", "openlineage", str(f), "--project", str(proj)).returncode == 0
    layer = json.loads(path.read_text())
    assert layer["jobs"]["etl/load"]["inputs"] == ["lake.new"]
    assert layer["config"]["lineage"] == [{"from": "lake.new", "to": product,
                                           "via": "openlineage:etl/load"}]


def test_a_future_event_posted_is_a_400(http: tuple[Path, str, str]) -> None:
    d, base, token = http
    ev = run_event("load", "2999-01-01T00:00:00Z", ["lake.a"], ["lake.b"])
    res = httpx.post(f"{base}/api/v1/lineage", json=ev,
                     headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert res.status_code == 400 and "after the project's clock" in res.json()["error"]
    assert not layer_path(d, "openlineage").exists()


def test_a_wide_event_makes_a_layer_proportional_to_it(proj: Path, tmp_path: Path) -> None:
    """One event, 300 inputs x 300 outputs: the layer holds the datasets' names once (not the
    90,000 pairs); the 300 edges into the one output a product is built from are kept; when
    tether.yaml later builds a product from another output, its edges come back on refresh."""
    from tether.profiling.layers import refresh_all

    product, table = a_product(proj)
    inputs = [f"lake.landing.source_table_{i:03d}" for i in range(300)]
    outputs = [f"lake.staging.derived_table_{i:03d}" for i in range(299)] + [f"main.{table}"]
    f = tmp_path / "wide.jsonl"
    f.write_text(json.dumps(run_event("wide", "2026-01-01T00:00:00Z", inputs, outputs)) + "\n")
    size = f.stat().st_size
    assert 30_000 < size < 60_000
    res = run_cli("import", "openlineage", str(f), "--project", str(proj), "--json")
    assert res.returncode == 0, res.stderr
    layer = layer_path(proj, "openlineage").stat().st_size
    assert layer < 1_000_000 and layer < 4 * size, (layer, size)
    edges = load_project(proj).config.lineage
    assert sorted(e.from_ for e in edges if e.to == product and e.via == "openlineage:etl/wide"
                  ) == inputs
    assert json.loads(layer_path(proj, "openlineage").read_text())["report"][
        "lineage_left_out"] == 299 * 300
    # a product built from another output, by an edge in tether.yaml: its upstream comes back
    yaml = proj / "tether.yaml"
    text = yaml.read_text()
    assert "\nlineage:\n" in text
    yaml.write_text(text.replace("\nlineage:\n", "\nlineage:\n  - {from: lake.staging.derived_"
                                 f"table_007, to: {product}, via: 'transform:by_hand'}}\n", 1))
    refresh_all(load_project(proj))
    edges = load_project(proj).config.lineage
    assert len([e for e in edges if e.to == "lake.staging.derived_table_007"]) == 300
    assert layer_path(proj, "openlineage").stat().st_size < 1_000_000


# --- dbt -----------------------------------------------------------------------------------------


def manifest(nodes: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"dbt_schema_version": MANIFEST_V12, "project_name": "lake",
                         "adapter_type": "duckdb"}, "nodes": nodes, "sources": {},
            "semantic_models": {}, "metrics": {}}


def model(i: int, deps: list[str]) -> dict[str, Any]:
    return {"unique_id": f"model.lake.m{i}", "resource_type": "model", "name": f"m{i}",
            "schema": "analytics", "depends_on": {"nodes": deps},
            "checksum": {"name": "sha256", "checksum": f"{i:064x}"}}


@DEPTHS
@pytest.mark.parametrize("which", ["manifest", "catalog"])
def test_a_deep_manifest_or_catalog_is_one_paragraph(proj: Path, tmp_path: Path, depth: int,
                                                     which: str) -> None:
    target = tmp_path / "dbt" / "target"
    target.mkdir(parents=True)
    good = json.dumps(manifest({"model.lake.m0": model(0, [])}), indent=1)
    deep = '{\n "metadata": {},\n "nodes": {\n  "x": {"meta": ' + nested(depth) + '}\n }\n}\n'
    (target / "manifest.json").write_text(deep if which == "manifest" else good)
    if which == "catalog":
        (target / "catalog.json").write_text(deep)
    res = run_cli("import", "dbt", str(tmp_path / "dbt"), "--project", str(proj))
    one_paragraph(res, 2, f"{which}.json:4", SAYS_DEEP, "previous import layer was left")
    assert not layer_path(proj, "dbt").exists()


def test_a_manifest_over_the_size_cap_is_refused_by_its_size(proj: Path, tmp_path: Path) -> None:
    """A sparse file of 256 MiB + 1 byte: refused by its size before a byte is read."""
    f = tmp_path / "manifest.json"
    with f.open("wb") as out:
        out.truncate(MAX_IMPORT_BYTES + 1)
    events = tmp_path / "events.jsonl"
    with events.open("wb") as out:
        out.truncate(MAX_IMPORT_BYTES + 1)
    started = time.perf_counter()
    one_paragraph(run_cli("import", "dbt", str(f), "--project", str(proj)), 2,
                  "manifest.json", "over tether's cap of 256 MiB", "268,435,456 bytes")
    one_paragraph(run_cli("import", "openlineage", str(events), "--project", str(proj)), 2,
                  "events.jsonl", "over tether's cap of 256 MiB")
    assert time.perf_counter() - started < 30
    assert not layer_path(proj, "dbt").exists()


def test_a_manifest_over_the_edge_cap_is_refused_and_one_that_serves_little_is_small(
        proj: Path, tmp_path: Path) -> None:
    """2,100 models x 50 dependencies: as products (--new-products) 105,000 edges, over the cap;
    with no model a product, the layer holds none of them."""
    n, deps = 2_100, 50
    nodes = {f"model.lake.m{i}": model(i, [f"model.lake.m{(i + k) % n}" for k in range(1, deps + 1)])
             for i in range(n)}
    f = tmp_path / "manifest.json"
    f.write_text(json.dumps(manifest(nodes)))
    res = run_cli("import", "dbt", str(f), "--new-products", "--project", str(proj))
    one_paragraph(res, 2, f"{n * deps:,} lineage edges", f"cap of {MAX_LAYER_EDGES:,}",
                  "Nothing was imported")
    assert not layer_path(proj, "dbt").exists()
    res = run_cli("import", "dbt", str(f), "--project", str(proj), "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["lineage_left_out"] == n * deps and report["skipped_total"] == n
    assert len(report["skipped"]) == 200
    assert layer_path(proj, "dbt").stat().st_size < 200_000
    shown = run_cli("import", "dbt", str(f), "--project", str(proj))
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) < 60, shown.stdout[-2000:]


# --- evaluation: cases and traces ----------------------------------------------------------------


@DEPTHS
def test_a_deep_case_line_is_named_and_the_others_run(server: str, tmp_path: Path,  # noqa: F811
                                                      depth: int) -> None:
    good = [json.dumps(c) for c in GOOD_CASES]
    deep = good[0].replace('"c1"', '"c9"').replace('"answer": 42', f'"answer": {nested(depth)}')
    assert nested(depth) in deep
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([good[0], deep, good[1]]) + "\n")
    loaded = load_cases(cases)
    assert [c.case_id for c in loaded.cases] == ["c1", "c2"]
    [error] = loaded.errors
    assert error.line == 2 and SAYS_DEEP in error.message, error
    res = eval_run(server, cases, tmp_path / "out")
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 1 and "Traceback" not in out, out
    assert "cases.jsonl:2: not readable JSON" in out and SAYS_DEEP in out, out


@DEPTHS
def test_deep_traces_are_a_cases_error_or_a_review_never_a_traceback(
        server: str, good_run: Path, tmp_path: Path, depth: int) -> None:  # noqa: F811
    """A recorded trace replayed (`--agent replay`) is that case's error naming the file and
    line; a run's trace is labelled for review; the report is written."""
    recorded = tmp_path / "recorded"
    shutil.copytree(good_run, recorded)
    text = (recorded / "traces" / "c1.json").read_text().rstrip()
    (recorded / "traces" / "c1.json").write_text(text[:-1] + f',\n "deep": {nested(depth)}\n}}\n')
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in GOOD_CASES))
    res = run_cli("eval", "run", "--server", server, "--cases", str(cases), "--agent", "replay",
                  "--replay", str(recorded), "--out", str(tmp_path / "again"),
                  "--as-user-via", "none")
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    index = json.loads((tmp_path / "again" / "index.json").read_text())
    entries = {e["case_id"]: e for e in index["entries"]}
    assert entries["c1"]["status"] == "error" and entries["c2"]["status"] == "done"
    line = len(text.splitlines()) + 1
    assert f"c1.json:{line}" in entries["c1"]["error"] and SAYS_DEEP in entries["c1"]["error"]
    # the same trace in a run folder: labelled for review, reported
    res = run_cli("eval", "label", str(recorded), "--project", str(tmp_path), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, res.stderr
    lines = {x["case_id"]: x for x in map(json.loads,
                                          (recorded / "labels.jsonl").read_text().splitlines())}
    assert lines["c2"]["correct"] is True
    assert lines["c1"]["needs_human_review"] is True and lines["c1"]["correct"] is None
    res = run_cli("eval", "report", str(recorded), "--out", str(tmp_path / "report"), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, res.stderr


# --- a tool list to lint, spans to harvest -------------------------------------------------------


@DEPTHS
@pytest.mark.parametrize("lines", [1, 2], ids=["document", "jsonl"])
def test_a_deep_tool_list_or_span_export_is_one_paragraph(proj: Path, tmp_path: Path,
                                                          depth: int, lines: int) -> None:
    """`tether lint FILE` and `tether eval harvest --otel FILE` read JSON from anywhere."""
    f = tmp_path / "deep.json"
    f.write_text(('{"name": "ok"}\n' if lines == 2 else "") + nested(depth) + "\n")
    if lines == 1:
        one_paragraph(run_cli("lint", str(f)), 2, SAYS_DEEP, "deep.json")
    res = run_cli("eval", "harvest", "--otel", str(f), "--out", str(tmp_path / "h.jsonl"),
                  "--project", str(proj))
    one_paragraph(res, 2, SAYS_DEEP if lines == 1 else "deep.json:2")
