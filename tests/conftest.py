"""Shared fixtures: a real demo DuckDB file and, when TETHER_TEST_PG_URL is set, real PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.demo import init_demo

TEST_SCALE = 0.2
PG_ENV = "TETHER_TEST_PG_URL"
GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="Rewrite golden files from the current output (on purpose).")


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def with_serve(text: str, **settings: object) -> str:
    """tether.yaml's text with ``serve`` settings added: into its ``serve:`` block when it has
    one (the demo's sets the tool-list budget), else as a new block at the end."""
    import json as _json

    lines = "".join(f"  {k}: {_json.dumps(v) if not isinstance(v, str) else v}\n"
                    for k, v in settings.items())
    if "\nserve:\n" in text:
        return text.replace("\nserve:\n", "\nserve:\n" + lines, 1)
    return text.rstrip("\n") + "\nserve:\n" + lines


def copy_project(src: Path, dst: Path) -> Path:
    """A project dir whose tether.yaml points at ``src``'s warehouse (no registry, no tools/)."""
    dst.mkdir(parents=True, exist_ok=True)
    text = (src / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{src / 'warehouse.duckdb'}")
    (dst / "tether.yaml").write_text(text)
    return dst


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo project on a DuckDB file, built once per session (scale 0.2: 42k order lines)."""
    d = tmp_path_factory.mktemp("demo")
    init_demo(d, scale=TEST_SCALE)
    return d


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: PostgreSQL tests need a server (.ci/run sets it)")
    return url


@pytest.fixture(scope="session")
def pg_schema(pg_url: str) -> Iterator[str]:
    """A fresh schema in the test database, dropped at the end."""
    import psycopg

    schema = f"tether_test_{uuid.uuid4().hex[:8]}"
    yield schema
    with psycopg.connect(pg_url) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_demo_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str, pg_schema: str) -> Path:
    """The same demo loaded into PostgreSQL, with a tether.yaml pointing there."""
    d = tmp_path_factory.mktemp("pgdemo")
    init_demo(d, scale=TEST_SCALE, source_url=pg_url, schema=pg_schema)
    return d


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `tether` console script in a subprocess (``input``: its stdin)."""
    exe = Path(sys.executable).parent / "tether"
    return subprocess.run(  # one width wherever it runs: messages are matched whole
        [str(exe), *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=300, input=input,
    )


Tables = dict[str, tuple[str, list[tuple[Any, ...]]]]
"""name -> (its columns as DDL, its rows): a small schema a test makes for itself."""


def duck_tables(path: Path, tables: Tables) -> str:
    """A DuckDB file at ``path`` holding each table (names quoted as given); its URL."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        for name, (ddl, rows) in tables.items():
            con.execute(f'CREATE TABLE "{name}" ({ddl})')
            if rows:
                con.executemany(f'INSERT INTO "{name}" VALUES '
                                f"({', '.join('?' * len(rows[0]))})", rows)
    return f"duckdb:///{path}"


@contextlib.contextmanager
def pg_tables(url: str, prefix: str, tables: Tables) -> Iterator[str]:
    """A fresh PostgreSQL schema holding each table (names quoted as given), dropped after; its
    name."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'CREATE SCHEMA "{schema}"')
        for name, (ddl, rows) in tables.items():
            pg.execute(f'CREATE TABLE "{schema}"."{name}" ({ddl})')
            if rows:
                with pg.cursor() as cur:
                    cur.executemany(f'INSERT INTO "{schema}"."{name}" VALUES '
                                    f"({', '.join(['%s'] * len(rows[0]))})", rows)
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA "{schema}" CASCADE')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_process(argv: list[str], port: int, timeout: float = 60) -> Iterator[None]:
    """Run a server process until it accepts connections on ``port``; stop it afterwards."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- second warehouse (tests/warehouse2) ---
# A clinic network in another domain than the demo (tests/warehouse2/__init__.py describes it).
SECOND_SCALE = 0.25


@pytest.fixture(scope="session")
def second_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The second warehouse's project on a DuckDB file, with cases.jsonl (scale 0.25: ~12k rows)."""
    from warehouse2 import build_second

    return build_second(tmp_path_factory.mktemp("second"), scale=SECOND_SCALE)


@pytest.fixture(scope="session")
def pg_second_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[Path]:
    """The same second warehouse loaded into its own fresh PostgreSQL schema, dropped at the end."""
    import psycopg

    from warehouse2 import build_second

    schema = f"tether_second_{uuid.uuid4().hex[:8]}"
    try:
        yield build_second(tmp_path_factory.mktemp("pgsecond"), scale=SECOND_SCALE,
                           source_url=pg_url, schema=schema)
    finally:
        with psycopg.connect(pg_url) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
# --- end second warehouse ---


@pytest.fixture(scope="session")
def console_base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The console tests' project (tests/console.py): a real pending review, tokens, a labelled
    run; tests work on copies of it."""
    from console import drift_project

    return drift_project(tmp_path_factory.mktemp("console") / "p")


# --- least-privilege PostgreSQL role ---
def reader_role(pg_url: str, schema: str) -> str:
    """A login role that may only read the tables of ``schema`` (no superuser, no writes, no
    file or server functions beyond PUBLIC's), made for this test session; returns its URL.
    tether's serving role should look like this (tether doctor checks it)."""
    import psycopg
    from psycopg import sql

    role = f"tether_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(
            sql.Identifier(role)))
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
        c.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
    return pg_url.replace("://postgres@", f"://{role}@", 1)


def drop_role(pg_url: str, reader_url: str) -> None:
    import psycopg
    from psycopg import sql

    role = reader_url.split("://", 1)[1].split("@", 1)[0]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        c.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def as_reader(project_dir: Path, dst: Path, pg_url: str, reader_url: str) -> Path:
    """A copy of a PostgreSQL project whose source connects as the least-privilege role."""
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "tether.yaml").write_text(
        (project_dir / "tether.yaml").read_text().replace(pg_url, reader_url))
    return dst


@pytest.fixture(scope="session")
def pg_reader_demo_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str,
                       pg_demo_dir: Path, pg_schema: str) -> Iterator[Path]:
    """The PostgreSQL demo served by a least-privilege role (SELECT on its schema only)."""
    url = reader_role(pg_url, pg_schema)
    try:
        yield as_reader(pg_demo_dir, tmp_path_factory.mktemp("pgreader"), pg_url, url)
    finally:
        drop_role(pg_url, url)


