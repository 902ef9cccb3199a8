"""Context -> grounded MCP tool definitions and their query plans.

Three kinds of tool: one listing tool per data product, one task tool per governed metric, and
one probe for progressive disclosure. Every sentence of every description records its source.
Restricted columns never reach a definition or a plan. Output is deterministic: tools sorted by
name, schemas built in a fixed order.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from tether.config import MetricConfig, ProductConfig, Project, TetherConfig
from tether.context.meta import enum_of
from tether.context.periods import resolve
from tether.context.profile import ColumnProfile, ProductProfile
from tether.errors import ConfigError
from tether.policy import restricted_columns
from tether.profiling.formats import is_money
from tether.sources import dialect_of
from tether.toolgen.describe import (
    enum_note,
    grain_noun,
    humanize,
    join_words,
    json_type,
    plural,
    sentence,
    singular,
    split_sentences,
)
from tether.toolgen.discovery import PROBE, product_param, rows_tool, search_tool
from tether.toolgen.model import (
    AGGREGATE,
    META_KEY,
    READ_ONLY,
    Filter,
    GeneratedTool,
    QueryPlan,
    Route,
    Sentence,
    Source,
    Window,
    join_sentences,
    sentence_origins,
)
from tether.toolgen.plan import fiscal_calendar, from_clause, parse, qualified
from tether.toolgen.provenance import declared_unseen, field_origins, said, upstream_versions

METRIC_MAX_ROWS = 1000
"""A metric cut by a dimension that is not an enum returns at most this many rows."""
UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
UUID_SHAPE = "^[0-9a-f-]{36}$"


@dataclass
class Ctx:
    project: Project
    profiles: dict[str, ProductProfile]
    tool_names: dict[str, str] = field(default_factory=dict)  # product or metric -> tool name

    @property
    def config(self) -> TetherConfig:
        return self.project.config

    def said(self, default: Source, *path: str | int) -> tuple[Source, str | None]:
        return said(self.project, default, *path)

    def dialect(self, product: str) -> str:
        """The sqlglot dialect of the product's source, from its URL (no connection)."""
        url = self.config.sources[self.project.source_name(product)].url
        return dialect_of(url)


def generate_grounded(project: Project, profiles: dict[str, ProductProfile]) -> list[GeneratedTool]:
    """Every grounded tool of the project, sorted by name."""
    ctx = Ctx(project, profiles)
    for name, p in project.config.products.items():
        ctx.tool_names[name] = product_tool_name(name, p)
    for name, m in project.config.metrics.items():
        ctx.tool_names[f"metric:{name}"] = (m.tool.name if m.tool and m.tool.name else name)
    _no_duplicate_names(project, ctx.tool_names)
    tools = [listing_tool(ctx, n) for n in project.config.products if n in profiles]
    tools += [metric_tool(ctx, n) for n in project.config.metrics]
    tools.append(probe_tool(ctx))
    # discovery: served where some product has no dedicated tool (toolgen/discovery.py)
    products = sorted(ctx.profiles)

    def meta(kind: str, sentences: list[Sentence], sources: dict[str, str],
             limits: dict[str, Any]) -> dict[str, Any]:  # as the probe's: over every product
        return _meta(ctx, kind, sentences, sources, products, canonical_ids={}, deprecated={},
                     source_of_truth={}, limits=limits, definitions=[])

    tools += [search_tool(bool(project.config.glossary), meta),
              rows_tool(sorted(t.plan.product for t in tools
                               if t.plan.kind == "list" and t.plan.product), meta)]
    return sorted(tools, key=lambda t: t.name)


def _no_duplicate_names(project: Project, names: dict[str, str]) -> None:
    seen: dict[str, str] = {}
    for owner, tool in names.items():
        if tool in seen:
            raise ConfigError(
                f"two tools would be named {tool!r}: {seen[tool]} and {owner}.",
                where=project.path.name, hint="Give one of them another tool: {name: ...}.")
        seen[tool] = owner


def product_tool_name(name: str, p: ProductConfig) -> str:
    if p.tool and p.tool.name:
        return p.tool.name
    if p.tool and p.tool.question:
        words = re.findall(r"[a-z0-9]+", p.tool.question.lower())
        named = "_".join(w for w in words if w not in {"which", "what", "the", "a", "an", "are",
                                                       "is", "do", "does"})[:60].strip("_")
        if re.fullmatch(r"[a-z][a-z0-9_]*", named):
            return named
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}_by_attributes"


# --- listing tools -------------------------------------------------------------------------------


