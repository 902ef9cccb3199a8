"""Running a listing: one product's rows under the caller's policy, a page at a time (keyset or
offset cursors), with the total of matching rows in the same statement; or, with count_by or
sum_and_average_of, their counts, totals and means in the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from tether.context.names import name_words, ref, ref_column, ref_parts
from tether.plan.paths import Reached
from tether.policy.entitle import Refusal
from tether.profiling.formats import MONEY_UNITS, is_money
from tether.serve import pagination
from tether.serve.answer import SHOWN, measure_words, valued
from tether.serve.arguments import SHAPING, coerce_times, known
from tether.serve.emptyhints import other_case, unknown_entity
from tether.serve.executor import (
    TOTAL,
    Executor,
    identifiers_read,
    json_rows,
    why_empty,
)
from tether.serve.kinds import Answered, Call
from tether.serve.labels import label_hop, labels_beside, reachable_for
from tether.serve.runners import Runner, register
from tether.toolgen.model import AGGREGATE, RANGE
from tether.toolgen.plan import (
    ArgumentError,
    call_params,
    compile_plan,
    path_column,
    qualified,
    ranges_key,
    resolve_window,
    routes_key,
)


def shape_key(ex: Executor, call: Call) -> tuple[Any, ...]:
    """What the SQL text of a call depends on: tool, version, user, filters present."""
    present = tuple(sorted((k, len(v) if isinstance(v, list) else 0)
                           for k, v in call.args.items() if v is not None))
    order = (call.args.get(ORDER_BY), call.args.get(ORDER))
    return (call.tool, call.version, call.user, present, routes_key(call.plan, call.args), order,
            ranges_key(call.plan, call.args))


ORDER_BY, ORDER = "order_by", "order"


def path_checked(ex: Executor, call: Call, name: str, what: str) -> Reached | None:
    """The path a count_by or order_by value names, checked for the caller: its column not
    masked on the product that holds it (its order or groups would tell the values apart)."""
    found = path_column(call.plan, name)
    if found is None or not reachable_for(ex, call)(name):
        return None
    masks, _ = ex.policy_of(call.user, found.product)
    if found.column in masks:
        raise Refusal("masked_predicate", f"{what}: {name} is masked for your role, so it "
                      "cannot be sorted or counted by")
    return found


def bounds_checked(ex: Executor, call: Call) -> None:
    """A ``range`` argument's columns checked for the caller: a path through a product they
    may not read is not named; a masked column is refused (its bounds would tell its values)."""
    asked = call.args.get(RANGE)
    if not isinstance(asked, dict):
        return  # (none, or not an object: ranges_of says what it takes)
    reach = reachable_for(ex, call)
    for name in map(str, asked):
        found = path_column(call.plan, name)
        if not reach(name):
            raise ArgumentError(f"{RANGE}: {name[:80]!r} is not a number this tool bounds; it "
                                "bounds " + (", ".join(c for c in call.plan.ranges if reach(c))
                                             or "none"))
        product = found.product if found else call.plan.product or ""
        if (found.column if found else name) in ex.policy_of(call.user, product)[0]:
            raise Refusal("masked_predicate", f"{RANGE}: {name} is masked for your role, so "
                          "it cannot be bounded")


def asked_order(call: Call, masks: dict[str, Any] | set[str],
                reach: Callable[[str], bool] = lambda _name: True) -> tuple[str, bool] | None:
    """The order a call asks for, checked: (a column of the rows, or a result field of its
    counts and totals; descending). A measure sorts descending unless ``order`` says asc, a
    column ascending; a masked column is refused (its order would tell its values apart)."""
    spec, order = call.args.get(ORDER_BY), call.args.get(ORDER)
    if order is not None and order not in ("asc", "desc"):
        raise ArgumentError(f"order: {str(order)[:20]!r} is neither asc nor desc")
    by, measured = call.args.get("count_by"), call.args.get(AGGREGATE)
    if spec is None and order is not None:
        implied = implied_order_by(call)
        if implied is None:
            raise ArgumentError("order needs order_by: the column or count to sort by")
        spec = implied
    if spec is None:
        return None
    spec = str(spec)
    plan = call.plan
    if by is not None or measured is not None:
        fields = {"count": "rows"} if by is not None else {}
        if measured is not None:
            fields |= {f"sum_of_{measured}": f"sum_{measured}",
                       f"avg_of_{measured}": f"average_{measured}"}
        if by is not None:
            fields[str(by)] = str(by)
        named = fields.get(spec) or (spec if spec in fields.values() else None)
        if named is None:  # (a result's own field name sorts too: average_C as avg_of_C)
            raise ArgumentError(f"order_by: {spec[:80]!r} is not one of this result's fields; "
                                "with count_by or sum_and_average_of it takes "
                                + ", ".join(fields))
        return named, (order or ("asc" if spec == by else "desc")) == "desc"
    orderable = [o for o in plan.orderable or [] if reach(o)]
    if spec not in orderable:
        hint = ("; count, sum_of_C and avg_of_C sort counts and totals (with count_by or "
                "sum_and_average_of)") if spec == "count" or spec.startswith(
                    ("sum_of_", "avg_of_")) else ""
        own = [o for o in orderable if path_column(plan, o) is None]
        paths = len(orderable) - len(own)
        raise ArgumentError(f"order_by: {spec[:80]!r} is not a column of this tool's rows; "
                            "it takes " + (", ".join(own) or "none")
                            + (f", or a column of what a row points to by its path ({paths}, "
                               "as count_by lists them)" if paths else "") + hint)
    if spec in masks:
        raise Refusal("masked_predicate", f"order_by: {spec} is masked for your role, so rows "
                      "cannot be sorted by it")
    return spec, (order or "asc") == "desc"


def aliases(plan: Any) -> dict[str, str]:
    """The alias each hop of a listing's paths (and labels) joins its product under."""
    return {h.alias: h.product for h in plan.hops}


