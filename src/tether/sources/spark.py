"""Apache Spark SQL over Spark Connect (``sources.S.url: spark://HOST:PORT``, or ``sc://``).

Every statement is rendered by sqlglot's Spark dialect; values travel as Spark's named
parameters (``spark.sql(text, args=...)``: ``:name`` markers bound by the server, never text).
Spark has no read-only session: this source refuses, before sending it, anything that is not one
query (defence in depth beside `run_sql`'s own guard); on a real cluster give tether a principal
that may only read. A statement past its timeout is interrupted (``interruptTag``: its own call's only).
Spark enforces no primary keys: a product's key comes from tether.yaml.

Needs the Spark Connect client (``pip install "pyspark[connect]"`` or ``pyspark-client``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.schema import Column
from tether.errors import ProductError, QueryError, SourceError, SourceUnreachable
from tether.sources.base import Fetched, Source, first_line, kind_of, take, trace_statement
from tether.sources.watchdog import WATCHDOG

_CLIENT_LOGGERS = ("SQLQueryContextLogger", "pyspark", "py4j")
_GONE = ("UNAVAILABLE", "RETRIES_EXCEEDED", "Connection refused", "failed to connect",
         "SESSION_NOT_FOUND", "SESSION_CHANGED", "Socket closed", "INVALID_HANDLE")
"""What a client error says when the server went away (or came back as another server)."""

_SPARK_TYPES = [  # Spark's simple type names as the engine-independent names kind_of reads
    (re.compile(r"^timestamp_ntz$"), "TIMESTAMP"),
    (re.compile(r"^timestamp$"), "TIMESTAMP WITH TIME ZONE"),  # Spark's TIMESTAMP is an instant
    (re.compile(r"^(tinyint|smallint|int|bigint)$"), "BIGINT"),
    (re.compile(r"^(array|struct|map)<"), None),
]


def spark_type(simple: str) -> str:
    for pattern, name in _SPARK_TYPES:
        if pattern.match(simple):
            return name or simple.split("<", 1)[0].upper()
    return simple.upper()


def remote_url(url: str) -> str:
    """spark://HOST:PORT as Spark Connect's sc://HOST:PORT (any /;params kept)."""
    return re.sub(r"^spark://", "sc://", url)


