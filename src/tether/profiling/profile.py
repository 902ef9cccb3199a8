"""Profile a data product with the work pushed into the engine.

Two queries per product, whatever its size, and a third only when a format is plausible:
1. one scan for the scalar statistics of every column (count, nulls, distinct, min, max);
2. one scan counting the values that fit each format plausible at both min and max (uuid,
   email, ...); skipped when no format is plausible, as is usual for fact tables;
3. one scan with GROUPING SETS over the low-cardinality columns (value counts and the newest
   timestamp per value), ranked in the engine so only the top values come back (not ranked
   when every such column has few values: they all come back anyway). A column too varied to
   be an enum whose values mostly occur once (a key, an email) gets no value counts.
No rows are pulled into Python: only aggregates. The statements are assembled from pieces
rendered once per engine (statements.py): at thousands of tables, building a sqlglot AST per
statement cost more than running it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import uuid
import zoneinfo
from collections.abc import Callable, Hashable, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import ProductConfig, ProfilingConfig, Project, TetherConfig
from tether.context.names import identifier_like
from tether.context.profile import ColumnProfile, EnumValue, ProductProfile, ValueCount
from tether.context.schema import Column, TypeKind
from tether.context.timeformat import GRAIN_DAYS, grain, to_time
from tether.context.timeformat import problem as format_problem
from tether.errors import ProductError, QueryError, TetherError, UnreadableProduct
from tether.policy import inherit, templates
from tether.profiling import shapes
from tether.profiling.enums import enum_candidates
from tether.profiling.fingerprint import schema_fingerprint
from tether.profiling.formats import DEFAULT_FORMATS, FormatCheck, native_formats
from tether.profiling.statements import fill, piece, relation_slot, slot
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
        relation = _relation(src, product, name, project.config)
        note(f"{name}: reading schema")
        try:
            columns = src.describe(relation, label=f"product {name!r}")
        except ProductError as e:
            e.where = e.where or project.where("products", name, "table" if product.table else "sql")
            raise
        _check_declared(project, name, product, columns)
        leaves = [leaf for c in columns for leaf in c.leaves()]
        note(f"{name}: scanning {len(leaves)} columns")
        refs = _refs(src, leaves)
        try:
            row_count, scalar = _scalar_pass(src, relation, leaves, refs)
        except QueryError as e:
            raise _unreadable(project, src, relation, name, leaves, refs, e) from None
        _format_pass(src, relation, leaves, refs, scalar, formats,
                     shaped_columns(product, leaves))
        ts = product.timestamp_column()
        cfg = project.config.profiling
        groupable = [i for i, c in enumerate(leaves)
                     if _countable(c, scalar[i], ts, cfg) and not nearly_unique(c, scalar[i], cfg)]
        keep = max(cfg.top_values, cfg.enum_max_values + 1)
        few = all((scalar[i].get("distinct") or 0) <= keep for i in groupable)
        note(f"{name}: counting values of {len(groupable)} low-cardinality columns")
        ts_ref = src.render(_col(parts_of(ts, columns))) if ts else None
        groups = _group_pass(src, relation, refs, groupable, ts_ref, cfg, row_count, few)
        conditional = _conditional_as_of(project, src, relation, name, columns)
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
        as_of=_aware(as_of, _zone(product.zone(fresh)), product.time_format(fresh)),
        columns=profiles,
    )


def profile_project(
    project: Project, products: Sequence[str] | None = None, progress: Progress | None = None
) -> list[ProductProfile]:
    """Profile the named products (default: all, in tether.yaml order)."""
    names = list(products or project.config.products)
    sources: dict[str, Source] = {}  # one connection (and catalog read) per source
    with contextlib.ExitStack() as stack:
        out = []
        for n in names:
            key = project.source_name(n)
            if key not in sources:
                sources[key] = open_product_source(project, n)
                stack.callback(sources[key].close)
                stack.enter_context(sources[key].catalog_read())
            out.append(profile_product(project, n, source=sources[key], progress=progress))
        return out


# --- relation and declared columns ---------------------------------------------------------------


def _relation(src: Source, product: ProductConfig, name: str,
              config: TetherConfig | None = None, seen: tuple[str, ...] = ()) -> exp.Expr:
    """The product as tether reads it: its table, or its SQL, in which another product's table
    is read less that product's restricted columns (policy/inherit.py)."""
    if product.table:
        return src.table_expr(product.table)
    query = src.sql_expr(product.sql or "", name)
    if config is None:
        return query
    chain = inherit.chain(name, seen)

    def read(other: str, alias: str) -> exp.Expr:
        base = _relation(src, config.products[other], other, config, chain)
        return inherit.visible(config, other, base, src.describe(base, label=other), alias)

    inherit.through(config, name, query.this, read)
    return query


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
    kinds = {c.name: c.kind for c in columns} | {leaf.name: leaf.kind for c in columns
                                                 for leaf in c.leaves()}
    for col, value in p.time_columns.items():  # a format fits the column's type, and only
        fmt = p.time_format(col)                 # a number or text needs one
        kind = kinds[col]
        why = (format_problem(fmt, kind) if fmt else
               f"{col!r} is {'an integer' if kind == 'integer' else 'text'}: say the format it "
               "holds time in instead of a time zone" if kind in ("integer", "string") else None)
        if why is not None:
            raise ProductError(
                f"product {name!r}: time column {col!r} ({kind}, {value!r}): {why}",
                where=project.where("products", name, "time_columns", col),
                hint='Formats: "%Y" (integer years), "%Y%m", "%Y%m%d", "%s" (seconds since '
                     '1970), "%Y-%m-%d" or any strftime format of text; a time zone (UTC) for '
                     "a timestamp or date column.")