def implied_order_by(call: Call) -> str | None:
    """What ``order`` without ``order_by`` sorts, where only one thing can be meant: the
    total asked for (sum_of_C), else the count of a count_by; None for rows (which column?)."""
    if call.args.get(ORDER_BY) is not None or call.args.get(ORDER) is None:
        return None
    measured = call.args.get(AGGREGATE)
    if measured is not None:
        return f"sum_of_{measured}"
    return "count" if call.args.get("count_by") is not None else None


def _ordered(node: exp.Expr, desc: bool) -> exp.Ordered:
    """``node`` sorted one way, NULLs last on every engine."""
    return exp.Ordered(this=node, desc=desc, nulls_first=False)


ROW_VALUES = frozenset({"duckdb", "postgres"})
"""Engines that compare row values, ``(a, b) > (:k0, :k1)``, as SQL says (an index serves it).
Elsewhere (Spark compares them as structs of exactly equal types; BigQuery and others not at
all) the same order is written out: ``a > :k0 OR (a = :k0 AND b > :k1)``."""


def beyond_key(keys: list[exp.Expr], first: int, desc: bool, dialect: str) -> exp.Expr:
    """Rows whose key comes after the marks ``:k<first>...`` (before them, ``desc``)."""
    beyond = exp.LT if desc else exp.GT
    marks = [exp.Placeholder(this=f"k{first + i}") for i in range(len(keys))]
    if dialect in ROW_VALUES or len(keys) == 1:
        if len(keys) == 1:
            return beyond(this=keys[0].copy(), expression=marks[0])
        return beyond(this=exp.Tuple(expressions=[k.copy() for k in keys]),
                      expression=exp.Tuple(expressions=marks))
    return exp.or_(*[exp.and_(*[exp.EQ(this=keys[j].copy(), expression=marks[j].copy())
                               for j in range(i)],
                              beyond(this=keys[i].copy(), expression=marks[i].copy()))
                     for i in range(len(keys))])


def _after(column: exp.Expr, keys: list[exp.Expr], desc: bool, null_mark: bool,
           first: int, dialect: str) -> exp.Expr:
    """Rows after the last one of a page sorted by ``column`` (NULLs last), then by the key in
    the same direction: the last row's value is ``:k<first-1>`` (unless NULL) and its key
    ``:k<first>...``."""
    beyond = exp.LT if desc else exp.GT
    tie = beyond_key(keys, first, desc, dialect)
    if null_mark:  # among the NULLs, which sort last: only the key moves on
        return exp.and_(exp.Is(this=column.copy(), expression=exp.Null()), tie)
    mark = exp.Placeholder(this=f"k{first - 1}")
    return exp.or_(beyond(this=column.copy(), expression=mark),
                   exp.Is(this=column.copy(), expression=exp.Null()),
                   exp.and_(exp.EQ(this=column.copy(), expression=mark.copy()), tie))


