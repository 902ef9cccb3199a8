"""OpenLineage run events, from a file and over HTTP (POST /api/v1/lineage, the official
openlineage-python client's HTTP transport): lineage edges, schema facets fingerprinted, and a
dataset that lost a column upstream is a lineage event for every product below it; on the demo
and on the second warehouse."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import copy_project, free_port, http_process, run_cli
from olclient import post_with_openlineage_client
from tether.config import Project, load_project
from tether.layers.model import layer_path

TETHER = str(Path(sys.executable).parent / "tether")
JOB = "etl"


def upstream_product(project: Project) -> tuple[str, set[str]]:
    """A product with another product below it in the lineage (else any product), and every
    product below it, itself included."""
    lineage = project.config.lineage
    products = project.config.products
    top = next((e.from_ for e in lineage if e.from_ in products and e.to in products),
               next(iter(products)))
    below = {top}
    frontier = [top]
    while frontier:
        node = frontier.pop()
        for e in lineage:
            if e.from_ == node and e.to in products and e.to not in below:
                below.add(e.to)
                frontier.append(e.to)
    return top, below


def event(project: Project, product: str, columns: list[str], when: str) -> dict[str, Any]:
    table = project.config.products[product].table
    return {"eventType": "COMPLETE", "eventTime": when,
            "run": {"runId": "0190a1b2-0000-7000-8000-000000000001"},
            "job": {"namespace": JOB, "name": f"load_{product}"},
            "producer": "https://example.org/tests", "schemaURL":
                "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "inputs": [{"namespace": "postgres://crm:5432", "name": f"landing.raw_{product}",
                        "facets": {"schema": {"fields": [{"name": c, "type": "VARCHAR"}
                                                         for c in columns]}}}],
            "outputs": [{"namespace": "duckdb://warehouse", "name": f"main.{table}"}]}


@pytest.fixture(params=["demo", "second"])
def project_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    source: Path = request.getfixturevalue(f"{request.param}_dir")
    d = copy_project(source, tmp_path / request.param)
    assert run_cli("build", "--project", str(d)).returncode == 0
    return d


def test_events_from_a_file_make_edges_and_a_lost_column_is_drift(project_dir: Path) -> None:
    project = load_project(project_dir)
    product, below = upstream_product(project)
    events = project_dir / "lineage.jsonl"
    events.write_text(json.dumps(event(project, product, ["id", "region", "amount"],
                                       "2026-01-01T00:00:00Z")) + "\n")
    res = run_cli("import", "openlineage", str(events), "--project", str(project_dir), "--json")
    assert res.returncode == 0, res.stderr
    edge = {"from": f"landing.raw_{product}", "to": product, "via": f"openlineage:{JOB}/load_"
            f"{product}"}
    assert json.loads(res.stdout)["edges"] == [edge]
    loaded = load_project(project_dir)
    assert edge in [e.model_dump(by_alias=True, exclude_none=True) for e in loaded.config.lineage]
    origin = loaded.origin("lineage", len(loaded.config.lineage) - 1)
    assert origin is not None and origin.kind == "openlineage"
    first = run_cli("check", "--project", str(project_dir), "--json")
    assert first.returncode in (0, 10), first.stderr  # the new edge: no tool changes meaning
    # the upstream dataset loses a column; tether check re-reads the moved file
    with events.open("a") as f:
        f.write(json.dumps(event(project, product, ["id", "amount"], "2026-01-02T00:00:00Z"))
                + "\n")
    data = json.loads(run_cli("check", "--project", str(project_dir), "--json").stdout)
    schema = [e for e in data["events"] if e["kind"] == "schema"]
    assert [(e["subject"], e["details"]["removed"]) for e in schema] == [
        (f"dataset:landing.raw_{product}", ["region"])]
    lineage = {e["subject"]: e for e in data["events"] if e["kind"] == "lineage_changed"}
    assert set(lineage) == below
    assert lineage[product]["details"]["columns_lost"] == {f"landing.raw_{product}": ["region"]}
    assert json.loads(layer_path(project_dir, "openlineage").read_text())["datasets"][
        f"landing.raw_{product}"]["columns"] == {"id": "VARCHAR", "amount": "VARCHAR"}


@pytest.mark.parametrize("line, said", [
    ('{"eventTime": "2026-01-01T00:00:00Z"}', "job"),
    ('{"eventTime": "2026-01-01T00:00:00Z", "job": {"namespace": "x", "name": "y"}, '
     '"inputs": "not a list"}', "inputs"),
    ('{"eventTime": "2026-01-01T00:00:00Z", "job": {"namespace"', "not valid JSON"),
    ('{"eventTime": "yesterday", "job": {"namespace": "x", "name": "y"}}', "eventTime"),
    ('{"eventTime": "2026-01-01T00:00:00", "job": {"namespace": "x", "name": "y"}}',
     "no UTC offset"),
])
def test_an_invalid_event_exits_2_naming_the_line_and_keeps_the_layer(
        second_dir: Path, tmp_path: Path, line: str, said: str) -> None:
    d = copy_project(second_dir, tmp_path / "second")
    project = load_project(d)
    product, _ = upstream_product(project)
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(event(project, product, ["a"], "2026-01-01T00:00:00Z")) + "\n")
    assert run_cli("import", "openlineage", str(good), "--project", str(d)).returncode == 0
    before = layer_path(d, "openlineage").read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "\n" + line + "\n")
    res = run_cli("import", "openlineage", str(bad), "--project", str(d))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "bad.jsonl:3" in res.stderr and said in res.stderr, res.stderr
    assert layer_path(d, "openlineage").read_bytes() == before
    res = run_cli("import", "openlineage", "-", "--project", str(d))  # stdin: empty is nothing
    assert res.returncode == 0, res.stderr


def test_lineage_over_http_for_admin_and_runner_tokens_only(second_dir: Path,
                                                            tmp_path: Path) -> None:
    d = copy_project(second_dir, tmp_path / "second")
    assert run_cli("build", "--project", str(d)).returncode == 0
    project = load_project(d)
    user, other = list(project.config.policies.users)[:2]  # one token per user
    tokens = {}
    for key, args in (("user", [user]), ("admin", ["lineage-emitter", "--admin"]),
                      ("runner", [other, "--runner"])):
        res = run_cli("token", "add", *args, "--project", str(d))
        assert res.returncode == 0, res.stderr
        tokens[key] = res.stdout.strip()
    listed = json.loads(run_cli("token", "list", "--project", str(d), "--json").stdout)
    assert {r["user"]: r["admin"] for r in listed}["lineage-emitter"] is True
    product, below = upstream_product(project)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ev = event(project, product, ["id", "kind"], "2026-02-01T00:00:00Z")
    with http_process([TETHER, "serve", "--project", str(d), "--transport", "http", "--port",
                       str(port)], port, timeout=30):
        url = f"{base}/api/v1/lineage"
        assert httpx.post(url, json=ev).status_code == 401
        refused = httpx.post(url, json=ev, headers={"Authorization": f"Bearer {tokens['user']}"})
        assert refused.status_code == 403 and "admin" in refused.json()["error"]
        assert not layer_path(d, "openlineage").exists()
        bad = httpx.post(url, content=b'{"eventTime": "x"}',
                         headers={"Authorization": f"Bearer {tokens['admin']}"})
        assert bad.status_code == 400 and "job" in bad.json()["error"]
        assert "eventTime" in bad.json()["error"] and "POST /api/v1/lineage:1" in bad.json()[
            "error"]
        # the official OpenLineage client's HTTP transport, as an emitter would send it
        post_with_openlineage_client(base, tokens["admin"], ev)
        layer = json.loads(layer_path(d, "openlineage").read_text())
        assert layer["config"]["lineage"] == [{"from": f"landing.raw_{product}", "to": product,
                                               "via": f"openlineage:{JOB}/load_{product}"}]
        first = run_cli("check", "--project", str(d), "--json")
        assert first.returncode in (0, 10), first.stderr  # the dataset's first schema
        ok = httpx.post(url, json=event(project, product, ["id"], "2026-02-02T00:00:00Z"),
                        headers={"Authorization": f"Bearer {tokens['runner']}"})
        assert ok.status_code == 200 and ok.json() == {"accepted": 1}
        # valid events the project cannot take (a damaged layer beside it): the sender is told
        # so without the server's file names, which go to its log
        damaged = layer_path(d, "dbt")
        damaged.write_text("{")
        failed = httpx.post(url, json=ev, headers={"Authorization": f"Bearer {tokens['admin']}"})
        damaged.unlink()
        assert failed.status_code == 500, failed.text
        assert ".tether" not in failed.text and str(d) not in failed.text
        assert "tether.yaml" not in failed.text
    data = json.loads(run_cli("check", "--project", str(d), "--json").stdout)
    schema = [e for e in data["events"] if e["kind"] == "schema"]
    assert [(e["subject"], e["details"]["removed"]) for e in schema] == [
        (f"dataset:landing.raw_{product}", ["kind"])]
    assert {e["subject"] for e in data["events"] if e["kind"] == "lineage_changed"} == below


def test_event_times_compare_as_instants_not_text(second_dir: Path, tmp_path: Path) -> None:
    """10:00+02:00 is 08:00Z, an hour before 09:00Z, though it sorts after it as text."""
    d = copy_project(second_dir, tmp_path / "second")
    project = load_project(d)
    product, _ = upstream_product(project)
    early = event(project, product, ["a"], "2026-01-01T10:00:00+02:00")
    late = event(project, product, ["a", "b"], "2026-01-01T09:00:00Z")
    late["outputs"] = [{"namespace": "duckdb://warehouse", "name": "main.elsewhere"}]
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(late) + "\n" + json.dumps(early) + "\n")
    assert run_cli("import", "openlineage", str(events), "--project", str(d)).returncode == 0
    layer = json.loads(layer_path(d, "openlineage").read_text())
    assert layer["jobs"][f"{JOB}/load_{product}"]["outputs"] == ["main.elsewhere"]
    assert layer["datasets"][f"landing.raw_{product}"]["columns"] == {"a": "VARCHAR",
                                                                     "b": "VARCHAR"}


def test_a_deleted_events_file_is_a_warning_and_its_edges_stay(second_dir: Path,
                                                               tmp_path: Path) -> None:
    d = copy_project(second_dir, tmp_path / "second")
    assert run_cli("build", "--project", str(d)).returncode == 0
    project = load_project(d)
    product, _ = upstream_product(project)
    events = d / "lineage.jsonl"
    events.write_text(json.dumps(event(project, product, ["a"], "2026-01-01T00:00:00Z")) + "\n")
    assert run_cli("import", "openlineage", str(events), "--project", str(d)).returncode == 0
    assert run_cli("check", "--project", str(d)).returncode in (0, 10)
    events.unlink()
    res = run_cli("check", "--project", str(d), "--json")
    assert res.returncode in (0, 10) and "Traceback" not in res.stderr, res.stderr
    assert "the OpenLineage events file lineage.jsonl is gone" in res.stderr
    assert json.loads(res.stdout)["warnings"]
    edges = json.loads(layer_path(d, "openlineage").read_text())["config"]["lineage"]
    assert [e["to"] for e in edges] == [product]
    again = run_cli("check", "--project", str(d))
    assert again.returncode == 0 and "gone" not in again.stderr  # said once


def _waits_on_a_lock(pid: int) -> bool:
    """Whether process ``pid`` is blocked waiting for a file lock (Linux: /proc/locks lists a
    waiter with ``->``)."""
    return any(line.split()[1] == "->" and str(pid) in line.split()
               for line in Path("/proc/locks").read_text().splitlines() if len(line.split()) > 2)


@pytest.mark.skipif(not Path("/proc/locks").is_file(), reason="needs Linux's /proc/locks")
def test_an_import_waits_for_the_layer_lock_and_loses_no_events(second_dir: Path,
                                                                tmp_path: Path) -> None:
    """`tether import openlineage` takes the layer's lock before it reads the layer it folds
    into: while another writer holds it, the import waits, then folds into what that writer
    left (so neither loses the other's events)."""
    import subprocess
    import time

    from tether.profiling.layers import fold_openlineage, layer_lock

    d = copy_project(second_dir, tmp_path / "second")
    project = load_project(d)
    product, _ = upstream_product(project)
    lines = []
    for n in range(2):
        ev = event(project, product, ["a"], f"2026-01-0{n + 1}T00:00:00Z")
        ev["job"]["name"] = f"job_{n}"
        lines.append(json.dumps(ev) + "\n")
    (tmp_path / "events.jsonl").write_text(lines[0])
    with layer_lock(d, "openlineage"):
        proc = subprocess.Popen([TETHER, "import", "openlineage", str(tmp_path / "events.jsonl"),
                                 "--project", str(d)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not _waits_on_a_lock(proc.pid):
            assert proc.poll() is None, "the import ran without waiting for the lock"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        fold_openlineage(d, lines[1], "http")  # the other writer, while the import waits
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    layer = json.loads(layer_path(d, "openlineage").read_text())
    assert sorted(layer["jobs"]) == [f"{JOB}/job_0", f"{JOB}/job_1"]


def test_a_second_admin_token_says_it_replaced_the_first(second_dir: Path,
                                                         tmp_path: Path) -> None:
    d = copy_project(second_dir, tmp_path / "second")
    first = run_cli("token", "add", "emitter", "--admin", "--project", str(d))
    assert first.returncode == 0 and "replaced" not in first.stderr
    second = run_cli("token", "add", "emitter", "--admin", "--project", str(d))
    said = " ".join(second.stderr.split())  # the console wraps long lines
    assert second.returncode == 0
    assert "replaced emitter's previous token (admin)" in said and "no longer works" in said