def _col(parts: Sequence[str]) -> exp.Expr:
    """``p."a"`` for a column, ``p."a"."b"`` for a nested field (its path), ``p."a.b"`` for a
    column whose name holds a dot."""
    head, *rest = parts
    node: exp.Expr = exp.column(head, table=ALIAS, quoted=True)
    for part in rest:
        node = exp.Dot(this=node, expression=exp.to_identifier(part, quoted=True))
    return node


# --- pass 1: scalar statistics -------------------------------------------------------------------


def _stat_expr(stat: str, dialect: str) -> exp.Expr:
    """One statistic of one column (slot 0)."""
    ref = slot(0)
    if stat == "distinct":
        if dialect == "duckdb":
            return exp.func("APPROX_COUNT_DISTINCT", ref)
        return exp.Count(this=exp.Distinct(expressions=[ref]))  # core PostgreSQL: exact
    return exp.func({"non_null": "COUNT", "min": "MIN", "max": "MAX"}[stat], ref)


def _scalar_stats(c: Column) -> list[str]:
    stats = ["non_null"]
    if c.kind in _DISTINCT_KINDS:
        stats.append("distinct")
    if c.kind in _ORDERED_KINDS:
        stats += ["min", "max"]
    return stats


def _run_stats(src: Source, relation: exp.Expr, refs: list[str],
               stats: Sequence[tuple[int, str, Hashable, Callable[[], exp.Expr]]]
               ) -> tuple[Any, ...]:
    """``SELECT COUNT(*), <one aggregate per stat>`` over the relation, each aggregate a piece
    rendered once per engine: (column index, name, piece key, its builder)."""
    frame = piece(src, "frame", lambda: exp.select(
        exp.func("COUNT", exp.Star()).as_("n"), slot("items")).from_(relation_slot()))
    items = ", ".join(
        fill(src, piece(src, key, build), {"0": refs[i]}) + f" AS s{k}"
        for k, (i, _stat, key, build) in enumerate(stats))
    sql = fill(src, frame, {"items": items, "rel": src.render(_aliased(relation))})
    return src.run(sql)[0]