def listing_window(ex: Executor, call: Call) -> dict[str, Any]:
    """The window a listing used; omitted, no bound, and said so."""
    plan = call.plan
    assert plan.window is not None
    window = resolve_window(plan, call.args, ex.project.config, ex.now(call))
    return window.to_json() if window is not None else {
        "start": None, "end": None, "end_exclusive": True, "calendar": None,
        "timezone": plan.window.timezone, "resolved_from": "default", "label": "all rows"}


def aggregate(ex: Executor, call: Call) -> Answered:
    """A listing's matching rows counted (per value of one enum parameter with count_by),
    and the total and mean of a numeric column (sum_and_average_of), in the engine, over
    every row the call matches with the caller's policy applied as for the rows. A column
    whose unit comes from each row's currency is totalled per currency."""
    config, plan = ex.project.config, call.plan
    product = plan.product or ""
    by = call.args.get("count_by")
    skip = 0  # groups already shown (the cursor of a grouped answer)
    if call.args.get("cursor"):
        if not by:
            raise ArgumentError(f"{AGGREGATE} without count_by answers in one result: it takes "
                                "no cursor")
        mark = pagination.decode(ex.cursor_key, str(call.args["cursor"]), call.user,
                                 call.tool, call.version, call.args)
        if len(mark) != 1 or not isinstance(mark[0], int) or mark[0] < 0:
            raise pagination.CursorError("this cursor is not one of this tool's: ask for the "
                                         "first page again")
        skip = mark[0]
    f = next((f for f in plan.filters if f.param == by and f.alias is None), None) if by else None
    # the same set whether the schema lists it (grounded) or not (bare)
    reach = reachable_for(ex, call)
    countable = [c for c in (plan.counts if plan.counts is not None else [
        x.param for x in plan.filters if not x.routes]) if reach(c)]
    by_path = path_checked(ex, call, str(by), "count_by") if by and f is None else None
    # a column of the rows counted by, that no parameter filters (a star rating, a month)
    own = str(by) if by and f is None and by_path is None and by in countable else None
    if by and ((f is None and by_path is None and own is None) or (f is not None and f.routes)
               or by not in countable):
        raise ArgumentError(f"count_by: {str(by)[:80]!r} is not one of this tool's "
                            "parameters to count by; it takes " + (
                                ", ".join(countable) or "none"))
    masks, _ = ex.policy_of(call.user, product)
    sort = asked_order(call, masks, reach)
    measured = call.args.get(AGGREGATE)
    if measured is not None and measured not in plan.aggregates:
        raise ArgumentError(f"{AGGREGATE}: {str(measured)[:80]!r} is not one of "
                            f"{', '.join(plan.aggregates) or 'no column'}")
    for param, column in [(str(by), ref_column(f.column)[1]) if f else (str(by), own or ""),
                          (AGGREGATE, str(measured or ""))]:
        if column and (column in masks or column.rsplit(".", 1)[-1] in masks):
            raise Refusal("masked_predicate", f"{param}: {column} is masked for your role, "
                          "so it cannot be counted or totalled")
    src = ex.source(plan.source)
    args = {k: v for k, v in coerce_times(call.args, call.definition).items()
            if k not in SHAPING and k not in ("limit", "cursor")}
    named = label_hop(ex, call, by_path.alias if by_path else product,
                       by_path.column if by_path else ref_column(f.column)[1] if f else None)
    joined = {a for a in (by_path.alias if by_path else None, named[0] if named else None) if a}
    query, params = compile_plan(plan, args, config, ex.now(call), listing=True, reach=joined)
    assert isinstance(query, exp.Select)
    query.set("order", None)
    query.set("limit", None)
    params.pop("limit", None)
    if by_path is not None:  # what a row points to, beside the row's own columns
        query = query.select(qualified(ref(by_path.alias, by_path.column)).as_(
            str(by), quoted=True))
    if named is not None:  # the name of each group's referent, beside its key
        query = query.select(qualified(ref(*named)).as_(f"{named[0]}.label", quoted=True))
    def col(path: list[str]) -> exp.Expr:  # a column of the listing's rows, or a STRUCT's field
        head, *rest = path
        out: exp.Expr = exp.column(head, table="q", quoted=True)
        for part in rest:
            out = exp.Dot(this=out, expression=exp.to_identifier(part, quoted=True))
        return out

    groups: list[tuple[list[str], str]] = []  # (column path, name in the result)
    if f is not None:
        groups.append((ref_parts(f.column)[1:], str(by)))
    elif by_path is not None or own is not None:
        groups.append(([str(by)], str(by)))
    if named is not None:
        groups.append(([f"{named[0]}.label"], f"{named[0]}.label"))
    if measured is not None:
        unit = plan.units.get(measured, "")
        if "{" in unit:  # amounts in each row's currency are never added across currencies
            per = unit[unit.index("{") + 1:unit.index("}")]
            if [per] not in [path for path, _ in groups]:
                groups.append(([per], per))

    # aliases quoted: an unquoted one is folded to lower case by PostgreSQL (groupID -> groupid)
    selects: list[exp.Expr] = [col(c).as_(n, quoted=True) for c, n in groups]
    selects.append(exp.Count(this=exp.Star()).as_("rows", quoted=True))
    units: dict[str, str] = {}
    for how, fn in (("sum", exp.Sum), ("average", exp.Avg)):
        if measured is None:
            break
        name = f"{how}_{measured}"
        selects.append(fn(this=col([measured])).as_(name, quoted=True))
        if plan.units.get(measured):
            units[name] = plan.units[measured]
    if measured is not None:  # an average is over the rows that hold a value: how many do
        selects.append(exp.Count(this=col([measured])).as_(f"rows_with_{measured}",
                                                            quoted=True))
    grouped = exp.select(*selects).from_(query.subquery("q"))
    most = config.serve.max_result_rows
    if groups:
        grouped = grouped.group_by(*[col(c) for c, _ in groups])
        firsts = [_ordered(exp.column(sort[0], quoted=True), sort[1])] if sort else []
        grouped = grouped.order_by(*firsts, *[col(c) for c, _ in groups])
        # limit keeps its meaning, groups of this answer (by value when ordered: the top N,
        # else by the counted value), and every matching row is still counted beside them
        # (one statement): an identifier's thousands of groups never pass as the total
        grouped = grouped.select(exp.Window(this=exp.Sum(this=exp.Count(
            this=exp.Star()))).as_(TOTAL, quoted=True))
        given = call.args.get("limit")
        most = plan.default_rows if given is None else int(given)
        if not 1 <= most <= plan.max_rows:
            raise ArgumentError(f"limit must be between 1 and {plan.max_rows} (got {most})")
        if skip:  # the groups after those of the pages before (the order is total)
            grouped = grouped.offset(exp.Placeholder(this="k0"))
            params["k0"] = skip
    secured, policy_params = ex.secure(grouped, call.user, aliases(plan))
    params.update(policy_params)
    got = ex.fetch(src, src.render(secured), params, most, known(call))
    rows = json_rows(got.names, got.rows)
    totals = {r.pop(TOTAL, None) for r in rows}
    if not groups and rows and rows[0]["rows"] == 0:
        rows = []  # nothing matched: no totals of nothing
    total = (int(next(iter(totals))) if len(totals) == 1 and None not in totals
             else sum(int(r["rows"]) for r in rows))
    next_cursor = (pagination.encode(ex.cursor_key, call.user, call.tool, call.version,
                                     call.args, [skip + len(rows)], total)
                   if groups and got.capped is not None and rows else None)
    out = ex.result(call, rows, [product], truncated=got.capped is not None,
                    next_cursor=next_cursor, paged=True)
    out["total_rows"] = total
    out["aggregate"] = {"count_by": by, AGGREGATE: measured}
    if sort is not None:
        out["aggregate"]["sorted_by"] = call.args.get(ORDER_BY) or implied_order_by(call)
    if (implied := implied_order_by(call)) is not None:  # said, as an interpretation is
        out["aggregate"][ORDER_BY] = implied
    resolved, via = identifiers_read(call)
    if resolved:
        out["identifiers"] = resolved
    if units:
        out["units"] = units
    if plan.window is not None:
        out["window"] = listing_window(ex, call)
    why_empty(out, call, ex.project.config)
    unknown_entity(ex, out, call)
    other_case(ex, out, call)
    return Answered(out, ex.evidence(call, src, src.display(secured), params,
                                       [product, *via], as_of=[product]))


