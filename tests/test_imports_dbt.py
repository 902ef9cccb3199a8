"""`tether import dbt` on a real dbt project, built by dbt-duckdb (dbt-core 1.11) in its own
cached venv: descriptions, units, declared values, relationships, lineage and the semantic
layer reach the generated tools with source dbt; a changed model or description is drift."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
from mcp import Client

import dbtproject
from conftest import run_cli
from tether.config import load_project
from tether.context.meta import EVIDENCE_KEY
from tether.layers.model import layer_path
from tether.serve.server import TetherServer


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dbt project, built once; each test copies it."""
    root = tmp_path_factory.mktemp("dbt-built")
    dbtproject.build(dbtproject.write_project(root))
    return root


@pytest.fixture
def site(built: Path, tmp_path: Path) -> Path:
    """A fresh copy: the dbt project, its warehouse, and a tether project over it (imported)."""
    root = tmp_path / "site"
    shutil.copytree(built, root)
    (root / "dbt" / "profiles.yml").write_text(
        dbtproject.PROFILES_YML.format(db=root / "warehouse.duckdb"))
    project = dbtproject.tether_project(root)
    res = run_cli("import", "dbt", str(root / "dbt"), "--project", str(project), "--json",
                  "--new-products")  # tether.yaml declares no product: dbt's models become them
    assert res.returncode == 0, res.stderr
    (root / "import.json").write_text(res.stdout)
    return root


