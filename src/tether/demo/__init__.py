"""The embedded demo: a warehouse with agent traps and its tether.yaml, on DuckDB or PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from tether.config import PROJECT_FILE, parse_project
from tether.demo.cases import write_cases
from tether.demo.warehouse import TABLES, Step, build_warehouse
from tether.errors import ProjectExistsError, SourceError
from tether.sources.duckdb import READ_ONLY_CONFIG
from tether.sources.sqlalchemy import libpq_url, redact

WAREHOUSE_FILE = "warehouse.duckdb"
DEFAULT_PG_SCHEMA = "tether_demo"


@dataclass
class DemoResult:
    project_dir: Path
    source_url: str
    rows: dict[str, int] = field(default_factory=dict)


def demo_project_text(source_url: str, schema: str | None = None) -> str:
    """The demo's tether.yaml, pointing at ``source_url``."""
    text = resources.files("tether.demo").joinpath("tether.yaml").read_text(encoding="utf-8")
    text = text.replace("__SOURCE_URL__", source_url)
    return text.replace("__SOURCE_SCHEMA__", f", schema: {schema}" if schema else "")


def init_demo(
    target: Path,
    *,
    scale: float = 1.0,
    seed: int = 7,
    source_url: str | None = None,
    schema: str | None = None,
    force: bool = False,
    step: Step | None = None,
) -> DemoResult:
    """Build the demo warehouse and write its tether.yaml into ``target``.

    With ``source_url`` (PostgreSQL), the same tables are loaded into ``schema`` there instead of
    a DuckDB file. Existing files are never overwritten without ``force``.
    """
    if scale <= 0:
        raise SourceError(f"--scale must be positive (got {scale}).", hint="Use e.g. 1 or 0.1.")
    target.mkdir(parents=True, exist_ok=True)
    project_file = target / PROJECT_FILE
    db = target / WAREHOUSE_FILE
    existing = [p for p in (project_file, db) if p.exists()] if source_url is None else (
        [project_file] if project_file.exists() else []
    )
    if existing and not force:
        raise ProjectExistsError(
            f"{', '.join(str(p) for p in existing)} already exist(s).",
            hint="Choose another directory, or pass --force to replace the demo there.",
        )
    if force:  # the old demo's registry and exported tools describe the old demo
        shutil.rmtree(target / ".tether", ignore_errors=True)
        shutil.rmtree(target / "tools", ignore_errors=True)
        shutil.rmtree(target / "eval", ignore_errors=True)  # traces of the old demo
    tmp = target / f".{WAREHOUSE_FILE}.building"
    tmp.unlink(missing_ok=True)
    try:
        rows = build_warehouse(tmp, scale=scale, seed=seed, step=step)
        if source_url is None:
            os.replace(tmp, db)
            url = f"duckdb:///{WAREHOUSE_FILE}"
        else:
            schema = schema or DEFAULT_PG_SCHEMA
            if step:
                step(f"copying into PostgreSQL schema {schema}")
            copy_to_postgres(tmp, source_url, schema, replace=force)
            url = source_url
    finally:
        tmp.unlink(missing_ok=True)
    text = demo_project_text(url, schema if source_url else None)
    parse_project(text, project_file)  # the shipped file must always load
    project_file.write_text(text, encoding="utf-8")
    if step:  # gold answers are computed on the new warehouse
        step("computing the evaluation cases' gold answers")
    write_cases(target)
    return DemoResult(target, url, rows)


_PG_TYPES = [
    (r"^VARCHAR", "text"),
    (r"^TIMESTAMP WITH TIME ZONE", "timestamptz"),
    (r"^STRUCT", "jsonb"),
]


def _pg_type(duck_type: str) -> str:
    for pattern, pg in _PG_TYPES:
        if re.match(pattern, duck_type):
            return pg
    return duck_type.lower()


def copy_to_postgres(db: Path, url: str, schema: str, replace: bool = False) -> None:
    """Copy every demo table from a DuckDB file into a PostgreSQL schema (COPY, batched)."""
    import psycopg
    from psycopg import sql

    libpq = libpq_url(url)
    src = duckdb.connect(str(db), read_only=True, config=dict(READ_ONLY_CONFIG))
    try:
        with psycopg.connect(libpq) as pg:
            exists = pg.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = ANY(%s)", (schema, list(TABLES))
            ).fetchone()
            if exists and exists[0] and not replace:
                raise ProjectExistsError(
                    f"schema {schema!r} in {url} already holds demo tables.",
                    hint="Pass --force to replace them, or --schema to choose another schema.",
                )
            pg.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            for table in TABLES:
                _copy_table(src, pg, schema, table)
    except psycopg.OperationalError as e:
        raise SourceError(
            f"cannot connect to {redact(url)}: {str(e).strip()}",
            hint="Check that PostgreSQL is running and the URL is right.",
        ) from None
    finally:
        src.close()


def _copy_table(src: duckdb.DuckDBPyConnection, pg: Any, schema: str, table: str) -> None:
    from psycopg import sql

    cols = src.execute(
        "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
        "WHERE table_name = $t ORDER BY column_index", {"t": table}
    ).fetchall()
    pk = src.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = $t AND constraint_type = 'PRIMARY KEY'", {"t": table}
    ).fetchall()
    ident = sql.Identifier(schema, table)
    defs = [
        sql.SQL("{} {}{}").format(
            sql.Identifier(name), sql.SQL(_pg_type(t)), sql.SQL("" if nullable else " NOT NULL")
        )
        for name, t, nullable in cols
    ]
    if pk:
        defs.append(sql.SQL("PRIMARY KEY ({})").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in pk[0][0])))
    pg.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    pg.execute(sql.SQL("CREATE TABLE {} ({})").format(ident, sql.SQL(", ").join(defs)))
    jsonb = [i for i, (_, t, _) in enumerate(cols) if t.startswith("STRUCT")]
    names = sql.SQL(", ").join(sql.Identifier(c[0]) for c in cols)
    cur = src.execute(f'SELECT * FROM "{table}" ORDER BY ALL')
    with pg.cursor() as pcur, pcur.copy(
        sql.SQL("COPY {} ({}) FROM STDIN").format(ident, names)
    ) as copy:
        while batch := cur.fetchmany(10_000):
            for row in batch:
                if jsonb:
                    row = tuple(json.dumps(v) if i in jsonb else v for i, v in enumerate(row))
                copy.write_row(row)
    pg.execute(sql.SQL("ANALYZE {}").format(ident))
