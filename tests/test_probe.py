"""The drift check's budget: products whose probe moved nothing keep their last profile, and
every change a profile would see still moves the probe (DuckDB and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from conftest import run_cli
from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.check import check
from tether.drift.publish import build
from tether.profiling.probe import PROFILE_KEY, profile_changed
from tether.registry import open_registry


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    d = tmp_path / "probe"
    init_demo(d, scale=0.05)
    build(load_project(d))
    return d


def redone(d: Path, full: bool = False) -> list[str]:
    """Which products a check would profile in full now (reads the cache, stores nothing)."""
    project = load_project(d)
    registry = open_registry(project)
    try:
        cache = {k[len(PROFILE_KEY):]: v for k, v in registry.state().items()
                 if k.startswith(PROFILE_KEY)}
    finally:
        registry.close()
    return profile_changed(project, cache, full=full)[2]


def test_a_quiet_check_profiles_nothing_and_an_update_in_place_is_still_caught(demo: Path) -> None:
    assert redone(demo) == []  # build left a probe per product
    assert check(load_project(demo)).exit_code == 0
    apply(demo, "on-hold")  # an UPDATE: the row count and newest placed_at do not move
    assert redone(demo) == ["orders"]  # the checksum over the enum columns did
    result = check(load_project(demo))
    assert result.exit_code == 10
    assert [e["details"]["value"] for e in result.events if e["kind"] == "enum_value_added"] == [
        "ON_HOLD"]
    assert redone(demo) == []
    assert check(load_project(demo)).exit_code == 0


def test_a_rename_after_a_quiet_check_is_a_breaking_change_not_a_crash(demo: Path) -> None:
    assert check(load_project(demo)).exit_code == 0
    apply(demo, "rename")
    assert redone(demo) == ["orders"]
    result = check(load_project(demo))
    assert result.exit_code == 11
    assert [e["kind"] for e in result.events if e["subject"] == "orders"] == ["schema"]


def test_a_config_edit_reprofiles_only_its_product_and_full_reprofiles_all(demo: Path) -> None:
    p = demo / "tether.yaml"
    text = p.read_text()
    old = "owner: support-ops@example.com"
    assert text.count(old) == 1
    p.write_text(text.replace(old, "owner: help-desk@example.com"))
    assert redone(demo) == ["support_tickets"]
    everything = list(load_project(demo).config.products)
    assert redone(demo, full=True) == everything
    res = run_cli("check", "--project", str(demo), "--full", "--json")
    assert res.returncode in (0, 10), res.stderr
    assert json.loads(res.stdout)["exit_code"] == res.returncode


def test_the_clock_alone_never_redoes_a_profile(demo: Path) -> None:
    """Dormancy counts from the earlier of the clock and the product's newest time, so with no
    new data no value turns dormant as the clock moves on: no horizon to recheck, and a clock a
    year later profiles nothing again."""
    project = load_project(demo)
    registry = open_registry(project)
    try:
        entry = registry.state()[PROFILE_KEY + "orders"]
    finally:
        registry.close()
    assert entry["recheck_by"] is None
    p = demo / "tether.yaml"
    text = p.read_text()
    clock = next(line for line in text.splitlines() if line.startswith("clock:"))
    p.write_text(text.replace(clock, "clock: 2027-08-20T09:00:00Z", 1))
    assert "orders" not in redone(demo)


def test_a_product_with_rows_after_the_clock_rechecks_at_its_horizon(demo: Path) -> None:
    """Rows dated after the clock (bookings): dormancy counts from the clock, which moves, so the
    profile is redone when the newest live value would turn dormant."""
    with duckdb.connect(str(demo / "warehouse.duckdb")) as con:
        con.execute("UPDATE orders SET placed_at = placed_at + INTERVAL 400 DAY "
                    "WHERE placed_at = (SELECT max(placed_at) FROM orders)")
    assert "orders" in redone(demo)
    check(load_project(demo))  # profiles it again and keeps the horizon
    assert "orders" not in redone(demo)
    registry = open_registry(load_project(demo))
    try:
        entry = registry.state()[PROFILE_KEY + "orders"]
    finally:
        registry.close()
    assert entry["recheck_by"] is not None
    p = demo / "tether.yaml"
    text = p.read_text()
    clock = next(line for line in text.splitlines() if line.startswith("clock:"))
    p.write_text(text.replace(clock, f"clock: {entry['recheck_by']}", 1))
    assert "orders" in redone(demo)


def test_postgres_update_in_place_moves_the_probe(pg_url: str, tmp_path: Path) -> None:
    import uuid

    import psycopg

    schema = f"tether_probe_{uuid.uuid4().hex[:8]}"
    d = tmp_path / "pgprobe"
    init_demo(d, scale=0.05, source_url=pg_url, schema=schema)
    try:
        build(load_project(d))
        assert redone(d) == []
        apply(d, "on-hold")
        assert redone(d) == ["orders"]
        result = check(load_project(d))
        assert result.exit_code == 10 and any(e["kind"] == "enum_value_added" for e in result.events)
        assert redone(d) == []
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


def test_an_upstream_table_that_is_not_a_product_is_fingerprinted(tmp_path: Path) -> None:
    """lineage: raw.shop_orders -> orders. When the raw table exists in the source, a change to
    its schema is a lineage event for every product below it, even though it is no product."""
    import duckdb

    d = tmp_path / "lineage"
    init_demo(d, scale=0.05)
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("CREATE SCHEMA raw")
        con.execute("CREATE TABLE raw.shop_orders AS SELECT order_id, status FROM orders")
    build(load_project(d))
    assert check(load_project(d)).exit_code == 0
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("ALTER TABLE raw.shop_orders ADD COLUMN channel VARCHAR")
    result = check(load_project(d))
    lineage = [e for e in result.events if e["kind"] == "lineage_changed"]
    assert [e["subject"] for e in lineage] == ["orders"]
    assert lineage[0]["details"]["upstream_changed"] == ["raw.shop_orders"]
    assert lineage[0]["details"]["edges_added"] == [] == lineage[0]["details"]["edges_removed"]
    assert check(load_project(d)).exit_code == 0  # recorded once, not on every check
