"""The dbt import at the policy boundary, on a real dbt project (dbt-duckdb, its own cached venv):
a model no product of tether.yaml reads is reported, not served, unless imported with
--new-products (and `tether check` re-reads it alike); imported SQL is checked by resolution
(a subquery, a CTE, another relation's column or a function off the allow-list is reported,
never imported and never a traceback); versioned models keep their facts in both reading modes;
a vanished or grown dbt project is noticed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import dbtproject
from conftest import run_cli
from tether.config import load_project
from tether.layers.model import layer_path
from tether.serve.server import TetherServer

ENRICHED_SQL = "select * from {{ ref('rentals') }}\n"
STATIONS_V1 = "select dock_code, dock_name from {{ ref('raw_docks') }}\n"
STATIONS_V2 = ("select dock_code, dock_name, upper(dock_name) as label "
               "from {{ ref('raw_docks') }}\n")
MORE_YML = """version: 2
models:
  - name: rentals_enriched
    description: "Every rental with every column, for the dashboards."
  - name: stations
    description: "Docks as the planning team calls them."
    latest_version: 2
    columns:
      - name: dock_code
        description: Code painted on the dock.
    versions:
      - v: 1
      - v: 2
"""

TETHER_YML = """clock: 2026-05-30T12:00:00Z
sources:
  bikes: {{url: "duckdb:///{db}"}}
products:
  rentals:
    table: rentals
