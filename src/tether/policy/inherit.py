"""Products defined by SQL over other products' tables read those tables through the policy.

A ``sql:`` product (``SELECT ... FROM order_items``) whose table is another product's would read
that table as it is: past the other product's row filter, its masks and its restricted columns.
So every real table a product's SQL names that holds another product (same source, same table)
is replaced by what the caller may read of that product: its entitled relation when serving,
its restricted-free projection when tether itself profiles it. The new product inherits the row
filter, the masks and the exclusions of every product it reads, for every role, with no rule of
its own; its own row filter, if any, applies on top.

Tables are matched by resolution (sqlglot's scopes: a CTE named like a table is not that table),
by name and, where both name one, by schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from tether.config import TetherConfig
from tether.errors import ConfigError
from tether.policy.model import exposable

Reader = Callable[[str, str], exp.Expr]
"""(product, alias) -> what to read in place of the product's table, aliased ``alias``."""


def _key(table: str | exp.Table) -> tuple[str | None, str]:
    t = exp.to_table(table) if isinstance(table, str) else table
    return (t.db.lower() or None) if t.db else None, t.name.lower()


def holders(config: TetherConfig, source: str | None) -> dict[str, list[str]]:
    """table name (lower case) -> the table products of ``source`` over it, by name."""
    default = next(iter(config.sources), None)
    out: dict[str, list[str]] = {}
    for name, p in sorted(config.products.items()):
        if p.table and (p.source or default) == (source or default):
            out.setdefault(_key(p.table)[1], []).append(name)
    return out


def held(config: TetherConfig, product: str, table: exp.Table,
         index: dict[str, list[str]]) -> str | None:
    """The product (other than ``product``) whose table ``table`` is, or None."""
    db, name = _key(table)
    for other in index.get(name, []):
        if other == product:
            continue
        odb, _ = _key(config.products[other].table or "")
        if db is None or odb is None or db == odb:
            return other
    return None


def real_tables(query: exp.Expr) -> list[exp.Table]:
    """The tables ``query`` reads from the catalog (not its CTEs), in every scope."""
    out: list[exp.Table] = []
    seen: set[int] = set()
    for scope in traverse_scope(query):
        for t in scope.tables:
            if isinstance(scope.sources.get(t.alias_or_name), Scope) or id(t) in seen:
                continue
            seen.add(id(t))
            out.append(t)
    return out


def reads(config: TetherConfig, product: str, dialect: str) -> list[str]:
    """The other products a ``sql:`` product's SQL reads (empty for a table product)."""
    p = config.products.get(product)
    if p is None or not p.sql:
        return []
    try:
        query = sqlglot.parse_one(p.sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return []
    index = holders(config, p.source)
    return sorted({q for t in real_tables(query) if (q := held(config, product, t, index))})


def through(config: TetherConfig, product: str, query: exp.Expr, read: Reader) -> exp.Expr:
    """``query`` (the product's SQL, parsed) with each table that holds another product read
    through ``read`` instead. Changes ``query`` in place and returns it."""
    p = config.products[product]
    index = holders(config, p.source)
    for t in real_tables(query):
        other = held(config, product, t, index)
        if other is not None:
            t.replace(read(other, t.alias_or_name))
    return query


def chain(product: str, seen: tuple[str, ...]) -> tuple[str, ...]:
    """``seen`` with ``product``; a product that reads itself through others is an error."""
    if product in seen:

        raise ConfigError(f"product {product} reads itself through "
                          f"{' -> '.join((*seen, product))}.",
                          hint="A product's SQL may read other products, never in a circle.")
    return (*seen, product)


def derived(config: TetherConfig, dialect_of: Callable[[str], str]) -> dict[str, list[str]]:
    """{product: the products its SQL reads}, for every ``sql:`` product reading another."""
    out: dict[str, list[str]] = {}
    for name, p in config.products.items():
        if p.sql:
            found = reads(config, name, dialect_of(name))
            if found:
                out[name] = found
    return out




def visible(config: TetherConfig, product: str, base: exp.Expr, columns: list[Any],
            alias: str) -> exp.Subquery:
    """``product`` as tether itself reads it inside another product's SQL: every column but the
    restricted ones, no row filter, no mask (what profiling and describing see)."""
    source = base.copy()
    source.set("alias", exp.TableAlias(this=exp.to_identifier(product, quoted=True)))
    shown = exposable(config, product, columns)
    query = exp.select(*[exp.column(c, table=product, quoted=True) for c in shown]).from_(source)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))
