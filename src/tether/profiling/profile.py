"""Profile a data product with the work pushed into the engine.

Two queries per product, whatever its size, and a third only when a format is plausible:
1. one scan for the scalar statistics of every column (count, nulls, distinct, min, max);
2. one scan counting the values that fit each format plausible at both min and max (uuid,
   email, ...); skipped when no format is plausible, as is usual for fact tables;
3. one scan with GROUPING SETS over the low-cardinality columns (value counts and the newest
   timestamp per value), ranked in the engine so only the top values come back.
No rows are pulled into Python: only aggregates.
"""

from __future__ import annotations

import datetime as dt
import difflib
import uuid
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import ProductConfig, ProfilingConfig, Project
from tether.context.profile import ColumnProfile, EnumValue, ProductProfile, ValueCount
from tether.context.schema import Column, TypeKind
from tether.errors import ProductError, TetherError
from tether.profiling.enums import enum_candidates
from tether.profiling.fingerprint import schema_fingerprint
from tether.profiling.formats import DEFAULT_FORMATS, FormatCheck, native_formats
from tether.profiling.units import unit_hints
from tether.sources import Source, open_product_source

Progress = Callable[[str], None]

_DISTINCT_KINDS: frozenset[TypeKind] = frozenset(
    {"string", "integer", "decimal", "float", "boolean", "date", "timestamp", "timestamptz",
     "time", "uuid"}
)
_ORDERED_KINDS: frozenset[TypeKind] = frozenset(
    {"string", "integer", "decimal", "float", "date", "timestamp", "timestamptz", "time"}
)
_NUMERIC_KINDS: frozenset[TypeKind] = frozenset({"integer", "decimal", "float"})
ALIAS = "p"


@dataclass
class _Stat:
    """One aggregate of the scalar scan: which column and which statistic it measures."""

    column: int
    stat: str
    expr: exp.Expr


def profile_product(
    project: Project,
    name: str,
    *,
    source: Source | None = None,
    formats: Sequence[FormatCheck] = DEFAULT_FORMATS,
    progress: Progress | None = None,
) -> ProductProfile:
    """Schema, statistics, enums, formats, units and fingerprint of one data product."""
    product = project.product(name)
    note = progress or (lambda _msg: None)
    own = source is None
    src = source or open_product_source(project, name)
    try:
        relation = _relation(src, product, name)
        note(f"{name}: reading schema")
        try:
            columns = src.describe(relation, label=f"product {name!r}")
        except ProductError as e:
            e.where = e.where or project.where("products", name, "table" if product.table else "sql")
            raise
        _check_declared(project, name, product, columns)
        leaves = [leaf for c in columns for leaf in c.leaves()]
        note(f"{name}: scanning {len(leaves)} columns")
        row_count, scalar = _scalar_pass(src, relation, leaves)
        _format_pass(src, relation, leaves, scalar, formats)
        ts = product.timestamp_column()
        cfg = project.config.profiling
        groupable = [
            i for i, c in enumerate(leaves)
            if c.kind in _DISTINCT_KINDS and c.name != ts
            and (scalar[i].get("distinct") or 0) <= cfg.exact_distinct_below
        ]
        note(f"{name}: counting values of {len(groupable)} low-cardinality columns")
        groups = _group_pass(src, relation, leaves, groupable, ts, cfg, row_count)
        conditional = _conditional_as_of(project, src, relation, name)
    finally:
        if own:
            src.close()
    profiles = _assemble(project, name, product, leaves, row_count, scalar, groups, ts)
    fresh = product.freshness.column if product.freshness else None
    as_of = conditional if product.freshness and product.freshness.where else next(
        (c.max for c in profiles if fresh and c.column.name == fresh), None)
    return ProductProfile(
        product=name,
        source=src.name,
        relation=product.table or (product.sql or "").strip(),
        row_count=row_count,
        fingerprint=schema_fingerprint(columns),
        timestamp_column=ts,
        profiled_at=project.now(),
        as_of=_aware(as_of, _zone(product.time_columns.get(fresh or "", "UTC"))),
        columns=profiles,
    )


