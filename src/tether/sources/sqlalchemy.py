"""Any SQLAlchemy URL; PostgreSQL first (psycopg 3). Sessions are read-only transactions."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlglot import exp

from tether.context.schema import Column
from tether.errors import ProductError, QueryError, SourceError, SourceUnreachable
from tether.sources.base import Fetched, ForeignKey, Source, kind_of, take, trace_statement

_BIND = f"tether_bind_{secrets.token_hex(8)}_"
"""Marks tether's own bound parameters while rendering (unguessable, so no query text holds it)."""
_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sqlite",
             "snowflake": "snowflake", "bigquery": "bigquery", "trino": "trino",
             "clickhouse": "clickhouse", "clickhousedb": "clickhouse", "hive": "spark",
             "databricks": "databricks"}
"""SQLAlchemy backend name -> the sqlglot dialect tether renders in (docs/warehouses.md)."""


_UNREACHABLE = re.compile(r"refused|timed? ?out|could not connect|server closed|no route|"
                          r"unreachable|shutting down|starting up|terminating|network", re.I)
"""What a connection error says when the server cannot be reached (not when it refused us)."""


def unescaped(text: str) -> str:
    """What :meth:`SQLAlchemySource.render` wrote, before it escaped the colons that are not
    bound parameters (the statement as sqlglot reads it back, for the SQL log)."""
    return text.replace("\\:", ":")


def redact(url: str) -> str:
    """The URL with any password replaced, for messages and logs."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq takes it (no +driver)."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def driver_url(url: str) -> str:
    """postgres:// and postgresql:// use psycopg 3, the driver tether installs."""
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


