"""The probe (`explain_data_product`): one product explained to one caller, read through the
caller's entitled relation like every other read.

What the column is (type, meaning, unit) comes from the project's profile of the product; what
the caller may see of it comes from their entitled relation: the row count, the most frequent
values of each categorical column (none for a masked column, which says its mask; no restricted
column at all) and as_of. A user filtered to one region gets that region's count and values; a
role that may not read the product gets a refusal.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from tether.policy.entitle import require_table
from tether.profiling import profile_product
from tether.serve.discovery import unknown_product
from tether.serve.executor import jsonable
from tether.serve.kinds import Answered, ToolError
from tether.serve.runners import Finding, Runner, register

if TYPE_CHECKING:
    from tether.serve.executor import Executor
    from tether.serve.kinds import Answered, Call

VALUES = 12
"""Most values shown per column."""
TTL = 60.0
"""Seconds a caller's probe of a product is reused (per role and attributes)."""


def explain(ex: Executor, call: Call) -> Answered:

    config = ex.project.config
    product = str(call.args["product"])
    require_table(config, call.user, product)
    key = (product, *ex.scope_key(call.user))
    p = config.products[product]
    src = ex.source(p.source)
    rel = ex.relation(call.user, product)
    q = exp.select(exp.func("COUNT", exp.Star())).from_(rel.subquery("q"))
    count_sql = src.render(q)
    evidence = ex.evidence(call, src, src.display(q), rel.params, [product])
    hit = ex.caches.probes.get(key)
    if hit is not None and time.monotonic() < hit[0]:
        return Answered(hit[1], evidence)
    if product not in ex.caches.profiles:  # what each column is: types, units, which are categorical
        ex.caches.profiles[product] = profile_product(ex.project, product, source=src)
    prof = ex.caches.profiles[product]
    shown = set(rel.columns)
    row_count = int(src.run(count_sql, rel.params, ex.timeout)[0][0])
    columns = []
    for c in prof.columns:
        name = c.column.name
        if name not in shown:
            continue  # restricted (or a field of a withheld struct)
        facts = p.columns.get(name)
        values: list[Any] = []
        if name not in rel.masks and (c.enum or c.top_values):
            values = _values(ex, src, rel, name)
        elif name not in rel.masks and c.nearly_unique:
            values = _first_values(ex, src, rel, name)
        entry = {"name": name, "type": c.column.type,
                 "description": facts.description if facts else None,
                 "unit": c.unit_hint, "values": [jsonable(v) for v in values]}
        if name in rel.masks:  # what the caller reads of it, said: no value is shown
            entry["mask"] = rel.masks[name]
        columns.append(entry)
    terms = sorted(t for t, g in config.glossary.items()
                   if any(f.split(".")[0] == product for f in g.fields))
    upstream = [{"from": e.from_, "to": e.to, "via": e.via} for e in config.lineage
                if e.to == product]
    out = {"product": product, "grain": p.grain, "row_count": row_count, "columns": columns,
           "definitions": [{"term": t, "definition": config.glossary[t].definition}
                           for t in terms],
           "lineage": upstream, "as_of": ex.as_of(call.user, [product])}
    ex.caches.probes[key] = (time.monotonic() + TTL, out)
    return Answered(out, evidence)


def _first_values(ex: Executor, src: Any, rel: Any, column: str) -> list[Any]:
    """The smallest values of a column whose values mostly occur once, among the rows the
    caller may read: a sample in order (counting every value of it would be a scan of its
    every distinct value for nothing)."""
    col = exp.column(column, table="q", quoted=True)
    q = (exp.select(col).from_(rel.subquery("q")).where(col.copy().is_(exp.null()).not_())
         .order_by(col.copy()).limit(VALUES))
    return list(dict.fromkeys(r[0] for r in src.run(src.render(q), rel.params, ex.timeout)))


def _values(ex: Executor, src: Any, rel: Any, column: str) -> list[Any]:
    """The most frequent values of ``column`` among the rows the caller may read."""
    col = exp.column(column, table="q", quoted=True)
    q = (exp.select(col).from_(rel.subquery("q")).where(col.copy().is_(exp.null()).not_())
         .group_by(col.copy()).order_by(exp.Ordered(this=exp.func("COUNT", exp.Star()),
                                                      desc=True), col.copy())
         .limit(VALUES))
    return [r[0] for r in src.run(src.render(q), rel.params, ex.timeout)]


def reads(ex: Executor, call: Call) -> list[str]:
    """The product it is asked about, whatever the enum says (an unknown one is an error)."""
    product = str(call.args.get("product"))
    if product not in ex.project.config.products:

        raise ToolError(unknown_product(product))
    return [product]


def query_with(server: Finding, user: str, args: dict[str, Any], result: dict[str, Any]
               ) -> dict[str, Any]:
    """The probe's result with how to read the product's rows, as this caller."""
    return {**result, "query_with": server.query_with(user, str(args.get("product")))}


RUNNER = register(Runner("probe", explain, reads=reads, then=query_with))
