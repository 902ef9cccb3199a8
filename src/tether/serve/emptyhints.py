"""What an empty listing says beside its zero: the id names no entity the caller may see, or
the value matches another case of one they may (one look-up each, only for an empty result,
over the caller's own rows)."""

from __future__ import annotations

import difflib
from typing import Any

from sqlglot import exp

from tether.context.meta import enum_of
from tether.context.names import ref_column
from tether.errors import QueryError, SourceError
from tether.policy.entitle import table_allowed
from tether.serve.executor import Executor
from tether.serve.kinds import Call
from tether.serve.peruser import values
from tether.toolgen.plan import chosen_route


def unknown_entity(ex: Executor, out: dict[str, Any], call: Call) -> None:
    """An empty result for an identifier that names no entity the caller may see says so
    (one look-up, only for an empty result): the id is wrong, not the count zero. The
    entity is looked for where its scheme lives: the crosswalk a value was resolved
    through, else the product keyed by the scheme."""
    if out.get("rows") or "empty_reason" not in out:
        return
    config = ex.project.config
    for f in call.plan.filters:
        value = call.args.get(f.param)
        table, column = ref_column(f.column)
        scheme = config.products[table].identifiers.get(column) if (
            table in config.products) else None
        if value is None or scheme is None:
            continue
        route = chosen_route(f, value)
        home: str | None
        if route is not None and route.via and route.match:
            home, key, scheme = route.via, route.match, route.scheme
        else:
            home = next((n for n, p in config.products.items()
                         if len(p.primary_key) == 1
                         and p.identifiers.get(p.primary_key[0]) == scheme), None)
            key = config.products[home].primary_key[0] if home else ""
            crosswalk = next((r for r in f.routes if r.via and r.take), None)
            if home is None and crosswalk is not None:  # the crosswalk holds every id
                home, key = crosswalk.via, str(crosswalk.take)
        if home is None or not table_allowed(config, call.user, home):
            continue
        rel = ex.relation(call.user, home)
        src = ex.source(config.products[home].source)
        q = exp.select(exp.Literal.number(1)).from_(rel.subquery("q")).where(exp.EQ(
            this=exp.column(key, table="q", quoted=True),
            expression=exp.Placeholder(this="entity"))).limit(1)
        if not src.run(src.render(q), {**rel.params, "entity": value}, ex.timeout):
            where = f" (every id: {f.resolver})" if f.resolver else ""
            out["empty_reason"] = (f"no {scheme} {str(value)[:80]} among the {home} you "
                                   f"may see: the id matches no entity{where}")
            return


def other_case(ex: Executor, out: dict[str, Any], call: Call) -> None:
    """Nothing matched a text value as written, but exactly one value of that column among the
    rows the caller may see is the same text in another case (``hub-04`` for ``Hub-04``, a
    column of too many values for the schema to list them): the result says which, to call
    again with (a zero read as the answer was the failure). One look-up, only for an empty
    result, over the caller's own rows (row filter applied; a masked column never filters)."""
    product = call.plan.product
    if (not product or out.get("total_rows", 0 if not out.get("rows") else 1) != 0
            or call.args.get("cursor")):
        return
    config = ex.project.config
    props = (call.definition.get("inputSchema") or {}).get("properties") or {}
    masks, _ = ex.policy_of(call.user, product)
    rel = ex.relation(call.user, product)
    src = ex.source(config.products[product].source)
    for f in call.plan.filters:
        value = call.args.get(f.param)
        table, column = ref_column(f.column)
        if f.op == "ieq" and isinstance(value, str):  # a name: the names that hold it
            if close_names(ex, out, call, f.param, table, column, value):
                return
            continue
        if (not isinstance(value, str) or f.routes or enum_of(props.get(f.param)) is not None
                or table != product or "." in column or column in masks):
            continue
        col = exp.column(column, table="q", quoted=True)
        q = (exp.select(col).distinct().from_(rel.subquery("q"))
             .where(exp.EQ(this=exp.Lower(this=exp.cast(col.copy(), "text")),
                           expression=exp.Lower(this=exp.Placeholder(this="other_case"))))
             .limit(2))
        try:
            found = [r[0] for r in src.run(src.render(q), {**rel.params, "other_case": value},
                                           ex.timeout)]
        except (QueryError, SourceError):  # a hint that cannot be read leaves the answer be
            return
        if len(found) == 1 and isinstance(found[0], str) and found[0] != value:
            said = (f"no row you may see has {f.param} {value[:80]!r} as written; "
                    f"{found[0][:80]!r} (another case) is one of its values: call again with it")
            out["empty_reason"] = (f"{out['empty_reason']}; {said}" if out.get("empty_reason")
                                   else said)
            return
        spec = config.products[product]
        if column not in spec.identifiers and column not in spec.primary_key and (
                _nearest_values(ex, out, call, f.param, product, column, value)):
            return  # (an id that names nothing is unknown_entity's to say)