def _refs(src: Source, leaves: list[Column]) -> list[str]:
    """Each leaf's reference (``p."a"``, ``p."a"."b"``) as the source writes it."""
    return [src.render(_col(c.parts)) for c in leaves]


def parts_of(name: str, columns: Sequence[Column]) -> list[str]:
    """The identifiers of a column or nested field named in tether.yaml: a top-level column's
    name is one identifier (dots and all); a nested field's, its path."""
    for c in columns:
        if c.name == name:
            return c.parts
        for leaf in c.leaves():
            if leaf.name == name:
                return leaf.parts
    return [name]


def _scalar_pass(
    src: Source, relation: exp.Expr, leaves: list[Column], refs: list[str]
) -> tuple[int, list[dict[str, Any]]]:
    d = src.dialect
    stats = [(i, stat, ("stat", stat), partial(_stat_expr, stat, d))
             for i, c in enumerate(leaves) for stat in _scalar_stats(c)]
    row = _run_stats(src, relation, refs, stats)
    out: list[dict[str, Any]] = [{} for _ in leaves]
    for (i, stat, _k, _b), value in zip(stats, row[1:], strict=True):
        out[i][stat] = value
        if stat == "distinct":
            out[i]["distinct_exact"] = d != "duckdb"
    return int(row[0]), out


def _unreadable(project: Project, src: Source, relation: exp.Expr, name: str,
                leaves: list[Column], refs: list[str], error: QueryError) -> UnreadableProduct:
    """The product and the column the engine cannot read (each column asked alone, once, to
    find it: a view whose cast fails on one value, a type the driver cannot return)."""
    for i, c in enumerate(leaves):
        try:
            _scalar_pass(src, relation, [c], [refs[i]])
        except QueryError as e:
            return UnreadableProduct(
                f"product {name!r}: column {c.name!r} cannot be read: {e.reason}",
                where=project.where("products", name),
                hint="Fix the column in the source, leave it out with `sql:`, or remove the "
                     "product; the other products are not affected.")
    return UnreadableProduct(f"product {name!r} cannot be read: {error.reason}",
                        where=project.where("products", name),
                        hint="Fix its table or sql; the other products are not affected.")


def _format_count(f: FormatCheck, dialect: str) -> exp.Expr:
    return exp.func("SUM", exp.If(this=f.condition(slot(0), dialect), true=exp.Literal.number(1),
                                  false=exp.Literal.number(0)))


