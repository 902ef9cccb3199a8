"""The listing kind: one tool per data product, returning its rows under the caller's policy,
with its filters, period, counts, totals and cursor paging."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tether.config import ProductConfig
from tether.context.config_model import api_product
from tether.context.meta import enum_of
from tether.context.names import column_prefix, date_part, key_grain, ref, words_of
from tether.context.profile import ColumnProfile
from tether.context.timeformat import says
from tether.errors import ConfigError
from tether.plan.paths import Hop, hops, path_of
from tether.profiling.formats import is_money
from tether.toolgen.describe import (
    grain_noun,
    join_words,
    plural,
    sentence,
    singular,
    split_sentences,
)
from tether.toolgen.kinds import Kind, register
from tether.toolgen.model import (
    AGGREGATE,
    RANGE,
    READ_ONLY,
    Filter,
    GeneratedTool,
    PathHop,
    QueryPlan,
    Sentence,
    Window,
    join_sentences,
)
from tether.toolgen.plan import from_clause, words_calendar
from tether.toolgen.provenance import declared_unseen, field_origins, note_said
from tether.toolgen.shared import (
    NO_UNIT,
    UNSTATED_MONEY,
    Ctx,
    child_product,
    closed,
    counted_number,
    counts_by,
    crosswalk_tool,
    each_rows,
    envelope,
    filter_columns,
    held_as,
    id_routes,
    not_a_quantity,
    output_rows,
    param_names,
    param_schema,
    period_param,
    policy_sentence,
    reference,
    safe_name,
    scoped_examples,
    size_words,
    tool_meta,
    visible_columns,
)


def listing_tool(ctx: Ctx, name: str) -> GeneratedTool:
    p: ProductConfig = ctx.config.products[name]
    cols = visible_columns(ctx, name)
    serve = ctx.config.serve
    max_rows = min(p.tool.max_rows if p.tool else 200, serve.max_result_rows)
    props: dict[str, Any] = {}
    filters: list[Filter] = []
    countable: list[str] = []
    # a whole key counts one row per value; a part of a composite one counts its groups
    whole_key = p.primary_key if len(p.primary_key) == 1 else []
    filtered = filter_columns(ctx, name, cols)
    pnames = param_names(p, [c.column.name for c in filtered])
    for c in filtered:
        pname = pnames[c.column.name]
        routes = id_routes(ctx, name, c.column.name) if c.column.name in p.identifiers else []
        props[pname] = param_schema(ctx, name, c, routes)
        resolver = next((ctx.tool_names.get(r.via) for r in routes if r.via), None)
        several = enum_of(props[pname]) is not None
        filters.append(Filter(param=pname, column=ref(name, *c.column.parts),
                              op="ieq" if _names_rows(p, c) else "eq",
                              routes=routes if len(routes) > 1 else [], resolver=resolver,
                              several=several,
                              declared=declared_unseen(ctx.config, name, c) if several else [],
                              examples=scoped_examples(ctx, name, c, props[pname])))
        # never the whole key (one each)
        if c.column.name not in whole_key and len(routes) <= 1 and counts_by(ctx, name, c):
            countable.append(pname)
    countable += [c.column.name for c in cols if counted_number(ctx, name, c)
                  and c.column.name not in countable]
    reach = reachable(ctx, name)
    chosen = p.tool.filters if p.tool else None
    reached = _reached_filters(ctx, reach, props, filters, countable, chosen)
    missing = [n for n in chosen or [] if "." in n and n not in reached]
    if missing:
        raise ConfigError(f"products.{name}.tool.filters names {', '.join(missing)}: no path "
                          "of this product reaches it (PATH.column, within "
                          "serve.max_path_hops).",
                          hint="Paths: " + (", ".join(reached) or "none") + ".")
    t = p.metric_time
    window = None
    if t:
        tz = p.zone(t)
        words = words_calendar(ctx.config)
        props["period"] = period_param(ctx, words, None, t, tz, p.time_format(t))
        window = Window(kind="listing", column=ref(name, t), timezone=tz, calendar=words,
                        format=p.time_format(t), held_as=held_as(p, t, cols))
    elif p.metric_time_via:
        window = _time_through(ctx, name, p.metric_time_via, reach, props)
    summable = _summable(ctx, name, p, cols)
    # their names say what they do (and the result's first line says what was counted)
    if countable:
        props["count_by"] = {"type": "string", "enum": countable}
    if summable:
        props[AGGREGATE] = {"type": "string", "enum": summable}
    orderable = _sortable(cols) + [path_of(h.alias, c) for h in reach
                                   for c in _sortable(visible_columns(ctx, h.product))]
    bounded = _boundable(ctx, name, cols) + [
        path_of(h.alias, c) for h in reach
        for c in _boundable(ctx, h.product, visible_columns(ctx, h.product))]
    if bounded:
        props[RANGE] = range_schema()
    props.update(order_schema(bool(countable or summable)))
    props["limit"] = {"type": "integer", "minimum": 1, "maximum": max_rows,
                      "default": min(50, max_rows)}
    props["cursor"] = {"type": "string", "description": "From next_cursor."}
    fresh = p.freshness.column if p.freshness and p.freshness.column else None
    out = envelope(output_rows(ctx, name, cols),
                    f"Newest {fresh}." if fresh else "Load time.", paged=True)
    sentences = _listing_sentences(ctx, name, p, cols, max_rows)
    if reached:
        sentences.insert(2, _reach_sentence(ctx, reach, reached))
    description, sources = join_sentences(sentences)
    select = exp.select(*[exp.column(c.column.head, table=name, quoted=True)
                          for c in _top_level(cols)]).from_(_alias_table(ctx, name))
    dialect = ctx.dialect(name)
    plan = QueryPlan(kind="list", product=name, source=ctx.project.source_name(name),
                     dialect=dialect, select=select.sql(dialect=dialect), filters=filters,
                     order_by=[ref(name, k) for k in (p.primary_key or _sortable(cols))],
                     paging="keyset" if p.primary_key else "offset",
                     max_rows=max_rows, default_rows=min(50, max_rows),
                     masks_apply_to=name, window=window, units=column_units(p, cols),
                     aggregates=summable, counts=countable, orderable=orderable,
                     ranges=bounded,
                     hops=[PathHop(alias=h.alias, product=h.product, parent=h.parent,
                                   column=h.column, key=h.key) for h in reach]
                     + [PathHop(alias=h.alias, product=h.product, parent=h.parent,
                                column=h.column, key=h.key, label_only=True)
                        for h in label_edge(ctx, name, reach)])
    meta = tool_meta(ctx, "list", sentences, sources, [name],
                 source_of_truth={c.column.name: f"{name}.{c.column.name}" for c in cols},
                 canonical_ids={pnames.get(c) or safe_name(s): s
                                for c, s in p.identifiers.items()
                                if c in {x.column.name for x in cols}},
                 deprecated={pnames[c.column.name]: [str(e.value) for e in c.enum or []
                                                               if e.deprecated]
                             for c in cols if c.column.name in pnames
                             and any(e.deprecated for e in c.enum or [])},
                 limits={"max_rows": max_rows, "max_bytes": serve.max_result_bytes,
                         "pagination": "cursor"},
                 fields={"arguments": {f.param: f.column for f in filters}
                         | ({"period": window.column} if window and window.column else {}),
                         "governed": []},
                 fields_from=field_origins(ctx.project, name, cols))
    return GeneratedTool(
        name=ctx.tool_names[name], title=(p.tool.question if p.tool else None),
        description=description, input_schema=closed(props),
        output_schema=out, annotations=dict(READ_ONLY), meta=meta, plan=plan,
    )


_NUMERIC = ("integer", "decimal", "float")


def reachable(ctx: Ctx, name: str, most: int | None = None) -> list[Hop]:
    """The relationships a listing of ``name`` may follow (plan/paths.py), to products with a
    profile (what their columns are is known) and a table of the same source; ``most`` hops
    (default serve.max_path_hops)."""
    source = ctx.project.source_name(name)
    def columns(product: str) -> list[str]:
        prof = ctx.profiles.get(product)
        return [c.column.name for c in prof.columns if not c.column.nested] if prof else []
    return [h for h in hops(ctx.config, name, most, columns=columns) if h.product in ctx.profiles
            and ctx.project.source_name(h.product) == source
            and not api_product(ctx.config, h.product)]


def label_edge(ctx: Ctx, name: str, reach: list[Hop]) -> list[Hop]:
    """The hops one past the reach to a product with a label: a key at the end of the reach
    (a nation's region key, two hops from a line) is grouped with its referent's name beside
    it, though no filter or order goes that far."""
    most = ctx.config.serve.max_path_hops
    ends = {h.alias for h in reach if h.alias.count(".") == most - 1}
    if not ends:
        return []
    return [h for h in reachable(ctx, name, most + 1)
            if h.parent in ends and ctx.config.products[h.product].label]


def _reached_filters(ctx: Ctx, found: list[Hop], props: dict[str, Any], filters: list[Filter],
                     countable: list[str], named: list[str] | None = None) -> list[str]:
    """Each product a hop reaches lends the listing its filters (its enums, identifiers and
    references, not the key the hop joined on), as parameters named by their path with ``_``
    (``shelf_aisle``), and count_by values by their path (``shelf.aisle``).
    ``named``: the tool's filters tether.yaml names, where it names them: a path's parameter
    only if named there by its path (``patients.home_district``); count_by and order_by still
    take every path. The paths offered, in order."""
    out = []
    for h in found:
        cols = visible_columns(ctx, h.product)
        parent = ctx.config.products[h.product]
        countable += [path_of(h.alias, c.column.name) for c in cols
                      if counted_number(ctx, h.product, c)]
        for c in filter_columns(ctx, h.product, cols):
            if c.column.name == h.key or c.column.nested:
                continue
            path = path_of(h.alias, c.column.name)
            if c.column.name not in parent.primary_key and (
                    counts_by(ctx, h.product, c) or c.column.name == parent.label):
                countable.append(path)
            out.append(path)
            if named is not None and path not in named:
                continue
            base = safe_name(path)
            pname, n = base, 2
            while pname in props:
                pname, n = f"{base}_{n}", n + 1
            schema = param_schema(ctx, h.product, c, [])
            said = str(schema.get("description", "")).rstrip(".")
            schema["description"] = sentence(
                f"{path}: the {c.column.name} of the {h.alias} a row points to"
                + (f"; {said[0].lower()}{said[1:]}" if said else ""))
            props[pname] = schema
            filters.append(Filter(param=pname, column=ref(h.product, *c.column.parts),
                                  op="ieq" if _names_rows(parent, c) else "eq",
                                  several=enum_of(schema) is not None, alias=h.alias,
                                  examples=scoped_examples(ctx, h.product, c, schema)))
    return out


def _time_through(ctx: Ctx, name: str, via: str, reach: list[Hop], props: dict[str, Any]
                  ) -> Window | None:
    """A fact's time through its key into a date table (``metric_time_via``): ``period``
    bounds the metric_time of the row ``via`` points to, that row's product joined when a
    period is given. None where no hop of that column reaches a product with a metric time."""
    hop = next((h for h in reach if h.parent == name and h.column == via), None)
    if hop is None:
        raise ConfigError(f"products.{name}.metric_time_via: {via} refers to no product with a "
                          "key (by a relationship or by the key's name).",
                          hint="Name a column of the product that holds another product's "
                          "key, or declare that relationship in tether.yaml.")
    target = ctx.config.products[hop.product]
    t = target.metric_time
    if t is None:
        raise ConfigError(f"products.{name}.metric_time_via: {hop.product}, which {via} points "
                          "to, has no metric_time.", hint=f"Give {hop.product} a metric_time.")
    tz = target.zone(t)
    said = f"the {t} of the {hop.product} row {via} points to"
    words = words_calendar(ctx.config)
    props["period"] = period_param(ctx, words, None, said, tz, target.time_format(t))
    return Window(kind="listing", column=ref(hop.alias, t), timezone=tz, calendar=words,
                  format=target.time_format(t),
                  held_as=held_as(target, t, visible_columns(ctx, hop.product)), via=hop.alias)


def _names_rows(p: ProductConfig, c: ColumnProfile) -> bool:
    """The product's label, of too many values to list: a name, matched in any case."""
    return c.column.name == p.label and c.enum is None and c.column.kind == "string"


UNSEEN_REFERENT = "; a row whose referent you may not see has no value there"
"""Said where some role's row filter narrows a product a path reaches (serve/peruser.py
keeps it only for such a caller)."""


def _reach_sentence(ctx: Ctx, found: list[Hop], reached: list[str]) -> Sentence:
    """How to reach what the rows point to (no product named: the paths a caller may not
    follow leave their list, serve/peruser.py)."""
    most = max(h.alias.count(".") + 1 for h in found)
    filtered = any(h.product in role.row_filters for role in ctx.config.policies.roles.values()
                   for h in found)
    return Sentence(text=sentence(
        "A parameter named PATH_column filters by a column of the row each row points to "
        f"(relationships in tether.yaml, up to {most} hop{'s' if most > 1 else ''}), and "
        "count_by and order_by take "
        "PATH.column" + (UNSEEN_REFERENT if filtered else "")), source="schema")


def column_units(p: ProductConfig, cols: list[ColumnProfile]) -> dict[str, str]:
    """The unit of each top-level numeric field, as results state it (keys have none, and
    neither has a value declared dimensionless or a column no evidence gives a unit)."""
    return {c.column.name: c.unit_hint for c in cols
            if not c.column.nested and c.column.kind in _NUMERIC and c.unit_hint
            and c.unit_hint != "none" and c.column.name not in p.primary_key
            and c.column.name not in p.identifiers}


def _summable(ctx: Ctx, name: str, p: ProductConfig, cols: list[ColumnProfile]) -> list[str]:
    """Numeric columns whose total and mean mean something (sum_and_average_of): no number
    that names a thing (shared.not_a_quantity), no time held as a number (a year) and no part
    of a date its name says it is (``month``, ``birth_day``)."""
    return [c.column.name for c in cols
            if not c.column.nested and c.column.kind in _NUMERIC
            and not not_a_quantity(ctx, name, c.column.name) and not date_part(c.column.name)
            and c.column.name not in p.time_columns]


def order_schema(measures: bool) -> dict[str, Any]:
    """``order_by`` and ``order``: the top N of any column in one call (and, where the tool
    counts or totals, the largest groups); the default direction said in a few tokens."""
    said = ("Sort by a column (asc), or by count, sum_of_COLUMN or avg_of_COLUMN (desc)"
            if measures else "A column to sort by (asc)")
    return {"order_by": {"type": "string", "description": said},
            "order": {"type": "string", "enum": ["desc", "asc"]}}


def _boundable(ctx: Ctx, name: str, cols: list[ColumnProfile]) -> list[str]:
    """Numeric columns a ``range`` may bound (a year held as a number among them): not a key,
    an identifier or a reference, whose order means nothing."""
    p = ctx.config.products[name]
    return [c.column.name for c in cols
            if not c.column.nested and c.column.kind in _NUMERIC
            and c.column.name not in p.primary_key and c.column.name not in p.identifiers
            and reference(ctx, name, c.column.name) is None]


def range_schema() -> dict[str, Any]:
    """``range``: numbers bounded in one call (a plane built before 1970, a distance over 1000),
    of the rows or of what they point to; the forms said in a few tokens."""
    return {"type": "object", "description": 'Bounds numbers: {"COLUMN or PATH.column": '
            '"5..9"}, ends included ("..9", "5.." too; ">5", "<9" without the end).'}


def _sortable(cols: list[ColumnProfile]) -> list[str]:
    """Without a primary key, pages are keyed on every plain top-level column."""
    return [c.column.name for c in cols if not c.column.nested
            and c.column.kind not in ("struct", "list", "map", "json", "binary")]


def _top_level(cols: list[ColumnProfile]) -> list[ColumnProfile]:
    seen: set[str] = set()
    out = []
    for c in cols:
        head = c.column.head
        if head not in seen:
            seen.add(head)
            out.append(c)
    return out


def _alias_table(ctx: Ctx, product: str) -> exp.Expr:
    table: exp.Expr = from_clause(ctx.config, [product], ctx.dialect(product)).args["from_"].this
    return table


def _units_phrase(cols: list[ColumnProfile], p: ProductConfig,
                  quantities: list[str] | None = None) -> str:
    """Money in its units, and each quantity (a column sum_and_average_of takes) with no known
    unit, "no known unit for X" (never "no amounts" over a number that may be one); else "no
    amounts"."""
    money = sorted({c.unit_hint for c in cols if c.unit_hint and is_money(c.unit_hint)})
    per_row = sorted({c.unit_hint for c in cols if c.unit_hint and "{" in c.unit_hint})
    hints = {c.column.name: c.unit_hint for c in cols}
    unknown = [q for q in quantities or [] if not hints.get(q)]
    named = [m for m in money if m not in UNSTATED_MONEY and "{" not in m]
    per_row = sorted({each_rows(u) for u in per_row})
    parts = [f"amounts are in {join_words(named + per_row)}"] if named or per_row else []
    if any(m in UNSTATED_MONEY for m in money):  # money by its name, in no stated currency
        parts.append("the currency of " + join_words(
            [c.column.name for c in cols if c.unit_hint in UNSTATED_MONEY][:3])
            + " is not stated in the data")
    if unknown:
        shown = unknown[:3] + ([f"{len(unknown) - 3} more"] if len(unknown) > 3 else [])
        parts.append(f"{NO_UNIT} for {join_words(shown)}")
    parts = parts or ["no amounts"]
    zones = sorted({tz for c, tz in p.time_columns.items() if not p.time_format(c)})
    if zones:
        parts.append(f"times are {join_words(zones)}")
    parts += [says(c, f) for c in p.time_columns if (f := p.time_format(c))]
    return ", ".join(parts)


def _listing_sentences(ctx: Ctx, name: str, p: ProductConfig, cols: list[ColumnProfile],
                       max_rows: int) -> list[Sentence]:
    noun = grain_noun(p.grain, name)
    words = words_of(name)
    if p.grain:
        question, each = f"Which {plural(noun)} match", f"one row per {noun}"
    elif len(p.primary_key) > 1:  # a composite key says the grain (context/names.py)
        question, each = f"Which rows of {words} match", str(key_grain(
            p.primary_key, column_prefix([c.column.name for c in cols])))
    elif words.endswith("s") and not words.endswith("ss"):  # a plural table name: a noun
        question, each = f"Which {words} match", f"one row per {singular(words)}"
    else:  # a mass noun ("weather", "inventory"): no plural is made up
        question, each = f"Which rows of {words} match", "one row each"
    if p.tool and p.tool.question:
        question = p.tool.question
    narrowed = bool(p.metric_time) or bool(filter_columns(ctx, name, cols))
    # a filter the question does not name is left out: the text makes that the obvious default
    s1 = f"{question.rstrip('?')}: {each}" + (
        ", narrowed by any parameter (omit one for all)" if narrowed else "")
    siblings = _metric_siblings(ctx, name)
    if siblings:
        s1 += "; " + "; ".join(siblings)
    # written by a person (a grain or question in tether.yaml), else made from the table's name
    said = "glossary" if p.grain or (p.tool and p.tool.question) else "schema"
    out = [Sentence(text=sentence(s1), source=said)]
    out.append(Sentence(text=sentence(
        f"{_units_phrase(cols, p, _summable(ctx, name, p, cols))}; read-only, at most "
        f"{max_rows} rows or "
        f"{size_words(ctx.config.serve.max_result_bytes)} a page, cursor paging"),
        source="schema"))
    if p.description:
        source, origin = ctx.said("glossary", "products", name, "description")
        out += [Sentence(text=sentence(x), source=source, origin=origin)
                for x in split_sentences(p.description)]
    child = child_product(ctx, name)
    if child:
        out.append(Sentence(text=sentence(
            f"Line-level detail is in {ctx.tool_names[child]}; joining it repeats each {noun} "
            "once per line, so never sum this product's amounts after that join"), source="schema"))
    for column, scheme in p.identifiers.items():
        cross = crosswalk_tool(ctx, scheme)
        if len(id_routes(ctx, name, column)) > 1 and column in {
                f.column.name for f in filter_columns(ctx, name, cols)}:
            continue  # its parameter takes every scheme: nothing to map by hand
        if cross and cross != ctx.tool_names[name]:
            held = "" if column == scheme else f"{column} holds {scheme} values; "
            out.append(Sentence(text=sentence(f"{held}map it to the other id schemes with {cross}"),
                                source="lineage"))
    for note in p.notes:  # how to call it, learned from calls or typed
        source, origin = note_said(ctx.project, "glossary", note, "products", name, "notes")
        out.append(Sentence(text=sentence(note), source=source, origin=origin))
    policy = policy_sentence(ctx, name)
    if policy:
        out.append(policy)
    return out


def _metric_siblings(ctx: Ctx, product: str) -> list[str]:
    out = []
    reads = ctx.metric_reads()
    for mname, m in ctx.config.metrics.items():
        if product in reads[mname]:
            term = m.term or mname.replace("_", " ")
            out.append(f"for {term} use {ctx.tool_names['metric:' + mname]}")
    return out


def _generate(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [listing_tool(ctx, n) for n in ctx.config.products
            if n in ctx.profiles and not api_product(ctx.config, n)]


LISTING_KIND = register(Kind("list", generate=_generate, listing=True, narrowed="values",
                             searchable=True, bare="query"))