policies:
  roles:
    analyst: {{tools: ["*"]}}
    dock_manager: {{tools: ["*"], row_filters: {{rentals: "dock_code = {{{{ user.dock }}}}"}}}}
  users:
    ana: {{role: analyst}}
    dee: {{role: dock_manager, dock: D1}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cycling project plus a model over rentals and a versioned model, built once."""
    root = tmp_path_factory.mktemp("dbt-boundary")
    d = dbtproject.write_project(root)
    (d / "models" / "rentals_enriched.sql").write_text(ENRICHED_SQL)
    (d / "models" / "stations_v1.sql").write_text(STATIONS_V1)
    (d / "models" / "stations_v2.sql").write_text(STATIONS_V2)
    (d / "models" / "more.yml").write_text(MORE_YML)
    dbtproject.build(d)
    return root


@pytest.fixture
def site(built: Path, tmp_path: Path) -> Path:
    """A fresh copy with a tether project that declares rentals, row-filtered for dee."""
    root = tmp_path / "site"
    shutil.copytree(built, root)
    (root / "dbt" / "profiles.yml").write_text(
        dbtproject.PROFILES_YML.format(db=root / "warehouse.duckdb"))
    (root / "tether").mkdir()
    (root / "tether" / "tether.yaml").write_text(TETHER_YML.format(db=root / "warehouse.duckdb"))
    return root


def import_dbt(site: Path, *flags: str) -> dict[str, Any]:
    res = run_cli("import", "dbt", str(site / "dbt"), "--project", str(site / "tether"),
                  "--json", *flags)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def tools_of(project: Path, user: str) -> list[str]:
    server = TetherServer(load_project(project), stdio_user=user)

    async def go() -> list[str]:
        async with Client(server.server) as c:
            return [t.name for t in (await c.list_tools()).tools]

    try:
        return anyio.run(go)
    finally:
        server.close()


def skipped(report: dict[str, Any], node: str) -> list[str]:
    return [s["reason"] for s in report["skipped"] + report["metrics_skipped"]
            if s["node"] == node]


# --- new products are opt-in ---------------------------------------------------------------------


def test_a_model_no_product_reads_is_reported_and_not_served(site: Path) -> None:
    project = site / "tether"
    report = import_dbt(site)
    assert report["products"] == ["rentals"] and report["new_products"] == []
    [why] = skipped(report, "model.cycling.rentals_enriched")
    assert "not a product" in why and "--new-products" in why
    assert run_cli("build", "--project", str(project)).returncode == 0
    assert run_cli("check", "--project", str(project)).returncode in (0, 10)
    loaded = load_project(project)
    assert "rentals_enriched" not in loaded.config.products
    assert loaded.config.products["rentals"].description  # dbt's facts did merge into rentals
    listed = tools_of(project, "dee")
    assert listed and not [t for t in listed if "enriched" in t or "stations" in t], listed


def test_new_products_are_added_with_the_flag_reported_and_kept_by_check(site: Path) -> None:
    project = site / "tether"
    report = import_dbt(site, "--new-products")
    assert report["new_products"] == ["docks", "rentals_enriched", "stations"]
    human = run_cli("import", "dbt", str(site / "dbt"), "--project", str(project),
                    "--new-products")
    assert "new product (--new-products): rentals_enriched" in human.stdout
    # tether check re-reads a moved manifest with the choice the layer recorded
    manifest = site / "dbt" / "target" / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n")
    res = run_cli("check", "--project", str(project), "--json")
    assert res.returncode in (0, 10), res.stderr
    layer = json.loads(layer_path(project, "dbt").read_text())
    assert layer["options"]["new_products"] is True
    assert {"rentals_enriched", "stations"} <= set(load_project(project).config.products)


@pytest.mark.parametrize("mode", ["manifest", "schema.yml"])
def test_a_versioned_model_keeps_its_description_and_version_facts(site: Path,
                                                                   mode: str) -> None:
    if mode == "schema.yml":
        shutil.rmtree(site / "dbt" / "target")
    report = import_dbt(site, "--new-products")
    assert "stations" in report["products"]
    [why] = skipped(report, "model.cycling.stations.v1")
    assert "version 1 of stations (latest 2)" in why
    stations = load_project(site / "tether").config.products["stations"]
    assert stations.table == "stations_v2"
    assert stations.description is not None
    assert stations.description.startswith(  # dbt's words quoted, tether's own beside them
        "The dbt project says: “Docks as the planning team calls them”.")
    assert "Version 2 of the dbt model stations, the latest; other versions: 1." in (
        stations.description)
    assert stations.columns["dock_code"].description == "Code painted on the dock."


# --- imported SQL, checked by resolution ------------------------------------------------------------

STATE_DIM = "      - name: state\n        type: categorical\n"
MEASURE = "        expr: fare_cents\n"
FILTER = "    filter: \"{{ Dimension('rental__state') }} = 'COMPLETED'\"\n"


def _measure(expr: str) -> tuple[str, str]:
    return MEASURE, f"        expr: {json.dumps(expr)}\n"


def _filter(sql: str) -> tuple[str, str]:
    return FILTER, f"    filter: {json.dumps(sql)}\n"


REFUSED = {
    "subquery-measure": (_measure("(select max(s.salary) from salaries s)"), "a subquery"),
    "other-product-measure": (_measure("docks.dock_code"), "docks is not rentals"),
    "function-measure": (_measure("fare_cents + length(current_setting('threads'))"),
                         "current_setting()"),
    "session-measure": (_measure("current_user"), "CURRENT_USER()"),
    "table-function-filter": (_filter("{{ Dimension('rental__state') }} = 'COMPLETED' and "
                                      "exists (select 1 from read_csv('/etc/passwd'))"),
                              "its filter"),
    "cte-filter": (_filter("{{ Dimension('rental__state') }} in (with x as (select 'COMPLETED' "
                           "as s) select s from x)"), "a CTE"),
    "refused-dimension": ((STATE_DIM, STATE_DIM + "        expr: "
                           "\"(select max(state) from raw_rentals)\"\n"),
                          "Dimension('rental__state'), which was refused"),
}


def _schema_mode(site: Path, old: str, new: str) -> None:
    shutil.rmtree(site / "dbt" / "target")
    schema = site / "dbt" / "models" / "schema.yml"
    assert old in schema.read_text()
    schema.write_text(schema.read_text().replace(old, new))


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_imported_sql_that_reads_beyond_its_product_is_reported(site: Path, case: str) -> None:
    (old, new), said = REFUSED[case]
    _schema_mode(site, old, new)
    report = import_dbt(site)
    assert report["metrics"] == []
    [why] = skipped(report, "metric.cycling.completed_fares")
    assert said in why, why
    assert "completed_fares" not in load_project(site / "tether").config.metrics
    res = run_cli("build", "--project", str(site / "tether"))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


def test_an_unreadable_dimension_is_reported_and_other_metrics_still_import(site: Path) -> None:
    _schema_mode(site, STATE_DIM, STATE_DIM + "      - name: broken\n        type: categorical\n"
                 "        expr: 'case when'\n")
    report = import_dbt(site)
    assert report["metrics"] == ["completed_fares"]
    [why] = skipped(report, "semantic_model.cycling.rentals")
    assert "its dimension broken" in why and "not SQL tether can read" in why


def test_a_subquery_measure_in_a_parsed_manifest_is_reported_and_build_runs(site: Path) -> None:
    """The same refusal through dbt's own manifest (dbt parse), where the catalog also lists the
    relation's columns: a column rentals lacks is refused too."""
    schema = site / "dbt" / "models" / "schema.yml"
    old, new = _measure("(select max(s.salary) from salaries s)")
    schema.write_text(schema.read_text().replace(old, new))
    assert dbtproject.run_dbt(site / "dbt", "parse").returncode == 0
    report = import_dbt(site)
    [why] = skipped(report, "metric.cycling.completed_fares")
    assert "a subquery" in why
    res = run_cli("build", "--project", str(site / "tether"))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    schema.write_text(schema.read_text().replace(new, "        expr: fare_in_dollars\n"))
    assert dbtproject.run_dbt(site / "dbt", "parse").returncode == 0
    [why] = skipped(import_dbt(site), "metric.cycling.completed_fares")
    assert "fare_in_dollars, which the relation of rentals does not have" in why


def test_a_metric_over_a_name_that_is_no_product_is_a_load_error(site: Path) -> None:
    yml = site / "tether" / "tether.yaml"
    yml.write_text(yml.read_text() + "metrics:\n  top_salary:\n"
                   "    measure: \"(select max(s.salary) from salaries s)\"\n"
                   "    window: current\n")
    res = run_cli("build", "--project", str(site / "tether"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    line = yml.read_text().splitlines().index(
        "    measure: \"(select max(s.salary) from salaries s)\"") + 1
    assert f"tether.yaml:{line}" in res.stderr and "names s, which is no product" in res.stderr


def test_model_paths_outside_the_dbt_project_are_refused(site: Path) -> None:
    shutil.rmtree(site / "dbt" / "target")
    (site / "elsewhere").mkdir()
    (site / "elsewhere" / "x.sql").write_text("select 1 as x\n")
    cfg = site / "dbt" / "dbt_project.yml"
    cfg.write_text(cfg.read_text().replace('model-paths: ["models"]',
                                           'model-paths: ["models", "../elsewhere"]'))
    res = run_cli("import", "dbt", str(site / "dbt"), "--project", str(site / "tether"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "'../elsewhere' is outside the dbt project" in res.stderr
    assert "dbt_project.yml" in res.stderr


# --- inputs that move or vanish ----------------------------------------------------------------------


def test_a_model_file_added_in_schema_yml_mode_is_read_by_check(site: Path) -> None:
    shutil.rmtree(site / "dbt" / "target")
    project = site / "tether"
    import_dbt(site)
    assert run_cli("build", "--project", str(project)).returncode == 0
    # a model file nobody hashed yet: only the listing of the model folders shows it
    (site / "dbt" / "models" / "late_returns.sql").write_text(
        "select * from {{ ref('rentals') }} where state = 'DISPUTED'\n")
    res = run_cli("check", "--project", str(project), "--json")
    assert res.returncode in (0, 10), res.stderr
    layer = json.loads(layer_path(project, "dbt").read_text())
    assert any(i["path"].endswith("dbt/models/late_returns.sql") for i in layer["inputs"])
    assert "model.cycling.late_returns" in {s["node"] for s in layer["report"]["skipped"]}


def test_a_vanished_dbt_project_says_what_to_do(site: Path) -> None:
    project = site / "tether"
    import_dbt(site)
    assert run_cli("build", "--project", str(project)).returncode == 0
    shutil.move(site / "dbt", site / "dbt-moved")
    res = run_cli("check", "--project", str(project))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "the dbt project this layer was imported from is gone" in res.stderr
    assert "tether import dbt PATH" in res.stderr and ".tether/imports/dbt.json" in res.stderr
    # doing what it says clears it
    res = run_cli("import", "dbt", str(site / "dbt-moved"), "--project", str(project))
    assert res.returncode == 0, res.stderr
    assert run_cli("check", "--project", str(project)).returncode in (0, 10)


@pytest.mark.parametrize("restricted", ["fare_cents", "state"])
def test_an_imported_metric_over_a_restricted_column_is_blocked(site: Path, restricted: str
                                                                ) -> None:
    """dbt's completed_fares sums fare_cents where state is COMPLETED: with either column
    restricted in tether.yaml, the imported metric is never published (its measure or its
    filter reads the column), every other tool is, and no tool names the column."""
    yml = site / "tether" / "tether.yaml"
    yml.write_text(yml.read_text().replace(
        "policies:\n", f"policies:\n  restricted: [rentals.{restricted}]\n", 1))
    report = import_dbt(site)
    assert report["metrics"] == ["completed_fares"] or skipped(
        report, "metric.cycling.completed_fares")
    res = run_cli("build", "--project", str(site / "tether"), "--json")
    assert "Traceback" not in res.stderr, res.stderr
    project = load_project(site / "tether")
    from tether.registry import open_registry

    registry = open_registry(project)
    try:
        current = registry.current()
    finally:
        registry.close()
    assert current and "completed_fares" not in current
    assert not [n for n, v in current.items() if restricted in json.dumps(
        v.definition.get("inputSchema", {})) + json.dumps(v.definition.get("outputSchema", {}))]
    if report["metrics"]:  # imported, then stopped by the gate: said so, exit 12
        assert res.returncode == 12, res.stdout + res.stderr
        assert any(o.get("name") == "completed_fares" and o.get("outcome") == "blocked"
                   for o in json.loads(res.stdout)["tools"]), res.stdout
