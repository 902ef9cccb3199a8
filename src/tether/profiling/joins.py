"""`tether init`: which column of one table holds the key of another, by inclusion.

A column whose values are values of another table's single-column key refers to that table
(``legs.port`` holds ``ports.code``): a many-to-one relationship, written into the starter with
``# inferred: confirm``. A column that shares its key's name needs none (it is found by name).
The engine decides each candidate in one statement; candidates are first narrowed by what the
starter already read (both ends' smallest and largest values overlapping, within first, their
type, an identifier's name for numbers: a small count fits inside any run of ids), and at most
MAX_CHECKS are asked (and MAX_COMPARED pairs looked at).

Where each table prefixes its own columns (``bx_shelfnum`` in one, ``sh_shelfnum`` the other's key),
a column whose name without its table's prefix is the key's without its own is named for that
key: a number of any name or count is then a candidate, asked first, and its values must still
be the key's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlglot import exp

from tether.context.names import IDENTIFIER_WORDS, bare_name, column_prefix, identifier_like
from tether.errors import QueryError, SourceError
from tether.profiling.starter import Reference, StarterProduct
from tether.sources import Source

MAX_COMPARED = 200_000
"""Column-to-key comparisons made in Python at most (a warehouse of thousands of tables stops
here: its relationships are a person's to declare, or dbt's to import)."""
MAX_CHECKS = 60
"""Candidate pairs the engine is asked about at most (one statement each)."""
ORPHANS_FROM = 20
"""A column of at least this many values may have up to 5% of them missing from the key (orphans,
as lookup tables that lag behind their facts have); fewer values must all be found, and a
number column needs this many values at all (and to reach past the middle of the key's run)."""
TIMEOUT = 30.0
"""Seconds one check may take: an unanswered one infers nothing."""


def _fit(lo: Any, hi: Any, plo: Any, phi: Any, text: bool, named: bool = False) -> int | None:
    """How well the column's ends sit in the key's: 0 within them, 1 overlapping them (an
    orphan may lie outside), None apart (or, for text, of another length than the key's, or,
    for a number not named for the key, a counter low in the key's run)."""
    if hi < plo or phi < lo:
        return None
    if text:
        short, long_ = sorted((len(plo), len(phi)))
        if not any(short <= len(v) <= long_ for v in (lo, hi)):
            return None
    elif not named and hi - plo < (phi - plo) / 2:  # a counter (1..5) sits in any run of ids from 1
        return None
    return 0 if plo <= lo and hi <= phi else 1


def _candidates(products: list[StarterProduct]) -> list[Reference]:
    """The pairs worth asking the engine about: those named for the key first, then those
    within the key's bounds."""
    ranked = sorted(enumerate(_pairs(products)),
                    key=lambda t: (not t[1][1].named, t[1][0], t[0]))
    return [ref for _, (_, ref) in ranked]


def _pairs(products: list[StarterProduct]) -> Iterator[tuple[int, Reference]]:
    parents = [(p, p.primary_key[0]) for p in products
               if len(p.primary_key) == 1 and not p.problem and p.primary_key[0] in p.bounds]
    prefix = {id(p): column_prefix([c.name for c in p.columns]) for p in products}
    compared = 0
    for child in products:
        if child.problem:
            continue
        for c in child.columns:
            bounds = child.bounds.get(c.name)
            if (c.nested or "." in c.name or c.name in child.time_columns
                    or c.name in child.identifiers or child.primary_key == [c.name]
                    or bounds is None or None in bounds or bounds[0] == bounds[1]):
                continue
            bare = bare_name(c.name, prefix[id(child)])
            compared += len(parents)
            if compared > MAX_COMPARED:  # thousands of tables: the rest are left to a person
                return
            for parent, key in parents:
                kind = next(x.kind for x in parent.columns if x.name == key)
                plo, phi = parent.bounds[key]
                if (parent is child or key == c.name or "." in key or kind != c.kind
                        or None in (plo, phi)):
                    continue
                # named for the key: its name without the prefixes, more than an identifier
                # word (two tables' own "t_id" and "u_id" are not named for each other)
                named = bare == bare_name(key, prefix[id(parent)]) and bare not in IDENTIFIER_WORDS
                if c.kind == "integer" and not (named or identifier_like(c.name)):
                    continue
                fit = _fit(*bounds, plo, phi, text=c.kind == "string", named=named)
                if fit is not None:
                    yield fit, Reference(child, c.name, parent, key, named)


def _included(src: Source, ref: Reference) -> bool:
    """Whether the column's values are the key's (one statement), but for a few orphans."""
    col = exp.column(ref.column, quoted=True)
    values = (exp.select(col.as_("v", quoted=True)).distinct()
              .from_(src.table_expr(ref.child.table)).where(exp.Not(this=exp.Is(
                  this=col.copy(), expression=exp.Null()))))
    keys = (exp.select(exp.column(ref.key, quoted=True).as_("k", quoted=True)).distinct()
            .from_(src.table_expr(ref.parent.table)))
    # a join, not NOT EXISTS per value: an engine that runs the latter as a subplan scans the
    # key's table once for every value (PostgreSQL, with no index on an inferred key)
    found = exp.column("k", table="p", quoted=True)
    q = (exp.select(exp.func("COUNT", exp.Star()), exp.Sub(
            this=exp.func("COUNT", exp.Star()), expression=exp.func("COUNT", found)))
         .from_(values.subquery("d", copy=False))
         .join(keys.subquery("p", copy=False), join_type="left", on=exp.EQ(
             this=found.copy(), expression=exp.column("v", table="d", quoted=True))))
    try:
        distinct, absent = src.query(q, timeout=TIMEOUT)[0]
    except (QueryError, SourceError):
        return False
    absent, distinct = int(absent or 0), int(distinct)
    if isinstance(ref.child.bounds[ref.column][0], int) and distinct < ORPHANS_FROM and (
            not ref.named):
        return False  # a few numbers fit inside any run of ids by chance (unless named so)
    # a few orphans among many values (a warehouse's lookup table that lags) still refer
    return absent == 0 or (distinct >= ORPHANS_FROM and absent * 20 <= distinct)


def infer_references(src: Source, products: list[StarterProduct]) -> list[Reference]:
    """Columns that hold another product's single-column key, their values checked."""
    return [r for r in _candidates(products)[:MAX_CHECKS] if _included(src, r)]
