"""What every kind of generated tool shares: the generation context, parameter and field
schemas, units, periods, policy sentences and provenance (``tool_meta``).

A kind's own module (listing.py, metric.py, probe.py, discovery.py) builds its tools from these;
none of them knows another kind.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from tether.config import ColumnFacts, MetricConfig, ProductConfig, Project, TetherConfig
from tether.context.config_model import reference_of
from tether.context.meta import enum_of, tool_meta_of
from tether.context.names import date_part, identifier_like
from tether.context.periods import SCHEMA_FORMS, resolve
from tether.context.profile import ColumnProfile, ProductProfile
from tether.context.timeformat import grain, says
from tether.errors import ConfigError
from tether.policy import restricted_columns
from tether.policy.entitle import role_masks
from tether.policy.model import values_scoped
from tether.sources import source_dialect
from tether.toolgen.describe import (
    enum_note,
    grain_noun,
    humanize,
    join_words,
    json_type,
    plural,
    sentence,
)
from tether.toolgen.model import (
    Route,
    Sentence,
    Source,
    sentence_origins,
)
from tether.toolgen.plan import fiscal_calendar, parse
from tether.toolgen.provenance import declared_unseen, said, upstream_versions

UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
UUID_SHAPE = "^[0-9a-f-]{36}$"


@dataclass
class Ctx:
    project: Project
    profiles: dict[str, ProductProfile]
    tool_names: dict[str, str] = field(default_factory=dict)  # product or metric -> tool name
    _metric_reads: dict[str, list[str]] | None = None
    _keyed_by: dict[tuple[str, ...], list[str]] | None = None
    _prefixes: dict[tuple[str, ...], list[str]] | None = None

    def metric_reads(self) -> dict[str, list[str]]:
        """{metric: the products it reads}, parsed once (not once per product that asks)."""
        if self._metric_reads is None:
            self._metric_reads = {n: metric_products(m) for n, m in self.config.metrics.items()}
        return self._metric_reads

    def keyed_by(self, key: tuple[str, ...]) -> list[str]:
        """Products whose primary key is exactly ``key``, in tether.yaml order."""
        if self._keyed_by is None:
            self._keyed_by = {}
            for n, p in self.config.products.items():
                self._keyed_by.setdefault(tuple(p.primary_key), []).append(n)
        return self._keyed_by.get(key, [])

    def extending(self, key: tuple[str, ...]) -> list[str]:
        """Products whose primary key starts with ``key`` and is longer, in tether.yaml order."""
        if self._prefixes is None:
            self._prefixes = {}
            for n, p in self.config.products.items():
                for k in range(1, len(p.primary_key)):
                    self._prefixes.setdefault(tuple(p.primary_key[:k]), []).append(n)
        return self._prefixes.get(key, [])

    @property
    def config(self) -> TetherConfig:
        return self.project.config

    def said(self, default: Source, *path: str | int) -> tuple[Source, str | None]:
        return said(self.project, default, *path)

    def dialect(self, product: str) -> str:
        """The sqlglot dialect of the product's source, from its URL (no connection)."""
        return source_dialect(self.config.sources[self.project.source_name(product)])




def visible_columns(ctx: Ctx, name: str) -> list[ColumnProfile]:
    """Columns a tool returns: not restricted, and not the load-time column (as_of reports it;
    a freshness column that is also the product's event time is data, and returned)."""
    prof = ctx.profiles[name]
    leaves = [c.column.name for c in prof.columns]
    hidden = restricted_columns(ctx.config, name, leaves)
    # a STRUCT with a restricted field is withheld whole: its parent is selected as one value
    heads = {c.column.name: c.column.head for c in prof.columns}
    hidden_heads = {heads.get(h, h) for h in hidden}
    p = ctx.config.products[name]
    if p.freshness and p.freshness.column and p.freshness.column != p.metric_time:
        hidden_heads.add(p.freshness.column)
    return [c for c in prof.columns if c.column.head not in hidden_heads]


def field_schema(ctx: Ctx, product: str, c: ColumnProfile) -> dict[str, Any]:
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
    if c.column.kind in ("integer", "decimal", "float") and (fmt := p.time_format(leaf)):
        notes.append(f"time, {says(leaf, fmt).split(' holds ', 1)[1]}; no unit")
    elif c.column.kind in ("integer", "decimal", "float") and date_part(leaf) and not c.unit_hint:
        notes.append("part of a date or time; no unit")
    elif c.column.kind in ("integer", "decimal", "float"):
        notes.append(unit_note(c.unit_hint, keyish=not_a_quantity(ctx, product, leaf)))
    kinds = mask_kinds(ctx, product, leaf)
    if kinds:  # how it is masked is part of what a caller reads: a mode change is a policy edit
        notes.append(f"{join_words([MASK_WORDS[k] for k in sorted(kinds)], 'or')} for some callers")
    if notes:
        schema["description"] = sentence("; ".join(notes))
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