def _format_pass(
    src: Source,
    relation: exp.Expr,
    leaves: list[Column],
    refs: list[str],
    scalar: list[dict[str, Any]],
    formats: Sequence[FormatCheck],
    shaped: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Count the rows fitting each format that both min and max fit; store as format:NAME.
    In the same scan, each column named in ``shaped`` is checked against the shapes its min and
    max share (profiling/shapes.py): the first every value fits is its ``pattern``."""
    stats: list[tuple[int, str, Hashable, Callable[[], exp.Expr]]] = []
    for i, c in enumerate(leaves):
        lo, hi = scalar[i].get("min"), scalar[i].get("max")
        for f in formats:
            if c.kind in f.kinds and lo is not None and f.plausible(lo) and f.plausible(hi):
                stats.append((i, f"format:{f.name}", ("format", f.name, f.predicate(src.dialect)),
                              partial(_format_count, f, src.dialect)))
        if c.name in shaped and isinstance(lo, str) and isinstance(hi, str) and lo != hi:
            stats += [(i, f"shape:{pattern}", ("shape", pattern), partial(_shape_count, pattern))
                      for pattern in shapes.candidates(lo, hi)]
    if not stats:
        return
    row = _run_stats(src, relation, refs, stats)
    for (i, stat, _k, _b), value in zip(stats, row[1:], strict=True):
        scalar[i][stat] = value
        fits = value is not None and int(value) == int(scalar[i].get("non_null") or 0)
        if stat.startswith("shape:") and fits and "pattern" not in scalar[i]:
            # checked as exact as both ends allow; published with runs of any length, so a key
            # added since (A-10000 after A-9999) is not refused before any query
            scalar[i]["pattern"] = shapes.loosened(stat.removeprefix("shape:"))


def _shape_count(pattern: str) -> exp.Expr:
    fits = exp.RegexpLike(this=slot(0), expression=exp.Literal.string(pattern))
    return exp.func("SUM", exp.If(this=fits, true=exp.Literal.number(1),
                                  false=exp.Literal.number(0)))


def shaped_columns(product: ProductConfig, leaves: Sequence[Column]) -> set[str]:
    """Text columns whose values' shape a parameter should state: a key's columns and those
    whose name says they identify (in any case style), where no identifier scheme says it."""
    return {c.name for c in leaves if c.kind == "string" and not c.nested
            and c.name not in product.identifiers
            and (c.name in product.primary_key or identifier_like(c.name))}


# --- pass 2: value counts of low-cardinality columns ---------------------------------------------


def _countable(c: Column, stats: dict[str, Any], ts: str | None, cfg: ProfilingConfig) -> bool:
    """A column whose values may be counted: a kind with distinct values, not the timestamp,
    fewer distinct values than profiling.exact_distinct_below."""
    return (c.kind in _DISTINCT_KINDS and c.name != ts
            and (stats.get("distinct") or 0) <= cfg.exact_distinct_below)


def nearly_unique(c: Column, stats: dict[str, Any], cfg: ProfilingConfig) -> bool:
    """Too many distinct values to be an enum, and on average fewer than two rows each: value
    counts would say nothing (a key, an email, an amount), so none are taken."""
    distinct, non_null = int(stats.get("distinct") or 0), int(stats.get("non_null") or 0)
    return c.kind != "boolean" and distinct > 2 * cfg.enum_max_values and 2 * distinct > non_null


def _ranked_statement(n: int, ts: bool, keep: int) -> exp.Expr:
    """Value counts of slots 0..n-1 (and the newest slot ``ts`` per value) in one GROUPING
    SETS scan, ranked in the engine: only each column's top ``keep`` values come back, with
    the number of its values."""
    refs = [slot(k) for k in range(n)]
    last_seen = exp.func("MAX", slot("ts")) if ts else exp.Null()
    grouped = (
        exp.select(
            *[r.copy().as_(f"v{k}") for k, r in enumerate(refs)],
            *[exp.func("GROUPING", r.copy()).as_(f"g{k}") for k, r in enumerate(refs)],
            exp.func("COUNT", exp.Star()).as_("n"),
            last_seen.as_("last_seen"),
        )
        .from_(relation_slot(), copy=False)
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
        for k in range(n)
    ]
    union: exp.Query = branches[0]
    for b in branches[1:]:
        union = exp.union(union, b, distinct=False, copy=False)
    order = [exp.Ordered(this=exp.column("value").is_(exp.null())),
             exp.Ordered(this=exp.column("n"), desc=True), exp.Ordered(this=exp.column("value"))]
    ranked_rows = exp.select(
        "col", "value", "n", "last_seen",
        exp.Window(this=exp.func("COUNT", exp.column("value")),
                   partition_by=[exp.column("col")]).as_("nd"),
        exp.Window(this=exp.func("ROW_NUMBER"), partition_by=[exp.column("col")],
                   order=exp.Order(expressions=order)).as_("rk"),
    ).from_("u", copy=False)
    return (
        exp.select("col", "value", "n", "last_seen", "nd")
        .from_("r", copy=False)
        .where(exp.column("rk") <= keep, copy=False)
        .with_("g", as_=grouped, copy=False)
        .with_("u", as_=union, copy=False)
        .with_("r", as_=ranked_rows, copy=False)
        .order_by("col", "rk", copy=False)
    )


def _few_branch(k: int, ts: bool) -> exp.Expr:
    """The value counts of slot ``k`` alone (one branch of :func:`_few_statement`)."""
    return exp.select(
        exp.Literal.number(k).as_("col"),
        exp.cast(slot(k), exp.DataType.build("TEXT")).as_("value"),
        exp.func("COUNT", exp.Star()).as_("n"),
        (exp.func("MAX", slot("ts")) if ts else exp.Null()).as_("last_seen"),
    ).from_(relation_slot(), copy=False).group_by(slot(k), copy=False)


def _few_statement(src: Source, n: int, ts: bool) -> str:
    """Every value of slots 0..n-1, ranked as :func:`_ranked_statement` ranks them, for
    columns known to have few values: a GROUP BY each, which on small tables costs a third of
    the one GROUPING SETS scan. The branches are joined as text (each a piece), so a table of
    hundreds of such columns is no UNION too deep to render."""
    frame = piece(src, ("few", "frame"), lambda: exp.select("col", "value", "n", "last_seen")
                  .from_(relation_slot("union"))
                  .order_by(exp.column("col"), exp.Ordered(this=exp.column("value").is_(
                      exp.null())), exp.Ordered(this=exp.column("n"), desc=True),
                      exp.column("value")))
    union = " UNION ALL ".join(piece(src, ("few", k, ts), partial(_few_branch, k, ts))
                               for k in range(n))
    return fill(src, frame, {"union": f"({union}) AS u"}, keep=True)


def _group_pass(
    src: Source,
    relation: exp.Expr,
    refs: list[str],
    groupable: list[int],
    ts_ref: str | None,
    cfg: ProfilingConfig,
    row_count: int,
    few: bool,
) -> dict[int, tuple[int, list[tuple[str | None, int, Any]]]]:
    """{column index: (exact distinct count, [(value as text, count, last_seen)])}, the
    values in rank order (not null first, most rows first, then by value), at most ``keep``
    a column. ``few``: every column is known to have few values, so the engine need not rank
    them (the same rows come back either way)."""
    if not groupable or row_count == 0:
        return {}
    keep = max(cfg.top_values, cfg.enum_max_values + 1)
    n, ts = len(groupable), ts_ref is not None
    text = (_few_statement(src, n, ts) if few else
            piece(src, ("ranked", n, ts, keep), partial(_ranked_statement, n, ts, keep)))
    slots = {str(k): refs[i] for k, i in enumerate(groupable)}
    slots["rel"] = src.render(_aliased(relation))
    if ts_ref is not None:
        slots["ts"] = ts_ref
    result: dict[int, tuple[int, list[tuple[str | None, int, Any]]]] = {}
    for row in src.run(fill(src, text, slots)):
        col, value, count, seen = row[:4]
        idx = groupable[int(col)]
        _, values = result.setdefault(idx, (int(row[4]) if len(row) > 4 else 0, []))
        values.append((value, int(count), seen))
    if few:  # what the engine would have ranked: the same order, cut at keep
        result = {i: (sum(v[0] is not None for v in values), values[:keep])
                  for i, (_, values) in result.items()}
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
    tz, fmt = _zone(product.zone(ts)), product.time_format(ts)
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
            # value counts left out for that reason alone (the probe samples it instead)
            prof.nearly_unique = _countable(c, s, ts, cfg) and nearly_unique(c, s, cfg)
        if i in groups:
            distinct, values = groups[i]
            prof.distinct_count, prof.distinct_exact = distinct, True
            prof.top_values = [
                ValueCount(value=_parse(v, c.kind), count=n, last_seen=_aware(seen, tz, fmt))
                for v, n, seen in values[: cfg.top_values]
                if v is not None
            ] if distinct < non_null else []  # every value unique: a top list says nothing
        prof.pattern = s.get("pattern")
        prof.formats = native_formats(c.kind) + [
            key.split(":", 1)[1]
            for key, hits in s.items()
            if key.startswith("format:") and non_null and int(hits or 0) == non_null
        ]
        if c.kind in _NUMERIC_KINDS and prof.min is not None:
            prof.never_negative = float(prof.min) >= 0
        out.append(prof)
    now = project.now()
    span = next(((_aware(scalar[i].get("min"), tz, fmt), _aware(scalar[i].get("max"), tz, fmt))
                 for i, c in enumerate(leaves) if c.name == ts), (None, None))
    oldest, newest = span
    # dormancy counts from the earlier of the clock and the product's own newest time: on
    # historical data (nothing after 2013) a value seen in the last month of the data is live
    dormant = dormancy_reference(now, newest) - dt.timedelta(days=cfg.dormant_after_days)
    # and a value that stopped in the first third of the data's span is history, not a value
    # being phased out (a code last used a century before the data ends is asked about by date)
    reference = dormancy_reference(now, newest)
    recent = (oldest + (reference - oldest) / 3
              if oldest is not None and newest is not None else None)
    coarse = fmt is not None and GRAIN_DAYS[grain(fmt)] >= cfg.dormant_after_days
    for i in enum_candidates(product, leaves, out, cfg):
        if i not in groups:  # exact count from the scan, but above exact_distinct_below
            continue
        _, values = groups[i]
        # dormant means replaced: other values go on where this one stopped. A column none of
        # whose values is recent has stopped being filled (a death place on people who started
        # recently), which says nothing of any one value
        seen_at = [t for v, _n, seen in values
                   if v is not None and (t := _aware(seen, tz, fmt)) is not None]
        # and a clock that ticks in years cannot place an absence of a year: a year column
        # (a build year, a season) marks nothing dormant
        quiet = (bool(seen_at) and max(seen_at) < dormant) or coarse
        out[i].enum = sorted(
            (
                EnumValue(
                    value=_parse(v, leaves[i].kind),
                    count=n,
                    last_seen=_aware(seen, tz, fmt),
                    deprecated=not quiet and _phased_out(_aware(seen, tz, fmt) or now, n,
                                                         dormant, recent, oldest, reference),
                )
                for v, n, seen in values
                if v is not None
            ),
            key=lambda e: str(e.value),
        )
    unit_hints(project, name, out)
    return out


EXPECTED_SINCE = 3.0
"""How many times a value must have been due since it was last seen, at its own rate, before
its absence says it stopped (a Poisson count of 3 or more is absent by chance about 5% of the
time; a value seen once in a century is not missed in five years)."""


def _phased_out(seen: dt.datetime, count: int, dormant: dt.datetime,
                recent: dt.datetime | None, oldest: dt.datetime | None,
                reference: dt.datetime) -> bool:
    """A value last seen before the dormancy line, but after the first third of the data's
    span, and common enough that its absence since is no chance: at the rate it was seen over
    the whole span it would have come back EXPECTED_SINCE times or more."""
    if not seen < dormant or (recent is not None and seen < recent):
        return False
    if oldest is None or reference <= oldest:
        return True
    due = count * (reference - seen) / (reference - oldest)
    return due >= EXPECTED_SINCE


def _zone(name: str) -> dt.tzinfo:
    return dt.UTC if name.upper() == "UTC" else zoneinfo.ZoneInfo(name)


def _conditional_as_of(project: Project, src: Source, relation: exp.Expr, name: str,
                       columns: Sequence[Column]) -> Any:
    """The newest freshness value among the rows its ``where`` keeps (None without one); a
    condition the engine rejects is an error naming its line in tether.yaml."""
    f = project.config.products[name].freshness
    if f is None or f.column is None or f.where is None:
        return None
    try:
        q = exp.select(exp.func("MAX", _col(parts_of(f.column, columns)))).from_(_aliased(relation)).where(
            templates.freshness_condition(f.where, src.dialect))
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


def _aware(value: Any, tz: dt.tzinfo, fmt: str | None = None) -> dt.datetime | None:
    """A time value as an aware datetime; one held in a format (a year, a date as text) read
    in it."""
    if value is None:
        return None
    if fmt is not None:
        return to_time(value, fmt)
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
