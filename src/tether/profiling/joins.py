"""`tether init`: which column of one table holds the key of another, and the evidence for it.

A relationship is written into the starter only on evidence a sentence can say, kept in its
comment (``# declared: ...`` or ``# inferred: name and values (...)``):

1. **Declared**: a FOREIGN KEY constraint in the source's catalog (PostgreSQL, DuckDB) whose
   parent is a table of the starter, on one column.
2. **Name and values**: a column named for another table's single-column key, each name without
   its table's prefix (``ShelfId`` and ``Shelf.ShelfId``; ``bx_shelfnum`` and ``sh_shelfnum``),
   or ending with that key's name after a role (``bx_packed_day_sk`` for ``dy_day_sk``), or named
   as that table plus an identifier word where the key is the bare word (``shelf_id`` for
   ``shelves.id``), whose values are that key's (but for a few orphans among many). A
   key column of its own table refers only to a table holding more keys (an extension table).
3. **Values that only one table holds**: a text column whose values (but for a few orphans
   among many) are the keys of exactly one other table (``legs.port``: the ports' codes).
4. **A hierarchy**: a column whose name says it holds an identifier or a role (``ParentBinId``,
   ``mentor_id``, ``checked_by``) and whose values are keys of its own table, some rows having
   none (the roots) and few naming their own row (a column that mostly repeats its row's key
   is another id of the row, not its parent).

A number that merely falls inside another table's run of ids is no evidence (ids from 1 fit
any run of ids), and a number of its own table's key (a line number within an order) refers to
another table only by name. A column named for a key need only have most of its values there
(a lookup table that lags far behind its facts); a text column of any name, all but a few.

A column whose name says it holds an identifier or a role but names no table is checked against
every table's key; the tables whose keys hold its values are **candidates**, ranked by the
share of their keys it holds, and written as comments for a person to confirm (never as fact),
as are several tables holding a text column's values. Candidates are first narrowed by what the
starter already read (both ends' smallest and largest values overlapping, their kind); at most
MAX_CHECKS are asked (one statement each) and MAX_COMPARED pairs looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from tether.context.names import (
    IDENTIFIER_WORDS,
    column_prefix,
    name_words,
    says_identifier,
)
from tether.errors import QueryError, SourceError, TetherError
from tether.profiling.starter import Reference, StarterProduct
from tether.sources import Source

MAX_COMPARED = 200_000
"""Column-to-key comparisons made in Python at most (a warehouse of thousands of tables stops
here: its relationships are a person's to declare, or dbt's to import)."""
MAX_CHECKS = 120
"""Candidate pairs the engine is asked about at most (one statement each)."""
ORPHANS_FROM = 20
"""A column of at least this many values may have up to 5% of them missing from the key (orphans,
as lookup tables that lag behind their facts have); fewer values must all be found."""
TIMEOUT = 30.0
"""Seconds one check may take: an unanswered one infers nothing."""
CANDIDATES_SHOWN = 3
"""Candidates written as comments for one column at most, the likeliest first."""
ROLE_WORDS = frozenset({"by", "to", "of", "for"})
"""A last word that says a column points at someone or something in a role (``created_by``,
``SentTo``): English's linking words, not any dataset's names."""


@dataclass(frozen=True)
class _Pair:
    child: StarterProduct
    column: str
    parent: StarterProduct
    key: str
    how: str  # "named", "text" (any name, text values) or "role" (an identifier or role name)
    role: bool = False  # the name says it holds an identifier or a role
    matched: int = 0  # words of the key's name the column's name ends with
    names_table: bool = False  # the column's name is the parent table's and an identifier word
    names_own: bool = False  # ... or its own table's (a table's own key: shelves.shelf_id)


@dataclass(frozen=True)
class _Found:
    distinct: int  # the column's distinct values
    absent: int  # of them, not keys of the parent
    keys: int  # the parent's distinct keys
    roots: int = 0  # rows with no value (a self-reference's roots)
    own: int = 0  # rows whose value is their own key (a self-reference only)

    def holds(self, named: bool) -> bool:
        """Its values are the key's, but for a few orphans among many; a column named for the
        key, most of them (the name says what it holds: a lookup that lags far behind its facts
        leaves it a reference all the same)."""
        if self.distinct == 0 or self.absent == 0:
            return self.distinct > 0
        if named:
            return self.absent * 2 < self.distinct
        return self.distinct >= ORPHANS_FROM and self.absent * 20 <= self.distinct

    def said(self, pair: _Pair) -> str:
        parent = _name(pair.parent)
        held = self.distinct - self.absent
        orphans = f", {self.absent} not among them" if self.absent else ""
        owner = f"{parent}'" if parent.endswith("s") else f"{parent}'s"
        return f"{pair.column} holds {held} of {owner} {self.keys} keys{orphans}"


def _name(p: StarterProduct) -> str:
    return p.table.rsplit(".", 1)[-1]


def _words(p: StarterProduct, column: str, prefix: dict[int, list[str]]) -> list[str]:
    """A column's words without its table's prefix (``bx_shelfnum`` -> ``shelfnum``)."""
    words = name_words(column)
    pre = prefix[id(p)]
    return words[len(pre):] if pre and words[:len(pre)] == pre and len(words) > len(pre) else words


def _singular(word: str) -> str:
    return word[:-3] + "y" if word.endswith("ies") else word[:-1] if word.endswith("s") else word


def _named(child: list[str], key: list[str], parent_table: list[str]) -> bool:
    """Whether a column's words name the key: the same words (more than a lone identifier
    word), or ending with them after a role, or the parent table's name and an identifier word
    where the key is that word alone (``shelf_id`` for ``shelves.id``)."""
    if len(key) == 1 and key[0] in IDENTIFIER_WORDS:
        table = [_singular(w) for w in parent_table]
        target = [*table, key[0]]
        return len(child) >= len(target) and [
            _singular(w) for w in child[-len(target):-1]] == table and child[-1] == key[0]
    if child == key:
        return True
    # after a role: a key of one word only where an identifier word runs into it (shelfnum)
    return (len(child) > len(key) and child[-len(key):] == key
            and (len(key) > 1 or says_identifier(key[0])))


def _names_table(child: list[str], table: list[str]) -> bool:
    """``shelf_id`` names the table ``shelves`` (its words, singular, and an identifier
    word)."""
    words = [_singular(w) for w in child[:-1]]
    table = [_singular(w) for w in table]
    return (len(child) > 1 and child[-1] in IDENTIFIER_WORDS and len(words) >= len(table)
            and words[-len(table):] == table)


def _pairs(products: list[StarterProduct], taken: set[tuple[int, str]]) -> Iterator[_Pair]:
    parents = [(p, p.primary_key[0]) for p in products
               if len(p.primary_key) == 1 and not p.problem and p.primary_key[0] in p.bounds]
    prefix = {id(p): column_prefix([c.name for c in p.columns]) for p in products}
    compared = 0
    for child in products:
        if child.problem:
            continue
        for c in child.columns:
            bounds = child.bounds.get(c.name)
            if ((id(child), c.name) in taken or c.nested
                    or c.name in child.time_columns or bounds is None or None in bounds
                    or bounds[0] == bounds[1] or c.kind not in ("integer", "string")):
                continue
            words = _words(child, c.name, prefix)
            role = says_identifier(c.name) or (len(words) > 1 and words[-1] in ROLE_WORDS)
            compared += len(parents)
            if compared > MAX_COMPARED:  # thousands of tables: the rest are left to a person
                return
            for parent, key in parents:
                kind = next(x.kind for x in parent.columns if x.name == key)
                plo, phi = parent.bounds[key]
                if (kind != c.kind or None in (plo, phi)
                        or (parent is child and key == c.name)):
                    continue
                if not _overlap(*bounds, plo, phi, text=c.kind == "string"):
                    continue
                key_words = _words(parent, key, prefix)
                named = _named(words, key_words, name_words(_name(parent)))
                if c.name in child.primary_key and not named and c.kind == "integer":
                    continue  # a number of its own key (a line number) refers only by name
                how = ("named" if named else "text" if c.kind == "string" else
                       "role" if role else None)
                if how is not None:
                    yield _Pair(child, c.name, parent, key, how, role, len(key_words),
                                _names_table(words, name_words(_name(parent))),
                                _names_table(words, name_words(_name(child))))


def _overlap(lo: Any, hi: Any, plo: Any, phi: Any, text: bool) -> bool:
    """The column's smallest and largest values overlap the key's (text: of the key's
    lengths). A narrowing only: never evidence."""
    if hi < plo or phi < lo:
        return False
    if text:
        short, long_ = sorted((len(plo), len(phi)))
        return any(short <= len(v) <= long_ for v in (lo, hi))
    return True


def _check(src: Source, pair: _Pair) -> _Found | None:
    """How many of the column's values are the key's, and how many keys there are, in one
    statement (None: the engine did not answer)."""
    col = exp.column(pair.column, quoted=True)
    values = (exp.select(col.as_("v", quoted=True)).distinct()
              .from_(src.table_expr(pair.child.table)).where(exp.Not(this=exp.Is(
                  this=col.copy(), expression=exp.Null()))))
    keys = (exp.select(exp.column(pair.key, quoted=True).as_("k", quoted=True)).distinct()
            .from_(src.table_expr(pair.parent.table)))
    # a join, not NOT EXISTS per value: an engine that runs the latter as a subplan scans the
    # key's table once for every value (PostgreSQL, with no index on an inferred key)
    found = exp.column("k", table="p", quoted=True)
    key_count = exp.select(exp.Count(this=exp.Distinct(expressions=[
        exp.column(pair.key, quoted=True)]))).from_(src.table_expr(pair.parent.table))
    q = (exp.select(exp.func("COUNT", exp.Star()), exp.Sub(
            this=exp.func("COUNT", exp.Star()), expression=exp.func("COUNT", found)),
            key_count.subquery())
         .from_(values.subquery("d", copy=False))
         .join(keys.subquery("p", copy=False), join_type="left", on=exp.EQ(
             this=found.copy(), expression=exp.column("v", table="d", quoted=True))))
    if pair.parent is pair.child:  # its roots, and the rows that name themselves (another
        # id of the row, not its parent): read for a self-reference only
        q = q.select(exp.select(exp.Sub(this=exp.func("COUNT", exp.Star()),
                                        expression=exp.func("COUNT", col.copy()))).from_(
            src.table_expr(pair.child.table)).subquery())
        q = q.select(exp.select(exp.func("COUNT", exp.Star())).from_(
            src.table_expr(pair.child.table)).where(exp.EQ(
                this=col.copy(), expression=exp.column(pair.key, quoted=True))).subquery())
    try:
        row = src.query(q, timeout=TIMEOUT)[0]
    except (QueryError, SourceError):
        return None
    return _Found(*(int(v or 0) for v in row))


def _declared(src: Source, products: list[StarterProduct]) -> list[Reference]:
    """The catalog's FOREIGN KEY constraints on one column whose parent is a starter table."""
    by_table = {p.table: p for p in products if not p.problem}
    out = []
    for child in by_table.values():
        try:
            keys = src.foreign_keys(child.table)
        except TetherError:
            continue
        for fk in keys:
            parent = by_table.get(fk.parent)
            if parent is None or len(fk.columns) != 1:
                continue
            out.append(Reference(child, fk.columns[0], parent, fk.key[0], named=True,
                                 evidence="declared: a FOREIGN KEY in the source",
                                 declared=True))
    return out