def run(ex: Executor, call: Call) -> Answered:
    config, plan = ex.project.config, call.plan
    bounds_checked(ex, call)
    if any(call.args.get(k) is not None for k in SHAPING):
        return aggregate(ex, call)
    product = plan.product or ""
    src = ex.source(plan.source)
    args = coerce_times(call.args, call.definition)
    params = call_params(plan, args, config, ex.now(call), listing=True)
    sort = asked_order(call, ex.policy_of(call.user, product)[0], reachable_for(ex, call))
    by_path = path_checked(ex, call, sort[0], "order_by") if sort else None
    last: list[Any] = []
    if call.args.get("cursor"):
        last = pagination.decode(ex.cursor_key, str(call.args["cursor"]), call.user,
                                 call.tool, call.version, call.args)
        width = 1 if plan.paging == "offset" else len(plan.order_by) + bool(sort)
        if len(last) != width or (plan.paging == "offset" and (
                not isinstance(last[0], int) or last[0] < 0)):
            raise pagination.CursorError("this cursor is not one of this tool's: ask for "
                                         "the first page again")
    totalled, moments = ([], []) if call.args.get("cursor") else summed(ex, call)
    null_mark = bool(sort and plan.paging == "keyset" and last and last[0] is None)
    key = (*shape_key(ex, call), null_mark)
    if key not in ex.caches.sql_texts:
        query, _ = compile_plan(plan, args, config, ex.now(call), listing=True,
                                reach={by_path.alias} if by_path else set())
        assert isinstance(query, exp.Select)
        keys = [qualified(k) for k in plan.order_by]
        sorted_by = (qualified(ref(by_path.alias, by_path.column)) if by_path
                     else qualified(ref(product, sort[0])) if sort else None)
        if by_path is not None and sort:  # the row shows what it was sorted by
            query = query.select(sorted_by.copy().as_(sort[0], quoted=True))  # type: ignore[union-attr]
        if sort:  # the column asked first, NULLs last; then the key (or every column) breaks ties
            by = sorted_by
            assert by is not None
            rest = [k for k in keys if k != by] if plan.paging == "offset" else keys
            query.set("order", None)
            query = query.order_by(_ordered(by, sort[1]), *[
                _ordered(k, sort[1] if plan.paging == "keyset" else False) for k in rest])
        if call.args.get("cursor") and plan.paging == "keyset" and sort:
            assert sorted_by is not None
            query = query.where(_after(sorted_by.copy(), keys, sort[1],
                                       null_mark, 1, src.dialect))
        elif call.args.get("cursor") and plan.paging == "keyset":
            query = query.where(beyond_key(keys, 0, False, src.dialect))
        elif call.args.get("cursor"):  # no key: the rows before this page are skipped
            query = query.offset(exp.Placeholder(this="k0"))
        else:  # the first page also counts every matching row, in the same statement
            query = query.select(exp.Window(this=exp.Count(this=exp.Star())).as_(TOTAL))
            for i, column in enumerate(totalled):  # and totals what adds up, beside it
                query = query.select(exp.Window(this=exp.Sum(this=qualified(ref(
                    product, column)))).as_(f"{TOTAL}_{i}", quoted=True))
            for i, column in enumerate(moments):  # a snapshot's totals: one moment only
                for how, fn in (("min", exp.Min), ("max", exp.Max)):
                    query = query.select(exp.Window(this=fn(this=qualified(ref(
                        product, column)))).as_(f"{TOTAL}_{how}_{i}", quoted=True))
        secured, policy_params = ex.secure(query, call.user, aliases(plan))
        ex.caches.sql_texts[key] = (src.render(secured), src.display(secured), policy_params)
    params.update(ex.caches.sql_texts[key][2])
    params.update({f"k{i}": v for i, v in enumerate(last) if not (null_mark and i == 0)})
    limit = int(params["limit"]) - 1
    run_text, shown_text, _ = ex.caches.sql_texts[key]
    got = ex.fetch(src, run_text, params, limit, known(call))
    # (what the statement added beside each row's own columns is read from the first row)
    first = json_rows(got.names, got.rows[:1])[0] if got.rows else {}
    rows = json_rows(got.names, got.rows, TOTAL)
    if call.args.get("cursor"):
        total = pagination.total_of(str(call.args["cursor"]))
    else:
        total = int(first[TOTAL]) if rows else 0
    sums = {c: first.get(f"{TOTAL}_{i}") for i, c in enumerate(totalled)}
    if any(first.get(f"{TOTAL}_min_{i}") != first.get(f"{TOTAL}_max_{i}")
           for i in range(len(moments))):
        sums = {}  # rows of several snapshots: their amounts do not add up
    labels_beside(ex, call, rows)  # the name of what each reference points to
    truncated = got.capped is not None
    next_cursor = None
    if truncated and got.rows:
        if plan.paging == "offset":
            mark = [(last[0] if last else 0) + len(got.rows)]
        else:
            last_raw = dict(zip(got.names, got.rows[-1], strict=True))
            mark = ([last_raw[sort[0]]] if sort else []) + [
                last_raw[ref_column(k)[1]] for k in plan.order_by]
        next_cursor = pagination.encode(ex.cursor_key, call.user, call.tool, call.version,
                                        call.args, mark, total)
    out = ex.result(call, rows, [product], truncated=truncated, next_cursor=next_cursor,
                       paged=True)
    out["total_rows"] = total
    if (total or 0) > 1 and any(v is not None for v in sums.values()):
        out["totals"] = {c: v for c, v in sums.items() if v is not None}
    resolved, via = identifiers_read(call)
    if resolved:
        out["identifiers"] = resolved
    if plan.window is not None:  # omitted on a listing: no bound, and said so
        out["window"] = listing_window(ex, call)
    if got.capped == "bytes":
        out["capped"] = (f"stopped at {config.serve.max_result_bytes:,} bytes of values; "
                         "next_cursor continues")
    if not call.args.get("cursor"):
        why_empty(out, call, ex.project.config)
        unknown_entity(ex, out, call)
        other_case(ex, out, call)
    return Answered(out, ex.evidence(call, src, shown_text, params, [product, *via],
                                       as_of=[product]))