def _visible_columns(ctx: Ctx, name: str) -> list[ColumnProfile]:
    """Columns a tool returns: not restricted, and not the load-time column (as_of reports it)."""
    prof = ctx.profiles[name]
    leaves = [c.column.name for c in prof.columns]
    hidden = restricted_columns(ctx.config, name, leaves)
    # a STRUCT with a restricted field is withheld whole: its parent is selected as one value
    hidden_heads = {h.split(".")[0] for h in hidden}
    fresh = ctx.config.products[name].freshness
    if fresh and fresh.column:
        hidden_heads.add(fresh.column)
    return [c for c in prof.columns if c.column.name.split(".")[0] not in hidden_heads]


def _field_schema(ctx: Ctx, product: str, c: ColumnProfile) -> dict[str, Any]:
    """A field's schema; a description only where it says more than the name (meaning, the
    identifier scheme, the unit), to keep the definition small."""
    p: ProductConfig = ctx.config.products[product]
    leaf = c.column.name
    schema = json_type(c.column.kind)
    facts = p.columns.get(leaf)
    notes = [facts.description.rstrip(".")] if facts and facts.description else []
    scheme = p.identifiers.get(leaf)
    if scheme and scheme != leaf:
        notes.append(f"{scheme} identifier")
    if c.column.kind in ("integer", "decimal", "float"):
        notes.append(unit_note(c.unit_hint, keyish=leaf in p.primary_key
                               or leaf in p.identifiers))
    if notes:
        schema["description"] = sentence("; ".join(notes))
    kinds = _mask_kinds(ctx, product, leaf)
    types = schema.get("type", "string")
    types = list(types) if isinstance(types, list) else [types]
    if c.column.nullable or "null" in kinds:  # the schema's promise, not this week's data
        types.append("null")
    if kinds - {"null"} and "string" not in types:  # a redacted or hashed value is text
        types.append("string")
        schema.pop("format", None)
    if len(types) > 1:
        schema["type"] = list(dict.fromkeys(types))
    return schema


def _mask_kinds(ctx: Ctx, product: str, column: str) -> set[str]:
    """The masks any role puts on ``product.column`` (the pii selector included): a masked
    value is text or NULL, whatever the column's type, and the output schema says so."""
    facts = ctx.config.products[product].columns.get(column)
    out: set[str] = set()
    for role in ctx.config.policies.roles.values():
        mask = role.masks.get(f"{product}.{column}")
        if mask is None and facts is not None and facts.classification == "pii":
            mask = role.masks.get("pii")
        if mask is not None:
            out.add(mask)
    return out


def size_words(n: int) -> str:
    """1048576 -> '1 MiB' (the result cap as a person reads it)."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


NO_UNIT = "no known unit"


def unit_note(unit: str | None, *, keyish: bool = False) -> str:
    """What a numeric field's description says of its unit: the unit, ``unit: none`` for a
    declared dimensionless value, "key, no unit", or, without evidence, that no unit is known
    (lint item 6 counts that as a lost point; nothing is invented)."""
    if unit == "none":
        return "dimensionless (unit: none)"
    if unit and "{" in unit:
        column = unit[unit.index("{") + 1:unit.index("}")]
        return f"unit: {unit} (from each row's {column})"
    if unit:
        return f"unit: {unit}"
    return "key, no unit" if keyish else NO_UNIT


def _output_rows(ctx: Ctx, product: str, cols: list[ColumnProfile]) -> dict[str, Any]:
    """Row properties; a STRUCT's visible leaves nest under their parent."""
    props: dict[str, Any] = {}
    for c in cols:
        head, _, rest = c.column.name.partition(".")
        if rest:
            parent = props.setdefault(head, {"type": "object", "properties": {}})
            parent["properties"][rest] = _field_schema(ctx, product, c)
        else:
            props[head] = _field_schema(ctx, product, c)
    return props


