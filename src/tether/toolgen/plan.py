"""Query plans: how a tool runs. ASTs with placeholders; values are always bound parameters.

A plan holds a base SELECT (text of a sqlglot AST in its source's dialect) plus the filters, window and
pagination key a call may add. :func:`compile_plan` turns a plan and a call's arguments into an AST
for the source's engine and a dict of bound parameters; nothing a caller sends is ever spliced
into SQL text.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import TetherConfig
from tether.context import timeformat
from tether.context.names import ref, ref_column, ref_parts
from tether.context.periods import FORMS_SENTENCE, FiscalCalendar, PeriodError, Window, resolve
from tether.errors import ProductError
from tether.plan.paths import Hop, Reached, join_hops, reached
from tether.sources.base import table_ref
from tether.toolgen.model import RANGE, Filter, QueryPlan, Route


class ArgumentError(ValueError):
    """A tool argument is invalid; the message says what is allowed (the model can act on it)."""


def parse(sql: str, dialect: str = "duckdb") -> exp.Expr:
    """SQL a person wrote in tether.yaml, in the dialect of the source it runs on."""
    return sqlglot.parse_one(sql, read=dialect)


def placeholder(name: str) -> exp.Placeholder:
    return exp.Placeholder(this=name)


def qualified(column: str) -> exp.Expr:
    """``table.column`` -> a column with its table qualifier, or a plain column;
    ``table.column.field`` -> a STRUCT column's field."""
    parts = ref_parts(column)
    if len(parts) <= 2:
        return exp.column(parts[-1], table=parts[0] if len(parts) == 2 else None, quoted=True)
    out: exp.Expr = exp.column(parts[1], table=parts[0], quoted=True)
    for part in parts[2:]:
        out = exp.Dot(this=out, expression=exp.to_identifier(part, quoted=True))
    return out


# --- joins between products through shared identifier schemes -----------------------------------


def scheme_columns(config: TetherConfig) -> dict[str, dict[str, str]]:
    """{product: {scheme: column}} from each product's identifiers, and each declared
    relationship as a key only its two ends share (a lookup table keyed by a code)."""
    out: dict[str, dict[str, str]] = {}
    for name, p in config.products.items():
        for column, scheme in p.identifiers.items():
            out.setdefault(name, {}).setdefault(scheme, column)
    for i, rel in enumerate(config.relationships):
        for end in (rel.from_, rel.to):
            product, *rest = ref_parts(end)  # a column named with a dot is quoted
            out.setdefault(product, {})[f"relationship {i}"] = ".".join(rest)
    return out


def join_path(config: TetherConfig, products: list[str]) -> list[tuple[str, exp.Expr | None]]:
    """[(product, ON condition)] joining ``products`` (first is the root) along shared identifier
    schemes, with crosswalk products inserted where no direct scheme is shared. Deterministic."""
    root, wanted = products[0], set(products[1:]) - {products[0]}
    order: list[tuple[str, exp.Expr | None]] = [(root, None)]
    if not wanted:  # one product: nothing to join (and no need to index every product's ids)
        return order
    ids = scheme_columns(config)
    joined = {root}
    for target in sorted(wanted - joined):
        if target in joined:
            continue
        path = _bfs(ids, joined, target)
        if path is None:
            raise ProductError(
                f"cannot join {target!r} to {root!r}: no chain of shared identifier schemes "
                "or relationships.",
                hint="Declare identifiers on both products (and a crosswalk product holding both "
                "schemes), or a relationship (from: product.column, to: product.column) in "
                "tether.yaml.",
            )
        for prev, nxt, scheme in path:
            if nxt in joined:
                continue
            on = exp.EQ(this=qualified(ref(prev, ids[prev][scheme])),
                        expression=qualified(ref(nxt, ids[nxt][scheme])))
            order.append((nxt, on))
            joined.add(nxt)
    return order


