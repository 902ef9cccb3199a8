"""`tether init`: what it infers from the data, and what it leaves to a person."""

from __future__ import annotations

from pathlib import Path

import yaml

from tether.config import SourceConfig, parse_project
from tether.profiling.starter import infer_products, render_starter, starter_url
from tether.sources import open_source


def starter(root: Path, url: str, schema: str | None = None) -> tuple[str, dict]:  # type: ignore[type-arg]
    with open_source("main", SourceConfig(url=url, schema=schema), root) as src:
        text = render_starter(url, infer_products(src))
    parse_project(text, root / "tether.yaml")
    return text, yaml.safe_load(text)


def _check(text: str, data: dict) -> None:  # type: ignore[type-arg]
    products = data["products"]
    assert set(products) >= {"customers", "orders", "order_lines", "deals", "pipeline_snapshot"}
    assert products["orders"]["primary_key"] == ["order_id"]
    assert products["order_lines"]["primary_key"] == ["order_id", "line_no"]
    assert products["orders"]["time_columns"]["placed_at"] == "UTC"
    assert products["orders"]["metric_time"] == "placed_at"
    assert products["orders"]["freshness"] == {"column": "loaded_at"}
    assert products["order_lines"]["freshness"] == {"load_time": True}
    ids = products["orders"]["identifiers"]
    assert "customer_ref" in ids
    schemes = data["identifier_schemes"]
    assert schemes[ids["customer_ref"]]["pattern"] == "^A\\-\\d{7}$"
    assert "uuid" not in str(products["orders"].get("identifiers"))
    # every inference is marked for a person
    for line in text.splitlines():
        if line.strip().startswith(("metric_time:", "freshness: {column")):
            assert "# inferred: confirm" in line


def test_starter_from_duckdb(demo_dir: Path, tmp_path: Path) -> None:
    text, data = starter(tmp_path, f"duckdb:///{demo_dir / 'warehouse.duckdb'}")
    _check(text, data)
    # a declared primary key is not an inference; an inferred one is marked
    assert "primary_key: [customer_id]\n" in text


def test_starter_from_postgres(pg_demo_dir: Path, pg_url: str, pg_schema: str,
                               tmp_path: Path) -> None:
    text, data = starter(tmp_path, pg_url, pg_schema)
    _check(text, data)


def test_password_becomes_env_var(tmp_path: Path) -> None:
    url, env = starter_url("postgresql://app:hunter2@db.internal:5432/wh", tmp_path)
    assert url == "postgresql://app:${TETHER_SOURCE_PASSWORD}@db.internal:5432/wh"
    assert env == "TETHER_SOURCE_PASSWORD"


def test_relative_duckdb_path(tmp_path: Path) -> None:
    assert starter_url(str(tmp_path / "w.duckdb"), tmp_path) == ("duckdb:///w.duckdb", None)
