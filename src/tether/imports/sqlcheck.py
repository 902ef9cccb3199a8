"""SQL an import brings in (a dbt measure's or dimension's ``expr``, a metric's filter), checked
by resolution before it becomes part of a governed definition.

An imported expression is a scalar or aggregate over the columns of the one product it belongs
to, nothing more: no query of its own (a subquery, a CTE, a set operation), no table and no table
function, no parameter, every function on the allow-list (tether.context.sqlfunctions, the list
run_sql is held to), every column qualified by that product and, when the relation's columns
are known (a dbt catalog), one of them. A reference to another relation through an alias
(``s.salary``) would read around the product's row filters and masks, so it is refused rather
than left for the server to catch.

Layer 0: text in, text or :class:`Refused` out.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from tether.context.sqlfunctions import SESSION_NAMES, disallowed_function


class Refused(ValueError):
    """An imported expression tether will not use; the message says why."""


# What makes an expression read beyond its own row: a query, a relation, a table function
_READS: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.With, "a CTE"), (exp.CTE, "a CTE"), (exp.Subquery, "a subquery"),
    (exp.Query, "a query of its own"), (exp.Table, "a table reference"),
    (exp.Lateral, "a table function"), (exp.Unnest, "a table function"),
    (exp.Explode, "a table function"), (exp.GenerateSeries, "a table function"),
    (exp.ExplodingGenerateSeries, "a table function"),
    (exp.Placeholder, "a parameter"), (exp.Parameter, "a parameter"),
    (exp.SessionParameter, "a session parameter"),
)
_TABLE_FUNCTION_NAMES = frozenset({"range", "generate_series", "unnest", "read_csv",
                                   "read_parquet", "read_json"})


def parse_expr(sql: str) -> exp.Expr:
    """One expression, or Refused (sqlglot's own errors and the parser failures it does not
    wrap are all one thing here: text that is not an expression tether can read)."""
    try:
        tree = sqlglot.parse_one(sql)
    except (sqlglot.errors.SqlglotError, RecursionError, IndexError, ValueError):
        raise Refused(f"{sql!r} is not SQL tether can read") from None
    if tree is None:
        raise Refused(f"{sql!r} is empty")
    return tree


def checked_expr(sql: str, product: str, dialect: str | None,
                 columns: set[str] | None = None) -> str:
    """``sql`` with its unqualified columns qualified by ``product``, once it holds only what an
    imported expression may (module docstring); else Refused naming the first thing it may not.
    ``columns``: the relation's columns (lower case), when known."""
    tree = parse_expr(sql)
    for kind, what in _READS:
        if tree.find(kind) is not None:
            raise Refused(f"{sql!r} has {what}: an imported expression may only read the "
                          f"columns of {product}")
    name = disallowed_function(tree, dialect) or next(
        (str(f.this) for f in tree.find_all(exp.Anonymous)
         if str(f.this).lower() in _TABLE_FUNCTION_NAMES), None)
    if name is not None:
        raise Refused(f"{sql!r} calls {name}(), which is not on tether's list of allowed "
                      "functions (aggregates, window, string, date and math functions)")
    for col in list(tree.find_all(exp.Column)):
        _check_column(col, sql, product, columns)
        if not col.table:
            col.set("table", exp.to_identifier(product))
    return str(tree.sql())


def _check_column(col: exp.Column, sql: str, product: str, columns: set[str] | None) -> None:
    if isinstance(col.this, exp.Star):
        raise Refused(f"{sql!r} selects {col.sql()}: name the columns")
    if col.args.get("db") or col.args.get("catalog"):
        raise Refused(f"{sql!r} names {col.sql()}, a column of another relation")
    if col.table and col.table.lower() != product.lower():
        raise Refused(f"{sql!r} names {col.sql()}: {col.table} is not {product}, the product "
                      "this expression belongs to")
    if not col.table and col.name.lower() in SESSION_NAMES:
        raise Refused(f"{sql!r} names {col.name}, which reports the server, not the data")
    if columns is not None and col.name.lower() not in columns:
        raise Refused(f"{sql!r} names {col.name}, which the relation of {product} does not "
                      "have")


def columns_of(sqls: list[str]) -> set[str]:
    """``product.column`` of every qualified column in ``sqls`` (each already checked)."""
    out: set[str] = set()
    for sql in sqls:
        if sql:
            out |= {f"{c.table}.{c.name}" for c in parse_expr(sql).find_all(exp.Column)
                    if c.table}
    return out