def bound_text(expr: exp.Expr, dialect: str) -> str:
    """SQL for SQLAlchemy's text(), which binds ``:name`` portably and escapes % for pyformat
    drivers. Every other colon (in a string literal, a quoted name, a cast) is escaped, so that
    text written in a query is never taken for a bound parameter."""
    def to_named(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name:
            return exp.var(f"{_BIND}{node.name}")
        return node

    text = expr.transform(to_named).sql(dialect=dialect)
    return text.replace(":", "\\:").replace(_BIND, ":")


class SQLAlchemySource(Source):
    def __init__(self, name: str, url: str, schema: str | None = None):
        super().__init__(name, redact(url))
        try:
            self.engine = sa.create_engine(driver_url(url), pool_pre_ping=True)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as e:
            raise SourceError(
                f"source {name!r}: {self.url_for_humans} is not a usable SQLAlchemy URL ({e}).",
                hint="Use e.g. postgresql://user@host:5432/db, or a DuckDB file path.",
            ) from None
        backend = self.engine.dialect.name
        self.dialect = _DIALECTS.get(backend, backend)
        self.schema = schema
        try:
            with self.engine.connect() as c:
                c.exec_driver_sql("SELECT 1")
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            raise SourceError(
                f"source {name!r}: cannot connect to {self.url_for_humans}: {reason}",
                hint="Check that the server is running and reachable, and the URL, user and "
                "database in tether.yaml (passwords belong in ${ENV_VARS}).",
            ) from None

    @contextlib.contextmanager
    def _session(self, stream: bool = False) -> Iterator[sa.Connection]:
        """A connection inside one read-only transaction, rolled back at the end (``stream``:
        rows are read from a server-side cursor as they are fetched)."""
        opts: dict[str, Any] = {"stream_results": True} if stream else {}
        if self.dialect == "postgres":
            opts["postgresql_readonly"] = True
        try:
            connection = self.engine.connect()
        except sa.exc.DBAPIError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            if _UNREACHABLE.search(reason):  # refused, timed out, shutting down: the last clause
                raise SourceUnreachable(self.name, reason.rsplit(": ", 1)[-1]) from None
            raise SourceError(f"source {self.name!r}: cannot connect: "
                              f"{reason.rsplit(': ', 1)[-1]}",
                              hint="Check the user, password and database of this source in "
                                   "tether.yaml.") from None
        with connection.execution_options(**opts) as conn, conn.begin() as tx:
            if self.schema and self.dialect == "postgres":
                conn.execute(sa.text("SELECT set_config('search_path', :s, true)"),
                             {"s": self.schema})
            yield conn
            tx.rollback()

    def render(self, expr: exp.Expr) -> str:  # unescaped() reverses it
        return bound_text(expr, self.dialect)

    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            with self._session() as c:
                if timeout and self.dialect == "postgres":
                    c.execute(sa.text("SELECT set_config('statement_timeout', :t, true)"),
                              {"t": f"{int(timeout * 1000)}ms"})
                trace_statement(self.name, self.dialect, unescaped(sql))
                result = c.execute(sa.text(sql), params or {})
                return list(result.keys()), [tuple(r) for r in result]
        except sa.exc.OperationalError as e:
            if "statement timeout" in str(e.orig):
                raise SourceError(f"source {self.name!r}: the query ran longer than "
                                  f"{timeout:g}s and was cancelled", hint="Narrow it down.") from None
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            raise QueryError(self.name, reason) from None
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            raise QueryError(self.name, reason) from None

    def fetch(self, sql: str, params: dict[str, Any] | None, timeout: float,
              max_rows: int, max_bytes: int) -> Fetched:
        deadline = time.monotonic() + timeout

        def late() -> None:
            raise TimeoutError

        try:
            with self._session(stream=True) as c:
                if self.dialect == "postgres":
                    c.execute(sa.text("SELECT set_config('statement_timeout', :t, true)"),
                              {"t": f"{int(timeout * 1000)}ms"})
                trace_statement(self.name, self.dialect, unescaped(sql))
                result = c.execute(sa.text(sql), params or {})
                names = list(result.keys())
                rows, capped = take(result.fetchmany, max_rows, max_bytes, deadline, late)
                result.close()
                return Fetched(names, rows, capped)
        except TimeoutError:
            raise SourceError(f"source {self.name!r}: the query ran longer than {timeout:g}s "
                              "and was cancelled", hint="Narrow it down.") from None
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            if "statement timeout" in reason:
                raise SourceError(f"source {self.name!r}: the query ran longer than "
                                  f"{timeout:g}s and was cancelled", hint="Narrow it down.") from None
            raise QueryError(self.name, reason) from None

    def _inspector(self) -> Any:
        return sa.inspect(self.engine)

    def tables(self) -> list[str]:
        insp = self._inspector()
        names = insp.get_table_names(schema=self.schema) + insp.get_view_names(schema=self.schema)
        return sorted(names)

    def primary_key(self, table: str) -> list[str]:
        t = self.table_expr(table)
        pk = self._inspector().get_pk_constraint(t.name, schema=t.db or self.schema)
        return list(pk.get("constrained_columns") or [])

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        t = self.table_expr(table)
        here = t.db or self.schema
        out = []
        for fk in self._inspector().get_foreign_keys(t.name, schema=here):
            cols, keys = fk.get("constrained_columns"), fk.get("referred_columns")
            if not cols or not keys or not fk.get("referred_table"):
                continue
            there = fk.get("referred_schema")
            prefix = f"{there}." if there and there != (self.schema or there) else ""
            out.append(ForeignKey(tuple(cols), prefix + fk["referred_table"], tuple(keys)))
        return out

    def describe(self, relation: exp.Expr, label: str) -> list[Column]:
        if isinstance(relation, exp.Table):
            return self._describe_table(relation, label)
        return self._describe_query(relation, label)

    def catalog_signatures(self, tables: list[exp.Table]) -> dict[str, str]:
        if self.dialect != "postgres":
            return {}
        schemas = sorted({t.db or self.schema or "public" for t in tables})
        names = {(t.db or self.schema or "public", t.name) for t in tables}
        rows = self.run(
            "SELECT table_schema, table_name, string_agg(column_name || ':' || data_type || ':' "
            "|| udt_name || ':' || is_nullable, '|' ORDER BY ordinal_position) "
            "FROM information_schema.columns WHERE table_schema = ANY(:s) GROUP BY 1, 2",
            {"s": schemas})
        return {t: sig for s, t, sig in rows if (s, t) in names}

    def checksum(self, columns: list[exp.Expr]) -> exp.Expr | None:
        if self.dialect != "postgres":
            return None
        row = exp.cast(exp.Tuple(expressions=columns), exp.DataType.build("TEXT"))
        return exp.func("SUM", exp.Anonymous(this="hashtext", expressions=[row]))

    def _describe_table(self, t: exp.Table, label: str) -> list[Column]:
        insp = self._inspector()
        schema = t.db or self.schema
        if not insp.has_table(t.name, schema=schema) and t.name not in insp.get_view_names(
            schema=schema
        ):
            raise ProductError(
                f"{label}: table {t.sql(dialect=self.dialect)} does not exist in source "
                f"{self.name!r} ({self.url_for_humans}).",
                hint=self.tables_hint(t.name),
            )
        out = []
        for c in insp.get_columns(t.name, schema=schema):
            type_name = c["type"].compile(dialect=self.engine.dialect).upper()
            # a native ENUM type compiles to its own name (ORDER_STATUS): its values are strings
            kind = "string" if isinstance(c["type"], sa.Enum) else kind_of(type_name)
            out.append(
                Column(name=c["name"], type=type_name, kind=kind,
                       nullable=bool(c.get("nullable", True)))
            )
        return out

    def _describe_query(self, q: exp.Expr, label: str) -> list[Column]:
        try:
            return self._columns_of(f"SELECT * FROM {self.render(q)} LIMIT 0", {}, None)
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            raise ProductError(f"{label}: the source rejected its SQL: {reason}") from None

    def result_columns(self, sql: str, params: dict[str, Any] | None = None,
                       timeout: float | None = None) -> list[Column]:
        try:
            return self._columns_of(f"SELECT * FROM ({sql}) AS tether_d LIMIT 0", params or {},
                                    timeout)
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            if "statement timeout" in reason:
                raise SourceError(f"source {self.name!r}: the query ran longer than "
                                  f"{timeout or 0:g}s and was cancelled",
                                  hint="Narrow it down.") from None
            raise QueryError(self.name, reason) from None

    def _columns_of(self, sql: str, params: dict[str, Any], timeout: float | None
                    ) -> list[Column]:
        """The columns of a statement that reads no row (``LIMIT 0``), typed from the driver's
        type codes (PostgreSQL: the catalog's type names)."""
        with self._session() as c:
            if timeout and self.dialect == "postgres":
                c.execute(sa.text("SELECT set_config('statement_timeout', :t, true)"),
                          {"t": f"{int(timeout * 1000)}ms"})
            trace_statement(self.name, self.dialect, unescaped(sql))
            res = c.execute(sa.text(sql), params)
            desc = res.cursor.description if res.cursor else []
            names = [d[0] for d in desc]
            codes = [d[1] for d in desc]
            types: dict[Any, str] = {}
            enums: set[Any] = set()
            if self.dialect == "postgres" and codes:
                rows = c.execute(
                    sa.text("SELECT oid, format_type(oid, NULL), typtype FROM pg_type "
                            "WHERE oid = ANY(:oids)"),
                    {"oids": list(set(codes))},
                )
                for oid, name, typtype in rows:
                    types[oid] = name.upper()
                    if typtype == "e":  # a native ENUM type
                        enums.add(oid)
        return [
            Column(name=n, type=types.get(code, "UNKNOWN"),
                   kind="string" if code in enums else kind_of(types.get(code, "")), nullable=True)
            for n, code in zip(names, codes, strict=True)
        ]

    def close(self) -> None:
        self.engine.dispose()