def closed(props: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema: its parameters and no others (the server refuses any other, and
    says so here, where a client or a grammar that honours the schema never sends one)."""
    return {"type": "object", "properties": props, "additionalProperties": False}


def _envelope(rows: dict[str, Any], as_of_desc: str, paged: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "rows": {"type": "array", "items": {"type": "object", "properties": rows}},
        "row_count": {"type": "integer", "description": "Unit: rows."},
    }
    if paged:
        props["truncated"] = {"type": "boolean"}
        props["next_cursor"] = {"type": ["string", "null"]}
        props["total_rows"] = {"type": "integer", "description": "All matching rows, not only "
                               "this page; unit: rows."}
    props["as_of"] = {"type": ["string", "null"], "format": "date-time", "description": as_of_desc}
    # a windowed result also carries `window` {start, end (exclusive), end_exclusive, calendar,
    # timezone, resolved_from, label}: stated in every result (docs/serve.md), not declared
    # here, where it would cost every tool about 50 tokens of every prompt
    return {"type": "object", "properties": props}


PERIOD_PARAM_PATTERN = r"^(today|yesterday|(this|last)_[a-z]+|last_\d+_days|[\dFYQ.-]{4,22})$"
"""The shape of every form context/periods.py accepts (the server checks the form itself and,
for one it does not know, lists them: the full grammar here cost every windowed tool 50 more
tokens of every prompt)."""


def period_param(ctx: Ctx, calendar_name: str | None, default: str | None,
                 timezone: str = "UTC") -> dict[str, Any]:
    """The one `period` argument of a time-windowed tool: the forms in one sentence, the
    calendar its quarters and years follow, and what omitting it means."""
    fiscal = fiscal_calendar(ctx.config, calendar_name)  # as the server will resolve it
    if fiscal is not None:
        example = resolve("this_quarter", ctx.project.now().date(), fiscal)
        assert example is not None
        years = (f"quarters and years fiscal (from 1 {calendar.month_name[fiscal.start_month]}, "
                 f"named by the year they {fiscal.year_named_by} in: {example.label} = "
                 f"{example.start}..{example.end - dt.timedelta(days=1)})")
    else:
        years = "calendar quarters and years"
    omitted = f"default {default}" if default else "omit for all rows"
    return {"type": "string", "pattern": PERIOD_PARAM_PATTERN, "description": sentence(
        "today, yesterday, this_|last_ week|month|quarter|year, last_N_days, FYyyyy[-Qn], "
        f"yyyy[-Qn], yyyy-mm[-dd], START..END (END included); {years}; {timezone}; {omitted}")}


MAX_FILTER_ENUM = 12
"""Enums offered as filters by default have 2 to this many values (tool.filters overrides)."""


def _filter_columns(p: ProductConfig, cols: list[ColumnProfile]) -> list[ColumnProfile]:
    by_name = {c.column.name: c for c in cols}
    if p.tool and p.tool.filters is not None:
        unknown = [n for n in p.tool.filters if n not in by_name]
        if unknown:
            raise ConfigError(f"tool.filters names {', '.join(unknown)}, which the product does "
                              "not expose (unknown, restricted or the load-time column).",
                              hint="Filters: " + ", ".join(sorted(by_name)) + ".")
        return [by_name[n] for n in p.tool.filters]
    key = p.primary_key[0] if len(p.primary_key) == 1 else None
    return [c for c in cols if c.column.name in p.identifiers
            or (c.column.name == key and c.column.kind in _LOOKUP_KINDS)
            or (c.enum is not None and len(c.enum) >= 2)]


_LOOKUP_KINDS = ("string", "integer", "uuid", "decimal", "date")
"""Kinds of a single-column key offered as a lookup parameter (one row by its key)."""
EXAMPLES = 5
"""Values shown for an enum above MAX_FILTER_ENUM (the parameter then has a pattern, not a list)."""


def value_pattern(values: list[str]) -> str | None:
    """A pattern every value fits, by character class and length (``^[A-Z0-9]{2}$`` for
    two-character carrier codes), or None when the values are too long or too varied to say."""
    if not values or max(map(len, values)) > 40:
        return None
    classes: list[str] = []
    for test, cls in ((str.isupper, "A-Z"), (str.islower, "a-z"), (str.isdigit, "0-9")):
        if any(test(ch) for v in values for ch in v):
            classes.append(cls)
    other = sorted({ch for v in values for ch in v if not (ch.isascii() and ch.isalnum())})
    if any(not ch.isascii() for ch in other) or len(other) > 6:
        return None
    body = "".join(classes) + "".join(re.escape(ch) if ch != " " else " " for ch in other)
    lo, hi = min(map(len, values)), max(map(len, values))
    size = f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
    return f"^[{body}]{size}$"


def _param_name(p: ProductConfig, column: str) -> str:
    return p.identifiers.get(column) or column.replace(".", "_")


def id_routes(ctx: Ctx, product: str, column: str) -> list[Route]:
    """Every scheme an identifier parameter accepts: the column's own, then each other scheme a
    declared crosswalk product holds beside it (a value of it is resolved through the crosswalk,
    in the same query). A restricted crosswalk column is never a route."""
    config = ctx.config
    own = config.products[product].identifiers[column]
    routes = [Route(scheme=own, pattern=config.identifier_schemes[own].pattern)]
    crosswalks = sorted({s.crosswalk.split(".")[0] for s in config.identifier_schemes.values()
                         if s.crosswalk})
    for via in crosswalks:
        x = config.products.get(via)
        if x is None or via == product:
            continue
        take = next((c for c, sch in x.identifiers.items() if sch == own), None)
        if take is None:
            continue
        hidden = set(restricted_columns(config, via, list(x.identifiers)))
        for match, scheme in x.identifiers.items():
            pattern = config.identifier_schemes[scheme].pattern
            if (scheme != own and pattern and match not in hidden
                    and scheme not in {r.scheme for r in routes}):
                routes.append(Route(scheme=scheme, pattern=pattern, via=via, match=match,
                                    take=take))
    return routes


def any_pattern(routes: list[Route]) -> str | None:
    """One pattern a value of any of the routes' schemes fits (None if one has none)."""
    if any(not r.pattern for r in routes):
        return None
    if len(routes) == 1:
        return routes[0].pattern
    # the UUID's full pattern costs 30 more tokens than its shape; the server recognises each
    # scheme by its own pattern
    return "|".join(f"({UUID_SHAPE if r.pattern == UUID_PATTERN else r.pattern})"
                    for r in routes)


def _param_schema(ctx: Ctx, product: str, c: ColumnProfile,
                  routes: list[Route] | None = None) -> dict[str, Any]:
    p: ProductConfig = ctx.config.products[product]
    leaf = c.column.name
    facts = p.columns.get(leaf)
    scheme_name = p.identifiers.get(leaf)
    if scheme_name:
        scheme = ctx.config.identifier_schemes[scheme_name]
        schema: dict[str, Any] = {"type": "string"}
        others = [r for r in routes or [] if r.via]
        if others:
            pattern = any_pattern(routes or [])
            if pattern:
                schema["pattern"] = pattern
        elif scheme.pattern == UUID_PATTERN:
            schema["format"] = "uuid"
        elif scheme.pattern:
            schema["pattern"] = scheme.pattern
        text = (scheme.description or humanize(scheme_name)).rstrip(".")
        if others:
            text += f"; or its {join_words([r.scheme for r in others], 'or')} (resolved for you)"
        else:
            text += "; only this id"
        if isinstance(c.min, str) and "format" not in schema and not _scoped(ctx, product, leaf):
            text += f", like {c.min}"  # a real value: only where every caller may see it
        schema["description"] = sentence(text)
        return schema
    schema = json_type(c.column.kind)
    notes = [facts.description.rstrip(".")] if facts and facts.description else []
    parent = _parent_product(ctx, product, leaf)
    if parent:
        notes.append(f"the {leaf} of {ctx.tool_names.get(parent, parent)} ({parent}.{leaf})")
    key = p.primary_key[0] if len(p.primary_key) == 1 else None
    if leaf == key:
        notes.append(f"the key of {plural(grain_noun(p.grain, product))}: at most one row")
    chosen = bool(p.tool and p.tool.filters and leaf in p.tool.filters)  # named in tether.yaml
    if c.enum is not None and c.column.kind != "boolean" and (
            chosen or len(c.enum) <= MAX_FILTER_ENUM):
        # one value or several at once (a single value is read as a list of one)
        # (the listed values say their type: none is repeated inside the items)
        schema = {"type": "array", "items": {"enum": [e.value for e in c.enum]}}
        note = enum_note(c)
        if note:
            notes.append(note.rstrip("."))
        unseen = declared_unseen(ctx.config, product, c)
        if unseen:  # the enum stays what the data holds; these match no row, and say so
            notes.append(f"also declared, never seen in the data: {', '.join(unseen)}")
    elif c.enum is not None and c.column.kind != "boolean":  # too many to list in the tool
        values = [str(e.value) for e in c.enum]
        pattern = value_pattern(values) if c.column.kind == "string" else None
        if pattern:
            schema["pattern"] = pattern
        text = f"one of {len(values)} values in the data"
        if not _scoped(ctx, product, leaf):  # a value every caller may see
            top = sorted(c.enum, key=lambda e: (-(e.count or 0), str(e.value)))[:EXAMPLES]
            schema["examples"] = [e.value for e in top]
            text += ", e.g. " + ", ".join(str(e.value) for e in top)
        notes.append(text)
        note = enum_note(c)
        if note:
            notes.append(note.rstrip("."))
    if c.unit_hint:
        notes.append(f"unit: {c.unit_hint}")
    if notes:
        schema["description"] = sentence("; ".join(notes))
    return schema


def _scoped(ctx: Ctx, product: str, column: str) -> bool:
    """Whether some role sees only part of ``product``'s rows or a mask of ``column``: then a
    value observed over every row is not one every caller may see."""
    pii = ctx.config.products[product].columns.get(column)
    for role in ctx.config.policies.roles.values():
        if product in role.row_filters or f"{product}.{column}" in role.masks:
            return True
        if "pii" in role.masks and pii is not None and pii.classification == "pii":
            return True
    return False


def _crosswalk_tool(ctx: Ctx, scheme: str) -> str | None:
    """The tool of the product that maps ``scheme`` to the canonical id, if one is declared."""
    crosswalk = ctx.config.identifier_schemes[scheme].crosswalk
    if not crosswalk:
        return None
    product = crosswalk.split(".")[0]
    return ctx.tool_names.get(product)


def listing_tool(ctx: Ctx, name: str) -> GeneratedTool:
    p: ProductConfig = ctx.config.products[name]
    cols = _visible_columns(ctx, name)
    serve = ctx.config.serve
    max_rows = min(p.tool.max_rows if p.tool else 200, serve.max_result_rows)
    props: dict[str, Any] = {}
    filters: list[Filter] = []
    countable: list[str] = []
    for c in _filter_columns(p, cols):
        pname = _param_name(p, c.column.name)
        routes = id_routes(ctx, name, c.column.name) if c.column.name in p.identifiers else []
        props[pname] = _param_schema(ctx, name, c, routes)
        resolver = next((ctx.tool_names.get(r.via) for r in routes if r.via), None)
        several = enum_of(props[pname]) is not None
        filters.append(Filter(param=pname, column=f"{name}.{c.column.name}", op="eq",
                              routes=routes if len(routes) > 1 else [], resolver=resolver,
                              several=several,
                              declared=declared_unseen(ctx.config, name, c) if several else []))
        if c.enum is not None and c.column.name not in p.identifiers and c.column.name not in (
                p.primary_key or []):
            countable.append(pname)
    t = p.metric_time
    window = None
    if t:
        tz = p.time_columns[t]
        props["period"] = period_param(ctx, None, None, tz)
        window = Window(kind="listing", column=f"{name}.{t}", timezone=tz)
    summable = _summable(ctx, name, p, cols)
    # their names say what they do (and the result's first line says what was counted)
    if countable:
        props["count_by"] = {"type": "string", "enum": countable}
    if summable:
        props[AGGREGATE] = {"type": "string", "enum": summable}
    props["limit"] = {"type": "integer", "minimum": 1, "maximum": max_rows,
                      "default": min(50, max_rows)}
    props["cursor"] = {"type": "string", "description": "From next_cursor."}
    fresh = p.freshness.column if p.freshness and p.freshness.column else None
    out = _envelope(_output_rows(ctx, name, cols),
                    f"Newest {fresh}." if fresh else "Load time.", paged=True)
    sentences = _listing_sentences(ctx, name, p, cols, max_rows)
    description, sources = join_sentences(sentences)
    select = exp.select(*[exp.column(c.column.name.split(".")[0], table=name, quoted=True)
                          for c in _top_level(cols)]).from_(_alias_table(ctx, name))
    dialect = ctx.dialect(name)
    plan = QueryPlan(kind="list", product=name, source=ctx.project.source_name(name),
                     dialect=dialect, select=select.sql(dialect=dialect), filters=filters,
                     order_by=[f"{name}.{k}" for k in (p.primary_key or _sortable(cols))],
                     paging="keyset" if p.primary_key else "offset",
                     max_rows=max_rows, default_rows=min(50, max_rows),
                     masks_apply_to=name, window=window, units=_column_units(p, cols),
                     aggregates=summable, counts=countable)
    meta = _meta(ctx, "list", sentences, sources, [name],
                 source_of_truth={c.column.name: f"{name}.{c.column.name}" for c in cols},
                 canonical_ids={_param_name(p, c): s for c, s in p.identifiers.items()
                                if c in {x.column.name for x in cols}},
                 deprecated={_param_name(p, c.column.name): [str(e.value) for e in c.enum or []
                                                               if e.deprecated]
                             for c in cols if any(e.deprecated for e in c.enum or [])},
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


def _column_units(p: ProductConfig, cols: list[ColumnProfile]) -> dict[str, str]:
    """The unit of each top-level numeric field, as results state it (keys have none, and
    neither has a value declared dimensionless or a column no evidence gives a unit)."""
    return {c.column.name: c.unit_hint for c in cols
            if "." not in c.column.name and c.column.kind in _NUMERIC and c.unit_hint
            and c.unit_hint != "none" and c.column.name not in p.primary_key
            and c.column.name not in p.identifiers}


def _summable(ctx: Ctx, name: str, p: ProductConfig, cols: list[ColumnProfile]) -> list[str]:
    """Numeric columns whose total and mean mean something (sum_and_average_of): not a key,
    an identifier or another product's key (a reference is a number, not a quantity)."""
    return [c.column.name for c in cols
            if "." not in c.column.name and c.column.kind in _NUMERIC
            and c.column.name not in p.primary_key and c.column.name not in p.identifiers
            and _parent_product(ctx, name, c.column.name) is None]


def _sortable(cols: list[ColumnProfile]) -> list[str]:
    """Without a primary key, pages are keyed on every plain top-level column."""
    return [c.column.name for c in cols if "." not in c.column.name
            and c.column.kind not in ("struct", "list", "map", "json", "binary")]


def _top_level(cols: list[ColumnProfile]) -> list[ColumnProfile]:
    seen: set[str] = set()
    out = []
    for c in cols:
        head = c.column.name.split(".")[0]
        if head not in seen:
            seen.add(head)
            out.append(c)
    return out


def _alias_table(ctx: Ctx, product: str) -> exp.Expr:
    table: exp.Expr = from_clause(ctx.config, [product], ctx.dialect(product)).args["from_"].this
    return table


def _units_phrase(cols: list[ColumnProfile], p: ProductConfig) -> str:
    money = sorted({c.unit_hint for c in cols if c.unit_hint and is_money(c.unit_hint)})
    per_row = sorted({c.unit_hint for c in cols if c.unit_hint and "{" in c.unit_hint})
    parts = [f"amounts are in {join_words(money + per_row)}" if money or per_row
             else "no amounts"]
    if p.time_columns:
        parts.append(f"times are {join_words(sorted(set(p.time_columns.values())))}")
    return ", ".join(parts)


def _listing_sentences(ctx: Ctx, name: str, p: ProductConfig, cols: list[ColumnProfile],
                       max_rows: int) -> list[Sentence]:
    noun = grain_noun(p.grain, name)
    words = name.replace("_", " ")
    if p.grain:
        question, each = f"Which {plural(noun)} match", f"one row per {noun}"
    elif words.endswith("s") and not words.endswith("ss"):  # a plural table name: a noun
        question, each = f"Which {words} match", f"one row per {singular(words)}"
    else:  # a mass noun ("weather", "inventory"): no plural is made up
        question, each = f"Which rows of {words} match", "one row each"
    if p.tool and p.tool.question:
        question = p.tool.question
    narrowed = bool(p.metric_time) or bool(_filter_columns(p, cols))
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
        f"{_units_phrase(cols, p)}; read-only, at most {max_rows} rows or "
        f"{size_words(ctx.config.serve.max_result_bytes)} a page, cursor paging"),
        source="schema"))
    if p.description:
        source, origin = ctx.said("glossary", "products", name, "description")
        out += [Sentence(text=sentence(x), source=source, origin=origin)
                for x in split_sentences(p.description)]
    child = _child_product(ctx, name)
    if child:
        out.append(Sentence(text=sentence(
            f"Line-level detail is in {ctx.tool_names[child]}; joining it repeats each {noun} "
            "once per line, so never sum this product's amounts after that join"), source="schema"))
    for column, scheme in p.identifiers.items():
        cross = _crosswalk_tool(ctx, scheme)
        if len(id_routes(ctx, name, column)) > 1 and column in {
                f.column.name for f in _filter_columns(p, cols)}:
            continue  # its parameter takes every scheme: nothing to map by hand
        if cross and cross != ctx.tool_names[name]:
            held = "" if column == scheme else f"{column} holds {scheme} values; "
            out.append(Sentence(text=sentence(f"{held}map it to the other id schemes with {cross}"),
                                source="lineage"))
    policy = _policy_sentence(ctx, name)
    if policy:
        out.append(policy)
    return out


