"""Every statement tether renders, read in the warehouse dialects it is not tested live on.

The whole path runs on the test warehouses (DuckDB, and PostgreSQL where it runs): profiling and
the build, then every tool each user sees, called with arguments made from its own schema (each
enum's first value, a period, an ordering, a second page), as a user with row filters and masks
and as one without, plus the probe, search and run_sql. TETHER_SQL_LOG records each statement
sent to the source. Each one must transpile from its engine's dialect to Snowflake, BigQuery,
Trino, ClickHouse and Spark with nothing unsupported, its bound parameters as SQLAlchemy's
text() takes them on those engines, and parse back in that dialect. An engine's own catalog
reads (information_schema, pg_catalog) are left out: each source class reads its engine's
catalog its own way. The hash mask, which tether writes per engine, is rendered for each of
them and parsed too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlglot
from mcp import Client
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from conftest import copy_project
from tether.config import load_project
from tether.drift.publish import build
from tether.policy.entitle import HASH_DIALECTS, hash_mask
from tether.serve.server import TetherServer
from tether.sources.base import SQL_LOG_ENV

TARGETS = ["snowflake", "bigquery", "trino", "clickhouse", "spark"]


def _arguments(tool: Any) -> list[dict[str, Any]]:
    """Calls made from the tool's schema alone: none, then every enum's first value with a
    period and an ordering where the tool takes them."""
    props = tool.input_schema.get("properties", {})
    full: dict[str, Any] = {}
    for name, spec in props.items():
        options = spec.get("enum") or (spec.get("items") or {}).get("enum")
        if name == "period":
            full[name] = "last quarter"
        elif name == "limit":
            full[name] = 2
        elif options and spec.get("type") == "array":
            full[name] = options[:1]
        elif options:
            full[name] = options[0]
    return [{"limit": 2} if "limit" in props else {}, full]


def _exercise(project_dir: Path, log: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    monkeypatch.setenv(SQL_LOG_ENV, str(log))
    assert build(load_project(project_dir)).exit_code in (0, 10)
    config = load_project(project_dir).config
    pol = config.policies

    def first(pred: Any) -> list[str]:
        return [next(u for u, c in pol.users.items() if pred(pol.roles[c.role]))]

    users = (first(lambda r: r.row_filters)  # a row filter pushed down
             + first(lambda r: not r.row_filters)  # no filter
             # masks, the keyed hash first where any role has it
             + first(lambda r: "hash" in r.masks.values() or (
                 r.masks and not any("hash" in x.masks.values() for x in pol.roles.values()))))
    for user in users:
        server = TetherServer(load_project(project_dir), stdio_user=user)

        async def go(server: TetherServer = server) -> None:
            async with Client(server.server) as c:
                tools = (await c.list_tools()).tools
                for tool in tools:
                    for args in _arguments(tool):
                        r = await c.call_tool(tool.name, args)
                        cursor = (r.structured_content or {}).get("next_cursor")
                        if cursor:
                            await c.call_tool(tool.name, {**args, "cursor": cursor})
                for product in config.products:
                    await c.call_tool("explain_data_product", {"product": product})
                    await c.call_tool("run_sql", {"sql": f"SELECT * FROM {product} LIMIT 3"})
                await c.call_tool("find_data_for_question", {"question": "how many in all"})

        try:
            anyio.run(go)
        finally:
            server.close()
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for line in log.read_text().splitlines():
        s = json.loads(line)
        seen.setdefault((s["dialect"], s["sql"]), s)
    return list(seen.values())


def _as_sqlalchemy_binds(node: exp.Expr) -> exp.Expr:
    """A bound parameter as tether hands it to SQLAlchemy's text() for these engines (a
    ``:name`` marker the driver binds), not in the engine's own placeholder syntax."""
    if isinstance(node, exp.Placeholder) and node.name:
        return exp.var(f"tether_bind_{node.name}")
    return node


def _reads_the_catalog(statement: dict[str, str]) -> bool:
    """An engine's own catalog read (each source class reads its engine's catalog its own way;
    another engine's class never sends this one)."""
    tree = sqlglot.parse_one(statement["sql"], read=statement["dialect"])
    return any(t.db.lower() in ("information_schema", "pg_catalog")
               for t in tree.find_all(exp.Table))


def _unreadable(statements: list[dict[str, str]]) -> list[str]:
    out = []
    for s in statements:
        if _reads_the_catalog(s):
            continue
        for target in TARGETS:
            try:
                tree = sqlglot.parse_one(s["sql"], read=s["dialect"]).transform(
                    _as_sqlalchemy_binds)
                text = tree.sql(dialect=target, unsupported_level=ErrorLevel.RAISE)
                sqlglot.parse_one(text, read=target)
            except sqlglot.errors.SqlglotError as e:
                out.append(f"{s['dialect']} -> {target}: {str(e).splitlines()[0]}\n  {s['sql']}")
    return out


def _check(project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    statements = _exercise(project_dir, tmp_path / "sql.jsonl", monkeypatch)
    kinds = {type(sqlglot.parse_one(s["sql"], read=s["dialect"])).__name__ for s in statements}
    assert len(statements) > 50 and "Select" in kinds, (len(statements), kinds)
    bad = _unreadable(statements)
    assert not bad, f"{len(bad)} of {len(statements) * len(TARGETS)}:\n" + "\n".join(bad[:20])


@pytest.mark.parametrize("which", ["demo_dir", "second_dir"])
def test_every_statement_reads_in_each_dialect_duckdb(which: str, request: pytest.FixtureRequest,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    d = copy_project(request.getfixturevalue(which), tmp_path / "p")
    _check(d, tmp_path, monkeypatch)


@pytest.mark.postgres
def test_every_statement_reads_in_each_dialect_postgres(pg_demo_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    d = copy_project(pg_demo_dir, tmp_path / "p")
    _check(d, tmp_path, monkeypatch)


@pytest.mark.parametrize("dialect", TARGETS)
def test_the_hash_mask_is_written_for_each_dialect(dialect: str) -> None:
    assert dialect in HASH_DIALECTS
    text = hash_mask(exp.column("c"), dialect).transform(_as_sqlalchemy_binds).sql(
        dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    assert "256" in text.upper() or "SHA256" in text.upper()
    sqlglot.parse_one(f"SELECT {text} FROM t", read=dialect)


@pytest.mark.parametrize("dialect", ["spark", "databricks"])
def test_run_sql_refuses_a_script_transform(dialect: str) -> None:
    """SELECT TRANSFORM (...) USING 'script' runs a program on a Spark or Hive cluster: run_sql
    refuses it (the dialects that read it), before any policy rewriting."""
    from tether.serve.sqlguard import GuardError, parse

    text = "SELECT TRANSFORM(id) USING 'sh -c id' AS (x STRING) FROM t"
    assert sqlglot.parse_one(text, read=dialect).find(exp.QueryTransform) is not None
    with pytest.raises(GuardError, match="QUERYTRANSFORM is not allowed"):
        parse(text, dialect)
