"""What makes a profile cheap at thousands of tables holds on its own: a column whose values
mostly occur once gets no value counts yet the probe still shows samples of it; a view whose
base table changed is described by binding it, not from the catalog's stale entry; tools of a
kind this server does not know are withheld, not listed; the export rewrites a file edited by
hand even when the edit kept its size and time. On a small warehouse of its own (a library's
loans), with nothing of the demo's."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
import yaml
from mcp import Client

from tether.config import load_project
from tether.drift.publish import build
from tether.errors import ProductError
from tether.profiling import profile_project
from tether.serve.server import TetherServer
from tether.sources.duckdb import DuckDBSource
from tether.toolgen.discovery import PROBE


@pytest.fixture
def library(tmp_path: Path) -> Path:
    d = tmp_path / "library"
    d.mkdir()
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("CREATE TABLE loans AS SELECT range + 1 AS loan_id, "
                    "'B-' || lpad(CAST(range * 7 % 1000 AS VARCHAR), 4, '0') AS barcode, "
                    "['ON_LOAN', 'RETURNED', 'OVERDUE'][range % 3 + 1] AS state, "
                    "TIMESTAMP '2026-03-01' + INTERVAL (range) HOUR AS lent_at "
                    "FROM range(600)")
        con.execute("CREATE TABLE shelves (shelf VARCHAR, floor INTEGER)")
        con.execute("INSERT INTO shelves VALUES ('A1', 1), ('B2', 2)")
        con.execute("CREATE VIEW shelf_floors AS SELECT shelf, floor FROM shelves")
    config = {
        "clock": "2026-04-01T00:00:00Z",
        "sources": {"main": {"url": "duckdb:///warehouse.duckdb"}},
        "products": {"loans": {"table": "loans", "primary_key": ["loan_id"],
                               "time_columns": {"lent_at": "UTC"}, "metric_time": "lent_at"},
                     "shelf_floors": {"table": "shelf_floors"}},
        "policies": {"roles": {"desk": {"tools": ["*"]}}, "users": {"lee": {"role": "desk"}}},
    }
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return d


def test_a_nearly_unique_column_gets_no_value_counts_and_the_probe_samples_it(
        library: Path) -> None:
    profiles = {p.product: p for p in profile_project(load_project(library))}
    barcode = profiles["loans"].column("barcode")
    state = profiles["loans"].column("state")
    # 600 rows, ~600 barcodes (a few repeat): too varied for an enum, mostly once each
    assert barcode.nearly_unique and not barcode.top_values and barcode.enum is None
    assert state.enum is not None and not state.nearly_unique  # an enum is still counted
    build(load_project(library))
    server = TetherServer(load_project(library), stdio_user="lee")

    async def probe() -> Any:
        async with Client(server.server) as c:
            return await c.call_tool(PROBE, {"product": "loans"})

    try:
        result = anyio.run(probe)
    finally:
        server.close()
    assert not result.is_error, result.content
    columns = {c["name"]: c for c in result.structured_content["columns"]}
    samples = columns["barcode"]["values"]
    assert samples and samples == sorted(samples)  # the smallest values, in order
    assert samples[0] == "B-0000" and len(samples) == len(set(samples))
    assert set(columns["state"]["values"]) == {"ON_LOAN", "RETURNED", "OVERDUE"}


def test_a_view_whose_base_changed_is_described_by_binding_not_from_the_catalog(
        library: Path) -> None:
    with duckdb.connect(str(library / "warehouse.duckdb")) as con:
        con.execute("ALTER TABLE shelves DROP COLUMN floor")  # the view no longer binds
    src = DuckDBSource("main", library / "warehouse.duckdb")
    try:
        view = src.table_expr("shelf_floors")
        with pytest.raises(ProductError):
            src.describe(view, label="shelf_floors")
        with src.catalog_read(), pytest.raises(ProductError):  # not the stale columns
            src.describe(view, label="shelf_floors")
        with src.catalog_read():  # a table is described from the catalog, as before
            assert [c.name for c in src.describe(src.table_expr("shelves"), "s")] == ["shelf"]
    finally:
        src.close()


def test_a_tool_of_a_kind_this_server_does_not_know_is_withheld(library: Path) -> None:
    build(load_project(library))
    registry = library / ".tether" / "registry.db"
    with sqlite3.connect(registry) as db:  # as a newer tether or a plugin would have written it
        name, definition, plan = db.execute(
            "SELECT name, definition, plan FROM tool_versions WHERE name LIKE 'loans%'"
        ).fetchone()
        db.execute("INSERT INTO publications (id, published_at, rule, tools) VALUES "
                   "(99, '2026-04-01T00:00:00+00:00', 'test', '[]')")
        db.execute("INSERT INTO tool_versions VALUES (?, '9.0.0', 99, 'x', ?, ?, "
                   "'2026-04-01T00:00:00+00:00')",
                   ("from_a_plugin", definition.replace(name, "from_a_plugin"),
                    plan.replace('"kind": "list"', '"kind": "from_a_plugin"')))
    server = TetherServer(load_project(library), stdio_user="lee")
    try:
        shown = {v.name for v in server.visible("lee")}
        assert "from_a_plugin" not in shown and name in shown
        assert ("from_a_plugin", "9.0.0") in server.withheld
    finally:
        server.close()


def test_an_edit_that_keeps_size_and_time_is_still_rewritten(library: Path) -> None:
    build(load_project(library))
    f = next((library / "tools").glob("loans*.json"))
    published = f.read_bytes()
    st = f.stat()
    edited = bytearray(published)
    edited[published.index(b'"name"') + 1] = ord("N")  # same size, other bytes
    f.write_bytes(bytes(edited))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p or rsync -t would leave it
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    build(load_project(library))
    assert f.read_bytes() == published
