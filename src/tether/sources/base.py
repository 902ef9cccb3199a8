"""What every source engine offers the layers above: catalog, schema, and parameterised queries."""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import json
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.schema import Column, TypeKind
from tether.errors import ProductError

_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")  # an identifier any dialect reads unquoted as itself
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")  # one plain-looking name part, any case


SQL_LOG_ENV = "TETHER_SQL_LOG"
"""Set to a file path, every statement tether sends to a source is appended to it as a JSON line
(``source``, ``dialect``, ``sql``): the text only, never the bound values."""
_SQL_LOG_LOCK = threading.Lock()


def trace_statement(source: str, dialect: str, sql: str) -> None:
    """One statement into the SQL log, when TETHER_SQL_LOG names one."""
    path = os.environ.get(SQL_LOG_ENV)
    if not path:
        return
    line = json.dumps({"source": source, "dialect": dialect, "sql": sql}) + "\n"
    with _SQL_LOG_LOCK, contextlib.suppress(OSError):  # a log that cannot be written is no error
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # run_sql's literals
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)


RESERVED = frozenset("""ALL ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC AUTHORIZATION BETWEEN
BINARY BOTH CASE CAST CHECK COLLATE COLLATION COLUMN CONCURRENTLY CONSTRAINT CREATE CROSS
CURRENT_CATALOG CURRENT_DATE CURRENT_ROLE CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP
CURRENT_USER DEFAULT DEFERRABLE DESC DESCRIBE DISTINCT DO ELSE END EXCEPT FALSE FETCH FOR FOREIGN
FREEZE FROM FULL GRANT GROUP HAVING ILIKE IN INITIALLY INNER INTERSECT INTO IS ISNULL JOIN LATERAL
LEADING LEFT LIKE LIMIT LOCALTIME LOCALTIMESTAMP NATURAL NOT NOTNULL NULL OFFSET ON ONLY OR ORDER
OUTER OVERLAPS PIVOT PLACING PRIMARY QUALIFY REFERENCES RETURNING RIGHT SELECT SESSION_USER SIMILAR
SOME SUMMARIZE SYMMETRIC SYSTEM_USER TABLE TABLESAMPLE THEN TO TRAILING TRUE UNION UNIQUE UNPIVOT
USER USING VARIADIC VERBOSE WHEN WHERE WINDOW WITH LAMBDA PIVOT_LONGER PIVOT_WIDER SHOW""".split())
"""Words PostgreSQL or DuckDB reserve (their own keyword lists: PostgreSQL's reserved and
reserved-as-function-or-type words, DuckDB's reserved ones), quoted in a table name even when
plain."""


def table_ref(table: str, dialect: str) -> exp.Table:
    """A product's ``table`` (``name``, ``schema.name``, ``catalog.schema.name``) as a table
    expression. Each part is kept as the catalog spells it: quoted unless every dialect reads it
    unquoted as itself (PostgreSQL folds an unquoted Orders to orders, another table). Anything
    else (already quoted parts) goes through the dialect's parser."""
    parts = table.split(".")
    if 1 <= len(parts) <= 3 and all(_NAME.fullmatch(p) for p in parts):  # no parser needed
        # a plain word may still be reserved (PostgreSQL reads an unquoted user as the
        # current_user function, not the table): quoted only where no engine reserves it
        ids = [exp.to_identifier(p, quoted=not _PLAIN.fullmatch(p) or p.upper() in RESERVED)
               for p in parts]
        return exp.table_(ids[-1], db=ids[-2] if len(ids) > 1 else None,
                          catalog=ids[0] if len(ids) == 3 else None)
    try:
        return exp.to_table(table, dialect=dialect)
    except sqlglot.errors.ParseError as e:
        raise ProductError(f"{table!r} is not a table name ({e}).") from None


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@dataclass(frozen=True)
class ForeignKey:
    """A FOREIGN KEY constraint the source's catalog declares: ``columns`` of the table hold
    ``key`` of ``parent`` (a table name as :meth:`Source.tables` spells it)."""

    columns: tuple[str, ...]
    parent: str
    key: tuple[str, ...]


@dataclass
class Fetched:
    """Rows read under caps: ``capped`` names the cap that stopped the read (rows or bytes)."""

    names: list[str]
    rows: list[tuple[Any, ...]]
    capped: str | None = None