CLOSE = 5
"""Names a hint offers at most."""
LISTED = 12
"""A column of at most this many values the caller may see is said whole when none is near."""


def _nearest_values(ex: Executor, out: dict[str, Any], call: Call, param: str, product: str,
                    column: str, value: str) -> bool:
    """Nothing matched a text value, and no value differs from it only in case: the values
    nearest it among those the caller's rows hold (or all of them, when few), said in the
    result to call again with: "United States" matching nothing reads as none sold, not as a
    value the data spells "USA". True when it said some."""
    try:
        have = sorted(values(ex, call.user, product, column))
    except (QueryError, SourceError):  # a hint that cannot be read leaves the answer be
        return False
    folded = {v.lower(): v for v in have}
    near = [folded[v] for v in difflib.get_close_matches(value.lower(), list(folded), CLOSE,
                                                          0.6)]
    words = set(value.lower().split())
    near += [v for v in have if v not in near and words & set(v.lower().split())][:CLOSE]
    if not near and not 0 < len(have) <= LISTED:
        return False
    said = (f"no row you may see has {param} {value[:80]!r}; "
            + (f"the nearest values you may see: {', '.join(repr(v[:80]) for v in near[:CLOSE])}"
               if near else f"the values you may see: {', '.join(repr(v[:80]) for v in have)}")
            + ": call again with one")
    out["empty_reason"] = (f"{out['empty_reason']}; {said}" if out.get("empty_reason")
                           else said)
    return True


def close_names(ex: Executor, out: dict[str, Any], call: Call, param: str, product: str,
                column: str, value: str) -> bool:
    """Nothing matched a name (a label, matched in any case): the names among the rows the
    caller may see of ``product`` that hold the words given (all of them, else any), said in
    the result to call again with. One look-up (two at most); True when it said some."""
    config = ex.project.config
    if (product not in config.products or not table_allowed(config, call.user, product)
            or column in ex.policy_of(call.user, product)[0]):
        return False
    rel = ex.relation(call.user, product)
    src = ex.source(config.products[product].source)
    col = exp.Lower(this=exp.cast(exp.column(column, table="q", quoted=True), "text"))
    words = [w for w in value.lower().replace("*", " ").split() if w][:4] or [value.lower()]
    for joined in (exp.and_, exp.or_):
        holds = [exp.GT(this=exp.StrPosition(this=col.copy(), substr=exp.Placeholder(
            this=f"close_{i}")), expression=exp.Literal.number(0)) for i in range(len(words))]
        q = (exp.select(exp.column(column, table="q", quoted=True)).distinct()
             .from_(rel.subquery("q")).where(joined(*holds))
             .order_by(exp.column(column, table="q", quoted=True)).limit(CLOSE))
        params = {**rel.params, **{f"close_{i}": w for i, w in enumerate(words)}}
        try:
            found = [str(r[0]) for r in src.run(src.render(q), params, ex.timeout)
                     if r[0] is not None]
        except (QueryError, SourceError):  # a hint that cannot be read leaves the answer be
            return False
        if found:
            said = (f"no row you may see has {param} {value[:80]!r}; names you may see that "
                    f"hold {'those words' if len(words) > 1 else 'it'}: "
                    + ", ".join(repr(n[:80]) for n in found) + " (call again with one)")
            out["empty_reason"] = (f"{out['empty_reason']}; {said}" if out.get("empty_reason")
                                   else said)
            return True
        if len(words) == 1:
            return False
    return False
