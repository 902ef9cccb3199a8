"""Which restricted columns a tool definition would expose: what it says it reads and returns,
and what its statement reads. The one check of every publisher (build, check, review approval)
and of every server loading a version: generation leaves restricted columns out, and this checks
again on its own (defence in depth), reading only what a definition says and runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import Project
from tether.context.meta import ToolContext
from tether.policy.model import restricted_columns

Restricted = Callable[[str, str], bool]
"""(product, column) -> whether no tool may expose it."""


def restricted_by(project: Project, *states: Mapping[str, Any]) -> Restricted:
    """Restricted by the policy in tether.yaml now, or by the restricted lists of ``states``
    (check states: the last check's and this one's)."""
    lists: dict[str, set[str]] = {}
    for state in states:
        for key, value in state.items():
            if key.startswith("product:") and isinstance(value, dict):
                lists.setdefault(key.split(":", 1)[1], set()).update(value.get("restricted", []))

    def restricted(product: str, column: str) -> bool:
        head = column.split(".")[0]
        listed = lists.get(product, set())
        if column in listed or head in listed:
            return True
        return bool(restricted_columns(project.config, product, [column, head]))

    return restricted


def exposes(definition: Mapping[str, Any], restricted: Restricted) -> list[str]:
    """``product.column`` fields the definition reads or returns that are restricted: its
    source-of-truth map, the fields its arguments read, and a listing's output columns."""
    ctx = ToolContext.of(dict(definition))
    refs: set[str] = {str(r) for r in ctx.source_of_truth.values()}
    for ref in (ctx.fields.get("arguments") or {}).values():
        refs.update([ref] if isinstance(ref, str) else [str(r) for r in ref])
    products = ctx.products
    if len(products) == 1:  # the columns a result returns, whatever its kind
        rows = (((definition.get("outputSchema") or {}).get("properties") or {}).get("rows")
                or {}).get("items", {}).get("properties", {})
        refs.update(f"{products[0]}.{c}" for c in rows)
    found = []
    for ref in sorted(refs):
        product, dot, column = ref.partition(".")
        if dot and not product.startswith("metric:") and restricted(product, column):
            found.append(ref)
    return found


def plan_reads(plan: Mapping[str, Any], restricted: Restricted,
               products: Collection[str]) -> list[str]:
    """``product.column`` fields a plan's statement names that are restricted: a column
    qualified by a product's alias anywhere in it (a measure, a predicate, a subquery), or an
    unqualified one in a plan over one product. What the definition says is checked apart
    (:func:`exposes`); this reads what would run."""
    text, dialect = plan.get("select"), str(plan.get("dialect") or "duckdb")
    if not text:
        return []
    try:
        tree = sqlglot.parse_one(str(text), read=dialect)
    except sqlglot.errors.SqlglotError:
        return []
    only = plan.get("product")
    found = set()
    for col in tree.find_all(exp.Column):
        owner = col.table or (str(only) if only else "")
        if owner in products and restricted(owner, col.name):
            found.add(f"{owner}.{col.name}")
    return sorted(found)


def exposure(definition: Mapping[str, Any], plan: Mapping[str, Any], restricted: Restricted
             ) -> list[str]:
    """Every restricted ``product.column`` a tool would expose: what its definition says
    (:func:`exposes`) and what its statement reads (:func:`plan_reads`). The one check of
    every publisher (build, check, approval) and of every server loading a version."""
    return sorted(set(exposes(definition, restricted)) | set(plan_reads(
        plan, restricted, ToolContext.of(dict(definition)).products)))