@pytest.fixture(scope="session")
def pg_reader_second_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str,
                         pg_second_dir: Path) -> Iterator[Path]:
    """The PostgreSQL second warehouse served by a least-privilege role."""
    import yaml

    schema = yaml.safe_load((pg_second_dir / "tether.yaml").read_text())["sources"]
    schema = next(iter(schema.values()))["schema"]
    url = reader_role(pg_url, schema)
    try:
        yield as_reader(pg_second_dir, tmp_path_factory.mktemp("pgreader2"), pg_url, url)
    finally:
        drop_role(pg_url, url)
# --- end least-privilege PostgreSQL role ---


@pytest.fixture(scope="session")
def built_both(demo_dir: Path, second_dir: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> dict[str, Any]:
    """{"demo": Project, "second": Project}: copies of both warehouses' projects, built once
    (published tools in a registry of their own), for tests that only call tools."""
    from tether.config import load_project
    from tether.drift.publish import build

    out = {}
    for which, src in (("demo", demo_dir), ("second", second_dir)):
        d = copy_project(src, tmp_path_factory.mktemp(f"built-{which}"))
        build(load_project(d))
        out[which] = load_project(d)
    return out


def call_tools(project: Any, user: str, calls: list[tuple[str, dict[str, Any]]],
               mode: str = "grounded", dedicated_tools: Any = None) -> list[Any]:
    """Each (tool, arguments) called in order through a real MCP client session on an
    in-process server acting as ``user`` (``dedicated_tools="none"``: discovery only); the
    results."""
    import anyio
    from mcp import Client

    from tether.serve.server import TetherServer

    server = TetherServer(project, mode=mode, stdio_user=user,  # type: ignore[arg-type]
                          dedicated_tools=dedicated_tools)

    async def go() -> list[Any]:
        async with Client(server.server) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    try:
        return anyio.run(go)
    finally:
        server.close()


def without_named_restrictions(probe: dict[str, Any]) -> dict[str, Any]:
    """The probe's definition less the one sentence that may name restricted columns (the
    policy's own "Not available to anyone through this server: ..."), from its description and
    its provenance; a restricted name anywhere else is still found. Other tools: unchanged."""
    import re

    from tether.toolgen.generate import NOT_AVAILABLE

    said = [x for x in re.split(r"(?<=\.) ", str(probe.get("description", "")))
            if x.startswith(NOT_AVAILABLE)]
    assert len(said) <= 1, probe.get("description")
    if not said:
        return probe
    ctx = dict(probe.get("_meta", {}).get("tether/context", {}))
    ctx["sources"] = {k: v for k, v in ctx.get("sources", {}).items() if k != said[0]}
    return {**probe, "description": probe["description"].replace(said[0], "").strip(),
            "_meta": {**probe.get("_meta", {}), "tether/context": ctx}}


@contextlib.contextmanager
def scratch_schema(url: str, prefix: str, ddl: str, rows: list[tuple[Any, ...]],
                   table: str) -> Iterator[str]:
    """A new PostgreSQL schema holding one table (``ddl``: its column list) with ``rows``; the
    schema's name; dropped afterwards."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
        c.execute(f'CREATE TABLE "{schema}"."{table}" {ddl}')
        marks = ", ".join(["%s"] * len(rows[0]))
        with c.cursor() as cur:
            cur.executemany(f'INSERT INTO "{schema}"."{table}" VALUES ({marks})', rows)
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


_PIPES: dict[int, tuple[Any, Any]] = {}


def piped(ex: Any) -> Any:
    """The call pipeline over the executor ``ex`` (serve/pipeline.py), made once per executor:
    its steps' caches are kept between calls, as a server keeps them."""
    from tether.serve.pipeline import Pipeline

    hit = _PIPES.get(id(ex))
    if hit is None or hit[0] is not ex:
        hit = _PIPES[id(ex)] = (ex, Pipeline(ex))
    return hit[1]