def _bfs(ids: dict[str, dict[str, str]], start: set[str], target: str
         ) -> list[tuple[str, str, str]] | None:
    queue: deque[tuple[str, list[tuple[str, str, str]]]] = deque((s, []) for s in sorted(start))
    seen = set(start)
    while queue:
        node, path = queue.popleft()
        if node == target:
            return path
        for other in sorted(ids):
            if other in seen:
                continue
            shared = sorted(set(ids.get(node, {})) & set(ids[other]))
            if shared:
                seen.add(other)
                queue.append((other, [*path, (node, other, shared[0])]))
    return None


def from_clause(config: TetherConfig, products: list[str], dialect: str = "duckdb"
                ) -> exp.Select:
    """SELECT * FROM the products joined along identifier schemes, each aliased by its name."""
    steps = join_path(config, products)
    root = steps[0][0]
    select = exp.select().from_(_table(config, root, dialect))
    for product, on in steps[1:]:
        select = select.join(_table(config, product, dialect), on=on)
    return select


def _table(config: TetherConfig, product: str, dialect: str, alias_name: str | None = None
           ) -> exp.Expr:
    p = config.products[product]
    alias = exp.TableAlias(this=exp.to_identifier(alias_name or product, quoted=True))
    if p.table:
        t = table_ref(p.table, dialect)
        t.set("alias", alias)
        return t
    return exp.Subquery(this=parse(p.sql or "", dialect), alias=alias)


# --- compiling a call ----------------------------------------------------------------------------


def call_params(
    plan: QueryPlan, args: dict[str, Any], config: TetherConfig, now: dt.datetime, *,
    listing: bool
) -> dict[str, Any]:
    """The bound parameters of one call (no SQL work: cheap enough for every call).
    ``listing``: the plan pages its rows (the caller's runner knows), so ``limit`` binds."""
    params: dict[str, Any] = {}
    for f in plan.filters:
        value = args.get(f.param)
        several = _several(f, value)
        if several is not None:
            params.update(zip(value_names(plan, f, len(several)), several, strict=True))
        elif value is not None:
            params[f.param] = value[0] if f.several and isinstance(value, list) else value
            if f.op == "ieq":
                params[f.param] = name_pattern(params[f.param])
    bounds = window_bounds(plan, args, config, now)
    if bounds is not None:
        params["window_start"], params["window_end"] = bounds
    params.update({b.placeholder: b.value for b in ranges_of(plan, args)})
    if listing:
        given = args.get("limit")
        limit = plan.default_rows if given is None else int(given)  # 0 is asked, not omitted
        if not 1 <= limit <= plan.max_rows:
            raise ArgumentError(f"limit must be between 1 and {plan.max_rows} (got {limit})")
        params["limit"] = limit + 1  # one more than asked tells whether the result is truncated
    return params


NAME_ESCAPE = "!"
"""The LIKE escape of a name filter's pattern (the same character on every engine)."""


def name_pattern(value: Any) -> str:
    """A name filter's value as the LIKE pattern it binds as: the text itself (its own ``%``,
    ``_`` and escape character escaped), so a name matches as written in any case; a ``*``
    stands for any text (``*lace*``: names that contain "lace"; ``Ada*``: that start so)."""
    text = str(value)
    for c in (NAME_ESCAPE, "%", "_"):
        text = text.replace(c, NAME_ESCAPE + c)
    return text.replace("*", "%")


def plan_hops(plan: QueryPlan, *, labels: bool = False) -> list[Hop]:
    """The relationships a listing's plan may follow (plan/paths.py); with ``labels``, also
    those joined only for a label (PathHop.label_only)."""
    return [Hop(h.alias, h.product, h.parent, h.column, h.key) for h in plan.hops
            if labels or not h.label_only]


def path_column(plan: QueryPlan, path: str) -> Reached | None:
    """The attribute a path names (``box.shelf.aisle``) among the plan's hops."""
    return reached(plan_hops(plan), path) if plan.hops else None


def filtered_column(f: Filter) -> exp.Expr:
    """The column a filter compares: its product's own, or the one its path's alias joins."""
    if f.alias is None:
        return qualified(f.column)
    return qualified(ref(f.alias, ref_column(f.column)[1]))