def infer_references(src: Source, products: list[StarterProduct]) -> list[Reference]:
    """Relationships to write (declared, then inferred), then candidates for a person to
    choose from (``written`` False), each with its evidence."""
    out = _declared(src, products)
    taken = {(id(r.child), r.column) for r in out}
    pairs = sorted(_pairs(products, taken), key=lambda p: ("named", "text", "role").index(p.how))
    checked: dict[tuple[int, str], list[tuple[_Pair, _Found]]] = {}
    for pair in pairs[:MAX_CHECKS]:
        got = _check(src, pair)
        if got is not None and got.holds(pair.how == "named") and _extension_ok(pair, got):
            checked.setdefault((id(pair.child), pair.column), []).append((pair, got))
    for held in checked.values():
        out += _decide(held)
    _time_through(src, products, [r for r in out if r.written])
    return out


def _time_through(src: Source, products: list[StarterProduct], refs: list[Reference]) -> None:
    """A table with no time of its own whose column refers to a date table (a table keyed by a
    number with one row per date: its metric time a date or timestamp that never repeats) has
    that date as its time (``metric_time_via``): the first such column in the table's order
    (the sale's date before the shipment's), the others said beside it."""
    unique: dict[int, bool] = {}
    for child in products:
        if child.metric_time is not None or child.problem:
            continue
        order = [c.name for c in child.columns]
        into = sorted((r for r in refs if r.child is child and r.parent is not child
                       and r.parent.metric_time is not None), key=lambda r: order.index(r.column))
        dated = []
        for r in into:
            kind = next((c.kind for c in r.parent.columns if c.name == r.parent.metric_time), "")
            if kind not in ("date", "timestamp", "timestamptz"):
                continue
            if id(r.parent) not in unique:
                col = exp.column(r.parent.metric_time or "", quoted=True)
                n, distinct = src.query(exp.select(
                    exp.func("COUNT", col.copy()),
                    exp.Count(this=exp.Distinct(expressions=[col.copy()]))).from_(
                        src.table_expr(r.parent.table)), timeout=TIMEOUT)[0]
                unique[id(r.parent)] = bool(n) and n == distinct
            if unique[id(r.parent)]:
                dated.append(r)
        if dated:
            first, others = dated[0], [r.column for r in dated[1:]]
            child.time_via = (first.column, (
                f"no time of its own; the {first.parent.metric_time} of the "
                f"{_name(first.parent)} row it points to, one row per date")
                + (f"; also {', '.join(others)}" if others else ""))


