"""The metric kind: one task tool per governed metric, its measure and governed predicate applied
over a period, cut by its dimensions."""

from __future__ import annotations

import re
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from tether.config import MetricConfig
from tether.context.meta import enum_of
from tether.context.profile import ColumnProfile
from tether.context.schema import TypeKind
from tether.errors import ConfigError
from tether.policy import restricted_columns
from tether.sources import kind_of, source_dialect
from tether.toolgen.describe import (
    humanize,
    join_words,
    json_type,
    sentence,
)
from tether.toolgen.kinds import Kind, register
from tether.toolgen.model import (
    READ_ONLY,
    Filter,
    GeneratedTool,
    QueryPlan,
    Sentence,
    Window,
    join_sentences,
)
from tether.toolgen.plan import from_clause, parse, qualified
from tether.toolgen.provenance import declared_unseen, words_said
from tether.toolgen.shared import (
    Ctx,
    closed,
    envelope,
    held_as,
    metric_products,
    param_schema,
    period_param,
    policy_sentence,
    tool_meta,
    unit_note,
)

METRIC_MAX_ROWS = 1000
"""A metric cut by a dimension that is not an enum returns at most this many rows."""


def _window_kind(m: MetricConfig) -> Literal["period", "trailing", "current"]:
    return m.window or ("period" if m.calendar else "trailing")


def metric_tool(ctx: Ctx, name: str) -> GeneratedTool:
    m: MetricConfig = ctx.config.metrics[name]
    # a metric reads one source (joins do not cross engines): its first source's dialect
    products = metric_products(m, source_dialect(next(iter(ctx.config.sources.values()))))
    if not products:
        raise ConfigError(f"metric {name!r} names no product.column anywhere.",
                          where=ctx.project.where("metrics", name),
                          hint="Qualify its columns as product.column, e.g. count(distinct "
                          "shipments.shipment_id).")
    dims = [d.split(".") for d in m.dimensions]
    for table, column in dims:
        if restricted_columns(ctx.config, table, [column]):
            raise ConfigError(f"metric {name!r} is cut by {table}.{column}, which is "
                              "restricted: no tool may expose it.",
                              where=ctx.project.where("metrics", name, "dimensions"),
                              hint="Remove the dimension or the restriction.")
    props: dict[str, Any] = {}
    filters: list[Filter] = []
    dim_profiles: list[ColumnProfile] = []
    for table, column in dims:
        prof = ctx.profiles[table].column(column)
        dim_profiles.append(prof)
        props[column] = param_schema(ctx, table, prof, learned=False)
        head = props[column].get("description", "").rstrip(".")
        props[column]["description"] = sentence(f"{head}; omit for every value" if head
                                                else "Omit for every value")
        filters.append(Filter(param=column, column=f"{table}.{column}", op="eq",
                              several=enum_of(props[column]) is not None))
    kind = _window_kind(m)
    table, _, tcol = (m.time or "").partition(".")
    tp = ctx.config.products.get(table)
    fmt = tp.time_format(tcol) if tp else None
    window = Window(kind=kind, column=m.time, end_column=m.time_end, calendar=m.calendar,
                    format=fmt, held_as=held_as(tp, tcol, ctx.profiles[table].columns)
                    if tp and fmt else None)
    if kind == "period":
        props["period"] = period_param(ctx, m.calendar, "this_quarter (none there: the latest "
                                       "quarter with rows)", m.time or "", fmt=fmt)
    elif kind == "trailing":
        props["period"] = period_param(ctx, m.calendar, f"last_{window.default_days}_days",
                                       m.time or "", fmt=fmt)
    measures = {name: (m.measure, m.unit, humanize(name))}
    for oname, o in m.outputs.items():
        measures[oname] = (o.sql, o.unit, o.description or humanize(oname))
    rows: dict[str, Any] = {}
    for (_, column), prof in zip(dims, dim_profiles, strict=True):
        rows[column] = _dimension_schema(prof)
    if kind in ("period", "trailing"):
        rows["period"] = {"type": "string", "description": "The window's label."}
    dialect = ctx.dialect(products[0])
    for mname, (sql, unit, desc) in measures.items():
        rows[mname] = measure_schema(ctx, sql, unit, products, dialect)
        rows[mname]["description"] = sentence(f"{desc.rstrip('.')}; {unit_note(unit)}")
    max_rows = 1
    for prof in dim_profiles:
        max_rows *= len(prof.enum) if prof.enum else METRIC_MAX_ROWS
    max_rows = min(max_rows, METRIC_MAX_ROWS, ctx.config.serve.max_result_rows)
    fresh = _freshness_columns(ctx, products)
    out = envelope(rows, f"Oldest of the newest {join_words(fresh)}." if fresh else "Load time.",
                    paged=False)
    sentences = _metric_sentences(ctx, name, m, kind, dims, max_rows, props)
    description, sources = join_sentences(sentences)
    select = from_clause(ctx.config, products, dialect)
    # dimension aliases quoted: PostgreSQL folds an unquoted one to lower case (groupID -> groupid)
    select = select.select(*[qualified(f"{t}.{c}").as_(c, quoted=True) for t, c in dims],
                           append=False)
    for mname, (sql, _, _) in measures.items():  # quoted: PostgreSQL folds an unquoted alias
        select = select.select(parse(sql, dialect).as_(mname, quoted=True))
    if m.predicate:
        select = select.where(parse(m.predicate, dialect))
        named = predicate_values(m.predicate, dialect)
        for f in filters:
            seen = {str(v) for v in enum_of(props[f.param]) or []}
            f.declared = sorted(v for v in named.get(f.column, set()) if v not in seen)
    for f, prof, (table, _) in zip(filters, dim_profiles, dims, strict=True):
        if f.several:
            f.declared = sorted(set(f.declared) | set(declared_unseen(ctx.config, table, prof)))
    if dims:
        select = select.group_by(*[qualified(f"{t}.{c}") for t, c in dims])
    plan = QueryPlan(kind="metric", product=products[0], source=ctx.project.source_name(products[0]),
                     dialect=dialect, select=select.sql(dialect=dialect), filters=filters,
                     max_rows=max_rows,
                     window=window, group_by=[c for _, c in dims], output_fields=list(rows),
                     units={k: u for k, (_, u, _) in measures.items() if u and u != "none"},
                     definition=_definition_applied(ctx, m))
    terms = [m.term] if m.term else []
    meta = tool_meta(ctx, "metric", sentences, sources, products, definitions=terms,
                 source_of_truth={k: f"metric:{name}" for k in measures},
                 canonical_ids={}, deprecated={},
                 limits={"max_rows": max_rows,
                         "max_bytes": ctx.config.serve.max_result_bytes, "pagination": "none"},
                 fields=_metric_fields(m, filters, measures, dialect, list(props)))
    return GeneratedTool(
        name=ctx.tool_names["metric:" + name], title=m.description, description=description,
        input_schema=closed(props), output_schema=out,
        annotations=dict(READ_ONLY), meta=meta, plan=plan,
    )


