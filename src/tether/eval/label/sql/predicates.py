"""Are two predicates the same definition? Normalised ASTs first, the source's rows second.

Normal form (sqlglot ASTs, never text surgery): columns as lower-case ``product.column``;
parentheses dropped; ``literal op column`` turned round; ``col = v`` written ``col IN (v)``; an
OR of IN/equalities on one column merged into one IN; IN lists, AND and OR operands sorted and
de-duplicated; numbers written canonically. When the normal forms differ, both predicates run on
the source (``SELECT DISTINCT <primary keys> FROM <products joined> WHERE <predicate>``, every
literal a bound parameter) and the row sets are compared: equal rows mean the definitions agree
on today's data.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any

import sqlglot
from sqlglot import exp

from tether.errors import TetherError
from tether.eval.label.context import LabelContext
from tether.eval.label.sql.shape import py_value
from tether.sources import Source
from tether.toolgen.plan import from_clause

_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE,
                                               exp.LTE: exp.GTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


@dataclass(frozen=True)
class Pred:
    """A predicate in normal form, with its key (the normal form as text) and its fields."""

    node: exp.Expr
    key: str
    fields: frozenset[str]


def pred(ctx: LabelContext, build: exp.Expr | Callable[[], exp.Expr],
         memo: Hashable | None = None) -> Pred:
    """The normal form of ``build`` (a tree, or a function making one, called only when
    needed); computed once per ``memo`` key (None: every time)."""
    if memo is not None:
        hit: Pred | None = ctx.cache.get(("pred", memo))
        if hit is not None:
            return hit
    node = canonical(build if isinstance(build, exp.Expr) else build())
    out = Pred(node, node.sql(dialect="duckdb"), column_fields(node))
    if memo is not None:
        ctx.cache[("pred", memo)] = out
    return out


def conjunction(ctx: LabelContext, parts: list[Pred]) -> Pred:
    if len(parts) == 1:
        return parts[0]
    keys = tuple(sorted({p.key for p in parts}))
    return pred(ctx, partial(_join, exp.and_, parts), ("and", keys))


def disjunction(ctx: LabelContext, parts: list[Pred]) -> Pred:
    if len(parts) == 1:
        return parts[0]
    keys = tuple(sorted({p.key for p in parts}))
    return pred(ctx, partial(_join, exp.or_, parts), ("or", keys))


def _join(how: Callable[..., exp.Expr], parts: list[Pred]) -> exp.Expr:
    return how(*[p.node for p in parts])


def parse_predicate(ctx: LabelContext, sql: str) -> exp.Expr:
    """A predicate from tether.yaml or a case (``table.column`` qualified, as docs/config.md says);
    an unqualified column is placed when exactly one product has it. Parsed once per text; the
    tree is shared, so callers copy before changing it."""
    memo = ("parsed", ctx.dialect, sql)
    if memo in ctx.cache:
        cached: exp.Expr = ctx.cache[memo]
        return cached
    node = sqlglot.parse_one(sql, read=ctx.dialect)
    owners: dict[str, set[str]] = {}
    for table, cols in (ctx.schema_columns() or {}).items():
        for c in cols:
            owners.setdefault(c, set()).add(ctx.product_of(table))
    for col in node.find_all(exp.Column):
        if col.table:
            col.meta["field"] = f"{ctx.product_of(col.table)}.{col.name.lower()}"
        elif len(owners.get(col.name.lower(), ())) == 1:
            col.meta["field"] = f"{next(iter(owners[col.name.lower()]))}.{col.name.lower()}"
    ctx.cache[memo] = node
    return node


def column_fields(node: exp.Expr) -> frozenset[str]:
    return frozenset(c.meta["field"] for c in node.find_all(exp.Column) if "field" in c.meta)


def canonical(node: exp.Expr) -> exp.Expr:
    """The normal form of a predicate whose columns carry ``meta['field']``."""

    def name(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
            f = n.meta.get("field")
            if f:
                table, _, column = f.partition(".")
                out = exp.column(column, table=table)
                out.meta["field"] = f
                return out
            return exp.column(n.name.lower(), table=n.table.lower() or None)
        return n

    out: exp.Expr = _norm(node.copy().transform(name))
    return _truthy(out)


def _norm(n: exp.Expr) -> exp.Expr:
    n.pop_comments()  # an agent's comment does not change what a predicate selects
    for k, v in list(n.args.items()):
        if isinstance(v, exp.Expr):
            n.set(k, _norm(v))
        elif isinstance(v, list):
            n.set(k, [_norm(x) if isinstance(x, exp.Expr) else x for x in v])
    return _local(n)


def _local(n: exp.Expr) -> exp.Expr:
    if isinstance(n, exp.Paren) and isinstance(n.this, exp.Expr):
        return n.this
    if isinstance(n, exp.Literal) and not n.is_string:
        try:
            d = Decimal(n.this).normalize()
            return exp.Literal.number(format(d, "f"))
        except InvalidOperation:
            return n
    flip = _FLIP.get(type(n))
    if flip is not None and isinstance(n, exp.Binary):
        if not isinstance(n.left, exp.Column) and isinstance(n.right, exp.Column):
            n = flip(this=n.right, expression=n.left)
        if isinstance(n, exp.EQ) and isinstance(n.left, exp.Column) \
                and n.right.find(exp.Column) is None:
            return exp.In(this=n.left, expressions=[n.right])
        return n
    if isinstance(n, exp.In) and not n.args.get("query"):
        return exp.In(this=n.this, expressions=_sorted_unique(n.expressions))
    if isinstance(n, exp.Or):
        return _merge_or(list(_flat(n, exp.Or)))
    if isinstance(n, exp.And):
        parts = _sorted_unique([_truthy(p) for p in _flat(n, exp.And)])
        return exp.and_(*parts) if len(parts) > 1 else parts[0]
    return n


def _truthy(n: exp.Expr) -> exp.Expr:
    """A bare boolean column as a conjunct means ``col = TRUE``."""
    if isinstance(n, exp.Column):
        return exp.In(this=n, expressions=[exp.true()])
    return n


def _flat(n: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    if isinstance(n, kind):
        assert isinstance(n, exp.Binary)
        return _flat(n.left, kind) + _flat(n.right, kind)
    return [n]


def _merge_or(parts: list[exp.Expr]) -> exp.Expr:
    lists: dict[str, tuple[exp.Expr, list[exp.Expr]]] = {}
    rest: list[exp.Expr] = []
    for p in map(_truthy, parts):
        if isinstance(p, exp.In) and not p.args.get("query") and isinstance(p.this, exp.Column):
            k = p.this.sql()
            lists.setdefault(k, (p.this, []))[1].extend(p.expressions)
        else:
            rest.append(p)
    merged = [exp.In(this=col, expressions=_sorted_unique(vals)) for col, vals in lists.values()]
    out = _sorted_unique(merged + rest)
    return exp.or_(*out) if len(out) > 1 else out[0]


def _sorted_unique(nodes: list[exp.Expr]) -> list[exp.Expr]:
    seen: dict[str, exp.Expr] = {}
    for x in nodes:
        seen.setdefault(x.sql(dialect="duckdb"), x)
    return [seen[k] for k in sorted(seen)]


# --- execution -----------------------------------------------------------------------------------


def equivalent(ctx: LabelContext, gold: Pred, applied: Pred) -> tuple[bool | None, str]:
    """(verdict, how): True/False with how it was decided, or None with the reason it could
    not be."""
    if gold.key == applied.key:
        return True, "same normalised predicate"
    cache_key = ("equiv", gold.key, applied.key)
    if cache_key not in ctx.cache:
        ctx.cache[cache_key] = _by_rows(ctx, gold.node, applied.node)
    result: tuple[bool | None, str] = ctx.cache[cache_key]
    return result


def _by_rows(ctx: LabelContext, gold: exp.Expr, applied: exp.Expr) -> tuple[bool | None, str]:
    if ctx.config is None:
        return None, "the predicates differ and there is no project to run them on"
    fields = column_fields(gold) | column_fields(applied)
    products = sorted({f.split(".")[0] for f in fields})
    if not products or any(p not in ctx.config.products or not ctx.pks.get(p) for p in products):
        return None, "the predicates differ and their products have no declared primary key"
    sources = {ctx.project.source_name(p) for p in products} if ctx.project else set()
    if len(sources) > 1:
        return None, "the predicates differ and their products live in different sources"
    src = ctx.source(products[0])
    if src is None:
        return None, ("the predicates differ and the source is unavailable "
                      f"({ctx.source_problem(products[0])})")
    try:
        with ctx.timed("predicate_sql"):
            rows_g = _rows(ctx, src, products, gold)
            rows_a = _rows(ctx, src, products, applied)
    except (TetherError, sqlglot.errors.SqlglotError) as e:
        return None, f"the predicates differ and running them failed: {e}"
    ctx.count("predicate_runs")
    if rows_g == rows_a:
        return True, f"same {len(rows_g)} rows on the source"
    return False, (f"different rows on the source ({len(rows_g)} governed, {len(rows_a)} applied, "
                   f"{len(rows_g ^ rows_a)} differ)")


def _rows(ctx: LabelContext, src: Source, products: list[str], pred: exp.Expr
          ) -> frozenset[tuple[Any, ...]]:
    assert ctx.config is not None
    params: dict[str, Any] = {}

    def bind(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.meta.get("field"):
            table, _, column = n.meta["field"].partition(".")
            return exp.column(column, table=table, quoted=True)
        if isinstance(n, exp.Literal):
            name = f"lv{len(params)}"
            params[name] = py_value(n)
            return exp.Placeholder(this=name)
        return n

    where = canonical(pred).transform(bind)
    select = from_clause(ctx.config, products, src.dialect)
    keys = [exp.column(k, table=p, quoted=True) for p in products for k in ctx.pks[p]]
    query = select.select(*keys, append=False).distinct().where(where)
    return frozenset(src.query(query, params, ctx.statement_timeout))
