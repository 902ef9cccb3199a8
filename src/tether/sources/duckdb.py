"""DuckDB files, read through DuckDB's own catalog (duckdb-engine cannot reflect under SA 2.1)."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
from sqlglot import exp

from tether.config import ServeConfig
from tether.context.schema import Column
from tether.errors import ProductError, QueryError, SourceError
from tether.sources.base import (
    Fetched,
    ForeignKey,
    Source,
    first_line,
    kind_of,
    take,
    trace_statement,
)
from tether.sources.watchdog import WATCHDOG

READ_ONLY_CONFIG = {"enable_external_access": False, "lock_configuration": True}
"""How tether opens a DuckDB file: no file, network or extension access, and a configuration no
statement can change back. DuckDB refuses a second connection to the same file in one process
with another configuration: open it with this one (read_only=True) beside a source."""

POOL = 8
"""Idle connections a source keeps for its next statements (more are opened while busy)."""

_SERVING: weakref.WeakSet[DuckDBSource] = weakref.WeakSet()
_OPEN: weakref.WeakSet[DuckDBSource] = weakref.WeakSet()
"""Every source holding a file open in this process (a writer closes them for its turn)."""


class Turns:
    """Turns on one DuckDB file in this process: statements read side by side; a writer waits
    for those running, has the file alone (DuckDB will not open a file for writing while this
    process holds it read-only), and the readers open it again after. While a writer waits, no
    new reading starts (so steady reads cannot starve it), but a thread already reading may read
    again (a statement inside another never waits on a writer that waits on it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0
        self._mine = threading.local()  # how deep this thread is in reading()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        depth = getattr(self._mine, "depth", 0)
        with self._cond:
            while self._writing or (self._waiting and depth == 0):
                self._cond.wait()
            self._readers += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self, timeout: float) -> Iterator[None]:
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            try:
                while self._writing or self._readers:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise SourceError("the DuckDB file stayed busy with reads; nothing was "
                                          "written", hint="Try again in a moment.")
                    self._cond.wait(left)
            finally:
                self._waiting -= 1
                self._cond.notify_all()
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


_TURNS: dict[str, Turns] = {}
_TURNS_LOCK = threading.Lock()


def turns(path: Path) -> Turns:
    """The turns on ``path`` (one object per file in this process)."""
    key = str(path.resolve())
    with _TURNS_LOCK:
        return _TURNS.setdefault(key, Turns())


@contextlib.contextmanager
def alone(path: Path, timeout: float) -> Iterator[None]:
    """This process's hold on ``path`` released for a writer: running statements finish, every
    source on the file closes its connections (each opens them again on its next statement),
    and none reads until the writer is done."""
    with turns(path).writing(timeout):
        key = path.resolve()
        for src in list(_OPEN):
            if src.path.resolve() == key:
                src.suspend()
        yield
_ARMING = threading.Lock()
_armed: list[Any] = []  # [an instance of no data that sets the allocator; when it last did]
REARM_SECONDS = 5.0


def return_freed_memory(force: bool = False) -> None:
    """Keep DuckDB's allocator handing freed memory back to the system while a server's source
    is open. Closing any DuckDB instance turns the allocator's background threads off for the
    whole process, whatever that instance's own setting (seen with duckdb 2.0.1: after one
    closed, a server kept a dropped 260 MB forever instead of for about a second), and a
    locked serving instance cannot turn them on again; an instance of no data, kept for it,
    can. Cheap: done after every close and at most every few seconds otherwise."""
    if not _SERVING:
        return
    now = time.monotonic()
    with _ARMING:
        if not force and _armed and now - _armed[1] < REARM_SECONDS:
            return
        if not _armed:
            _armed.extend([duckdb.connect(":memory:"), now])
        _armed[0].execute("SET allocator_background_threads = true")
        _armed[1] = now


