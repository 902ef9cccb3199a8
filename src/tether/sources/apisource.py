"""An HTTP API described by OpenAPI, as a source: its read operations are its tables.

Profiling reads a bounded sample of each operation (``sources.S.sample_calls`` requests, as the
user ``auth.sample_as`` names, or with the shared credential the project names) into an
in-memory DuckDB table typed from the spec, so every profile pass (enums, formats, patterns,
units, ranges) runs on it as on any table. A server never reads through SQL here: each call of
an API tool makes its own requests with the caller's own credential (serve/api.py), and the
rows it gets back pass the same policy (the caller's entitled relation) in a DuckDB table of
their own. ``run_sql`` and the probe have no way in.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from tether.config import ServeConfig, SourceConfig
from tether.context.schema import Column
from tether.errors import ConfigError, QueryError, SourceError
from tether.sources.apiclient import ApiClient, ApiError, Credential
from tether.sources.base import Source, first_line, trace_statement
from tether.sources.credentials import CredentialStore
from tether.sources.openapi import Operation, Spec, item_columns, load_spec, scheme_of


def rows_table(columns: list[Column], rows: list[dict[str, Any]], table: str = "api_rows"
               ) -> Any:
    """An in-memory DuckDB connection holding ``rows`` as ``table`` (see :func:`load_rows`)."""
    con = duckdb.connect(":memory:")
    load_rows(con, columns, rows, table)
    return con


def load_rows(con: Any, columns: list[Column], rows: list[dict[str, Any]], table: str) -> None:
    """``rows`` as ``table`` in ``con``, one column per entry of ``columns``, typed: a value the
    type cannot hold is NULL there, as a missing field is."""
    quoted = [_q(c.name) for c in columns]
    name = _q(table)
    if not columns:
        con.execute(f"CREATE OR REPLACE TABLE {name} (tether_row INTEGER)")
        return
    con.execute("CREATE OR REPLACE TEMP TABLE tether_raw ("
                + ", ".join(f"{q} VARCHAR" for q in quoted) + ")")
    if rows:
        con.executemany(f"INSERT INTO tether_raw VALUES ({', '.join('?' for _ in columns)})",
                        [[_text(r.get(c.name), c.kind == "json") for c in columns]
                         for r in rows])
    casts = ", ".join(f"TRY_CAST({q} AS {c.type}) AS {q}"
                      for q, c in zip(quoted, columns, strict=True))
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT {casts} FROM tether_raw")
    con.execute("DROP TABLE tether_raw")


def _text(v: Any, as_json: bool = False) -> str | None:
    if v is None:
        return None
    if as_json:  # text, numbers and objects alike, as JSON (a bare string is no JSON text)
        return json.dumps(v, sort_keys=True, default=str)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return str(v)


def credential_for(name: str, cfg: SourceConfig, store: CredentialStore,
                   scheme: dict[str, Any] | None, user: str | None, security: list[str]
                   ) -> Credential | None:
    """The credential a request of ``user`` carries, placed as ``scheme`` says: theirs from
    the token store, or the shared one the project names; None where the operation needs none.
    A caller without one where one is needed: ApiError (a refusal)."""
    auth = cfg.auth
    if auth is None or scheme is None:
        if security:
            raise ConfigError(f"source {name!r}: the API asks for {', '.join(security)} but "
                              "the source has no `auth:`.",
                              hint="Add `auth: {scheme: NAME}` (each caller's credential from "
                              "the token store).")
        return None
    if auth.credential.startswith("env:"):
        var = auth.credential[4:]
        secret = os.environ.get(var)
        if not secret:
            raise ConfigError(f"source {name!r}: the shared credential ${var} is not set.",
                              hint=f"Export {var} where tether runs.")
        return Credential(secret, scheme)
    if user is None:
        raise ApiError(f"source {name!r} answers each caller with their own credential, and "
                       "this call has no caller.")
    secret = store.get(name, user)
    if secret is None:
        raise ApiError(f"{user} holds no credential for source {name!r}: the API is read "
                       "with each caller's own.",
                       hint=f"An administrator sets it with `tether token credential {user} "
                       f"--source {name}`.")
    return Credential(secret, scheme)


class OpenAPISource(Source):
    """Read operations as tables; with ``serve`` (a server's), no SQL at all."""

    dialect = "duckdb"

    def __init__(self, name: str, cfg: SourceConfig, root: Path, serve: ServeConfig | None):
        super().__init__(name, str(cfg.spec))
        self.cfg = cfg
        self.root = root
        self.serving = serve is not None
        self.serve_cfg = serve or ServeConfig()
        self._spec: Spec | None = None
        self._con: Any = None
        self._loaded: set[str] = set()
        self._lock = threading.RLock()
        self.sampled_at: dt.datetime | None = None
        self.credentials = CredentialStore(root / self.serve_cfg.credentials_file)

    @property
    def spec(self) -> Spec:
        if self._spec is None:
            assert self.cfg.spec is not None
            self._spec = load_spec(self.cfg.spec, self.root)
        return self._spec

    def operation(self, table: str) -> Operation:
        op = self.spec.operations.get(table)
        if op is None:
            raise SourceError(f"source {self.name!r}: the API has no read operation {table!r}.",
                              hint=self.tables_hint(table))
        return op

    def tables(self) -> list[str]:
        return sorted(self.spec.operations)

    def primary_key(self, table: str) -> list[str]:
        return []

    def describe(self, relation: exp.Expr, label: str) -> list[Column]:
        if isinstance(relation, exp.Table):
            return item_columns(self.operation(relation.name))
        raise SourceError(f"source {self.name!r}: a product of an API reads one operation "
                          f"(`table:`), not SQL ({label}).",
                          hint="Give the product `table: OPERATION`.")

    def catalog_signatures(self, tables: list[exp.Table]) -> dict[str, str]:
        """The operation as the spec describes it: changes with a field, parameter, enum,
        page model or word of it, and with the spec's server where tether.yaml names no
        base_url (where the requests go: a moved server is drift, gated like any)."""
        server = "" if self.cfg.base_url else next(
            (s for s in self.spec.servers if s.startswith(("http://", "https://"))), "")
        return {t.name: self.spec.operations[t.name].digest + (f" {server}" if server else "")
                for t in tables if t.name in self.spec.operations}

    def base_url(self, published: str | None = None) -> str:
        """tether.yaml's base_url, else the server a published tool recorded (a server moved in
        the spec reaches callers only through the gate), else the spec's (profiling)."""
        if self.cfg.base_url:
            return self.cfg.base_url
        if published:
            return published
        if self.serving:
            raise ConfigError(f"source {self.name!r}: the tool records no server and the "
                              "source has no base_url.", hint="Set `base_url:` on the source.")
        servers = self.spec.servers
        if servers and servers[0].startswith(("http://", "https://")):
            return servers[0]
        raise ConfigError(f"source {self.name!r}: the spec names no absolute server URL.",
                          hint="Set `base_url:` on the source.")

    def credential(self, user: str | None, security: list[str],
                   scheme: dict[str, Any] | None = None) -> Credential | None:
        """The credential ``user`` sends, placed as ``scheme`` says (a published tool's
        record; profiling reads the spec's)."""
        if scheme is None and not self.serving:
            scheme = scheme_of(self.name, self.cfg, self.spec.schemes)
        return credential_for(self.name, self.cfg, self.credentials, scheme, user, security)

    # --- profiling's sample ---

    def _sample(self, table: str) -> None:
        op = self.operation(table)
        rows: list[dict[str, Any]] = []
        calls = self.cfg.sample_calls
        needed = [p.name for p in op.params if p.required and p.schema.get("default") is None]
        if calls and not needed:
            auth = self.cfg.auth
            user = auth.sample_as if auth is not None else None
            if auth is not None and auth.credential == "token_store" and user is None:
                raise ConfigError(f"source {self.name!r}: profiling samples the API, and the "
                                  "credentials are each caller's own.",
                                  hint="Name the user whose credential samples it "
                                  "(`auth.sample_as`), or set `sample_calls: 0`.")
            cred = self.credential(user, list(op.security))
            client = ApiClient(self.base_url(), self.serve_cfg.statement_timeout_seconds,
                               self.serve_cfg.max_api_call_bytes)
            try:
                state: dict[str, Any] | None = None
                for _ in range(calls):
                    got = client.rows(op.plan(), {}, cred, self.serve_cfg.max_result_rows,
                                      state, max_pages=1)
                    rows += got.rows
                    state = got.next_state
                    if state is None:
                        break
            except ApiError as e:
                raise SourceError(f"source {self.name!r}: sampling {op.op_id}: {e.message}",
                                  hint=e.hint) from None
            finally:
                client.close()
        self.sampled_at = dt.datetime.now(dt.UTC)
        load_rows(self._con, item_columns(op), rows, table)
        self._loaded.add(table)

    def run_named(self, sql: str, params: dict[str, Any] | None = None,
                  timeout: float | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Profiling: the statement over the operations' samples, each read on first mention.
        A server: over the operations' tables with no row in them (it compiles its policy's
        predicates against their columns, and reads no data through SQL here)."""
        with self._lock:
            if self._con is None:
                self._con = duckdb.connect(":memory:")
                if self.serving:
                    for table, op in self.spec.operations.items():
                        load_rows(self._con, item_columns(op), [], table)
            if not self.serving:
                for t in sorted((_mentioned(sql) & set(self.spec.operations)) - self._loaded):
                    self._sample(t)
            trace_statement(self.name, self.dialect, sql)
            try:
                cur = self._con.execute(sql, params or {})
                return [d[0] for d in cur.description or []], cur.fetchall()
            except duckdb.Error as e:
                raise QueryError(self.name, first_line(e)) from None

    def loaded_at(self) -> dt.datetime | None:
        return self.sampled_at

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _q(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")


def _mentioned(sql: str) -> set[str]:
    """The tables a statement names (every word of it, where it does not parse)."""
    try:
        return {t.name for t in sqlglot.parse_one(sql, dialect="duckdb").find_all(exp.Table)}
    except sqlglot.errors.ParseError:
        return set(re.findall(r"\w+", sql))
