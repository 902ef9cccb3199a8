"""Each caller's tool list holds only what their entitlement reaches.

Published definitions are the project's; their enums were observed over every row. A caller
whose role filters a product's rows sees, in their own tools/list and in the validation errors of
their calls, only the values their rows hold (one DISTINCT over their entitled relation per
column and role, kept a few minutes). A product argument (the probe's, the generic listing's) is
narrowed by the server to the products the caller reaches.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from tether.context.meta import ToolContext, context_of, enum_of, with_enum
from tether.context.names import ref_column
from tether.plan.paths import products_on, reached
from tether.policy.entitle import equality_scope, table_allowed
from tether.policy.model import role_of
from tether.toolgen.kinds import kind
from tether.toolgen.listing import UNSEEN_REFERENT
from tether.toolgen.plan import plan_hops

if TYPE_CHECKING:
    from tether.serve.executor import Executor
    from tether.toolgen.model import QueryPlan

TTL = 300.0
"""Seconds a caller's narrowed definition is reused."""
MAX_VALUES = 1000


def shaped(ex: Executor, user: str, definition: dict[str, Any], plan: QueryPlan,
           cache: dict[tuple[Any, ...], tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """``definition`` as ``user`` sees it (the same object when nothing narrows)."""
    if kind(plan.kind).narrowed != "values":
        # a product argument is narrowed by the server, to the products the caller reaches
        # (TetherServer.reachable: tool globs and tables together), never here
        return definition
    key = (definition.get("name"), ToolContext.of(definition).version, *ex.scope_key(user))
    hit = cache.get(key)
    if hit is not None and time.monotonic() < hit[0]:
        return hit[1]
    out = _masked_rows(ex, user, _examples(ex, user, _enums(
        ex, user, _reach(ex, user, definition, plan), plan), plan), plan)
    cache[key] = (time.monotonic() + TTL, out)
    return out


def _masked_rows(ex: Executor, user: str, definition: dict[str, Any], plan: QueryPlan
                 ) -> dict[str, Any]:
    """The rows' output schema with each column masked for the caller typed as the mask gives
    it (text: a constant, a keyed hash, or null): a client that checks a result against the
    schema refused a masked number ("None is not of type 'integer'")."""
    masks, _ = ex.policy_of(user, plan.product) if plan.product else ({}, {})
    row = (((definition.get("outputSchema") or {}).get("properties") or {}).get("rows")
           or {}).get("items") or {}
    hit = [c for c in (row.get("properties") or {}) if c in masks]
    if not hit:
        return definition
    out = copy.deepcopy(definition)
    columns = out["outputSchema"]["properties"]["rows"]["items"]["properties"]
    for c in hit:
        said = str(columns[c].get("description", "")).rstrip(".")
        columns[c] = {"type": ["string", "null"], "description": (f"{said}; " if said else "")
                      + f"masked for your role ({masks[c]})."}
    return out


def _reach(ex: Executor, user: str, definition: dict[str, Any], plan: QueryPlan
           ) -> dict[str, Any]:
    """A listing's paths through a product the caller may not read taken out (its parameters
    and count_by values): it is neither reachable nor named; and the note that a referent the
    caller may not see gives no value, for a caller who reads every referent whole."""
    if not plan.hops:
        return definition
    config = ex.project.config
    hops = plan_hops(plan)
    shut = {h.alias for h in hops if not all(
        table_allowed(config, user, p) for p in products_on(hops, h.alias))}
    filters = role_of(config, user)[1].row_filters
    unseen = UNSEEN_REFERENT in definition.get("description", "") and not any(
        h.product in filters for h in plan_hops(plan, labels=True) if h.alias not in shut)
    if not shut and not unseen:
        return definition
    out = copy.deepcopy(definition)
    if unseen:  # every referent the caller reaches, they read whole: no row misses one
        out["description"] = out["description"].replace(UNSEEN_REFERENT, "")
        sources = context_of(out).get("sources") or {}
        for said in [k for k in sources if UNSEEN_REFERENT in k]:
            sources[said.replace(UNSEEN_REFERENT, "")] = sources.pop(said)
    props = out["inputSchema"]["properties"]
    said = (context_of(out).get("fields") or {}).get("arguments") or {}
    for f in plan.filters:
        if f.alias in shut:
            props.pop(f.param, None)
            said.pop(f.param, None)
    counts = props.get("count_by") or {}
    if "enum" in counts:
        counts["enum"] = [c for c in counts["enum"]
                          if (r := reached(hops, c)) is None or r.alias not in shut]
    return out


def _enums(ex: Executor, user: str, definition: dict[str, Any], plan: QueryPlan
           ) -> dict[str, Any]:
    config = ex.project.config
    filters = role_of(config, user)[1].row_filters
    props = definition.get("inputSchema", {}).get("properties", {})
    narrowed: dict[str, list[Any]] = {}
    yours: dict[str, tuple[str, Any]] = {}  # param -> (column, the caller's one value)
    for f in plan.filters:
        product, column = ref_column(f.column)
        enum = enum_of(props.get(f.param))
        if product not in filters or product not in config.products:
            continue
        pinned = equality_scope(config, user, product).get(column)
        # (a path's filter gets no default: it would hide the rows whose referent the caller
        # may not see, which their policy shows)
        if pinned is not None and len(pinned) == 1 and f.op == "eq" and f.alias is None:
            yours[f.param] = (column, next(iter(pinned)))
        if enum is None:
            continue
        have = values(ex, user, product, column)
        kept = [v for v in enum if str(v) in have]
        if kept != enum:
            narrowed[f.param] = kept
    if not narrowed and not yours:
        return definition
    out = copy.deepcopy(definition)
    for param, kept in narrowed.items():
        with_enum(out["inputSchema"]["properties"][param], kept)
    for param, (column, value) in yours.items():
        # the caller's own scope is the default, and the tool says so; another value is refused
        prop = out["inputSchema"]["properties"][param]
        prop["default"] = [value] if prop.get("type") == "array" else value
        said = str(prop.get("description", "")).rstrip(".")
        words = column.replace("_", " ")
        prop["description"] = (f"{said}; " if said else "") + (
            f"your {words}: {value} (the default; another is refused).")
    return out


SHOWN = 3
"""Example values a caller's parameter says."""


def _examples(ex: Executor, user: str, definition: dict[str, Any], plan: QueryPlan
              ) -> dict[str, Any]:
    """Example values of the filters whose description could not say them for everyone
    (Filter.examples): a caller who reads the whole product gets the most frequent ones; a
    caller whose role narrows it, values their own rows hold; a masked column, none."""
    config = ex.project.config
    filters = role_of(config, user)[1].row_filters
    props = definition.get("inputSchema", {}).get("properties", {})
    said: dict[str, list[Any]] = {}
    for f in plan.filters:
        product, column = ref_column(f.column)
        if (not f.examples or f.param not in props or product not in config.products
                or "." in column  # a nested field: values() reads top-level columns
                or not table_allowed(config, user, product)
                or column in ex.policy_of(user, product)[0]):
            continue
        if product in filters:  # their own rows' values, never another role's
            have = values(ex, user, product, column)
            shown = [e for e in f.examples if str(e) in have][:SHOWN] or sorted(have)[:SHOWN]
        else:
            shown = f.examples[:SHOWN]
        if shown:
            said[f.param] = shown
    if not said:
        return definition
    out = copy.deepcopy(definition)
    for param, shown in said.items():
        prop = out["inputSchema"]["properties"][param]
        prop["examples"] = shown
        head = str(prop.get("description", "")).rstrip(".")
        prop["description"] = (f"{head}; e.g. " if head else "E.g. ") + ", ".join(
            str(v) for v in shown) + "."
    return out


def values(ex: Executor, user: str, product: str, column: str) -> set[str]:
    """The distinct values of ``column`` among the rows ``user`` may read (as text)."""
    key = (product, column, *ex.scope_key(user))
    if key not in ex.caches.values_read:
        rel = ex.relation(user, product)
        src = ex.source(config_source(ex, product))
        col = exp.column(column, table="q", quoted=True)
        q = exp.select(col).distinct().from_(rel.subquery("q")).limit(MAX_VALUES)
        ex.caches.values_read[key] = {str(r[0]) for r in src.run(src.render(q), rel.params, ex.timeout)}
    return ex.caches.values_read[key]


def config_source(ex: Executor, product: str) -> str | None:
    return ex.project.config.products[product].source