# what a caller under each mask reads in place of the value
MASK_WORDS = {"hash": "a keyed hash", "redact": "redacted", "null": "null"}


def mask_kinds(ctx: Ctx, product: str, column: str) -> set[str]:
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


def not_a_quantity(ctx: Ctx, product: str, column: str) -> bool:
    """A number that names a thing rather than measures it: a key or a part of one, an
    identifier, a column whose name says it is one (``invoice_id``, ``orderKey``, in any case
    style) or another product's key (a reference). It has no unit and no total."""
    p = ctx.config.products[product]
    return (column in p.primary_key or column in p.identifiers or identifier_like(column)
            or parent_product(ctx, product, column) is not None)


UNSTATED_MONEY = {"currency": "an amount of money in a currency the data does not name",
                  "cents": "cents of a currency the data does not name"}
"""Money whose name says it is money but whose currency nothing states: said so, never as a
code."""


def each_rows(unit: str) -> str:
    """A unit each row's column names, as a sentence says it (``{currency}_cents`` -> "cents
    of each row's currency"): no template text reaches a description."""
    column = unit[unit.index("{") + 1:unit.index("}")]
    rest = unit.replace("{" + column + "}", "").strip("_ ").replace("_", " ")
    return f"{rest} of each row's {column}" if rest else f"each row's {column}"


def unit_note(unit: str | None, *, keyish: bool = False) -> str:
    """What a numeric field's description says of its unit: the unit, ``unit: none`` for a
    declared dimensionless value, "key, no unit", or, without evidence, that no unit is known
    (lint item 6 counts that as a lost point; nothing is invented)."""
    if unit == "none":
        return "dimensionless (unit: none)"
    if unit and "{" in unit:
        return f"unit: {each_rows(unit)}"
    if unit in UNSTATED_MONEY:
        return f"unit: {UNSTATED_MONEY[unit]}"
    if unit:
        return f"unit: {unit}"
    return "key, no unit" if keyish else NO_UNIT


def output_rows(ctx: Ctx, product: str, cols: list[ColumnProfile]) -> dict[str, Any]:
    """Row properties; a STRUCT's visible leaves nest under their parent."""
    props: dict[str, Any] = {}
    for c in cols:
        if c.column.nested:  # a STRUCT's field, under its parent (a dotted name is a column)
            head, rest = c.column.path[0], ".".join(c.column.path[1:])
            parent = props.setdefault(head, {"type": "object", "properties": {}})
            parent["properties"][rest] = field_schema(ctx, product, c)
        else:
            props[c.column.name] = field_schema(ctx, product, c)
    return props