def profile_project(
    project: Project, products: Sequence[str] | None = None, progress: Progress | None = None
) -> list[ProductProfile]:
    """Profile the named products (default: all, in tether.yaml order)."""
    names = list(products or project.config.products)
    sources: dict[str, Source] = {}  # one connection per source, not per product
    try:
        out = []
        for n in names:
            key = project.source_name(n)
            if key not in sources:
                sources[key] = open_product_source(project, n)
            out.append(profile_product(project, n, source=sources[key], progress=progress))
        return out
    finally:
        for s in sources.values():
            s.close()


# --- relation and declared columns ---------------------------------------------------------------


def _relation(src: Source, product: ProductConfig, name: str) -> exp.Expr:
    if product.table:
        return src.table_expr(product.table)
    return src.sql_expr(product.sql or "", name)


def _aliased(relation: exp.Expr) -> exp.Expr:
    rel = relation.copy()
    if isinstance(rel, exp.Table):
        rel.set("alias", exp.TableAlias(this=exp.to_identifier(ALIAS)))
    return rel


def _check_declared(project: Project, name: str, p: ProductConfig, columns: list[Column]) -> None:
    have = {c.name for c in columns} | {leaf.name for c in columns for leaf in c.leaves()}
    declared: list[tuple[tuple[str | int, ...], str]] = []
    declared += [(("primary_key",), c) for c in p.primary_key]
    declared += [(("time_columns", c), c) for c in p.time_columns]
    declared += [(("identifiers", c), c) for c in p.identifiers]
    declared += [(("columns", c), c) for c in p.columns]
    declared += [(("columns", c, "unit_column"), f.unit_column) for c, f in p.columns.items()
                 if f.unit_column]
    if p.freshness and p.freshness.column:
        declared.append((("freshness", "column"), p.freshness.column))
    for loc, col in declared:
        if col not in have:
            close = difflib.get_close_matches(col, sorted(have), n=1)
            raise ProductError(
                f"product {name!r} declares column {col!r}, which its relation does not have."
                + (f" Did you mean {close[0]!r}?" if close else ""),
                where=project.where("products", name, *loc),
                hint="Columns there: " + ", ".join(sorted(c.name for c in columns)) + ".",
            )


def _col(name: str) -> exp.Expr:
    """``p."a"`` or, for a nested field, ``p."a"."b"``."""
    head, *rest = name.split(".")
    node: exp.Expr = exp.column(head, table=ALIAS, quoted=True)
    for part in rest:
        node = exp.Dot(this=node, expression=exp.to_identifier(part, quoted=True))
    return node


# --- pass 1: scalar statistics -------------------------------------------------------------------


def _scalar_stats(i: int, c: Column, dialect: str) -> list[_Stat]:
    ref = _col(c.name)
    stats = [_Stat(i, "non_null", exp.func("COUNT", ref))]
    if c.kind in _DISTINCT_KINDS:
        if dialect == "duckdb":
            distinct: exp.Expr = exp.func("APPROX_COUNT_DISTINCT", ref)
        else:  # core PostgreSQL has no approximate distinct aggregate: exact it is
            distinct = exp.Count(this=exp.Distinct(expressions=[ref.copy()]))
        stats.append(_Stat(i, "distinct", distinct))
    if c.kind in _ORDERED_KINDS:
        stats.append(_Stat(i, "min", exp.func("MIN", ref.copy())))
        stats.append(_Stat(i, "max", exp.func("MAX", ref.copy())))
    return stats


def _run_stats(src: Source, relation: exp.Expr, stats: list[_Stat]) -> tuple[Any, ...]:
    select = exp.select(
        exp.func("COUNT", exp.Star()).as_("n"),
        *[s.expr.as_(f"s{k}", copy=False) for k, s in enumerate(stats)],
        copy=False,
    ).from_(_aliased(relation), copy=False)
    return src.query(select)[0]


def _scalar_pass(
    src: Source, relation: exp.Expr, leaves: list[Column]
) -> tuple[int, list[dict[str, Any]]]:
    stats = [s for i, c in enumerate(leaves) for s in _scalar_stats(i, c, src.dialect)]
    row = _run_stats(src, relation, stats)
    out: list[dict[str, Any]] = [{} for _ in leaves]
    for s, value in zip(stats, row[1:], strict=True):
        out[s.column][s.stat] = value
        if s.stat == "distinct":
            out[s.column]["distinct_exact"] = src.dialect != "duckdb"
    return int(row[0]), out