def compile_plan(
    plan: QueryPlan, args: dict[str, Any], config: TetherConfig, now: dt.datetime, *,
    listing: bool, reach: set[str] | frozenset[str] = frozenset()
) -> tuple[exp.Expr, dict[str, Any]]:
    """(AST, bound parameters) for one call. Raises ArgumentError for a bad window argument.
    The AST depends only on which filters are present, so callers may cache its SQL text.
    ``listing``: rows in the plan's order, ``limit`` of them (else a grouped plan's groups).
    ``reach``: the aliases of paths the call counts or sorts by (its filters add theirs): the
    hops to them are joined."""
    if plan.select is None:
        raise ArgumentError(f"plan of kind {plan.kind!r} has no SQL")
    params = call_params(plan, args, config, now, listing=listing)
    query = parse(plan.select, plan.dialect)
    assert isinstance(query, exp.Select)
    wanted = set(reach) | {f.alias for f in plan.filters if f.alias and (
        f.param in params or _several(f, args.get(f.param)) is not None)}
    if "window_start" in params and plan.window is not None and plan.window.via:
        wanted.add(plan.window.via)  # the time is the referent's: its hop is joined
    bounded = [(b, path_column(plan, b.column)) for b in ranges_of(plan, args)]
    wanted |= {found.alias for _b, found in bounded if found is not None}
    if wanted:
        query = join_hops(query, plan_hops(plan, labels=True), wanted,
                          lambda product, alias: _table(config, product, plan.dialect, alias))
    for f in plan.filters:
        several = _several(f, args.get(f.param))
        if several is not None:
            query = query.where(exp.In(this=filtered_column(f), expressions=[
                placeholder(k) for k in value_names(plan, f, len(several))]))
            continue
        if f.param not in params:
            continue
        route = chosen_route(f, params[f.param])
        if route is not None and route.via:  # another scheme: through the crosswalk
            assert route.match and route.take
            inner = exp.select(qualified(f"{route.via}.{route.take}")).from_(
                _table(config, route.via, plan.dialect)).where(exp.EQ(
                    this=qualified(f"{route.via}.{route.match}"),
                    expression=placeholder(f.param)))
            query = query.where(exp.In(this=filtered_column(f), query=exp.Subquery(this=inner)))
            continue
        if f.op == "ieq":  # a name, in any case; *part* for the names holding it
            # one statement for both (the value binds as a pattern: name_pattern), so the
            # SQL text still depends only on which filters are present
            cond: exp.Expr = exp.Escape(this=exp.Like(
                this=exp.Lower(this=exp.cast(filtered_column(f), "text")),
                expression=exp.Lower(this=placeholder(f.param))),
                expression=exp.Literal.string(NAME_ESCAPE))
        else:
            cond = {"eq": exp.EQ, "gte": exp.GTE, "lt": exp.LT}[f.op](
                this=filtered_column(f), expression=placeholder(f.param))
        query = query.where(cond)
    for b, found in bounded:
        col = (qualified(ref(found.alias, found.column)) if found is not None
               else qualified(ref(plan.product or "", b.column)))
        query = query.where(_COMPARE[b.op](this=col, expression=placeholder(b.placeholder)))
    if "window_start" in params:
        query = query.where(_window_condition(plan))
    if listing:
        query = query.order_by(*[qualified(c) for c in plan.order_by]).limit(placeholder("limit"))
    elif plan.group_by:
        query = query.order_by(*[exp.column(c, quoted=True) for c in plan.group_by])
        query = query.limit(exp.Literal.number(plan.max_rows))
    return query, params


def _several(f: Filter, value: Any) -> list[Any] | None:
    """The values of a filter that takes several at once, when more than one is given (one
    value binds as a plain comparison, as before)."""
    if f.several and isinstance(value, list) and len(value) > 1:
        return value
    return None


@dataclass(frozen=True)
class Bound:
    """One end of a ``range`` argument: ``column`` (its own, or PATH.column) compared by
    ``op`` with ``value``, bound as ``placeholder``."""

    column: str
    op: str
    value: int | float
    placeholder: str


_COMPARE = {"gte": exp.GTE, "lte": exp.LTE, "gt": exp.GT, "lt": exp.LT}
_PREFIX = (("<=", "lte"), (">=", "gte"), ("<", "lt"), (">", "gt"))
MAX_RANGES = 8
RANGE_FORMS = ('"5..9" (ends included), "..9", "5..", ">5" or "<9" (without the end), or one '
               'number')


