"""What every scorer may consult: the project (optional), its schema, prices, the oracle, caches.

One :class:`LabelContext` serves a whole run: the source schema is read once, every SQL shape is
analysed once (:mod:`tether.eval.label.sql.shape`), entitled keys are read once per user and
product, and predicate equivalences run once per pair. Without a project (a third-party server
labelled on its own) the context still works: SQL is analysed without a schema, and whatever
needs the source (predicate execution, the policy oracle) is left to a human.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlglot.schema import MappingSchema

from tether.config import Project, TetherConfig
from tether.errors import TetherError
from tether.eval.prices import PriceTable
from tether.policy.model import restricted_columns
from tether.sources import Source, open_product_source, source_dialect

SQL_ARGUMENTS: tuple[str, ...] = ("sql", "query", "statement", "sql_query", "query_sql")
"""Tool arguments read as SQL on any server (besides a tether tool whose kind is ``sql``)."""

METADATA_TOOLS: tuple[str, ...] = (
    "list_tables", "describe_table", "describe_tables", "list_schemas", "list_databases",
    "list_columns", "get_schema", "read_schema", "list_resources",
)
"""Tools whose results describe the catalog, not data: they need no as_of (freshness)."""

TIME_KINDS = ("date", "timestamp", "timestamptz")


@dataclass
class LabelContext:
    """Shared state for labelling the traces of one run."""

    project: Project | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    oracle_cmd: str | None = None
    dialect: str = "duckdb"
    sql_arguments: tuple[str, ...] = SQL_ARGUMENTS
    metadata_tools: tuple[str, ...] = METADATA_TOOLS
    statement_timeout: float = 10.0
    shape_cache: bool = True
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    # derived from the project (filled by build)
    table_map: dict[str, str] = field(default_factory=dict)
    pks: dict[str, list[str]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    identifiers: dict[str, str] = field(default_factory=dict)
    schemes: dict[str, re.Pattern[str]] = field(default_factory=dict)
    # caches
    cache: dict[Any, Any] = field(default_factory=dict)
    _sources: dict[str, Source] = field(default_factory=dict)
    _source_errors: dict[str, str] = field(default_factory=dict)
    _schema: MappingSchema | None = None
    _schema_columns: dict[str, dict[str, str]] | None = None
    _schema_error: str | None = None

    @classmethod
    def build(cls, project: Project | None, prices: PriceTable | None = None,
              oracle_cmd: str | None = None, **options: Any) -> LabelContext:
        """A context for ``project`` (None: no source, no policy oracle but ``oracle_cmd``)."""
        ctx = cls(project=project, prices=prices or PriceTable(), oracle_cmd=oracle_cmd, **options)
        if project is not None:
            ctx._index(project.config)
            if "dialect" in options:  # a third-party server over a copy may speak another one
                ctx.dialect = options["dialect"]
        return ctx

    def _index(self, c: TetherConfig) -> None:
        if c.sources:
            self.dialect = source_dialect(next(iter(c.sources.values())))
        for name, p in c.products.items():
            self.table_map.setdefault(name.lower(), name)
            if p.table:
                self.table_map[p.table.split(".")[-1].lower()] = name
            self.pks[name] = list(p.primary_key)
            for col, facts in p.columns.items():
                if facts.unit:
                    self.units[f"{name}.{col}"] = facts.unit
            for col, scheme in p.identifiers.items():
                self.identifiers[f"{name}.{col}"] = scheme
        for name, s in c.identifier_schemes.items():
            if s.pattern:
                self.schemes[name] = re.compile(s.pattern)

    @property
    def config(self) -> TetherConfig | None:
        return self.project.config if self.project is not None else None

    # --- names ---

    def product_of(self, table: str) -> str:
        """The product a table name (bare or schema-qualified) stands for; itself when unknown."""
        bare = table.split(".")[-1].strip('"').lower()
        return self.table_map.get(bare, bare)

    def field(self, ref: str) -> str:
        """``table.column`` (or ``tool.argument``) in the labeller's spelling: product.column."""
        memo = ("field", ref)
        hit: str | None = self.cache.get(memo)
        if hit is None:
            head, dot, rest = ref.strip().partition(".")
            hit = f"{self.product_of(head)}.{rest.lower()}" if dot else ref.strip().lower()
            self.cache[memo] = hit
        return hit

    def restricted(self, product: str, column: str) -> bool:
        """Whether no tool may ever expose product.column (policy list or classification)."""
        memo = ("restricted", product, column)
        if memo not in self.cache:
            config = self.config
            self.cache[memo] = bool(config is not None and product in config.products
                                    and restricted_columns(config, product, [column]))
        return bool(self.cache[memo])

    def time_fields(self) -> set[str]:
        """product.column of every time column: declared time_columns and date/time types."""
        key = ("time_fields",)
        if key not in self.cache:
            out: set[str] = set()
            if self.config is not None:
                for name, p in self.config.products.items():
                    out |= {f"{name}.{c}".lower() for c in p.time_columns}
            for table, cols in (self.schema_columns() or {}).items():
                out |= {f"{self.product_of(table)}.{c}" for c, kind in cols.items()
                        if kind in TIME_KINDS}
            self.cache[key] = out
        result: set[str] = self.cache[key]
        return result

    # --- the source ---

    def source(self, product: str | None = None) -> Source | None:
        """A read-only connection to the source holding ``product`` (default: the first
        product's), opened once per source; None without a project or when it is down."""
        if self.project is None:
            return None
        products = list(self.project.config.products)
        product = product or (products[0] if products else None)
        if product is None:
            self._source_errors[""] = "the project declares no products"
            return None
        name = self.project.source_name(product)
        if name not in self._sources and name not in self._source_errors:
            try:
                self._sources[name] = open_product_source(self.project, product)
            except TetherError as e:
                self._source_errors[name] = e.paragraph()
        return self._sources.get(name)

    def source_problem(self, product: str | None = None) -> str | None:
        """Why ``source(product)`` is None, when there is a project."""
        if self.source(product) is not None:
            return None
        return next(iter(self._source_errors.values()), None)

    def schema_columns(self) -> dict[str, dict[str, str]] | None:
        """{table name: {column: kind}} for every product, read once (None: no source)."""
        if self._schema_columns is None and self._schema_error is None and self.project:
            out: dict[str, dict[str, str]] = {}
            for name, p in self.project.config.products.items():
                src = self.source(name)
                if src is None:
                    self._schema_error = self.source_problem(name) or "no source"
                    continue
                try:
                    rel = src.table_expr(p.table) if p.table else src.sql_expr(p.sql or "", name)
                    cols = src.describe(rel, label=name)
                except TetherError as e:
                    self._schema_error = e.paragraph()
                    continue
                kinds: dict[str, str] = {c.name.lower(): str(c.kind) for c in cols}
                out[name.lower()] = kinds
                if p.table:
                    out[p.table.split(".")[-1].lower()] = kinds
            self._schema_columns = out or None
            if not out and self._schema_error is None:
                self._schema_error = "no product could be described"
        return self._schema_columns

    @property
    def schema_problem(self) -> str | None:
        """Why some or all of the schema could not be read (SQL is then placed without it)."""
        self.schema_columns()
        return self._schema_error

    def schema(self) -> MappingSchema | None:
        """The sqlglot schema qualification runs against (types are irrelevant: names only)."""
        if self._schema is None:
            cols = self.schema_columns()
            if cols:
                self._schema = MappingSchema(
                    {t: dict.fromkeys(c, "TEXT") for t, c in cols.items()},
                    dialect=self.dialect, normalize=True)
        return self._schema

    def close(self) -> None:
        for src in self._sources.values():
            src.close()
        self._sources.clear()

    def __enter__(self) -> LabelContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- instruments (the benchmark reads them) ---

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n