def closed(props: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema: its parameters and no others (the server refuses any other, and
    says so here, where a client or a grammar that honours the schema never sends one)."""
    return {"type": "object", "properties": props, "additionalProperties": False}


def envelope(rows: dict[str, Any], as_of_desc: str, paged: bool) -> dict[str, Any]:
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


def period_param(ctx: Ctx, calendar_name: str | None, default: str | None, column: str,
                 timezone: str = "UTC", fmt: str | None = None) -> dict[str, Any]:
    """The one `period` argument of a time-windowed tool: the column it bounds, the canonical
    forms in one sentence, the calendar its quarters and years follow, and what omitting it
    means. No pattern: context/periods.py reads every spelling it accepts (any case, spaces,
    "Q1 2026", "May 2026", "since DATE") and refuses the rest with the forms, so a schema
    pattern could only reject what the server would answer."""
    fiscal = fiscal_calendar(ctx.config, calendar_name)  # as the server will resolve it
    if fiscal is not None:
        example = resolve("this_quarter", ctx.project.now().date(), fiscal)
        assert example is not None
        # the example says the start month and how years are named; calendar ones asked so
        years = (f"quarters and years fiscal ({example.label} = "
                 f"{example.start}..{example.end - dt.timedelta(days=1)}; calendar: yyyy-Qn)")
    else:
        years = "calendar quarters and years"
    omitted = f"default {default}" if default else "omit for all rows"
    if fmt is not None and grain(fmt) in ("year", "month"):  # what the column can be cut into
        cut = "yyyy, yyyy..yyyy" if grain(fmt) == "year" else "yyyy-mm, yyyy"
        column = f"{column} (whole {grain(fmt)}s: {cut}, since ...)"
    return {"type": "string", "description": sentence(
        f"Bounds {column}: {SCHEMA_FORMS}; {years}; {timezone}; {omitted}")}


def held_as(p: ProductConfig, column: str, cols: list[ColumnProfile]
            ) -> Literal["integer", "text"] | None:
    """Whether a time column held in a format is an integer or text (None: a timestamp or date
    column)."""
    if p.time_format(column) is None:
        return None
    kind = next((c.column.kind for c in cols if c.column.name == column), None)
    return "integer" if kind == "integer" else "text"


MAX_FILTER_ENUM = 12
"""Enums offered as filters by default have 2 to this many values (tool.filters overrides)."""


def filter_columns(ctx: Ctx, name: str, cols: list[ColumnProfile]) -> list[ColumnProfile]:
    """The columns a product's listing takes as parameters: its identifiers, its key (or each
    part of a composite one), a reference to another product's key, and each few-valued column
    (an enum); the ones tether.yaml names where it names them."""
    p: ProductConfig = ctx.config.products[name]
    by_name = {c.column.name: c for c in cols}
    if p.tool and p.tool.filters is not None:  # (a PATH.column is a path's: toolgen/listing)
        unknown = [n for n in p.tool.filters if n not in by_name and "." not in n]
        if unknown:
            raise ConfigError(f"tool.filters names {', '.join(unknown)}, which the product does "
                              "not expose (unknown, restricted or the load-time column).",
                              hint="Filters: " + ", ".join(sorted(by_name)) + ".")
        return [by_name[n] for n in p.tool.filters if n in by_name]
    key = p.primary_key[0] if len(p.primary_key) == 1 else None
    return [c for c in cols if c.column.name in p.identifiers
            or c.column.name == p.label
            or (c.column.name == key and c.column.kind in LOOKUP_KINDS)
            or key_part(p, c)
            or (c.enum is not None and len(c.enum) >= 2)
            or category(ctx, name, c)
            or (not c.column.nested and c.column.kind in LOOKUP_KINDS
                and reference(ctx, name, c.column.name) is not None)]


CATEGORY_TIMES = 4
"""A category holds at most this many times profiling.enum_max_values values."""
CATEGORY_REPEATS = 10
"""...each held by this many rows on average or more."""


def counts_by(ctx: Ctx, product: str, c: ColumnProfile) -> bool:
    """A filter's column a top N counts by: an enum, a category, an identifier or a reference
    to another product (the most active user, the busiest destination)."""
    p = ctx.config.products[product]
    return (c.enum is not None or category(ctx, product, c) or c.column.name in p.identifiers
            or reference(ctx, product, c.column.name) is not None)


def counted_number(ctx: Ctx, product: str, c: ColumnProfile) -> bool:
    """A number of few values that repeat (a star rating, a month, a count of engines, a line
    number within an order's composite key), and no whole key, identifier, reference or time:
    a column to count by (``range`` bounds it)."""
    n, p, leaf = c.distinct_count or 0, ctx.config.products[product], c.column.name
    return (c.column.kind in ("integer", "decimal", "float") and not c.column.nested
            and c.distinct_exact and 2 <= n <= ctx.config.profiling.enum_max_values
            and n * 2 <= c.non_null_count and p.primary_key != [leaf]
            and leaf not in p.identifiers and leaf not in p.time_columns
            and reference(ctx, product, leaf) is None)


def category(ctx: Ctx, product: str, c: ColumnProfile) -> bool:
    """Text with too many values to be an enum whose values still repeat (a release year held
    as text, a country, an occupation), and no key, identifier, reference or label: a filter
    that matches one value and a column to count by, its values too many to list."""
    n, p, leaf = c.distinct_count or 0, ctx.config.products[product], c.column.name
    return (c.enum is None and c.column.kind == "string" and not c.column.nested
            and c.distinct_exact and not c.nearly_unique
            and 2 <= n <= CATEGORY_TIMES * ctx.config.profiling.enum_max_values
            and n * CATEGORY_REPEATS <= c.non_null_count
            and leaf not in p.primary_key and leaf not in p.identifiers and leaf != p.label
            and reference(ctx, product, leaf) is None)


def key_part(p: ProductConfig, c: ColumnProfile) -> bool:
    """A column of a composite key that is no time column (the period bounds that one): a
    lookup parameter, so a listing can always be narrowed to its grain (the rows of one batch,
    one step, one code), whatever the part's type or number of values."""
    return (len(p.primary_key) > 1 and c.column.name in p.primary_key
            and c.column.name not in p.time_columns and c.column.kind in LOOKUP_KINDS)


LOOKUP_KINDS = ("string", "integer", "uuid", "decimal", "date")
"""Kinds of a key's columns offered as lookup parameters (one row by its key, or the rows of one
value of a composite key's column: one batch, one step)."""
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


LISTING_PARAMS = ("period", "count_by", "sum_and_average_of", "order_by", "order", "limit",
                  "cursor")
"""A listing tool's own parameters: a column's parameter never takes one of these names."""


def param_names(p: ProductConfig, columns: list[str]) -> dict[str, str]:
    """Each filter column's parameter: its identifier scheme where no other of these columns
    carries the same one, else its name, with each run of characters a model's tool schema may
    not hold in a property name (dots, spaces, dashes) as one ``_`` (``info.kind`` ->
    ``info_kind``, ``Box Label`` -> ``Box_Label``). A name the tool's own parameters hold gets
    ``_value`` (a column named ``order`` -> ``order_value``); two columns that would share a
    name (``a b`` and ``a_b``) are told apart by a number (``a_b``, ``a_b_2``)."""
    schemes = [p.identifiers.get(c) for c in columns]
    out: dict[str, str] = {}
    taken = set(LISTING_PARAMS)
    for column, scheme in zip(columns, schemes, strict=True):
        base = safe_name(scheme if scheme and schemes.count(scheme) == 1 else column)
        name = f"{base}_value" if base in LISTING_PARAMS else base
        n = 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        out[column] = name
    return out


def safe_name(name: str) -> str:
    """``name`` as a property or tool name every model API accepts: letters, digits and ``_``."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "_"


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


def param_schema(ctx: Ctx, product: str, c: ColumnProfile,
                  routes: list[Route] | None = None, learned: bool = True) -> dict[str, Any]:
    """A filter parameter's schema and description; ``learned``: with the column's notes (a
    product's own listing; a governed metric's dimension keeps its words as governed)."""
    p: ProductConfig = ctx.config.products[product]
    leaf = c.column.name
    facts = p.columns.get(leaf)
    if not learned and facts is not None and facts.notes:
        facts = facts.model_copy(update={"notes": []})
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
        if isinstance(c.min, str) and "format" not in schema and not scoped(ctx, product, leaf):
            text += f", like {c.min}"  # a real value: only where every caller may see it
        schema["description"] = with_notes(sentence(text), facts)
        return schema
    schema = json_type(c.column.kind)
    notes = [facts.description.rstrip(".")] if facts and facts.description else []
    held = reference(ctx, product, leaf)
    if held:
        parent, held_key = held
        notes.append(f"the {held_key} of {ctx.tool_names.get(parent, parent)} "
                     f"({parent}.{held_key})")
    key = p.primary_key[0] if len(p.primary_key) == 1 else None
    if leaf == p.label and c.enum is None:
        like = (f", like {c.min}" if isinstance(c.min, str) and not scoped(ctx, product, leaf)
                else "")  # a real value, where every caller may see it
        notes.append(f"a name, matched exactly in any case (*part* for names containing "
                     f"it){like}")
    if leaf == key:
        notes.append(f"the key of {plural(grain_noun(p.grain, product))}: at most one row")
    elif key_part(p, c) and c.enum is None:  # an enum's values say what it takes
        rest = join_words([k for k in p.primary_key if k != leaf])
        like = (f", like {c.min}" if isinstance(c.min, str) and not scoped(ctx, product, leaf)
                else "")  # a real value, where every caller may see it
        notes.append(f"key part: with {rest}, at most one row{like}")
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
        if not scoped(ctx, product, leaf):  # a value every caller may see
            top = sorted(c.enum, key=lambda e: (-(e.count or 0), str(e.value)))[:EXAMPLES]
            schema["examples"] = [e.value for e in top]
            text += ", e.g. " + ", ".join(str(e.value) for e in top)
        notes.append(text)
        note = enum_note(c)
        if note:
            notes.append(note.rstrip("."))
    elif category(ctx, product, c):  # many values that repeat: the most frequent say its form
        text = f"one of {c.distinct_count} values in the data"
        if not scoped(ctx, product, leaf):  # a value every caller may see
            top = [v.value for v in c.top_values[:EXAMPLES]]
            schema["examples"] = top
            text += ", e.g. " + ", ".join(str(v) for v in top)
        notes.append(text)
    if c.pattern and "pattern" not in schema and schema.get("type") == "string":
        schema["pattern"] = c.pattern  # the shape every value has (profiling/shapes.py)
    if c.unit_hint:
        notes.append(f"unit: {c.unit_hint}")
    if notes or (facts and facts.notes):
        schema["description"] = with_notes(sentence("; ".join(notes)) if notes else "", facts)
    return schema


def with_notes(text: str, facts: ColumnFacts | None) -> str:
    """A parameter's description and the column's notes after it (how to pass it)."""
    return " ".join([text] * bool(text) + [sentence(n) for n in (facts.notes if facts else [])])


def scoped_examples(ctx: Ctx, product: str, c: ColumnProfile, schema: dict[str, Any]
                    ) -> list[Any]:
    """A filter's most frequent values, where its description could not say them (some role
    sees only part of the rows, or a mask): the server says each caller theirs."""
    if ((c.enum is None and not category(ctx, product, c)) or c.column.kind == "boolean"
            or enum_of(schema) is not None or "examples" in schema
            or not scoped(ctx, product, c.column.name)):
        return []
    return [e.value for e in sorted(c.enum or c.top_values,
                                    key=lambda e: (-(e.count or 0), str(e.value)))][:EXAMPLES]


def scoped(ctx: Ctx, product: str, column: str) -> bool:
    """Whether a value of ``column`` is not one every caller may see (policy.model)."""
    return values_scoped(ctx.config, product, column)


def crosswalk_tool(ctx: Ctx, scheme: str) -> str | None:
    """The tool of the product that maps ``scheme`` to the canonical id, if one is declared."""
    crosswalk = ctx.config.identifier_schemes[scheme].crosswalk
    if not crosswalk:
        return None
    product = crosswalk.split(".")[0]
    return ctx.tool_names.get(product)


def reference(ctx: Ctx, product: str, column: str) -> tuple[str, str] | None:
    """The product whose single-column key this column holds, and that key
    (config_model.reference_of, with the build's index of products by key)."""
    return reference_of(ctx.config, product, column, ctx.keyed_by)


def parent_product(ctx: Ctx, product: str, column: str) -> str | None:
    """The product whose single-column key this column holds (shared.reference)."""
    found = reference(ctx, product, column)
    return found[0] if found else None


def child_product(ctx: Ctx, name: str) -> str | None:
    """A product whose primary key is this one's and one column more (an order's lines by
    their number): a one-to-many child (fan-out risk)."""
    pk = ctx.config.products[name].primary_key
    if not pk:
        return None
    return next((other for other in ctx.extending(tuple(pk)) if other != name
                 and len(ctx.config.products[other].primary_key) == len(pk) + 1), None)


def policy_sentence(ctx: Ctx, product: str, with_masks: bool = True) -> Sentence | None:
    roles = ctx.config.policies.roles
    filtered = sorted(r for r, role in roles.items() if product in role.row_filters)
    # as the masks apply (the pii selector over the columns classified pii), never naming a
    # restricted column
    applied = {c for r in roles for c in role_masks(ctx.config, r, product)} if with_masks \
        else set()
    masked = sorted(applied - restricted_columns(ctx.config, product, sorted(applied)))
    parts = []
    if filtered:
        parts.append("rows are filtered to your entitlement")
    if masked:
        parts.append(f"{join_words(masked)} may be masked")
    if not parts:
        return None
    return Sentence(text=sentence("; ".join(parts)), source="policy")


def metric_products(m: MetricConfig, dialect: str = "duckdb") -> list[str]:
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




def tool_meta(ctx: Ctx, kind: str, sentences: list[Sentence], sources: dict[str, str],
          products: list[str], *, source_of_truth: dict[str, str], canonical_ids: dict[str, str],
          deprecated: dict[str, list[str]], limits: dict[str, Any],
          definitions: list[str] | None = None,
          fields: dict[str, Any] | None = None,
          fields_from: dict[str, dict[str, str]] | None = None,
          upstream: bool = True) -> dict[str, Any]:
    """A tool's provenance (``_meta["tether/context"]``); ``upstream``: the versions of what it
    is built from are recorded (a discovery tool over every product records none)."""
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
    built_from = upstream_versions(ctx.config, products) if upstream else {}
    if built_from:
        context["upstream"] = built_from
    return tool_meta_of(context)