def _decide(held: list[tuple[_Pair, _Found]]) -> list[Reference]:
    """One column's pairs whose keys hold its values: the one written, or the candidates."""
    def rank(t: tuple[_Pair, _Found]) -> tuple[int, bool, bool]:
        return -t[0].matched, not t[0].names_table, t[1].absent > 0

    named = sorted(((p, f) for p, f in held if p.how == "named"), key=rank)
    if named:  # the longest name matched stands out (return_bin_sk over bin_sk),
        p, f = named[0]  # then the table the name names, then the one key holding every value
        if len(named) == 1 or rank(named[0]) != rank(named[1]):
            return [_ref(p, f"inferred: name and values ({f.said(p)})")]
        return [_ref(p, f"candidate: name and values ({f.said(p)})", written=False)
                for p, f in named[:CANDIDATES_SHOWN]]
    self_ref = [(p, f) for p, f in held if p.parent is p.child and p.role]
    if self_ref and self_ref[0][1].roots and self_ref[0][1].own * 2 < (
            self_ref[0][1].distinct):  # a row is no parent of its own
        p, f = self_ref[0]
        return [_ref(p, f"inferred: a hierarchy ({f.said(p)}: keys of its own rows; "
                        f"{f.roots} rows have none, the roots)")]
    text = [(p, f) for p, f in held if p.how == "text" and p.parent is not p.child]
    if len(text) == 1 and len(held) == 1:
        p, f = text[0]
        return [_ref(p, f"inferred: values ({f.said(p)}; no other table's key holds them)")]
    ranked = sorted(held, key=lambda t: (-(t[1].distinct - t[1].absent) / max(t[1].keys, 1),
                                         t[1].keys, t[0].parent.table))
    return [_ref(p, f"candidate: values ({f.said(p)})", written=False)
            for p, f in ranked[:CANDIDATES_SHOWN]]


def _extension_ok(pair: _Pair, found: _Found) -> bool:
    """A table's own key refers to another's only where that one holds more keys, or as many
    where its name names that table and not its own (``shelf_extras.shelf_id`` to
    ``shelves``, one to one)."""
    return (pair.child.primary_key != [pair.column] or found.distinct - found.absent < found.keys
            or (pair.names_table and not pair.names_own and found.absent == 0))


def _ref(pair: _Pair, evidence: str, written: bool = True) -> Reference:
    return Reference(pair.child, pair.column, pair.parent, pair.key,
                     named=pair.how == "named", evidence=evidence, written=written)