def _number(column: str, text: str) -> int | float:
    t = text.strip()
    try:
        n = int(t) if re.fullmatch(r"[+-]?\d+", t) else float(t)
        if math.isfinite(n):
            return n
        raise ValueError(t)
    except ValueError:
        raise ArgumentError(f"{RANGE}: {column}: {text[:40]!r} is no number; give "
                            f"{RANGE_FORMS}") from None


def ranges_of(plan: QueryPlan, args: dict[str, Any]) -> list[Bound]:
    """The bounds a call's ``range`` argument asks for, in a fixed order (the SQL text depends
    only on which columns and ends are given). ArgumentError for a column the plan does not
    bound or a value that is no number."""
    asked = args.get(RANGE)
    if asked is None:
        return []
    if not isinstance(asked, dict) or len(asked) > MAX_RANGES:
        raise ArgumentError(f"{RANGE}: an object of at most {MAX_RANGES} columns, each "
                            f"{RANGE_FORMS}, e.g. {{\"{(plan.ranges or ['COLUMN'])[0]}\": "
                            '"10..20"}')
    ends: list[tuple[str, str, int | float]] = []  # (column, op, value)
    for column in sorted(asked):
        if column not in plan.ranges:
            raise ArgumentError(f"{RANGE}: {str(column)[:80]!r} is not a number this tool "
                                "bounds; it bounds " + (", ".join(plan.ranges) or "none"))
        value = asked[column]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ArgumentError(f"{RANGE}: {column}: give {RANGE_FORMS}")
        text = str(value).strip()
        prefix = next(((p, op) for p, op in _PREFIX if text.startswith(p)), None)
        if prefix is not None:
            ends.append((column, prefix[1], _number(column, text[len(prefix[0]):])))
        elif ".." in text:
            low, high = text.split("..", 1)
            given = [(column, op, _number(column, t)) for op, t in (("gte", low), ("lte", high))
                     if t.strip()]
            if not given:
                raise ArgumentError(f"{RANGE}: {column}: give {RANGE_FORMS}")
            ends += given
        else:
            n = _number(column, text)
            ends += [(column, "gte", n), (column, "lte", n)]
    return [Bound(column, op, n, name) for (column, op, n), name
            in zip(ends, _free_names(plan, RANGE, len(ends)), strict=True)]