_ANY_VALUE = {"type": ["number", "string", "boolean", "null"]}
"""A measure whose type cannot be worked out (a function sqlglot does not type): any scalar."""


def measure_schema(ctx: Ctx, sql: str, unit: str | None, products: list[str], dialect: str
                   ) -> dict[str, Any]:
    """The JSON Schema of one measure's value, from its SQL type: the expression typed by
    sqlglot against the columns the profiles describe (``max`` of a text column is a string,
    ``count`` an integer, a ratio a number), NULL allowed unless the expression can never be
    NULL (a count, a COALESCE with a literal). A unit naming a timestamp still makes it one."""
    found = _measure_kind(ctx, sql, products, dialect)
    if found in (None, "other", "json", "struct", "map", "list"):
        schema: dict[str, Any] = dict(_ANY_VALUE)
        if unit and "timestamp" in unit:
            schema = {"type": "string", "format": "date-time"}
    else:
        schema = json_type(found)
    try:
        nullable = not _never_null(parse(sql, dialect))
    except sqlglot.errors.SqlglotError:
        nullable = True
    kinds = schema.get("type")
    if nullable and isinstance(kinds, str):
        schema["type"] = [kinds, "null"]
    return schema


def _measure_kind(ctx: Ctx, sql: str, products: list[str], dialect: str) -> TypeKind | None:
    """The kind of a measure's value, or None when it cannot be worked out."""
    schema: dict[str, object] = {p: {
        c.column.name: _SQLGLOT_TYPES.get(c.column.kind, "UNKNOWN")
        for c in ctx.profiles[p].columns} for p in products if p in ctx.profiles}
    try:
        select = exp.select(parse(sql, dialect).as_("v")).from_(exp.to_table(products[0]))
        for p in products[1:]:
            select = select.join(exp.to_table(p))
        typed = annotate_types(qualify(select, schema=schema, dialect=dialect,
                                       validate_qualify_columns=False),
                               schema=schema, dialect=dialect)
    except (sqlglot.errors.SqlglotError, KeyError, ValueError):
        return None
    found = typed.selects[0].type
    if found is None or found.is_type(exp.DataType.Type.UNKNOWN):
        return None
    return kind_of(found.sql(dialect=dialect))