ADDITIVE = frozenset({"count", "milliseconds", "seconds", "minutes", "hours", "days"})
"""Units whose values add up across rows, besides an amount in one named currency."""


def summed(ex: Executor, call: Call) -> tuple[list[str], list[str]]:
    """(the columns a listing's first page totals over every matching row, the time columns
    whose one value those rows must share for the totals to be said). Totalled: the columns it
    may total (sum_and_average_of) whose unit adds up across rows (an amount in one named
    currency or its cents, a count, a duration; never a ratio, a percent, an amount in each
    row's own currency or an unknown one), not masked for the caller. Where the key holds a
    time column (a periodic snapshot, or a per-day aggregate: the shape does not tell them
    apart), amounts add up within one moment only: totals are said only when every matching
    row has the same value there (a period of one snapshot). None where rows each hold a state
    over a span of time (a metric's time_end is one of the product's columns). "How much" over
    a first page was answered with the page's sum."""
    plan, config = call.plan, ex.project.config
    name = plan.product or ""
    product = config.products.get(name)
    if product is None or any(
            m.time_end and ref_column(m.time_end)[0] == name for m in config.metrics.values()):
        return [], []
    masks, _ = ex.policy_of(call.user, name)
    moments = [c for c in product.primary_key if c in product.time_columns]
    if any(c in masks for c in moments):
        return [], []  # a masked time reads as one value: the moments cannot be told apart
    totalled = [c for c in plan.aggregates if c not in masks
                and c.rsplit(".", 1)[-1] not in masks and _adds_up(c, plan.units.get(c, ""))]
    return totalled, moments if totalled else []


