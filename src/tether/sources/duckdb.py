"""DuckDB files, read through DuckDB's own catalog (duckdb-engine cannot reflect under SA 2.1)."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
from sqlglot import exp

from tether.context.schema import Column
from tether.errors import ProductError, QueryError, SourceError
from tether.sources.base import Fetched, Source, first_line, kind_of, take
from tether.sources.watchdog import WATCHDOG

READ_ONLY_CONFIG = {"enable_external_access": False, "lock_configuration": True}
"""How tether opens a DuckDB file: no file, network or extension access, and a configuration no
statement can change back. DuckDB refuses a second connection to the same file in one process
with another configuration: open it with this one (read_only=True) beside a source."""


class DuckDBSource(Source):
    dialect = "duckdb"

    def __init__(self, name: str, path: Path, schema: str | None = None):
        super().__init__(name, str(path))
        if not path.is_file():
            raise SourceError(
                f"source {name!r}: the DuckDB file {path} does not exist.",
                hint="Check the path in tether.yaml (relative paths are relative to the project "
                "directory), or build the demo with `tether demo init`.",
            )
        try:
            # tether only reads: no file, network or extension access, and a configuration
            # that no statement can change back
            self.con = duckdb.connect(str(path), read_only=True, config=dict(READ_ONLY_CONFIG))
        except duckdb.Error as e:
            raise SourceError(
                f"source {name!r}: cannot open {path} read-only: {e}",
                hint="Another process may hold it open for writing; close it and retry.",
            ) from None
        self.schema = schema
        self.path = path
        self._catalog: dict[tuple[str, str], list[Column]] | None = None
        self._catalog_wanted = False
        self._catalog_lock = threading.Lock()  # profiles are described from threads
        self._types: dict[str, Any] = {}
        if schema:
            self.con.execute(f"SET schema = '{schema.replace(chr(39), '')}'")

    def loaded_at(self) -> dt.datetime | None:
        """The database file's last write (its write-ahead log's, if newer)."""
        times = [f.stat().st_mtime for f in (self.path, self.path.with_name(self.path.name + ".wal"))
                 if f.is_file()]
        return dt.datetime.fromtimestamp(max(times), dt.UTC) if times else None

    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        # a cursor per call: its own connection to the same database, safe across threads
        cur = self.con.cursor()
        try:
            if self.schema:
                cur.execute(f"SET schema = '{self.schema.replace(chr(39), '')}'")
            with WATCHDOG.guard(timeout, cur.interrupt):
                cur.execute(sql, params or None)
                names = [d[0] for d in cur.description or []]
                return names, cur.fetchall()
        except duckdb.InterruptException:
            raise SourceError(f"source {self.name!r}: the query ran longer than {timeout:g}s "
                              "and was cancelled", hint="Narrow it down.") from None
        except duckdb.Error as e:
            raise QueryError(self.name, first_line(e)) from None
        finally:
            cur.close()

    def fetch(self, sql: str, params: dict[str, Any] | None, timeout: float,
              max_rows: int, max_bytes: int) -> Fetched:
        cur = self.con.cursor()
        deadline = time.monotonic() + timeout

        def late() -> None:
            raise duckdb.InterruptException("deadline")

        try:
            if self.schema:
                cur.execute(f"SET schema = '{self.schema.replace(chr(39), '')}'")
            with WATCHDOG.guard(timeout, cur.interrupt):
                cur.execute(sql, params or None)
                names = [d[0] for d in cur.description or []]
                batches = iter(lambda: cur.fetchmany(512), [])
                rows, capped = take(batches, max_rows, max_bytes, deadline, late)
                return Fetched(names, rows, capped)
        except duckdb.InterruptException:
            raise SourceError(f"source {self.name!r}: the query ran longer than {timeout:g}s "
                              "and was cancelled", hint="Narrow it down.") from None
        except duckdb.Error as e:
            raise QueryError(self.name, first_line(e)) from None
        finally:
            cur.close()

    def tables(self) -> list[str]:
        rows = self.con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal "
            "AND database_name = current_database() UNION ALL "
            "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal "
            "AND database_name = current_database() ORDER BY 1, 2"
        ).fetchall()
        default = self.schema or "main"
        return [t if s == default else f"{s}.{t}" for s, t in rows]

    def primary_key(self, table: str) -> list[str]:
        t = self.table_expr(table)
        rows = self.con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY' AND table_name = $t AND schema_name = $s",
            {"t": t.name, "s": t.db or self.schema or "main"},
        ).fetchall()
        return list(rows[0][0]) if rows else []

    @contextlib.contextmanager
    def catalog_read(self) -> Iterator[None]:
        self._catalog_wanted = True  # read on the first describe: a quiet check needs none
        try:
            yield
        finally:
            self._catalog, self._catalog_wanted = None, False

    def _read_catalog(self) -> dict[tuple[str, str], list[Column]]:
        """Every base table's columns (not views': a view whose base table changed keeps stale
        columns in the catalog until it is bound again, so views are described by binding)."""
        cur = self.con.cursor()
        rows = cur.execute(
            "SELECT c.schema_name, c.table_name, c.column_name, c.data_type, c.is_nullable "
            "FROM duckdb_columns() c JOIN duckdb_tables() t ON t.database_name = "
            "c.database_name AND t.schema_name = c.schema_name AND t.table_name = c.table_name "
            "WHERE c.database_name = current_database() "
            "ORDER BY c.schema_name, c.table_name, c.column_index").fetchall()
        cur.close()
        catalog: dict[tuple[str, str], list[Column]] = {}
        for schema, table, column, type_name, nullable in rows:
            catalog.setdefault((schema, table), []).append(
                _column(column, self._type(type_name), nullable=bool(nullable)))
        return catalog

    def _type(self, name: str) -> Any:
        """A catalog type name as a type (a user type needs the connection's catalog); called
        while reading the catalog, under its lock."""
        if name not in self._types:
            self._types[name] = self.con.sqltype(name)
        return self._types[name]

    def describe(self, relation: exp.Expr, label: str) -> list[Column]:
        if isinstance(relation, exp.Table) and self._catalog_wanted:
            with self._catalog_lock:
                if self._catalog is None:
                    self._catalog = self._read_catalog()
            found = self._catalog.get((relation.db or self.schema or "main", relation.name))
            if found is not None:
                return list(found)
        cur = self.con.cursor()  # its own connection: profiles are described from threads
        try:
            if self.schema:
                cur.execute(f"SET schema = '{self.schema.replace(chr(39), '')}'")
            return self._describe(cur, relation, label)
        finally:
            cur.close()

    def _describe(self, cur: Any, relation: exp.Expr, label: str) -> list[Column]:
        try:
            rel = cur.sql(f"SELECT * FROM {relation.sql(dialect='duckdb')} LIMIT 0")
            names, types = rel.columns, rel.types
        except duckdb.CatalogException:
            raise ProductError(
                f"{label}: table {relation.sql(dialect='duckdb')} does not exist in source "
                f"{self.name!r} ({self.url_for_humans}).",
                hint=self.tables_hint(relation.name),
            ) from None
        except duckdb.Error as e:
            raise ProductError(f"{label}: the source rejected it: {e}") from None
        not_null: set[str] = set()
        if isinstance(relation, exp.Table):
            # the table's own catalog entry: duckdb_columns() filtered by name reads every
            # column of every table (4.5 ms a table at 1,000 tables; this is 0.5 ms at any size)
            bare = relation.copy()
            bare.set("alias", None)
            try:
                rows = cur.execute(
                    'SELECT name FROM pragma_table_info($t) WHERE "notnull"',
                    {"t": bare.sql(dialect="duckdb")},
                ).fetchall()
            except duckdb.Error as e:
                raise ProductError(f"{label}: the source rejected it: {e}") from None
            not_null = {r[0] for r in rows}
        return [_column(n, t, nullable=n not in not_null)
                for n, t in zip(names, types, strict=True)]

    def catalog_signatures(self, tables: list[exp.Table]) -> dict[str, str]:
        names = {(t.db or self.schema or "main", t.name) for t in tables}
        rows = self.con.execute(
            "SELECT schema_name, table_name, list(column_name || ':' || data_type || ':' || "
            "is_nullable::VARCHAR ORDER BY column_index) FROM duckdb_columns() "
            "WHERE database_name = current_database() GROUP BY 1, 2").fetchall()
        return {t: "|".join(cols) for s, t, cols in rows if (s, t) in names}

    def checksum(self, columns: list[exp.Expr]) -> exp.Expr | None:
        return exp.func("SUM", exp.Anonymous(this="hash", expressions=columns))

    def close(self) -> None:
        self.con.close()


def _column(name: str, t: Any, nullable: bool = True) -> Column:
    type_name = str(t).upper()
    children: list[Column] = []
    if t.id == "struct":
        children = [_column(f"{name}.{cn}", ct) for cn, ct in t.children]
    elif t.id == "list":
        children = [_column(f"{name}[]", t.children[0][1])]
    return Column(
        name=name, type=type_name, kind=kind_of(type_name), nullable=nullable, children=children
    )