def value_size(v: Any) -> int:
    """About how many bytes a value takes once serialised (text and binary by length)."""
    if isinstance(v, str | bytes | bytearray):
        return len(v) + 2
    if isinstance(v, dict):
        return sum(value_size(k) + value_size(x) for k, x in v.items()) + 2
    if isinstance(v, list | tuple):
        return sum(value_size(x) + 1 for x in v) + 2
    return 8


_SCALARS = frozenset({int, float, bool, type(None), dt.datetime, dt.date, dt.time})


FIRST_BATCH = 64
BATCH = 512
"""Rows asked of the driver at once: a batch is converted to Python whole before its rows are
counted, so the first is small and each next one holds about what the bytes left allow."""


def take(fetch_rows: Callable[[int], Any], max_rows: int, max_bytes: int,
         deadline: float | None, on_late: Callable[[], None]
         ) -> tuple[list[tuple[Any, ...]], str | None]:
    """Read rows (``fetch_rows(n)``: at most n more, empty at the end) until the rows or bytes
    cap (or the deadline) is reached."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    want = min(FIRST_BATCH, max_rows + 1)
    while True:
        batch = fetch_rows(want)
        if not batch:
            return rows, None
        for r in batch:
            for v in r:  # value_size, inlined for the common kinds: this runs per value
                t = type(v)
                size += (len(v) + 2 if t is str else 8 if t in _SCALARS else value_size(v))
            size += 2
            if size > max_bytes:
                return rows, "bytes"
            if len(rows) >= max_rows:
                return rows, "rows"
            rows.append(tuple(r))
        if deadline is not None and time.monotonic() > deadline:
            on_late()
        average = max(1, size // max(1, len(rows)))
        want = max(1, min(BATCH, (max_bytes - size) // average + 1, max_rows + 1 - len(rows)))


class Source(ABC):
    """A connection to one engine. Read-only: nothing tether does through it writes."""

    dialect: str = ""
    schema: str | None = None

    def __init__(self, name: str, url_for_humans: str):
        self.name = name
        self.url_for_humans = url_for_humans

    def loaded_at(self) -> dt.datetime | None:
        """When the source was last written, where the engine can tell (``freshness:
        {load_time: true}``); None where it cannot."""
        return None

    @abstractmethod
    def tables(self) -> list[str]:
        """Every table and view, schema-qualified where the schema is not the default."""

    @abstractmethod
    def describe(self, relation: exp.Expr, label: str) -> list[Column]:
        """Columns of a table (exp.Table) or a query (exp.Subquery)."""

    @contextlib.contextmanager
    def catalog_read(self) -> Iterator[None]:
        """Within it, :meth:`describe` of a table may answer from one read of the whole
        catalog, taken on entry (engines that can: thousands of tables described one by one
        cost more than profiling them). Outside it, every describe reads the catalog anew."""
        yield

    @abstractmethod
    def primary_key(self, table: str) -> list[str]:
        """Declared primary key columns of a table, [] when none is declared."""

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        """The FOREIGN KEY constraints the catalog declares on a table ([] where the engine
        keeps none)."""
        return []

    def run(self, sql: str, params: dict[str, Any] | None = None,
            timeout: float | None = None) -> list[tuple[Any, ...]]:
        """Execute engine SQL text with bound parameters in a read-only transaction; a query
        running longer than ``timeout`` seconds is cancelled (SourceError)."""
        return self.run_named(sql, params, timeout)[1]

    @abstractmethod
    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Like run, with the result's column names."""

    def fetch(self, sql: str, params: dict[str, Any] | None, timeout: float,
              max_rows: int, max_bytes: int) -> Fetched:
        """Like run_named, reading at most ``max_rows`` rows and ``max_bytes`` bytes of values
        (one row more than the rows cap tells that more exist); the timeout covers the whole
        read, fetching included."""
        names, rows = self.run_named(sql, params, timeout)
        left = iter([rows])
        kept, capped = take(lambda _n: next(left, []), max_rows, max_bytes, None, lambda: None)
        return Fetched(names, kept, capped)

    def result_columns(self, sql: str, params: dict[str, Any] | None = None,
                       timeout: float | None = None) -> list[Column]:
        """The columns a statement (engine text, as :meth:`run` takes it) returns, named as
        ``SELECT *`` over it names them, without reading a row; engines that cannot tell the
        types give kind "other"."""
        names, _ = self.run_named(f"SELECT * FROM ({sql}) AS tether_d LIMIT 0", params, timeout)
        return [Column(name=n, type="UNKNOWN", kind="other", nullable=True) for n in names]

    def query(self, expr: exp.Expr, params: dict[str, Any] | None = None,
              timeout: float | None = None) -> list[tuple[Any, ...]]:
        """Execute a sqlglot AST; values travel as bound parameters (exp.Placeholder), never text."""
        return self.run(self.render(expr), params, timeout)

    def render(self, expr: exp.Expr) -> str:
        """The text this source's driver runs."""
        return expr.sql(dialect=self.dialect)

    def display(self, expr: exp.Expr) -> str:
        """The statement in the engine's own dialect, placeholders as the dialect writes them
        ($name, %(name)s): what evidence shows and any reader parses."""
        return expr.sql(dialect=self.dialect)

    def catalog_signatures(self, tables: list[exp.Table]) -> dict[str, str]:
        """One catalog read for many tables: ``{table name: signature}``, where the signature
        changes whenever a column is added, dropped, renamed, retyped or changes nullability.
        Tables the engine cannot sign in bulk are left out (the caller describes them)."""
        return {}

    def checksum(self, columns: list[exp.Expr]) -> exp.Expr | None:
        """An aggregate that changes when any value of ``columns`` changes (an in-place UPDATE
        included); None when the engine has no cheap hash."""
        return None

    def close(self) -> None:  # noqa: B027 - optional for engines holding nothing
        """Release connections."""

    # --- relations ---

    def table_expr(self, table: str) -> exp.Table:
        return table_ref(table, self.dialect)

    def sql_expr(self, sql: str, product: str) -> exp.Subquery:
        """A product's SQL as a subquery; it must be exactly one SELECT."""
        try:
            parsed = sqlglot.parse(sql, dialect=self.dialect)
        except sqlglot.errors.ParseError as e:
            raise ProductError(
                f"the SQL of product {product!r} does not parse: {str(e).splitlines()[0]}",
                hint="Write a single SELECT in the source's SQL dialect.",
            ) from None
        stmts = [p for p in parsed if p is not None]
        if len(stmts) != 1 or not isinstance(stmts[0], exp.Query):
            raise ProductError(
                f"the SQL of product {product!r} must be exactly one SELECT statement.",
                hint="Remove other statements; a product is read-only.",
            )
        return exp.Subquery(this=stmts[0], alias=exp.TableAlias(this=exp.to_identifier("p")))

    def tables_hint(self, wanted: str) -> str:
        """'Did you mean ...? Tables there: ...' for a table that does not exist."""
        tables = self.tables()
        close = difflib.get_close_matches(wanted, tables, n=1)
        head = f"Did you mean {close[0]!r}? " if close else ""
        return head + "Tables there: " + (", ".join(tables) or "(none)") + "."

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_KINDS: list[tuple[str, TypeKind]] = [
    (r"^(TIMESTAMP WITH TIME ZONE|TIMESTAMPTZ|TIMESTAMP\(\d+\) WITH TIME ZONE)", "timestamptz"),
    (r"^(TIMESTAMP|DATETIME)", "timestamp"),
    (r"^DATE$", "date"),
    (r"^(TIME|TIMETZ)", "time"),
    (r"^INTERVAL", "interval"),
    (r"^STRUCT", "struct"),
    (r"^MAP", "map"),
    (r"(\[\d*\]$|^LIST|^ARRAY)", "list"),
    (r"^(VARCHAR|TEXT|CHAR|CHARACTER|STRING|ENUM|NVARCHAR|CITEXT|NAME$)", "string"),
    (r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?\d*|SERIAL|BIGSERIAL|UHUGEINT)$", "integer"),
    (r"^(DECIMAL|NUMERIC)", "decimal"),
    (r"^(DOUBLE|FLOAT|REAL)", "float"),
    (r"^(BOOLEAN|BOOL)$", "boolean"),
    (r"^UUID$", "uuid"),
    (r"^JSONB?$", "json"),
    (r"^(BLOB|BYTEA|BINARY|VARBINARY|BIT)", "binary"),
]


def kind_of(type_name: str) -> TypeKind:
    """Engine-independent kind of an engine's type name."""
    t = type_name.strip().upper()
    for pattern, kind in _KINDS:
        if re.search(pattern, t):
            return kind
    return "other"