def _format_pass(
    src: Source,
    relation: exp.Expr,
    leaves: list[Column],
    scalar: list[dict[str, Any]],
    formats: Sequence[FormatCheck],
) -> None:
    """Count the rows fitting each format that both min and max fit; store as format:NAME."""
    stats = []
    for i, c in enumerate(leaves):
        lo, hi = scalar[i].get("min"), scalar[i].get("max")
        for f in formats:
            if c.kind in f.kinds and lo is not None and f.plausible(lo) and f.plausible(hi):
                cond = f.condition(_col(c.name), src.dialect)
                count = exp.func("SUM", exp.If(this=cond, true=exp.Literal.number(1),
                                               false=exp.Literal.number(0)))
                stats.append(_Stat(i, f"format:{f.name}", count))
    if not stats:
        return
    row = _run_stats(src, relation, stats)
    for s, value in zip(stats, row[1:], strict=True):
        scalar[s.column][s.stat] = value


# --- pass 2: value counts of low-cardinality columns ---------------------------------------------


def _group_pass(
    src: Source,
    relation: exp.Expr,
    leaves: list[Column],
    groupable: list[int],
    ts: str | None,
    cfg: ProfilingConfig,
    row_count: int,
) -> dict[int, tuple[int, list[tuple[str | None, int, Any]]]]:
    """{column index: (exact distinct count, [(value as text, count, last_seen)])}."""
    if not groupable or row_count == 0:
        return {}
    keep = max(cfg.top_values, cfg.enum_max_values + 1)
    refs = [_col(leaves[i].name) for i in groupable]
    last_seen = exp.func("MAX", _col(ts)) if ts else exp.Null()
    grouped = (
        exp.select(
            *[r.copy().as_(f"v{k}") for k, r in enumerate(refs)],
            *[exp.func("GROUPING", r.copy()).as_(f"g{k}") for k, r in enumerate(refs)],
            exp.func("COUNT", exp.Star()).as_("n"),
            last_seen.as_("last_seen"),
        )
        .from_(_aliased(relation), copy=False)
        .group_by(exp.GroupingSets(expressions=[exp.Paren(this=r.copy()) for r in refs]),
                  copy=False)
    )
    text = exp.DataType.build("TEXT")
    branches = [
        exp.select(
            exp.Literal.number(k).as_("col"),
            exp.cast(exp.column(f"v{k}"), text).as_("value"),
            exp.column("n"),
            exp.column("last_seen"),
        ).from_("g", copy=False).where(exp.column(f"g{k}").eq(0), copy=False)
        for k in range(len(refs))
    ]
    union: exp.Query = branches[0]
    for b in branches[1:]:
        union = exp.union(union, b, distinct=False, copy=False)
    ranked = exp.select(
        "col", "value", "n", "last_seen",
        exp.Window(this=exp.func("COUNT", exp.column("value")),
                   partition_by=[exp.column("col")]).as_("nd"),
        exp.Window(
            this=exp.func("ROW_NUMBER"),
            partition_by=[exp.column("col")],
            order=exp.Order(expressions=[
                exp.Ordered(this=exp.column("value").is_(exp.null())),
                exp.Ordered(this=exp.column("n"), desc=True),
                exp.Ordered(this=exp.column("value")),
            ]),
        ).as_("rk"),
    ).from_("u", copy=False)
    query = (
        exp.select("col", "value", "n", "last_seen", "nd")
        .from_("r", copy=False)
        .where(exp.column("rk") <= keep, copy=False)
        .with_("g", as_=grouped, copy=False)
        .with_("u", as_=union, copy=False)
        .with_("r", as_=ranked, copy=False)
        .order_by("col", "rk", copy=False)
    )
    result: dict[int, tuple[int, list[tuple[str | None, int, Any]]]] = {}
    for col, value, n, seen, nd in src.query(query):
        idx = groupable[int(col)]
        _, values = result.setdefault(idx, (int(nd), []))
        values.append((value, int(n), seen))
    return result


# --- assembly ------------------------------------------------------------------------------------