class SparkSource(Source):
    dialect = "spark"

    def __init__(self, name: str, url: str, schema: str | None = None):
        super().__init__(name, re.sub(r";token=[^;]*", ";token=***", url))
        try:
            import pyspark.sql.connect.session  # noqa: F401
        except ImportError as e:
            raise SourceError(
                f"source {name!r}: the Spark Connect client is not installed ({e}).",
                hint='pip install "pyspark[connect]" (or pyspark-client) beside tether.') from None
        self.schema = schema
        self._lock = threading.Lock()
        for quiet in _CLIENT_LOGGERS:  # the client logs each failed query, JVM stack and all;
            logging.getLogger(quiet).setLevel(logging.CRITICAL)  # tether says it once itself
        self.url = url
        self._stale = False  # the server went away: a new session before the next statement
        try:
            self.spark = self._connect()
        except Exception as e:  # grpc and Spark errors have no common base worth naming
            raise SourceError(
                f"source {name!r}: cannot connect to {self.url_for_humans}: {reason(e)}",
                hint="Check that the Spark Connect server is running (start-connect-server.sh) "
                     "and the host and port in tether.yaml.") from None

    def _connect(self) -> Any:
        """A session of its own, whose client gives up on a server that does not answer within
        about a second (its default waits ten minutes: a call would hang that long)."""
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession

        spark = SparkSession.builder.remote(remote_url(self.url)).create()
        spark.client.set_retry_policies([DefaultPolicy(max_retries=3, initial_backoff=50,
                                                       max_backoff=1000)])
        spark.sql("SELECT 1").collect()
        if self.schema:
            spark.catalog.setCurrentDatabase(self.schema)
        return spark

    def _session(self) -> Any:
        with self._lock:
            return self._current()

    def _current(self) -> Any:
        if self._stale:
            try:
                fresh = self._connect()
            except Exception:
                raise SourceUnreachable(self.name, "the Spark Connect server does not "
                                                   "answer") from None
            old, self.spark, self._stale = self.spark, fresh, False
            with contextlib.suppress(Exception):
                old.stop()
        return self.spark

    # --- statements ---

    def _checked(self, sql: str) -> str:
        try:
            parsed = [p for p in sqlglot.parse(sql, read="spark") if p is not None]
        except sqlglot.errors.ParseError as e:
            raise QueryError(self.name, f"the statement does not parse: {first_line(e)}") from None
        if len(parsed) != 1 or not isinstance(parsed[0], (exp.Query, exp.Describe)):
            raise QueryError(self.name, "only a single query is sent to a Spark source "
                                        "(tether reads, never writes)")
        if parsed[0].find(exp.QueryTransform) is not None:  # TRANSFORM ... USING 'script'
            raise QueryError(self.name, "a script transform is never sent to a Spark source")
        return sql

    def _df(self, sql: str, params: dict[str, Any] | None) -> Any:
        trace_statement(self.name, self.dialect, sql)
        return self._session().sql(self._checked(sql), args=_args(params))

    @contextlib.contextmanager
    def _timed(self, timeout: float | None) -> Iterator[dict[str, bool]]:
        """One call's statements under a tag of their own (tags are per thread), so that its
        timeout interrupts them and no one else's."""
        state = {"stopped": False}
        tag = f"tether-{uuid.uuid4().hex}"
        spark = self._session()
        spark.addTag(tag)

        def stop() -> None:
            state["stopped"] = True
            with contextlib.suppress(Exception):
                spark.interruptTag(tag)

        try:
            with WATCHDOG.guard(timeout, stop):
                yield state
        finally:
            with contextlib.suppress(Exception):
                spark.removeTag(tag)

    def _failed(self, e: Exception, timeout: float | None, state: dict[str, bool]) -> Exception:
        if state["stopped"]:
            return SourceError(f"source {self.name!r}: the query ran longer than "
                               f"{timeout or 0:g}s and was cancelled", hint="Narrow it down.")
        gone = self._gone(e)
        if gone is not None:
            return gone
        return QueryError(self.name, reason(e))

    def _gone(self, e: Exception) -> SourceUnreachable | None:
        """The error of a server that went away (the next statement opens a new session)."""
        if any(w in str(e) for w in _GONE):
            self._stale = True
            return SourceUnreachable(self.name, "the Spark Connect server does not answer")
        return None

    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self._timed(timeout) as state:
            try:
                df = self._df(sql, params)
                rows = df.collect()
                schema = df.schema
                return list(df.columns), [_row(r, schema) for r in rows]
            except (QueryError, SourceError):
                raise
            except Exception as e:
                raise self._failed(e, timeout, state) from None

    def fetch(self, sql: str, params: dict[str, Any] | None, timeout: float,
              max_rows: int, max_bytes: int) -> Fetched:
        deadline = time.monotonic() + timeout

        def late() -> None:
            raise TimeoutError

        with self._timed(timeout) as state:
            try:
                df = self._df(sql, params).limit(max_rows + 1)
                schema = df.schema
                rows = [_row(r, schema) for r in df.collect()]
                left = iter([rows])
                kept, capped = take(lambda _n: next(left, []), max_rows, max_bytes, deadline, late)
                return Fetched(list(df.columns), kept, capped)
            except (QueryError, SourceError):
                raise
            except TimeoutError:
                state["stopped"] = True
                raise self._failed(TimeoutError(), timeout, state) from None
            except Exception as e:
                raise self._failed(e, timeout, state) from None

    def result_columns(self, sql: str, params: dict[str, Any] | None = None,
                       timeout: float | None = None) -> list[Column]:
        with self._timed(timeout) as state:
            try:
                schema = self._df(f"SELECT * FROM ({sql}) AS tether_d LIMIT 0", params).schema
            except (QueryError, SourceError):
                raise
            except Exception as e:
                raise self._failed(e, timeout, state) from None
        return [_column(f.name, f.dataType, f.nullable) for f in schema.fields]

    # --- catalog ---

    def tables(self) -> list[str]:
        try:
            spark = self._session()
            db = self.schema or spark.catalog.currentDatabase()
            return sorted(t.name for t in spark.catalog.listTables(db) if not t.isTemporary)
        except SourceError:
            raise
        except Exception as e:
            raise self._gone(e) or QueryError(self.name, reason(e)) from None

    def primary_key(self, table: str) -> list[str]:
        return []

    def describe(self, relation: exp.Expr, label: str) -> list[Column]:
        text = relation.sql(dialect="spark")
        try:
            schema = self._session().sql(f"SELECT * FROM {text} LIMIT 0").schema
        except SourceError:
            raise
        except Exception as e:
            gone = self._gone(e)
            if gone is not None:
                raise gone from None
            message = reason(e)
            if "TABLE_OR_VIEW_NOT_FOUND" in message and isinstance(relation, exp.Table):
                raise ProductError(
                    f"{label}: table {text} does not exist in source {self.name!r} "
                    f"({self.url_for_humans}).", hint=self.tables_hint(relation.name)) from None
            raise ProductError(f"{label}: the source rejected it: {message}") from None
        return [_column(f.name, f.dataType, f.nullable) for f in schema.fields]

    def catalog_signatures(self, tables: list[exp.Table]) -> dict[str, str]:
        out = {}
        for t in tables:
            try:
                cols = self.describe(t, t.name)
            except ProductError:
                continue  # gone: its drift is found by describing it (a server gone raises)
            out[t.name] = "|".join(f"{c.name}:{c.type}:{c.nullable}" for c in cols)
        return out

    def checksum(self, columns: list[exp.Expr]) -> exp.Expr | None:
        # summed as DECIMAL(38, 0): a BIGINT sum of 64-bit hashes overflows, which ANSI mode
        # (Spark's default) refuses
        return exp.func("SUM", exp.cast(exp.Anonymous(this="xxhash64", expressions=columns),
                                        exp.DataType.build("DECIMAL(38, 0)")))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.spark.stop()


