"""Import cost: `tether import dbt` on a generated manifest of 2,000 models (and its catalog)
over a DuckDB warehouse holding each model's relation, timed end to end (the CLI, as a user runs
it) and by phase in process (read and map, check against the source, load with the layer, the
declared-values report). A second import with the layer in place is timed too.

    python bench/imports.py [--models 2000] [--dir bench/out/imports]

The manifest has the shape dbt-core 1.11 writes (schema v12): 8 documented columns per model,
a unit and a pii tag on two of them, a unique + not_null key, an accepted_values test on one
model in ten, a relationships test on one in ten, a chain of depends_on edges from one source,
and one semantic model with a simple metric for one model in a hundred.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from tether.config import load_project
from tether.imports.dbt import read_dbt
from tether.profiling.declared import declared_values, verify_layer

PACKAGE = "bench"
STATES = ["OPEN", "HELD", "DONE"]


def model(i: int) -> dict[str, Any]:
    name = f"m{i:04d}"
    deps = [f"model.{PACKAGE}.m{i - 1:04d}"] if i else [f"source.{PACKAGE}.raw.events"]
    cols = {c: {"name": c, "description": f"{c} of {name}.", "meta": {}, "data_type": None,
                "constraints": [], "config": {"meta": meta, "tags": []}, "tags": []}
            for c, meta in (("id", {}), ("state", {}), ("amount_cents", {"unit": "EUR_cents"}),
                            ("contact", {"pii": True}), ("parent_id", {}), ("note", {}),
                            ("created_at", {}), ("score", {}))}
    return {"unique_id": f"model.{PACKAGE}.{name}", "resource_type": "model", "name": name,
            "alias": name, "schema": "main", "database": "w", "package_name": PACKAGE,
            "description": f"One row per record of stage {i}.", "columns": cols,
            "meta": {}, "config": {"meta": {"owner": "data@example.org"},
                                   "materialized": "table", "contract": {"enforced": False}},
            "depends_on": {"nodes": deps, "macros": []},
            "checksum": {"name": "sha256", "checksum": f"{i:064x}"},
            "version": None, "latest_version": None, "deprecation_date": None,
            "primary_key": ["id"], "contract": {"enforced": False}, "constraints": [],
            "original_file_path": f"models/{name}.sql"}


def tests(i: int) -> dict[str, Any]:
    name = f"m{i:04d}"
    uid = f"model.{PACKAGE}.{name}"
    out = {}
    if i % 10 == 0:
        out[f"test.{PACKAGE}.accepted_values_{name}_state"] = {
            "unique_id": f"test.{PACKAGE}.accepted_values_{name}_state", "resource_type": "test",
            "name": f"accepted_values_{name}_state", "attached_node": uid, "column_name": "state",
            "test_metadata": {"name": "accepted_values", "kwargs": {
                "column_name": "state", "values": [*STATES[:2], "GONE"]}},
            "depends_on": {"nodes": [uid], "macros": []}}
    if i % 10 == 5:
        parent = f"model.{PACKAGE}.m{i - 1:04d}"
        out[f"test.{PACKAGE}.relationships_{name}"] = {
            "unique_id": f"test.{PACKAGE}.relationships_{name}", "resource_type": "test",
            "name": f"relationships_{name}", "attached_node": uid, "column_name": "parent_id",
            "test_metadata": {"name": "relationships", "kwargs": {
                "column_name": "parent_id", "to": f"ref('m{i - 1:04d}')", "field": "id"}},
            "depends_on": {"nodes": [uid, parent], "macros": []}}
    return out


def semantic(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    name = f"m{i:04d}"
    sm = {"unique_id": f"semantic_model.{PACKAGE}.{name}", "name": name,
          "model": f"ref('{name}')", "depends_on": {"nodes": [f"model.{PACKAGE}.{name}"]},
          "node_relation": {"alias": name, "schema_name": "main"},
          "defaults": {"agg_time_dimension": "created_at"},
          "entities": [{"name": f"e{i}", "type": "primary", "expr": "id"}],
          "dimensions": [{"name": "state", "type": "categorical"},
                         {"name": "created_at", "type": "time",
                          "type_params": {"time_granularity": "day"}}],
          "measures": [{"name": f"amount_{i}", "agg": "sum", "expr": "amount_cents"}]}
    metric = {"unique_id": f"metric.{PACKAGE}.done_amount_{i}", "name": f"done_amount_{i}",
              "label": f"done amount {i}", "description": "Amount of records done.",
              "type": "simple", "type_params": {"measure": {"name": f"amount_{i}"}},
              "filter": {"where_filters": [{"where_sql_template":
                                            f"{{{{ Dimension('e{i}__state') }}}} = 'DONE'"}]}}
    return sm, metric


def make(d: Path, models: int) -> Path:
    if d.exists():
        shutil.rmtree(d)
    (d / "dbt" / "target").mkdir(parents=True)
    nodes: dict[str, Any] = {}
    sms, metrics = {}, {}
    for i in range(models):
        m = model(i)
        nodes[m["unique_id"]] = m
        nodes.update(tests(i))
        if i % 100 == 0:
            sm, metric = semantic(i)
            sms[sm["unique_id"]], metrics[metric["unique_id"]] = sm, metric
    manifest = {"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/"
                             "v12.json", "dbt_version": "1.11.16", "project_name": PACKAGE},
                "nodes": nodes, "sources": {f"source.{PACKAGE}.raw.events": {
                    "unique_id": f"source.{PACKAGE}.raw.events", "source_name": "raw",
                    "name": "events", "schema": "raw", "identifier": "events"}},
                "semantic_models": sms, "metrics": metrics, "macros": {}, "docs": {}}
    (d / "dbt" / "target" / "manifest.json").write_text(json.dumps(manifest))
    catalog = {"nodes": {uid: {"columns": {c: {"name": c, "type": "VARCHAR"}
                                           for c in n["columns"]}}
                         for uid, n in nodes.items() if n["resource_type"] == "model"}}
    (d / "dbt" / "target" / "catalog.json").write_text(json.dumps(catalog))
    with duckdb.connect(str(d / "w.duckdb")) as con:
        con.execute("CREATE SCHEMA raw")
        con.execute("CREATE TABLE raw.events AS SELECT 1 AS id")
        con.execute("CREATE TABLE seed AS SELECT r AS id, ['OPEN', 'HELD', 'DONE'][1 + r % 3] "
                    "AS state, r * 10 AS amount_cents, 'x@example.org' AS contact, r AS "
                    "parent_id, 'n' AS note, TIMESTAMP '2026-01-01' AS created_at, 0.5 AS score "
                    "FROM range(30) t(r)")
        for i in range(models):
            con.execute(f"CREATE TABLE m{i:04d} AS SELECT * FROM seed")
    (d / "tether.yaml").write_text('clock: 2026-08-20T09:00:00Z\nsources:\n  main: {url: '
                                   '"duckdb:///w.duckdb"}\n')
    return d


def phases(d: Path) -> dict[str, float]:
    """Seconds per phase of one import, in process."""
    out: dict[str, float] = {}
    t = time.perf_counter()
    project = load_project(d)
    layer = read_dbt(project, d / "dbt", new_products=True)  # tether.yaml declares none
    out["read and map"] = time.perf_counter() - t
    t = time.perf_counter()
    verify_layer(project, layer)
    out["check against the source"] = time.perf_counter() - t
    t = time.perf_counter()
    loaded = load_project(d, with_layer=layer)
    out["load with the layer"] = time.perf_counter() - t
    t = time.perf_counter()
    declared_values(loaded)
    out["declared values report"] = time.perf_counter() - t
    return out


def cli(d: Path) -> float:
    exe = Path(sys.executable).parent / "tether"
    t = time.perf_counter()
    res = subprocess.run([str(exe), "import", "dbt", str(d / "dbt"), "--project", str(d),
                          "--json", "--new-products"], capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=2000)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/imports"))
    args = ap.parse_args()
    d = make(args.dir, args.models)
    size = (d / "dbt" / "target" / "manifest.json").stat().st_size
    print(f"{args.models} models, manifest {size / 1e6:.1f} MB")
    runs = [phases(d) for _ in range(3)]
    for k in runs[0]:
        print(f"  {k}: median {statistics.median(r[k] for r in runs):.2f} s")
    first = cli(d)
    again = [cli(d) for _ in range(2)]
    print(f"tether import dbt (CLI, end to end): first {first:.2f} s; with the layer in place "
          f"{statistics.median(again):.2f} s (target: under 10 s)")
    products = len(json.loads((d / ".tether" / "imports" / "dbt.json").read_text())["config"]
                   ["products"])
    print(f"  layer: {products} products")


if __name__ == "__main__":
    main()