def _assemble(
    project: Project,
    name: str,
    product: ProductConfig,
    leaves: list[Column],
    row_count: int,
    scalar: list[dict[str, Any]],
    groups: dict[int, tuple[int, list[tuple[str | None, int, Any]]]],
    ts: str | None,
) -> list[ColumnProfile]:
    cfg = project.config.profiling
    tz = _zone(product.time_columns.get(ts or "", "UTC"))
    out: list[ColumnProfile] = []
    for i, c in enumerate(leaves):
        s = scalar[i]
        non_null = int(s.get("non_null") or 0)
        prof = ColumnProfile(
            column=c,
            non_null_count=non_null,
            null_fraction=(row_count - non_null) / row_count if row_count else None,
            min=_jsonable(s.get("min")),
            max=_jsonable(s.get("max")),
        )
        if "distinct" in s:
            prof.distinct_count = int(s["distinct"] or 0)
            prof.distinct_exact = bool(s.get("distinct_exact"))
        if i in groups:
            distinct, values = groups[i]
            prof.distinct_count, prof.distinct_exact = distinct, True
            prof.top_values = [
                ValueCount(value=_parse(v, c.kind), count=n, last_seen=_aware(seen, tz))
                for v, n, seen in values[: cfg.top_values]
                if v is not None
            ] if distinct < non_null else []  # every value unique: a top list says nothing
        prof.formats = native_formats(c.kind) + [
            key.split(":", 1)[1]
            for key, hits in s.items()
            if key.startswith("format:") and non_null and int(hits or 0) == non_null
        ]
        if c.kind in _NUMERIC_KINDS and prof.min is not None:
            prof.never_negative = float(prof.min) >= 0
        out.append(prof)
    now = project.now()
    newest = next((_aware(scalar[i].get("max"), tz) for i, c in enumerate(leaves)
                   if c.name == ts), None)
    # dormancy counts from the earlier of the clock and the product's own newest time: on
    # historical data (nothing after 2013) a value seen in the last month of the data is live
    dormant = dormancy_reference(now, newest) - dt.timedelta(days=cfg.dormant_after_days)
    for i in enum_candidates(product, leaves, out, cfg):
        if i not in groups:  # exact count from the scan, but above exact_distinct_below
            continue
        _, values = groups[i]
        out[i].enum = sorted(
            (
                EnumValue(
                    value=_parse(v, leaves[i].kind),
                    count=n,
                    last_seen=_aware(seen, tz),
                    deprecated=(_aware(seen, tz) or now) < dormant,
                )
                for v, n, seen in values
                if v is not None
            ),
            key=lambda e: str(e.value),
        )
    unit_hints(project, name, out)
    return out


def _zone(name: str) -> dt.tzinfo:
    return dt.UTC if name.upper() == "UTC" else zoneinfo.ZoneInfo(name)


def _conditional_as_of(project: Project, src: Source, relation: exp.Expr, name: str) -> Any:
    """The newest freshness value among the rows its ``where`` keeps (None without one); a
    condition the engine rejects is an error naming its line in tether.yaml."""
    f = project.config.products[name].freshness
    if f is None or f.column is None or f.where is None:
        return None
    try:
        q = exp.select(exp.func("MAX", _col(f.column))).from_(_aliased(relation)).where(
            f.condition(src.dialect))
        return src.query(q, {"clock": project.now()})[0][0]
    except (sqlglot.errors.SqlglotError, TetherError) as e:
        reason = (getattr(e, "reason", None) or getattr(e, "message", None)
                  or str(e).splitlines()[0])
        raise ProductError(f"the freshness condition of {name} does not compile on its source: "
                           f"{reason}", where=project.where("products", name, "freshness", "where"),
                           hint="Fix products.*.freshness.where; it may name the product's "
                           "columns and {{ clock }}.") from None


def dormancy_reference(now: dt.datetime, newest: dt.datetime | None) -> dt.datetime:
    """The time dormancy is measured from: the earlier of the clock and the product's newest
    metric time (never the wall clock alone: old data is not dormant data)."""
    return min(now, newest) if newest is not None else now


def _aware(value: Any, tz: dt.tzinfo) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=tz)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=tz)
    return None


def _parse(text: str | None, kind: TypeKind) -> Any:
    """Value counts come back as text (one column for all types); restore JSON-native types."""
    if text is None:
        return None
    try:
        if kind == "integer":
            return int(text)
        if kind in ("float", "decimal"):
            return float(text)
        if kind == "boolean":
            return text.lower() in ("true", "t", "1")
    except ValueError:
        return text
    return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.time):
        return value.isoformat()
    return value