_SQLGLOT_TYPES: dict[str, str] = {
    "string": "TEXT", "uuid": "UUID", "integer": "BIGINT", "decimal": "DECIMAL(38, 9)",
    "float": "DOUBLE", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ", "time": "TIME", "interval": "INTERVAL"}
"""A column's kind as sqlglot types it (the engine's own type names vary by engine)."""


def _never_null(e: exp.Expr) -> bool:
    """True when the expression's value is never NULL: a count, a non-null literal, COALESCE
    with such an argument, and sums, differences and products of those (never a division: a
    divisor of 0 is NULL on DuckDB)."""
    if isinstance(e, exp.Paren | exp.Alias):
        return _never_null(e.this)
    if isinstance(e, exp.Count):
        return True
    if isinstance(e, exp.Filter):  # count(*) FILTER (WHERE ...)
        return _never_null(e.this)
    if isinstance(e, exp.Literal):
        return True
    if isinstance(e, exp.Cast):
        return _never_null(e.this)
    if isinstance(e, exp.Coalesce):
        return any(_never_null(a) for a in [e.this, *e.expressions])
    if isinstance(e, exp.Add | exp.Sub | exp.Mul):
        return _never_null(e.this) and _never_null(e.expression)
    return False


def _dimension_schema(prof: ColumnProfile) -> dict[str, Any]:
    """A dimension's values as the column holds them (text, a number, a date), NULL allowed
    where the data holds one (a NULL is a group of its own)."""
    kind = prof.column.kind
    schema: dict[str, Any] = {"type": json_type(kind)["type"]} if kind in _SCALAR_KINDS else {
        "type": "string"}
    if prof.null_fraction:
        schema["type"] = [schema["type"], "null"]
    return schema


_SCALAR_KINDS = frozenset({"string", "uuid", "integer", "decimal", "float", "boolean", "date",
                           "timestamp", "timestamptz", "time"})


def predicate_values(predicate: str, dialect: str) -> dict[str, set[str]]:
    """``table.column`` -> the string values a governed predicate compares it with (``IN``
    lists and ``=``): values the definition names, whether or not the data holds them."""
    out: dict[str, set[str]] = {}
    for node in parse(predicate, dialect).find_all(exp.In, exp.EQ):
        if isinstance(node.parent, exp.Not):
            continue  # values it excludes are not values it names
        col = node.this if isinstance(node.this, exp.Column) else None
        if isinstance(node, exp.EQ) and col is None:
            col = node.expression if isinstance(node.expression, exp.Column) else None
        if col is None or not col.table:
            continue
        values = (node.expressions if isinstance(node, exp.In)
                  else [node.expression if node.this is col else node.this])
        out.setdefault(f"{col.table}.{col.name}", set()).update(
            v.this for v in values if isinstance(v, exp.Literal) and v.is_string)
    return out


def _definition_applied(ctx: Ctx, m: MetricConfig) -> str | None:
    """What each answer of the metric states as the definition it applied: the governed
    term's definition, else the metric's own description."""
    term = ctx.config.glossary.get(m.term or "")
    if term is not None:
        return f"{m.term}: {term.definition.rstrip('.')}"
    return m.description.rstrip(".") if m.description else None


def _metric_fields(m: MetricConfig, filters: list[Filter],
                   measures: dict[str, tuple[str, str | None, str]], dialect: str,
                   params: list[str]) -> dict[str, Any]:
    """Which source fields each argument reads and which the tool applies by itself (measure,
    governed predicate, metric time): what an evaluation counts as the fields a call used."""
    window = [c for c in (m.time, m.time_end) if c]
    args: dict[str, str | list[str]] = {f.param: f.column for f in filters}
    if "period" in params:
        args["period"] = window
    governed: set[str] = set(window)
    for sql in [m.predicate or "", *[s for s, _, _ in measures.values()]]:
        if sql:
            governed |= {f"{c.table}.{c.name}" for c in parse(sql, dialect).find_all(exp.Column)
                         if c.table}
    return {"arguments": args, "governed": sorted(governed)}


def _freshness_columns(ctx: Ctx, products: list[str]) -> list[str]:
    out = []
    for p in products:
        f = ctx.config.products[p].freshness
        if f and f.column:
            out.append(f"{p}.{f.column}")
    return out


def _metric_sentences(ctx: Ctx, name: str, m: MetricConfig, kind: str,
                      dims: list[list[str]], max_rows: int, props: dict[str, Any]
                      ) -> list[Sentence]:
    term = ctx.config.glossary.get(m.term or "")
    by = f", by {join_words([c for _, c in dims])}" if dims else ""
    s1 = (m.description or humanize(name)).rstrip(".")
    if by and by.strip(", ").replace("_", " ") not in s1.replace("_", " "):
        s1 += by
    lookalikes = _lookalike_columns(ctx, m)
    if lookalikes:
        s1 += f"; use it, not {join_words(lookalikes)}, for any {m.term} question"
    source, origin = ctx.said("glossary", "metrics", name, "description")
    out = [Sentence(text=sentence(s1), source=source, origin=origin)]
    when = {"period": "over a period (default: this quarter, else the latest with rows)",
            "trailing": f"over a period (default: the last {Window(kind='trailing').default_days} "
                        "days)",
            "current": "as of now, no time window"}[kind]
    out.append(Sentence(text=sentence(
        f"Values are in {_metric_units(m)}, {when}; read-only, at most "
        f"{max_rows} rows (one per {join_words([c for _, c in dims]) or 'call'}), no pagination"),
        source="schema"))
    if term:
        source, origin = ctx.said("glossary", "glossary", m.term or "", "definition")
        said = words_said(ctx.project, term.definition, "glossary", m.term or "", "definition")
        out.append(Sentence(text=sentence(f"Governed definition of {m.term}: {said}"),
                            source=source, origin=origin))
    if m.time:
        source, origin = ctx.said("glossary", "metrics", name, "time")
        out.append(Sentence(text=sentence(
            f"Time is {m.time}" + (f" to {m.time_end} (a row counts if it overlaps)"
                                   if m.time_end else "")), source=source, origin=origin))
    for table in sorted({t for t, _ in dims}):
        policy = policy_sentence(ctx, table, with_masks=False)  # aggregates show no masked value
        if policy:
            out.append(policy)
            break
    return out


def _metric_units(m: MetricConfig) -> str:
    units = [m.unit or "numbers"]
    for o in m.outputs.values():
        if o.unit and "timestamp" not in o.unit and o.unit not in units:
            units.append(o.unit)
    return join_words(units)


def _lookalike_columns(ctx: Ctx, m: MetricConfig) -> list[str]:
    """Columns whose names sound like the metric's term but are not what it is defined on."""
    term = ctx.config.glossary.get(m.term or "")
    if not term:
        return []
    words = {w for phrase in [m.term or "", *term.synonyms] for w in re.findall(r"[a-z]+", phrase)
             if len(w) > 3}
    governed = set(term.fields) | {m.time or "", m.time_end or ""}
    out = []
    for product, prof in ctx.profiles.items():
        for c in prof.columns:
            full = f"{product}.{c.column.name}"
            tokens = set(re.findall(r"[a-z]+", c.column.name))
            if tokens & words and full not in governed and c.column.kind == "boolean":
                out.append(full)
    return sorted(out)


def _generate(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [metric_tool(ctx, n) for n in ctx.config.metrics]


METRIC_KIND = register(Kind("metric", generate=_generate, narrowed="values", searchable=True))