def serving_config(path: Path, serve: ServeConfig) -> dict[str, Any]:
    """The engine settings of a server's own DuckDB instance: a memory limit (intermediates
    and the buffer cache; beyond it a query spills or fails), a bounded spill folder beside the
    file, its threads, and freed memory handed back to the system (the allocator's background
    threads: a value a statement built and dropped leaves the process within a second or so)."""
    config: dict[str, Any] = {
        "memory_limit": serve.duckdb_memory_limit,
        "max_temp_directory_size": serve.duckdb_max_temp_size,
        "temp_directory": str(path) + ".tmp",  # where DuckDB spills for a file it opens itself
        "allocator_background_threads": True,
    }
    if serve.duckdb_threads:
        config["threads"] = serve.duckdb_threads
    return config


class DuckDBSource(Source):
    """A DuckDB file, read-only. With ``serve`` (a server's connections), in an engine instance
    of its own whose memory, threads and spilling ``serve`` bounds: the file is attached to an
    in-memory instance, so the limits hold for serving alone while profiling in the same process
    opens the file with the engine's defaults."""

    dialect = "duckdb"

    def __init__(self, name: str, path: Path, schema: str | None = None,
                 serve: ServeConfig | None = None):
        super().__init__(name, str(path))
        if not path.is_file():
            raise SourceError(
                f"source {name!r}: the DuckDB file {path} does not exist.",
                hint="Check the path in tether.yaml (relative paths are relative to the project "
                "directory), or build the demo with `tether demo init`.",
            )
        self.schema = schema
        self.path = path
        self.serve = serve
        self._use: list[str] = []  # what each new connection runs before its first statement
        self._pool: list[Any] = []
        self._pool_lock = threading.Lock()
        self.turns = turns(path)
        self._con: Any = self._open_bounded(serve) if serve is not None else self._open()
        self._catalog: dict[tuple[str, str], list[Column]] | None = None
        self._catalog_wanted = False
        self._catalog_lock = threading.Lock()  # profiles are described from threads
        self._types: dict[str, Any] = {}
        for statement in self._use:
            self._con.execute(statement)
        _OPEN.add(self)
        if serve is not None:
            _SERVING.add(self)
            return_freed_memory(force=True)

    @property
    def con(self) -> Any:
        """The connection, opened again after a writer had the file (call while reading)."""
        if self._con is None:
            with self._pool_lock:  # two readers at once open it once
                if self._con is None:
                    con = self._open_bounded(self.serve) if self.serve is not None else (
                        self._open())
                    for statement in self._use:
                        con.execute(statement)
                    self._con = con
        return self._con

    def suspend(self) -> None:
        """Close every connection to the file, for a writer's turn (see :func:`alone`)."""
        with self._pool_lock:
            idle, self._pool = self._pool, []
        for cur in idle:
            cur.close()
        if self._con is not None:
            self._con.close()
            self._con = None

    def _open(self) -> Any:
        try:
            # tether only reads: no file, network or extension access, and a configuration
            # that no statement can change back
            con = duckdb.connect(str(self.path), read_only=True, config=dict(READ_ONLY_CONFIG))
        except duckdb.Error as e:
            raise SourceError(
                f"source {self.name!r}: cannot open {self.path} read-only: {e}",
                hint="Another process may hold it open for writing; close it and retry.",
            ) from None
        if self.schema:
            self._use = [f"SET schema = '{self.schema.replace(chr(39), '')}'"]
        return con

    def _open_bounded(self, serve: ServeConfig) -> Any:
        """An in-memory instance with the serving limits, the file attached read-only under
        the name a direct connection gives it (its stem), then external access turned off and
        the configuration locked, as for :meth:`_open`."""
        alias = self.path.stem
        try:
            con = duckdb.connect(":memory:", config=serving_config(self.path, serve))
        except duckdb.Error as e:
            raise SourceError(
                f"source {self.name!r}: DuckDB refused the serving limits: {first_line(e)}",
                hint="Check serve.duckdb_memory_limit, serve.duckdb_max_temp_size and "
                "serve.duckdb_threads in tether.yaml.") from None
        quoted = exp.to_identifier(alias, quoted=True).sql(dialect="duckdb")
        try:
            con.execute(f"ATTACH '{str(self.path).replace(chr(39), chr(39) * 2)}' AS {quoted} "
                        "(READ_ONLY)")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        except duckdb.Error as e:
            con.close()
            raise SourceError(
                f"source {self.name!r}: cannot open {self.path} read-only: {first_line(e)}",
                hint="Another process may hold it open for writing; close it and retry (a file "
                "named memory, system or temp must be renamed: DuckDB keeps those names).",
            ) from None
        schema = (exp.to_identifier(self.schema, quoted=True).sql(dialect="duckdb")
                  if self.schema else None)
        self._use = [f"USE {quoted}" + (f".{schema}" if schema else "")]
        return con

    @contextlib.contextmanager
    def _cursor(self, timeout: float | None = None) -> Iterator[Any]:
        """A connection to this source's database for one statement, interrupted after
        ``timeout`` seconds. Connections are reused (opening one and setting its catalog cost
        more than a small query); one that was interrupted or failed is closed instead, so a
        late interrupt can never reach the next statement."""
        with self.turns.reading():
            with self._pool_lock:
                cur = self._pool.pop() if self._pool else None
            if cur is None:
                cur = self.con.cursor()
                for statement in self._use:
                    cur.execute(statement)
            with self._statement(cur, timeout) as held:
                yield held

    @contextlib.contextmanager
    def _statement(self, cur: Any, timeout: float | None) -> Iterator[Any]:
        lock = threading.Lock()
        state = {"live": True, "stopped": False}

        def stop() -> None:
            with lock:
                if state["live"]:
                    state["stopped"] = True
                    cur.interrupt()

        if self.serve is not None:
            return_freed_memory()
        reusable = False
        try:
            with WATCHDOG.guard(timeout, stop):
                yield cur
            reusable = True
        finally:
            with lock:
                state["live"] = False
            with self._pool_lock:
                keep = reusable and not state["stopped"] and len(self._pool) < POOL
                if keep:
                    self._pool.append(cur)
            if not keep:
                cur.close()

    def _failed(self, e: duckdb.Error, timeout: float | None) -> Exception:
        """The error a failed statement raises: a timeout, the memory limit, or the engine's."""
        if isinstance(e, duckdb.InterruptException):
            return SourceError(f"source {self.name!r}: the query ran longer than "
                               f"{timeout or 0:g}s and was cancelled", hint="Narrow it down.")
        if isinstance(e, duckdb.OutOfMemoryException) and self.serve is not None:
            return SourceError(
                f"source {self.name!r}: the query needed more memory than this server's DuckDB "
                f"limit (serve.duckdb_memory_limit: {self.serve.duckdb_memory_limit}) and was "
                "stopped", hint="Narrow it down (fewer rows, groups or distinct values), or "
                "raise serve.duckdb_memory_limit in tether.yaml.")
        return QueryError(self.name, first_line(e))

    def loaded_at(self) -> dt.datetime | None:
        """The database file's last write (its write-ahead log's, if newer)."""
        times = [f.stat().st_mtime for f in (self.path, self.path.with_name(self.path.name + ".wal"))
                 if f.is_file()]
        return dt.datetime.fromtimestamp(max(times), dt.UTC) if times else None

    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            with self._cursor(timeout) as cur:
                trace_statement(self.name, self.dialect, sql)
                cur.execute(sql, params or None)
                names = [d[0] for d in cur.description or []]
                return names, cur.fetchall()
        except duckdb.Error as e:
            raise self._failed(e, timeout) from None

    def result_columns(self, sql: str, params: dict[str, Any] | None = None,
                       timeout: float | None = None) -> list[Column]:
        try:
            with self._cursor(timeout) as cur:
                trace_statement(self.name, self.dialect, sql)
                cur.execute(f"SELECT * FROM ({sql}) AS tether_d LIMIT 0", params or None)
                return [_column(d[0], d[1]) for d in cur.description or []]
        except duckdb.Error as e:
            raise self._failed(e, timeout) from None

    def fetch(self, sql: str, params: dict[str, Any] | None, timeout: float,
              max_rows: int, max_bytes: int) -> Fetched:
        deadline = time.monotonic() + timeout

        def late() -> None:
            raise duckdb.InterruptException("deadline")

        try:
            with self._cursor(timeout) as cur:
                trace_statement(self.name, self.dialect, sql)
                cur.execute(sql, params or None)
                names = [d[0] for d in cur.description or []]
                rows, capped = take(cur.fetchmany, max_rows, max_bytes, deadline, late)
                return Fetched(names, rows, capped)
        except duckdb.Error as e:
            raise self._failed(e, timeout) from None

    def tables(self) -> list[str]:
        with self.turns.reading():
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
        with self.turns.reading():
            rows = self.con.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() "
                "WHERE constraint_type = 'PRIMARY KEY' AND table_name = $t AND schema_name = $s",
                {"t": t.name, "s": t.db or self.schema or "main"},
            ).fetchall()
        return list(rows[0][0]) if rows else []

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        t = self.table_expr(table)
        schema = t.db or self.schema or "main"
        with self.turns.reading():
            rows = self.con.execute(
                "SELECT constraint_column_names, referenced_table, referenced_column_names "
                "FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY' "
                "AND table_name = $t AND schema_name = $s AND database_name = "
                "current_database() ORDER BY constraint_index",
                {"t": t.name, "s": schema}).fetchall()
        prefix = "" if schema == (self.schema or "main") else f"{schema}."
        return [ForeignKey(tuple(cols), prefix + parent, tuple(keys))
                for cols, parent, keys in rows if cols and keys]

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
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT c.schema_name, c.table_name, c.column_name, c.data_type, c.is_nullable "
                "FROM duckdb_columns() c JOIN duckdb_tables() t ON t.database_name = "
                "c.database_name AND t.schema_name = c.schema_name AND t.table_name = "
                "c.table_name WHERE c.database_name = current_database() "
                "ORDER BY c.schema_name, c.table_name, c.column_index").fetchall()
        catalog: dict[tuple[str, str], list[Column]] = {}
        with self.turns.reading():  # a user type is read through the connection
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
        with self._cursor() as cur:  # its own connection: profiles are described from threads
            return self._describe(cur, relation, label)

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
        with self.turns.reading():
            rows = self.con.execute(
                "SELECT schema_name, table_name, list(column_name || ':' || data_type || ':' || "
                "is_nullable::VARCHAR ORDER BY column_index) FROM duckdb_columns() "
                "WHERE database_name = current_database() GROUP BY 1, 2").fetchall()
        return {t: "|".join(cols) for s, t, cols in rows if (s, t) in names}

    def checksum(self, columns: list[exp.Expr]) -> exp.Expr | None:
        return exp.func("SUM", exp.Anonymous(this="hash", expressions=columns))

    def close(self) -> None:
        self.suspend()
        _SERVING.discard(self)
        _OPEN.discard(self)
        return_freed_memory(force=True)  # this close turned them off for every instance


def _column(name: str, t: Any, nullable: bool = True, path: list[str] | None = None) -> Column:
    """A column (``path`` None) or a STRUCT's field (``path``: the identifiers down to it; its
    name joins them with dots, but only the path says where one identifier ends)."""
    type_name = str(t).upper()
    children: list[Column] = []
    if t.id == "struct":
        children = [_column(f"{name}.{cn}", ct, path=[*(path or [name]), cn])
                    for cn, ct in t.children]
    elif t.id == "list":
        children = [_column(f"{name}[]", t.children[0][1])]
    return Column(
        name=name, type=type_name, kind=kind_of(type_name), nullable=nullable, children=children,
        path=path or [],
    )
