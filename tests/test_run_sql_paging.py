"""run_sql pages: a result that says more follow carries a signed next_cursor, and the cursor
continues it to the end, in order, none repeated or missing, whether a page was stopped by the
rows cap or the bytes cap; a cursor is good for one user and one statement only. Through the
official SDK client, on DuckDB and PostgreSQL."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tether.config import load_project
from tether.serve.server import TetherServer
from tether.sources import open_product_source

SQL = "SELECT order_id, status FROM orders ORDER BY order_id"
WIDE = {"duckdb": "SELECT order_id, format('{:>20000}', status) AS padded FROM orders "
                  "ORDER BY order_id",
        "postgres": "SELECT order_id, format('%20000s', status) AS padded FROM orders "
                    "ORDER BY order_id"}
USER, OTHER = "mgr.emea", "mgr.amer"


def _project(request: pytest.FixtureRequest, engine: str) -> Any:
    return load_project(request.getfixturevalue("demo_dir" if engine == "duckdb"
                                                else "pg_demo_dir"))


def _pages(project: Any, user: str, sql: str, most: int | None = None
           ) -> list[dict[str, Any]]:
    """The structured results of run_sql ``sql`` as ``user``, page after page (at most
    ``most``), each next page asked with the previous one's next_cursor."""
    server = TetherServer(project, mode="generic", stdio_user=user)

    async def go() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        args: dict[str, Any] = {"sql": sql}
        async with Client(server.server) as c:
            while most is None or len(out) < most:
                r = await c.call_tool("run_sql", args)
                assert not r.is_error, r.content
                out.append(r.structured_content or {})
                if not out[-1]["next_cursor"]:
                    break
                args = {"sql": sql, "cursor": out[-1]["next_cursor"]}
        return out

    try:
        return anyio.run(go)
    finally:
        server.close()


def _call(project: Any, user: str, args: dict[str, Any]) -> Any:
    server = TetherServer(project, mode="generic", stdio_user=user)

    async def go() -> Any:
        async with Client(server.server) as c:
            return await c.call_tool("run_sql", args)

    try:
        return anyio.run(go)
    finally:
        server.close()


def _emea_orders(project: Any) -> list[int]:
    with open_product_source(project, "orders") as src:
        return [r[0] for r in src.run("SELECT order_id FROM orders WHERE sales_region = 'EMEA' "
                                      "ORDER BY order_id")]


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_run_sql_pages_to_the_end(engine: str, request: pytest.FixtureRequest) -> None:
    project = _project(request, engine)
    pages = _pages(project, USER, SQL)
    ids = [r["order_id"] for p in pages for r in p["rows"]]
    assert ids == _emea_orders(project)  # every row the user may see, in order, once each
    assert len(pages) > 2
    for p in pages[:-1]:
        assert p["truncated"] and p["next_cursor"] and p["row_count"] == 200
    assert not pages[-1]["truncated"] and pages[-1]["next_cursor"] is None


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_pages_stopped_by_the_bytes_cap_continue_where_they_stopped(
        engine: str, request: pytest.FixtureRequest) -> None:
    project = _project(request, engine)
    pages = _pages(project, USER, WIDE[engine], most=3)
    ids = [r["order_id"] for p in pages for r in p["rows"]]
    assert ids == _emea_orders(project)[:len(ids)]
    for p in pages:
        assert p["truncated"] and p["capped"] and 0 < p["row_count"] < 200
        assert all(len(r["padded"]) == 20000 for r in p["rows"])


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_cursor_serves_one_user_and_one_statement(engine: str,
                                                   request: pytest.FixtureRequest) -> None:
    project = _project(request, engine)
    cursor = _pages(project, USER, SQL, most=1)[0]["next_cursor"]
    assert cursor
    for user, args in [(OTHER, {"sql": SQL, "cursor": cursor}),  # another user
                       (USER, {"sql": SQL.replace("status", "currency"), "cursor": cursor})]:
        r = _call(project, user, args)
        assert r.is_error
        assert "cursor belongs to another user, tool, version or set of arguments" in (
            r.content[0].text)
    raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw[-3] ^= 1  # the offset altered
    forged = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    r = _call(project, USER, {"sql": SQL, "cursor": forged})
    assert r.is_error and "cursor" in r.content[0].text


def test_run_sql_declares_its_cursor(demo_dir: Path) -> None:
    server = TetherServer(load_project(demo_dir), mode="generic", stdio_user=USER)

    async def go() -> Any:
        async with Client(server.server) as c:
            return next(t for t in (await c.list_tools()).tools if t.name == "run_sql")

    try:
        tool = anyio.run(go)
    finally:
        server.close()
    assert tool.input_schema["properties"]["cursor"]["type"] == "string"
