"""The writer connection of a source (``sources.S.writer_url``): one transaction per write.

Serving connections stay read-only; a write tool's change runs here, on a DSN and role of its
own, in one transaction that commits all of it or nothing (a process killed before the commit
leaves the rows as they were: the engine rolls back what it never committed). Statements are
sqlglot ASTs whose values are bound parameters, as everywhere else.

A DuckDB file cannot be opened for writing while this process holds it read-only: the writer
takes its turn on the file (sources/duckdb.py ``alone``), during which this process's readers
close and then reopen. Another process holding the file (a second server) makes the write fail
cleanly: a DuckDB file has one writer process, and replicas that write need PostgreSQL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import sqlalchemy as sa
from sqlglot import exp

from tether.config import SourceConfig
from tether.errors import ConfigError, TetherError
from tether.sources import dialect_of, resolve_duckdb_path
from tether.sources.base import first_line, trace_statement
from tether.sources.duckdb import alone
from tether.sources.sqlalchemy import bound_text, driver_url
from tether.sources.watchdog import WATCHDOG


class WriteError(TetherError):
    """A write the engine did not take (nothing of it was applied)."""


class Tx:
    """One open transaction: read rows, change rows."""

    def __init__(self, name: str, dialect: str, con: Any):
        self.name, self.dialect, self._con = name, dialect, con

    def rows(self, expr: exp.Expr, params: dict[str, Any]) -> list[dict[str, Any]]:
        text = self._text(expr)
        trace_statement(self.name, self.dialect, text)
        if self.dialect == "duckdb":
            cur = self._con.execute(text, params or None)
            names = [d[0] for d in cur.description or []]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        result = self._con.execute(sa.text(text), params)
        return [dict(r._mapping) for r in result]

    def execute(self, expr: exp.Expr, params: dict[str, Any]) -> int:
        """Run a change; how many rows it changed."""
        text = self._text(expr)
        trace_statement(self.name, self.dialect, text)
        if self.dialect == "duckdb":
            found = self._con.execute(text, params or None).fetchall()
            return int(found[0][0]) if found else 0
        return int(self._con.execute(sa.text(text), params).rowcount)

    def _text(self, expr: exp.Expr) -> str:
        if self.dialect == "duckdb":
            return expr.sql(dialect="duckdb")
        return bound_text(expr, self.dialect)


class Writer:
    """A source's writer: ``transaction()`` opens one, commits it when the block ends, and rolls
    it back on any error."""

    def __init__(self, name: str, cfg: SourceConfig, root: Path):
        if cfg.kind != "sql" or not cfg.writer_url:
            raise ConfigError(f"source {name!r} has no writer_url: its actions cannot write.",
                              hint="Add sources.NAME.writer_url (a DSN and role of its own).")
        self.name = name
        self.url = cfg.writer_url
        self.schema = cfg.schema_
        self.path = resolve_duckdb_path(self.url, root)
        self.dialect = "duckdb" if self.path is not None else dialect_of(self.url)
        self._engine: sa.Engine | None = None

    def _sa(self) -> sa.Engine:
        if self._engine is None:
            self._engine = sa.create_engine(driver_url(self.url), pool_pre_ping=True,
                                            pool_size=2, max_overflow=4)
        return self._engine

    @contextlib.contextmanager
    def transaction(self, timeout: float) -> Iterator[Tx]:
        if self.path is not None:
            with self._duckdb(timeout) as tx:
                yield tx
            return
        try:
            with self._sa().connect() as c, c.begin():
                if self.dialect == "postgres":
                    c.execute(sa.text("SELECT set_config('statement_timeout', :t, true), "
                                      "set_config('lock_timeout', :t, true)"),
                              {"t": f"{int(timeout * 1000)}ms"})
                    if self.schema:
                        c.execute(sa.text("SELECT set_config('search_path', :s, true)"),
                                  {"s": self.schema})
                yield Tx(self.name, self.dialect, c)
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            raise WriteError(f"source {self.name!r}: the write was not applied: {reason}",
                             hint="Nothing changed; run the dry run again.") from None

    @contextlib.contextmanager
    def _duckdb(self, timeout: float) -> Iterator[Tx]:
        assert self.path is not None
        with alone(self.path, timeout):
            try:
                con = duckdb.connect(str(self.path), config={"enable_external_access": False})
            except duckdb.Error as e:
                raise WriteError(
                    f"source {self.name!r}: cannot open {self.path.name} for writing: "
                    f"{first_line(e)}", hint="Another process holds the DuckDB file open (a "
                    "DuckDB file takes writes from one process; replicas that write need "
                    "PostgreSQL). Nothing was written.") from None
            try:
                if self.schema:
                    con.execute(f"SET schema = '{self.schema.replace(chr(39), '')}'")
                with WATCHDOG.guard(timeout, con.interrupt):  # readers wait on this write
                    yield from self._duckdb_tx(con)
            except duckdb.Error as e:
                raise WriteError(f"source {self.name!r}: the write was not applied: "
                                 f"{first_line(e)}",
                                 hint="Nothing changed; run the dry run again.") from None
            finally:
                con.close()

    def _duckdb_tx(self, con: Any) -> Iterator[Tx]:
        """One transaction on ``con``: committed when the block ends, else rolled back."""
        con.execute("BEGIN TRANSACTION")
        try:
            yield Tx(self.name, "duckdb", con)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