def _metric_siblings(ctx: Ctx, product: str) -> list[str]:
    out = []
    for mname, m in ctx.config.metrics.items():
        if product in _metric_products(m):
            term = m.term or mname.replace("_", " ")
            out.append(f"for {term} use {ctx.tool_names['metric:' + mname]}")
    return out


def _parent_product(ctx: Ctx, product: str, column: str) -> str | None:
    """The product whose single-column key this column is (legs.shipment_id -> shipments)."""
    for other, p in ctx.config.products.items():
        if other != product and p.primary_key == [column]:
            return other
    return None


def _child_product(ctx: Ctx, name: str) -> str | None:
    """A product whose primary key extends this one's: a one-to-many child (fan-out risk)."""
    pk = ctx.config.products[name].primary_key
    if not pk:
        return None
    for other, p in ctx.config.products.items():
        if other != name and len(p.primary_key) > len(pk) and p.primary_key[: len(pk)] == pk:
            return other
    return None


def _policy_sentence(ctx: Ctx, product: str, with_masks: bool = True) -> Sentence | None:
    roles = ctx.config.policies.roles
    filtered = sorted(r for r, role in roles.items() if product in role.row_filters)
    masked = sorted({m.split(".", 1)[1] for role in roles.values() for m in role.masks
                     if m.split(".", 1)[0] == product}) if with_masks else []
    parts = []
    if filtered:
        parts.append("rows are filtered to your entitlement")
    if masked:
        parts.append(f"{join_words(masked)} may be masked")
    if not parts:
        return None
    return Sentence(text=sentence("; ".join(parts)), source="policy")