PER_UNIT = frozenset({"price", "prices", "rate", "rates", "per", "avg", "average", "mean",
                      "median", "ratio", "pct", "percent"})
"""Words that make a number a value per something (a unit price, a rate, a mean): a sum of them
over rows means nothing, whatever its unit."""


def _adds_up(column: str, unit: str) -> bool:
    if set(name_words(column.rsplit(".", 1)[-1])) & PER_UNIT:
        return False  # an amount of an unknown currency ("cents", "currency") may mix several
    return unit in ADDITIVE or (is_money(unit) and unit not in MONEY_UNITS)


def listing_words(result: dict[str, Any]) -> str:
    shown, total = result.get("row_count", 0), result.get("total_rows")
    if not isinstance(total, int):
        return f"{shown} rows shown"
    if total == 0:
        return "0 matching rows"
    # the total is the one number: a small model answers "how many" with a number it reads, and
    # a page's count read as the total was the failure this sentence exists to prevent (after
    # the total too: "118 matching rows in all; 50 of 118 shown" was answered 50); the page's
    # size is row_count
    if shown >= total:
        return f"{total} matching rows in all, every one shown" + (
            _one_row(result) or _totals(result))
    out = f"{total} matching rows in all; one page of them shown"
    if result.get("next_cursor"):
        out += " (the rest: next_cursor)"
    return out + _totals(result)


