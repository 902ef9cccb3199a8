"""Governed measures: did a call compute the governed aggregate (revenue = sum of amount times
rate), by expression, then by value?

A glossary term may carry ``measure``: an aggregate over ``product.column`` fields. A statement a
call ran computes it when one of its aggregate projections, with every column written as the
product it reads, equals the measure after normalising (the same AST, operands of ``*`` and
``+`` in a fixed order); failing that, when replacing that projection by the measure (its columns
written over the statement's own aliases) gives the same values on the source.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import build_scope

from tether.errors import TetherError
from tether.eval.label.sql.rerun import cell

if TYPE_CHECKING:
    from tether.eval.label.work import Work

_COMMUTATIVE = (exp.Mul, exp.Add)


def canonical(node: exp.Expr) -> str:
    """Text of an expression with commutative operands sorted (a*b and b*a read the same)."""
    def order(n: exp.Expr) -> exp.Expr:
        if isinstance(n, _COMMUTATIVE):
            a, b = sorted((n.this, n.expression), key=lambda x: x.sql())
            return type(n)(this=a, expression=b)
        return n

    return node.copy().transform(order).sql(dialect="duckdb").lower()


def fields_of(node: exp.Expr) -> set[str]:
    return {f"{c.table}.{c.name}".lower() for c in node.find_all(exp.Column) if c.table}


def _aliases(tree: exp.Expr, table_map: dict[str, str]) -> dict[str, str]:
    """{alias: product} for the tables the statement's top scope reads."""
    root = build_scope(tree)
    out: dict[str, str] = {}
    if root is None:
        return out
    for alias, (_, source) in root.selected_sources.items():
        if isinstance(source, exp.Table):
            out[alias.lower()] = table_map.get(source.name.lower(), source.name.lower())
    return out


def match(work: Work, measure: str, statement: str) -> tuple[bool | None, str | None]:
    """(True / False / None, why) for one statement against the governed measure."""
    ctx = work.ctx
    try:
        gold = sqlglot.parse_one(measure, read=ctx.dialect)
        tree = qualify(sqlglot.parse_one(statement, read=ctx.dialect), dialect=ctx.dialect,
                       schema=ctx.schema(), validate_qualify_columns=False,
                       quote_identifiers=False, identify=False)
    except (sqlglot.errors.SqlglotError, ValueError, KeyError) as e:
        return None, f"the statement could not be read for the measure: {str(e)[:120]}"
    if not isinstance(tree, exp.Select):
        return None, "the statement is not a single SELECT"
    aliases = _aliases(tree, ctx.table_map)
    wanted = canonical(gold)
    gold_fields = fields_of(gold)
    candidates: list[int] = []
    for i, p in enumerate(tree.expressions):
        agg = p.unalias()
        if agg.find(exp.AggFunc) is None:
            continue
        as_products = agg.copy().transform(
            lambda n: exp.column(n.name, table=aliases.get(n.table.lower(), n.table))
            if isinstance(n, exp.Column) and n.table else n)
        if canonical(as_products) == wanted:
            return True, None
        if fields_of(as_products) & gold_fields:
            candidates.append(i)
    if not candidates:
        return False, "no aggregate over the measure's fields"
    return _by_value(work, tree, candidates[0], gold, aliases)


def _by_value(work: Work, tree: exp.Select, index: int, gold: exp.Expr,
              aliases: dict[str, str]) -> tuple[bool | None, str | None]:
    """Run the statement as it is and with its projection replaced by the measure."""
    by_product = {p: a for a, p in aliases.items()}
    missing = sorted({c.table for c in gold.find_all(exp.Column) if c.table
                      and c.table.lower() not in by_product})
    if missing:
        return False, f"the statement does not read {', '.join(missing)}, which the measure needs"
    swapped = gold.copy().transform(
        lambda n: exp.column(n.name, table=by_product[n.table.lower()])
        if isinstance(n, exp.Column) and n.table else n)
    other = tree.copy()
    p = other.expressions[index]
    replacement = swapped.as_(p.alias) if isinstance(p, exp.Alias) else swapped
    p.replace(replacement)
    src = work.ctx.source(next(iter(aliases.values()), None))
    if src is None:
        return None, f"the source is unavailable ({work.ctx.source_problem()})"
    try:
        as_run = _values(src, tree, index, work.ctx.statement_timeout)
        governed = _values(src, other, index, work.ctx.statement_timeout)
    except TetherError as e:
        return None, f"the measure could not be run on the source: {e.message}"
    if as_run == governed:
        return True, None
    return False, "its aggregate gives other values than the governed measure"


def _values(src: Any, tree: exp.Select, index: int, timeout: float) -> Counter[Any]:
    rows = src.run(src.render(tree), {}, timeout)
    return Counter(cell(r[index]) for r in rows)
