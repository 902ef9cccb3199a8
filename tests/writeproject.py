"""A small project with write actions, on a DuckDB file or in a PostgreSQL schema served by a
read-only role and written by a writer role of its own (its registry in PostgreSQL too, as
replicas share it): shipments of a parcel carrier (a domain
neither test warehouse uses), with a state machine, a precondition, a metric downstream and
depot row filters. Shared by tests/test_write.py and tests/test_write_attacks.py."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import yaml

TABLE = "shipments"
COLUMNS = ("shipment_id", "depot", "state", "weight_kg", "value_eur")
ROWS: list[tuple[Any, ...]] = [
    ("S001", "NORTH", "PENDING", 2.5, 40.0),
    ("S002", "NORTH", "PACKED", 1.0, 60.0),
    ("S003", "NORTH", "DELIVERED", 3.0, 10.0),
    ("S004", "NORTH", "PENDING", 0.0, 5.0),      # no weight: fails the precondition
    ("S005", "SOUTH", "PENDING", 4.0, 80.0),
    ("S006", "SOUTH", "PACKED", 2.0, 20.0),
    ("S007", "NORTH", "PACKED", 5.0, 15.5),
    ("S008", "NORTH", "HELD", 1.5, 12.0),
]
DDL = ("(shipment_id VARCHAR PRIMARY KEY, depot VARCHAR NOT NULL, state VARCHAR NOT NULL, "
       "weight_kg DOUBLE PRECISION, value_eur DOUBLE PRECISION)")

NORTH, NORTH2, SOUTH, VIEWER = "disp.north", "disp.north2", "disp.south", "view.all"
REVIEWER = "rev.rita"
HOLD, RELEASE = "hold_shipment", "release_shipment"


def config(url: str, writer_url: str, schema: str | None) -> dict[str, Any]:
    source: dict[str, Any] = {"url": url, "writer_url": writer_url}
    if schema:
        source["schema"] = schema
    return {
        "sources": {"main": source},
        "products": {TABLE: {
            "table": TABLE, "description": "A parcel on its way from a depot.",
            "grain": "one row per shipment", "primary_key": ["shipment_id"],
            "columns": {"value_eur": {"unit": "EUR"}, "weight_kg": {"unit": "kg"}},
            "actions": {
                "hold_shipment": {
                    "description": "Put shipments on hold before pickup.",
                    "set": ["state"],
                    "transitions": {"state": {"PENDING": ["HELD"], "PACKED": ["HELD"]}},
                    "require": ["weight_kg > 0"],
                    "consequences": ["the carrier's pickup list drops held shipments"],
                    "roles": ["dispatcher"], "inverse": "release_shipment"},
                "release_shipment": {
                    "description": "Release held shipments.",
                    "set": ["state"],
                    "transitions": {"state": {"HELD": ["PENDING", "PACKED"]}},
                    "roles": ["dispatcher"], "inverse": "hold_shipment"},
            }}},
        "metrics": {"open_value": {
            "description": "Value of shipments waiting for pickup.",
            "measure": "sum(shipments.value_eur)",
            "predicate": "shipments.state IN ('PENDING', 'PACKED')",
            "window": "current", "unit": "EUR", "tool": {"name": "open_value"}}},
        "policies": {
            "roles": {
                "dispatcher": {"tools": ["*"], "row_filters": {
                    TABLE: "depot = {{ user.depot }}"}},
                "viewer": {"tools": ["*"]},
                # a person who reviews changes (a tightened action waits for one)
                "reviewer": {"tools": ["*"], "reviewer": True}},
            "users": {NORTH: {"role": "dispatcher", "depot": "NORTH"},
                      NORTH2: {"role": "dispatcher", "depot": "NORTH"},
                      SOUTH: {"role": "dispatcher", "depot": "SOUTH"},
                      VIEWER: {"role": "viewer"}, REVIEWER: {"role": "reviewer"}}},
    }


class Made:
    """A built project and a way to read the table as it is now."""

    def __init__(self, folder: Path, read: Callable[[], dict[str, str]],
                 sql: Callable[[str], None], engine: str, url: str | None = None):
        self.folder, self.read, self.sql, self.engine, self.url = folder, read, sql, engine, url

    def states(self) -> dict[str, str]:
        return self.read()


def _write(folder: Path, cfg: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _build(folder: Path) -> None:
    from tether.config import load_project
    from tether.drift.publish import build

    build(load_project(folder))


@contextlib.contextmanager
def duckdb_project(tmp_path: Path, extra: Callable[[dict[str, Any]], None] | None = None
                   ) -> Iterator[Made]:
    path = tmp_path / "carrier.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE {TABLE} {DDL}")
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?)", ROWS)
    folder = tmp_path / "proj"
    cfg = config(f"duckdb:///{path}", f"duckdb:///{path}", None)
    if extra:
        extra(cfg)
    _write(folder, cfg)
    _build(folder)

    def read() -> dict[str, str]:
        from tether.sources.duckdb import alone

        with alone(path, 30), duckdb.connect(str(path), read_only=True) as c:
            return dict(c.execute(f"SELECT shipment_id, state FROM {TABLE}").fetchall())

    def sql(q: str) -> None:
        from tether.sources.duckdb import alone

        with alone(path, 30), duckdb.connect(str(path)) as c:
            c.execute(q)
    yield Made(folder, read, sql, "duckdb")


def pg_role(pg_url: str, schema: str, grants: str) -> str:
    """A login role of its own with ``grants`` on the schema's tables; its URL."""
    import psycopg
    from psycopg import sql

    role = f"tether_w_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(
            sql.Identifier(role)))
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
        c.execute(sql.SQL("GRANT " + grants + " ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
    return pg_url.replace("://postgres@", f"://{role}@", 1)


@contextlib.contextmanager
def pg_project(tmp_path: Path, pg_url: str,
               extra: Callable[[dict[str, Any]], None] | None = None) -> Iterator[Made]:
    import psycopg

    from conftest import drop_role, scratch_schema

    with scratch_schema(pg_url, "carrier", DDL.replace("VARCHAR", "text"), ROWS,
                        TABLE) as schema:
        reader = pg_role(pg_url, schema, "SELECT")
        writer = pg_role(pg_url, schema, "SELECT, UPDATE")
        registry = f"{schema}_registry"  # shared by every server on the project: replicas
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "{registry}"')
        try:
            folder = tmp_path / "proj"
            cfg = config(reader, writer, schema)
            cfg["registry"] = {"url": f"{pg_url}?options=-csearch_path%3D{registry}"}
            if extra:
                extra(cfg)
            _write(folder, cfg)
            _build(folder)

            def read() -> dict[str, str]:
                with psycopg.connect(pg_url, autocommit=True) as c:
                    rows = c.execute(f'SELECT shipment_id, state FROM "{schema}".{TABLE}'
                                     ).fetchall()
                return dict(rows)

            def sql(q: str) -> None:
                with psycopg.connect(pg_url, autocommit=True) as c:
                    c.execute(f'SET search_path TO "{schema}"')
                    c.execute(q)
            yield Made(folder, read, sql, "postgres", pg_url)
        finally:
            drop_role(pg_url, reader)
            drop_role(pg_url, writer)
            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA "{registry}" CASCADE')


def tighten(made: Made, change: Callable[[dict[str, Any]], None] | None = None) -> None:
    """A reviewed change narrows the hold (2.0.0): only PENDING shipments worth under 30 EUR
    may be held (and the release allows every move back, no more); ``change`` edits the actions
    further. Checked (it waits for a person) and approved by the reviewer."""
    from conftest import run_cli

    path = made.folder / "tether.yaml"
    cfg = yaml.safe_load(path.read_text())
    actions = cfg["products"][TABLE]["actions"]
    actions[HOLD]["transitions"] = {"state": {"PENDING": ["HELD"]}}
    actions[HOLD]["require"] = ["weight_kg > 0", "value_eur < 30"]
    actions[RELEASE]["transitions"] = {"state": {"HELD": ["PENDING"]}}
    if change:
        change(actions)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    checked = run_cli("check", "--project", str(made.folder), "--json")
    assert checked.returncode == 11, (checked.stdout, checked.stderr)
    reviews = {t["review"] for t in json.loads(checked.stdout)["tools"]
               if t["tool"] in actions and t.get("review")}
    for review in sorted(reviews):
        approved = run_cli("review", "approve", str(review), "--as", REVIEWER, "--project",
                           str(made.folder))
        assert approved.returncode == 0, (approved.stdout, approved.stderr)


def session(folder: Path, user: str, steps: Callable[[Any], Awaitable[Any]]) -> Any:
    """``steps(client)`` over a real MCP client session with an in-process server acting as
    ``user``; what it returns."""
    import anyio
    from mcp import Client

    from tether.config import load_project
    from tether.serve.server import TetherServer

    server = TetherServer(load_project(folder), stdio_user=user)

    async def go() -> Any:
        async with Client(server.server) as c:
            return await steps(c)

    try:
        return anyio.run(go)
    finally:
        server.close()


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(result.structured_content)


def refused(result: Any) -> tuple[str, str | None]:
    """(the error text, the refusal reason) of a call that must fail."""
    assert result.is_error, result.structured_content
    meta = (result.meta or {}).get("tether/refusal") or {}
    return result.content[0].text, meta.get("reason")