def _one_row(result: dict[str, Any]) -> str:
    """The one matching row's numbers that carry a unit, said with them: where a row already
    holds a count or an amount (a row per site and day with its people on shift), "1 matching
    row" alone was answered 1."""
    rows, units = result.get("rows") or [], result.get("units") or {}
    if len(rows) != 1:
        return ""
    row = rows[0]
    said = [f"{k} = {valued(row[k], unit, row)}" for k, unit in units.items()
            if isinstance(row.get(k), int | float) and not isinstance(row.get(k), bool)]
    return (": " + ", ".join(said[:SHOWN])) if said else ""


def _totals(result: dict[str, Any]) -> str:
    """What the matching rows add up to, each with its unit (not a page's sum)."""
    totals, units = result.get("totals") or {}, result.get("units") or {}
    said = [f"{measure_words('sum_' + k)} {valued(v, units.get(k), {})}"
            for k, v in totals.items()]
    return ("; over all of them: " + ", ".join(said[:SHOWN])) if said else ""


def _measured(key: str, row: dict[str, Any], units: dict[str, str]) -> str:
    """A total or an average in words; an average over fewer rows than the group's says so
    (a row without a value is left out of it, as SQL's AVG leaves it)."""
    said = f"{measure_words(key)} {valued(row.get(key), units.get(key), row)}"
    held = row.get("rows_with_" + key.partition("_")[2])
    if key.startswith("average_") and isinstance(held, int) and held != row.get("rows"):
        said += f" (over the {held} rows with a value)"
    return said


def aggregate_words(result: dict[str, Any]) -> str:
    agg, rows, units = result["aggregate"], result.get("rows") or [], result.get("units") or {}
    total = result.get("total_rows", 0)
    by = agg.get("count_by")
    measures = [k for k in rows[0] if k.startswith(("sum_", "average_"))] if rows else []
    if not by:  # one row: the totals over every matching row
        said = [_measured(k, rows[0], units) for k in measures] if rows else []
        return f"{total} matching rows" + (": " + ", ".join(said) if said else "")
    named = []
    for r in rows[:SHOWN]:
        values = ", ".join(_measured(k, r, units) for k in measures)
        label = next((v for k, v in r.items() if k.endswith(".label")), None)
        group = f"{r.get(by)} ({label})" if label is not None else f"{r.get(by)}"
        if r.get(by) is None and "." in str(by):  # a path's: no referent, or one without it
            group = "none (no row it points to, or no value there)"
        named.append(f"{group}: {r.get('rows')} rows" + (f" ({values})" if values else ""))
    more = f", and {len(rows) - SHOWN} more values in rows" if len(rows) > SHOWN else ""
    ordered = agg.get("sorted_by")
    cut = ((f"; {len(rows)} values shown, more match (next_cursor continues"
            + ("" if ordered else ", or order_by count for the top ones") + ")")
           if result.get("truncated") else "")
    implied = (f"; order without order_by read as order_by {agg['order_by']}"
               if agg.get("order_by") else "")
    return (f"{total} matching rows counted by {by}" + (": " + ", ".join(named) if named else "")
            + more + cut + implied)


def opening(plan: Any, result: dict[str, Any]) -> str:
    """How many rows of how many matching (never a page read as the count), or the counts and
    totals asked for."""
    return aggregate_words(result) if result.get("aggregate") else listing_words(result)


RUNNER = register(Runner("list", run, opening=opening))