# --- metric tools --------------------------------------------------------------------------------


def _metric_products(m: MetricConfig, dialect: str = "duckdb") -> list[str]:
    """Products a metric reads, in order of first mention: table qualifiers of the columns in
    its SQL (parsed, so string literals do not count) and its product.column references."""
    seen: list[str] = []
    for sql in [m.measure, m.predicate or "", *[o.sql for o in m.outputs.values()]]:
        if not sql:
            continue
        for col in parse(sql, dialect).find_all(exp.Column):
            if col.table and col.table not in seen:
                seen.append(col.table)
    for ref in [m.time or "", m.time_end or "", *m.dimensions]:
        table = ref.partition(".")[0]
        if table and table not in seen:
            seen.append(table)
    return seen


def _window_kind(m: MetricConfig) -> Literal["period", "trailing", "current"]:
    return m.window or ("period" if m.calendar else "trailing")


def metric_tool(ctx: Ctx, name: str) -> GeneratedTool:
    m: MetricConfig = ctx.config.metrics[name]
    # a metric reads one source (joins do not cross engines): its first source's dialect
    products = _metric_products(m, dialect_of(next(iter(ctx.config.sources.values())).url))
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
        props[column] = _param_schema(ctx, table, prof)
        head = props[column].get("description", "").rstrip(".")
        props[column]["description"] = sentence(f"{head}; omit for every value" if head
                                                else "Omit for every value")
        filters.append(Filter(param=column, column=f"{table}.{column}", op="eq",
                              several=enum_of(props[column]) is not None))
    kind = _window_kind(m)
    window = Window(kind=kind, column=m.time, end_column=m.time_end, calendar=m.calendar)
    if kind == "period":
        props["period"] = period_param(ctx, m.calendar, "this_quarter")
    elif kind == "trailing":
        props["period"] = period_param(ctx, m.calendar, f"last_{window.default_days}_days")
    measures = {name: (m.measure, m.unit, humanize(name))}
    for oname, o in m.outputs.items():
        measures[oname] = (o.sql, o.unit, o.description or humanize(oname))
    rows: dict[str, Any] = {}
    for _, column in dims:
        rows[column] = {"type": "string"}
    if kind in ("period", "trailing"):
        rows["period"] = {"type": "string", "description": "The window's label."}
    for mname, (_, unit, desc) in measures.items():
        is_time = bool(unit and "timestamp" in unit)
        rows[mname] = ({"type": ["string", "null"], "format": "date-time"} if is_time
                       else {"type": "number"})
        rows[mname]["description"] = sentence(f"{desc.rstrip('.')}; {unit_note(unit)}")
    max_rows = 1
    for prof in dim_profiles:
        max_rows *= len(prof.enum) if prof.enum else METRIC_MAX_ROWS
    max_rows = min(max_rows, METRIC_MAX_ROWS, ctx.config.serve.max_result_rows)
    fresh = _freshness_columns(ctx, products)
    out = _envelope(rows, f"Oldest of the newest {join_words(fresh)}." if fresh else "Load time.",
                    paged=False)
    sentences = _metric_sentences(ctx, name, m, kind, dims, max_rows, props)
    description, sources = join_sentences(sentences)
    dialect = ctx.dialect(products[0])
    select = from_clause(ctx.config, products, dialect)
    select = select.select(*[qualified(f"{t}.{c}").as_(c) for t, c in dims], append=False)
    for mname, (sql, _, _) in measures.items():
        select = select.select(parse(sql, dialect).as_(mname))
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
    meta = _meta(ctx, "metric", sentences, sources, products, definitions=terms,
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
    when = {"period": "over a period (default: this quarter)",
            "trailing": f"over a period (default: the last {Window(kind='trailing').default_days} "
                        "days)",
            "current": "as of now, no time window"}[kind]
    out.append(Sentence(text=sentence(
        f"Values are in {_metric_units(m)}, {when}; read-only, at most "
        f"{max_rows} rows (one per {join_words([c for _, c in dims]) or 'call'}), no pagination"),
        source="schema"))
    if term:
        source, origin = ctx.said("glossary", "glossary", m.term or "", "definition")
        out.append(Sentence(text=sentence(f"Governed definition of {m.term}: {term.definition}"),
                            source=source, origin=origin))
    if m.time:
        source, origin = ctx.said("glossary", "metrics", name, "time")
        out.append(Sentence(text=sentence(
            f"Time is {m.time}" + (f" to {m.time_end} (a row counts if it overlaps)"
                                   if m.time_end else "")), source=source, origin=origin))
    for table in sorted({t for t, _ in dims}):
        policy = _policy_sentence(ctx, table, with_masks=False)  # aggregates show no masked value
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


# --- the probe -----------------------------------------------------------------------------------


NOT_AVAILABLE = "Not available to anyone through this server:"
"""How the probe's description opens its one sentence naming the restricted columns (the only
place a definition names them; the gate reads fields, never this sentence)."""


def restricted_fields(ctx: Ctx) -> list[str]:
    """``product.column`` of every restricted column (or STRUCT field) the profiles hold."""
    out = []
    for name in sorted(ctx.profiles):
        leaves = [c.column.name for c in ctx.profiles[name].columns]
        out += [f"{name}.{c}" for c in sorted(restricted_columns(ctx.config, name, leaves))]
    return out


def probe_tool(ctx: Ctx) -> GeneratedTool:
    products = sorted(ctx.profiles)
    parts = ["every column with its type, meaning and sample values"]
    if ctx.config.glossary:  # only what this project has to tell
        parts.append("the glossary terms that govern it")
    if ctx.config.lineage:
        parts.append("its upstream lineage")
    sentences = [
        Sentence(text=sentence(
            f"Explains one data product on request: {join_words(parts)}; use it when a "
            "field's meaning is unclear, before the other tools"), source="schema"),
        Sentence(text=sentence(
            "No amounts, units are given per column; read-only, at most 1 product per call, "
            "no pagination, restricted columns are never listed"), source="policy"),
    ]
    hidden = restricted_fields(ctx)
    if hidden:  # the one place they are named: so a model declines instead of inventing
        sentences.append(Sentence(text=sentence(
            f"{NOT_AVAILABLE} {join_words(hidden)}; asking for one is refused"),
            source="policy"))
    description, sources = join_sentences(sentences)
    column = {"type": "object", "properties": {
        "name": {"type": "string"}, "type": {"type": "string"},
        "description": {"type": ["string", "null"]}, "unit": {"type": ["string", "null"]},
        "values": {"type": "array"},
    }}
    out = {
        "type": "object",
        "properties": {
            "product": {"type": "string"},
            "grain": {"type": ["string", "null"]},
            "row_count": {"type": "integer", "description": "Unit: rows."},
            "columns": {"type": "array", "items": column},
            "definitions": {"type": "array", "description": "Glossary terms governing it."},
            "lineage": {"type": "array", "description": "Upstream edges."},
            "as_of": {"type": ["string", "null"], "format": "date-time"},
            "query_with": {"type": ["object", "null"], "description": "The tool that reads "
                           "its rows and that tool's arguments.", "properties": {
                               "tool": {"type": "string"}, "product": {"type": "string"},
                               "arguments": {"type": "object", "additionalProperties": True,
                                             "description": "Each argument's JSON Schema."}}},
        },
    }
    props = {"product": product_param(products, "Data product to explain.")}
    meta = _meta(ctx, "probe", sentences, sources, products, canonical_ids={}, deprecated={},
                 source_of_truth={}, limits={"max_rows": 1, "pagination": "none"})
    return GeneratedTool(name=PROBE, title="What does this data product contain and mean?",
                         description=description,
                         input_schema={**closed(props), "required": ["product"]},
                         output_schema=out, annotations=dict(READ_ONLY), meta=meta,
                         plan=QueryPlan(kind="probe"))


# --- provenance ----------------------------------------------------------------------------------


def _meta(ctx: Ctx, kind: str, sentences: list[Sentence], sources: dict[str, str],
          products: list[str], *, source_of_truth: dict[str, str], canonical_ids: dict[str, str],
          deprecated: dict[str, list[str]], limits: dict[str, Any],
          definitions: list[str] | None = None,
          fields: dict[str, Any] | None = None,
          fields_from: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    used: set[Source] = {s.source for s in sentences}
    used.add("schema")
    if any(ctx.profiles[p].columns for p in products if p in ctx.profiles):
        used.add("samples")
    fingerprints = sorted({ctx.profiles[p].fingerprint for p in products if p in ctx.profiles})
    terms = definitions if definitions is not None else sorted(
        t for t, g in ctx.config.glossary.items()
        if any(f.split(".")[0] in products for f in g.fields))
    context: dict[str, Any] = {
        "kind": kind,
        "products": products,
        "schema_fingerprint": fingerprints[0] if len(fingerprints) == 1 else fingerprints,
        "generated_from": sorted(used),
        "source_of_truth": source_of_truth,
        "canonical_ids": canonical_ids,
        "definitions": terms,
        "fields": fields or {"arguments": {}, "governed": []},
        "limits": limits,
        "sources": sources,
    }
    if deprecated:
        context["deprecated_values"] = deprecated
    origins = sentence_origins(sentences)
    if origins:  # only where an import layer said something: other tools are unchanged
        context["origins"] = origins
    if fields_from:
        context["field_origins"] = fields_from
    upstream = upstream_versions(ctx.config, products) if kind in ("list", "metric") else {}
    if upstream:
        context["upstream"] = upstream
    return {META_KEY: context}