def ranges_key(plan: QueryPlan, args: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What a call's SQL text depends on of its ``range`` argument: the columns and ends."""
    return tuple((b.column, b.op) for b in ranges_of(plan, args))


RESERVED = ("limit", "window_start", "window_end")
"""Placeholder names a call binds besides its filters' (and the cursor's k0, k1, ...)."""


def value_names(plan: QueryPlan, f: Filter, n: int) -> list[str]:
    """Placeholder names of ``n`` values of ``f`` (``status__0``, ...), none another
    parameter's or a reserved name."""
    return _free_names(plan, f.param, n)


def _free_names(plan: QueryPlan, base: str, n: int) -> list[str]:
    """``n`` placeholder names ``base__0``, ``base__1``, ..., none a filter's parameter, a
    reserved name or the cursor's ``k0``, ``k1``, ..."""
    taken = {g.param for g in plan.filters} | set(RESERVED)
    names = []
    for i in range(n):
        name = f"{base}__{i}"
        while name in taken or re.fullmatch(r"k\d+", name):
            name += "_"
        taken.add(name)
        names.append(name)
    return names


def chosen_route(f: Filter, value: Any) -> Route | None:
    """The scheme an identifier value is recognised as (the column's own first); None for a
    filter with one scheme. ArgumentError naming the schemes and the resolving tool when the
    value fits none."""
    if not f.routes:
        return None
    text = str(value)
    for route in f.routes:
        if route.pattern and re.fullmatch(route.pattern, text):
            return route
    names = ", ".join(r.scheme for r in f.routes)
    raise ArgumentError(
        f"{f.param}: {text[:80]!r} is none of the ids it takes ({names}); "
        + (f"{f.resolver} lists every id of each scheme" if f.resolver
           else "check the id's format"))


def routes_key(plan: QueryPlan, args: dict[str, Any]) -> tuple[str, ...]:
    """Which scheme each identifier argument was recognised as (what a call's SQL depends on
    beside the arguments present)."""
    out = []
    for f in plan.filters:
        if f.routes and args.get(f.param) is not None:
            route = chosen_route(f, args[f.param])
            out.append(f"{f.param}:{route.scheme if route else ''}")
    return tuple(out)


def _window_condition(plan: QueryPlan) -> exp.Expr:
    w = plan.window
    assert w is not None and w.column is not None
    col: exp.Expr = qualified(w.column)
    if w.format and w.held_as == "text" and not timeformat.lexical(w.format):
        # text that does not sort as time (05/01/2010): parsed in the engine, then compared
        parse = exp.StrToTime if timeformat.grain(w.format) == "second" else exp.StrToDate
        col = parse(this=col, format=exp.Literal.string(w.format))
    start, end = placeholder("window_start"), placeholder("window_end")
    if w.end_column:  # a spell [time, time_end) counts when it overlaps the window
        end_col = qualified(w.end_column)
        return exp.and_(
            exp.LT(this=col, expression=end),
            exp.or_(end_col.is_(exp.null()), exp.GT(this=end_col.copy(), expression=start)),
        )
    return exp.and_(exp.GTE(this=col, expression=start), exp.LT(this=col.copy(), expression=end))


def words_calendar(config: TetherConfig) -> str | None:
    """The calendar the project's quarter and year words follow in every tool that has no
    calendar of its own (serve.calendar; else its one fiscal calendar; None: calendar quarters)."""
    if config.serve.calendar:
        return config.serve.calendar
    fiscal = [n for n, c in config.calendars.items() if c.start_month != 1]
    return fiscal[0] if len(fiscal) == 1 else None


def fiscal_calendar(config: TetherConfig, name: str | None) -> FiscalCalendar | None:
    """The calendar a metric names, as the fiscal calendar its quarters and years follow (None:
    calendar quarters and years, and FYyyyy forms are errors)."""
    cal = config.calendars.get(name or "")
    return FiscalCalendar(cal.start_month, cal.year_named_by) if cal is not None else None


def resolve_window(plan: QueryPlan, args: dict[str, Any], config: TetherConfig,
                   now: dt.datetime) -> Window | None:
    """The window a call's ``period`` names (context/periods.py), at the project's clock:
    quarters and years in the metric's calendar; omitted, this quarter for a period metric,
    the last ``default_days`` days for a trailing one, no bound for a listing. ArgumentError
    (listing the accepted forms) for a period that is not one of them."""
    w = plan.window
    if w is None or w.kind == "current":
        return None
    fiscal = fiscal_calendar(config, w.calendar)
    default = {"period": "this_quarter", "trailing": f"last_{w.default_days}_days"}.get(w.kind)
    period = args.get("period")
    if period is not None and not isinstance(period, str):
        raise ArgumentError(f"period must be a string; {FORMS_SENTENCE}")
    try:
        return resolve(period, now.astimezone(dt.UTC).date(), fiscal, default=default,
                       timezone=w.timezone)
    except PeriodError as e:
        raise ArgumentError(str(e)) from None


def window_bounds(
    plan: QueryPlan, args: dict[str, Any], config: TetherConfig, now: dt.datetime
) -> tuple[Any, Any] | None:
    """[start, end) for the call's window as the statement compares its time column with:
    aware datetimes, or the column's own values where it holds time in a format (years, text
    dates; ArgumentError for a window its grain cannot hold). None when it has none."""
    found = resolve_window(plan, args, config, now)
    if found is None:
        return None
    start, end = found.bounds()
    w = plan.window
    if w is None or w.format is None:
        return start, end
    column = ref_column(w.column or "")[1]
    try:
        return timeformat.bounds(start, end, w.format, w.held_as or "text", column,
                                 now.astimezone(dt.UTC).date())
    except timeformat.TimeFormatError as e:
        raise ArgumentError(str(e)) from None


