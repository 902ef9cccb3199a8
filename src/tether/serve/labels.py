"""Names beside ids: a listing's row, or a group, that holds the key of another product carries
that product's label (``products.P.label``) beside it, read as the caller may read that product
(its row filter; a masked label, or a product the caller may not read, gives none), so "the top
five customers by spend" names them in one call.

A grouped answer joins the label in its own statement (listing.aggregate); a page of rows looks
the labels up afterwards, one statement per referenced product over the page's keys only: a
join in the listing's statement would join every matching row before the page is cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from tether.errors import QueryError, SourceError
from tether.plan.paths import products_on, reached
from tether.policy.entitle import table_allowed
from tether.serve.executor import Executor, jsonable
from tether.serve.kinds import Call
from tether.toolgen.plan import placeholder, plan_hops

LABELLED = 200
"""Most distinct keys of one referenced product a page looks labels up for."""


def reachable_for(ex: Executor, call: Call) -> Callable[[str], bool]:
    """Whether a name the call may give (a column, or a path) is one the caller reaches: a
    path only where the caller may read every product on it (a product they may not read is
    neither reachable nor named)."""
    config, hops = ex.project.config, plan_hops(call.plan, labels=True)

    def ok(name: str) -> bool:
        found = reached(hops, name) if hops else None
        return found is None or all(table_allowed(config, call.user, p)
                                    for p in products_on(hops, found.alias))
    return ok


def label_hop(ex: Executor, call: Call, alias: str, column: str | None
              ) -> tuple[str, str] | None:
    """(the alias, the label column) of the product ``alias``'s ``column`` refers to, where
    that product has a label the caller may read (not masked, the product reachable): its name
    goes beside each key."""
    if column is None:
        return None
    config = ex.project.config
    hop = next((h for h in call.plan.hops if h.parent == alias and h.column == column), None)
    if hop is None:
        return None
    label = config.products[hop.product].label
    if (label is None or not reachable_for(ex, call)(f"{hop.alias}.{label}")
            or label in ex.policy_of(call.user, hop.product)[0]):
        return None
    return hop.alias, label


def labels_beside(ex: Executor, call: Call, rows: list[dict[str, Any]]) -> None:
    """Each reference of a page's rows (a column holding another product's key, not masked for
    the caller) followed by ``<alias>.label``: the label of the row it points to, as the caller
    may read it (None where they may see no such row). In place."""
    product = call.plan.product or ""
    products = ex.project.config.products
    if not rows or not any(h.parent == product and products[h.product].label
                           for h in call.plan.hops):
        return  # (every call of a listing: nothing read unless a reference names a label)
    masked = ex.policy_of(call.user, product)[0]
    for hop in call.plan.hops:
        if hop.parent != product or hop.column in masked or hop.column not in rows[0]:
            continue
        named = label_hop(ex, call, product, hop.column)
        if named is None:
            continue
        keys = list(dict.fromkeys(r[hop.column] for r in rows if r[hop.column] is not None))
        found = _labels(ex, call.user, hop.product, hop.key, named[1], keys[:LABELLED])
        if found is None:  # a look-up that cannot be read leaves the rows as they are
            continue
        said = f"{named[0]}.label"
        for i, r in enumerate(rows):
            at = list(r).index(hop.column) + 1
            items = list(r.items())
            rows[i] = dict([*items[:at], (said, found.get(r[hop.column])), *items[at:]])


def _labels(ex: Executor, user: str, product: str, key: str, label: str, keys: list[Any]
            ) -> dict[Any, Any] | None:
    """{key: label} of ``product``'s rows whose ``key`` is one of ``keys``, among the rows
    ``user`` may read; None when the look-up fails."""
    if not keys:
        return {}
    rel = ex.relation(user, product)
    src = ex.source(ex.project.config.products[product].source)
    k = exp.column(key, table="q", quoted=True)
    q = (exp.select(k, exp.column(label, table="q", quoted=True)).from_(rel.subquery("q"))
         .where(exp.In(this=k.copy(), expressions=[placeholder(f"label_{i}")
                                                   for i in range(len(keys))])))
    params = {**rel.params, **{f"label_{i}": v for i, v in enumerate(keys)}}
    try:
        got = src.run(src.render(q), params, ex.timeout)
    except (QueryError, SourceError):
        return None
    return {jsonable(r[0]): jsonable(r[1]) for r in got}