def reason(e: BaseException) -> str:
    """The engine's reason in one line: the gRPC status details when there are any (the first
    line of such an error says nothing), a connection token never."""
    whole = str(e)
    found = re.search(r'details = "([^"\n]*)', whole)
    text = found.group(1) if found else first_line(e)
    return re.sub(r"(token=)[^;\s'\"]+", r"\1***", text)


def _args(params: dict[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            v = v.astimezone(dt.UTC)
        out[k] = v
    return out


def _row(r: Any, schema: Any) -> tuple[Any, ...]:
    return tuple(_value(v, f.dataType) for v, f in zip(tuple(r), schema.fields, strict=True))


def _value(v: Any, t: Any) -> Any:
    """A value as the other engines' drivers give it: a struct as a dict, a list as a list, a
    TIMESTAMP as an instant in UTC (the client gives it as a naive time in this process's zone),
    a TIMESTAMP_NTZ as the naive time it is."""
    kind = t.typeName()
    if v is None:
        return None
    if kind == "struct":
        return {f.name: _value(x, f.dataType) for f, x in zip(t.fields, tuple(v), strict=True)}
    if kind == "array":
        return [_value(x, t.elementType) for x in v]
    if kind == "timestamp" and isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC)  # a naive value is read as this process's local time
    return v


def _column(name: str, t: Any, nullable: bool = True, path: list[str] | None = None) -> Column:
    """A column from Spark's data type; a struct's fields and a list's element as children, as
    the other engines describe them (a field's name joins the path with dots)."""
    simple = t.simpleString()
    type_name = spark_type(simple)
    children: list[Column] = []
    if t.typeName() == "struct":
        children = [_column(f"{name}.{f.name}", f.dataType, f.nullable,
                            [*(path or [name]), f.name]) for f in t.fields]
    elif t.typeName() == "array":
        children = [_column(f"{name}[]", t.elementType)]
    return Column(name=name, type=type_name, kind=kind_of(type_name), nullable=nullable,
                  children=children, path=path or [])