def tool(site: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((site / "tether" / "tools" / f"{name}.json").read_text())
    return data


def test_import_reports_declared_and_observed_values(site: Path) -> None:
    report = json.loads((site / "import.json").read_text())
    assert report["layer"] == ".tether/imports/dbt.json"
    assert report["products"] == ["docks", "rentals"]
    assert report["metrics"] == ["completed_fares"]
    [state] = report["declared_values"]
    assert (state["product"], state["column"]) == ("rentals", "state")
    assert state["declared_not_seen"] == ["LOST"]
    assert state["seen_not_declared"] == ["DISPUTED"]
    layer = json.loads(layer_path(site / "tether", "dbt").read_text())
    manifest = site / "dbt" / "target" / "manifest.json"
    import hashlib

    assert layer["inputs"][0]["sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert layer["inputs"][1]["path"].endswith("catalog.json")
    # the human form says the same
    res = run_cli("import", "dbt", str(site / "dbt"), "--project", str(site / "tether"),
                  "--new-products")
    assert res.returncode == 0 and "LOST" in res.stdout and "DISPUTED" in res.stdout


def test_descriptions_units_and_enums_reach_the_tools_with_source_dbt(site: Path) -> None:
    res = run_cli("build", "--project", str(site / "tether"))
    assert res.returncode == 0, res.stderr
    t = tool(site, "rentals_by_attributes")
    ctx = t["_meta"]["tether/context"]
    described = "The dbt project says: “One row per bicycle rental, from unlock to return”."
    assert described in t["description"]
    assert ctx["sources"][described] == "dbt"
    assert ctx["origins"][described] == "dbt:model.cycling.rentals"
    assert "dbt" in ctx["generated_from"]
    rows = t["outputSchema"]["properties"]["rows"]["items"]["properties"]
    assert rows["fare_cents"]["description"] == "Fare charged for the rental; unit: EUR_cents."
    assert ctx["field_origins"]["fare_cents"] == {"description": "dbt:model.cycling.rentals",
                                                  "unit": "dbt:model.cycling.rentals"}
    assert "card_token" not in json.dumps(t)  # restricted by dbt meta: never exposed
    state = t["inputSchema"]["properties"]["state"]
    assert state["items"]["enum"] == ["CANCELLED", "COMPLETED", "DISPUTED"]  # what the data holds
    assert "never seen in the data: LOST" in state["description"]
    assert ctx["upstream"] == {"dbt:model.cycling.rentals": ctx["upstream"][
        "dbt:model.cycling.rentals"]} and len(ctx["upstream"]["dbt:model.cycling.rentals"]) == 12
    # a deprecation date and the dbt relationship (docks' key) are read too
    assert "Deprecated: dbt retires this model on 2031-01-01." in t["description"]
    assert "docks_by_attributes (docks.dock_code)" in t["inputSchema"]["properties"][
        "dock_code"]["description"]


def call(project_dir: Path, user: str, name: str, args: dict[str, Any]) -> Any:
    server = TetherServer(load_project(project_dir), stdio_user=user)

    async def go() -> Any:
        async with Client(server.server) as c:
            return await c.call_tool(name, args)

    try:
        return anyio.run(go)
    finally:
        server.close()


def test_the_semantic_metric_applies_the_dbt_filter(site: Path) -> None:
    project = site / "tether"
    assert run_cli("build", "--project", str(project)).returncode == 0
    t = tool(site, "completed_fares")
    ctx = t["_meta"]["tether/context"]
    assert ctx["origins"]["The dbt project says: “Fares of rentals that were completed”."] == (
        "dbt:metric.cycling.completed_fares")
    result = call(project, "ana", "completed_fares", {"period": "2026-05"})
    assert not result.is_error, result.content
    evidence = result.meta[EVIDENCE_KEY]
    assert "'COMPLETED'" in evidence["sql"] and "state" in evidence["sql"]
    with duckdb.connect(str(site / "warehouse.duckdb"), read_only=True) as con:
        want = con.execute("SELECT sum(fare_cents) FROM rentals WHERE state = 'COMPLETED' AND "
                           "started_at >= '2026-05-01' AND started_at < '2026-06-01'").fetchone()
        everything = con.execute("SELECT sum(fare_cents) FROM rentals").fetchone()
    assert want is not None and everything is not None
    value = result.structured_content["rows"][0]["completed_fares"]
    assert value == want[0] != everything[0]


def test_pii_from_dbt_meta_is_masked_by_the_pii_selector(site: Path) -> None:
    project = site / "tether"
    assert run_cli("build", "--project", str(project)).returncode == 0
    masked = call(project, "sam", "rentals_by_attributes", {"limit": 5}).structured_content
    plain = call(project, "ana", "rentals_by_attributes", {"limit": 5}).structured_content
    assert all("@" not in str(r["rider_email"]) for r in masked["rows"])
    assert all("@" in r["rider_email"] for r in plain["rows"])


def test_a_changed_model_sql_is_a_lineage_event_routed_to_review(site: Path) -> None:
    project = site / "tether"
    assert run_cli("build", "--project", str(project)).returncode == 0
    sql = site / "dbt" / "models" / "rentals.sql"
    sql.write_text(sql.read_text() + "where state <> 'DISPUTED'\n")
    # rebuild the model (dbt run writes the manifest again; catalog.json keeps its columns)
    assert dbtproject.run_dbt(site / "dbt", "run", "--select", "rentals").returncode == 0
    res = run_cli("check", "--project", str(project), "--json")
    assert res.returncode == 11, res.stderr
    data = json.loads(res.stdout)
    lineage = [e for e in data["events"] if e["kind"] == "lineage_changed"]
    assert [e["subject"] for e in lineage] == ["rentals"]
    assert lineage[0]["details"]["edges_added"][0][2] == "dbt:model.cycling.rentals"
    outcome = {o["tool"]: o for o in data["tools"]}
    assert outcome["rentals_by_attributes"]["outcome"] == "pending"
    assert outcome["rentals_by_attributes"]["change_kind"] == "semantic"
    # the layer followed the manifest: its recorded hash is the new one
    layer = json.loads(layer_path(project, "dbt").read_text())
    import hashlib

    manifest = site / "dbt" / "target" / "manifest.json"
    assert layer["inputs"][0]["sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    again = run_cli("check", "--project", str(project), "--json")
    assert again.returncode == 11 and not json.loads(again.stdout)["events"]  # asked once


def test_a_changed_dbt_description_is_a_wording_event(site: Path) -> None:
    project = site / "tether"
    assert run_cli("build", "--project", str(project)).returncode == 0
    schema = site / "dbt" / "models" / "schema.yml"
    schema.write_text(schema.read_text().replace("from unlock to return", "unlock to dock"))
    assert dbtproject.run_dbt(site / "dbt", "parse").returncode == 0
    res = run_cli("check", "--project", str(project), "--json")
    assert res.returncode == 10, res.stderr
    data = json.loads(res.stdout)
    [event] = [e for e in data["events"] if e["kind"] == "description_changed"]
    assert event["subject"] == "rentals" and "model.cycling.rentals" in event["details"]["where"]
    rentals = {o["tool"]: o for o in data["tools"]}["rentals_by_attributes"]
    assert (rentals["outcome"], rentals["change_kind"]) == ("published", "wording")
    assert "the description of rentals changed" in rentals["change_note"]
    assert "unlock to dock" in tool(site, "rentals_by_attributes")["description"]
    # tether diff shows the sentence the re-read description changed, between the versions
    diff = run_cli("diff", "rentals_by_attributes", "1.0.0", rentals["version"], "--project",
                   str(project), "--json")
    assert diff.returncode == 0, diff.stderr
    lines = json.loads(diff.stdout)["description"]
    assert "-The dbt project says: “One row per bicycle rental, from unlock to return”." in lines
    assert "+The dbt project says: “One row per bicycle rental, unlock to dock”." in lines


def test_tether_yaml_overrides_the_layer_key_by_key_and_explain_says_which(site: Path) -> None:
    project = site / "tether"
    yaml = project / "tether.yaml"
    yaml.write_text(yaml.read_text() + "products:\n  rentals:\n    table: rentals\n"
                    "    columns:\n      fare_cents: {description: \"Fare in euro cents, typed.\"}\n")
    loaded = load_project(project)
    facts = loaded.config.products["rentals"].columns
    assert facts["fare_cents"].description == "Fare in euro cents, typed."
    assert facts["fare_cents"].unit == "EUR_cents"  # the key tether.yaml leaves out: dbt's
    assert facts["card_token"].classification == "restricted"
    res = run_cli("explain", "products.rentals.columns.fare_cents", "--project", str(project),
                  "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["key"]: r for r in json.loads(res.stdout)}
    assert rows["products.rentals.columns.fare_cents.description"]["from"].startswith(
        "tether.yaml:")
    assert rows["products.rentals.columns.fare_cents.unit"]["layer"] == "dbt"
    assert "model.cycling.rentals" in rows["products.rentals.columns.fare_cents.unit"]["from"]
    # importing again replaces the layer, never the typed key
    assert run_cli("import", "dbt", str(site / "dbt"), "--project", str(project)).returncode == 0
    assert "typed." in yaml.read_text()
    assert load_project(project).config.products["rentals"].columns[
        "fare_cents"].description == "Fare in euro cents, typed."


def test_schema_yml_files_are_read_when_there_is_no_manifest(site: Path) -> None:
    shutil.rmtree(site / "dbt" / "target")
    project = site / "tether"
    res = run_cli("import", "dbt", str(site / "dbt"), "--project", str(project), "--json",
                  "--new-products")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["products"] == ["docks", "rentals"]
    assert any(i["path"].endswith("schema.yml") for i in report["inputs"])
    rentals = load_project(project).config.products["rentals"]
    assert rentals.description and "bicycle rental" in rentals.description
    assert rentals.columns["state"].accepted_values == ["COMPLETED", "CANCELLED", "LOST"]
    assert rentals.columns["rider_email"].classification == "pii"


@pytest.mark.parametrize("damage", ["truncated", "version", "shape"])
def test_bad_manifests_exit_2_and_keep_the_previous_layer(site: Path, damage: str) -> None:
    project = site / "tether"
    layer = layer_path(project, "dbt")
    before = layer.read_bytes()
    manifest = site / "dbt" / "target" / "manifest.json"
    text = manifest.read_text()
    if damage == "truncated":
        manifest.write_text(text[: len(text) // 2])
    elif damage == "version":
        manifest.write_text(text.replace("/manifest/v12.json", "/manifest/v99.json"))
    else:
        data = json.loads(text)
        data["nodes"]["model.cycling.rentals"]["columns"] = ["not", "a", "mapping"]
        manifest.write_text(json.dumps(data))
    res = run_cli("import", "dbt", str(site / "dbt"), "--project", str(project))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "manifest.json" in res.stderr
    expected = {"truncated": "truncated", "version": "v99",
                "shape": "model.cycling.rentals"}[damage]
    assert expected in res.stderr, res.stderr
    assert layer.read_bytes() == before
    # tether check re-reads the moved input: the same error, the same layer kept
    res = run_cli("check", "--project", str(project))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "manifest.json" in res.stderr
    assert layer.read_bytes() == before


def test_the_demo_stage_imports_its_dbt_project(demo_dir: Path, tmp_path: Path) -> None:
    """make demo's stage 11, on a copy of the demo: the warehouse is left as it was, the report
    names both values, and the metric a manager calls applies the dbt filter in their region."""
    import hashlib
    import subprocess
    import sys

    from conftest import copy_project

    d = copy_project(demo_dir, tmp_path / "demo")
    shutil.copy(demo_dir / "warehouse.duckdb", d / "warehouse.duckdb")
    (d / "tether.yaml").write_text((demo_dir / "tether.yaml").read_text())
    assert run_cli("build", "--project", str(d)).returncode == 0
    before = hashlib.sha256((d / "warehouse.duckdb").read_bytes()).hexdigest()
    res = subprocess.run([sys.executable, "-m", "tether.demo.dbt_tour", str(d)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "CRITICAL" in res.stdout and "URGENT" in res.stdout
    assert "whose source is dbt" in res.stdout and "metric.helpdesk.open_urgent_tickets" in res.stdout
    assert hashlib.sha256((d / "warehouse.duckdb").read_bytes()).hexdigest() == before
    result = call(d, "mgr.emea", "open_urgent_tickets", {"period": "last_365_days"})
    assert not result.is_error, result.content
    sql = result.meta[EVIDENCE_KEY]["sql"]
    assert "'URGENT'" in sql and "'SOLVED'" in sql
    assert {r["sales_region"] for r in result.structured_content["rows"]} == {"EMEA"}
