"""Paths over many-to-one relationships: what a product's rows point to, by name.

From a product, each relationship whose ``from`` is one of its columns and whose ``to`` is the
whole primary key of another product (``many_to_one``, or ``one_to_one`` either way) is a
**hop**: joining it keeps one row per row of the product. A hop is named by the product it
reaches (``Shelf``), or, where that would not say which (two references to one product, as a
leg's start and end port; a reference to the product's own rows, as a parent bin), by the
referring column (``from_port``, ``ParentBinId``). An attribute reached through hops is named by the
hop names and the column, joined by dots as tether.yaml spells them (``Shelf.Label``;
``Box.Shelf.Label`` two hops away), at most ``serve.max_path_hops`` hops, never through a
product twice.

A hop's **alias** is its path so far (``Box.Shelf``), the name its product is joined under;
the executor reads each joined product as the caller may read it (serve/executor.secure), so a
row whose referent the caller may not see has no value there (a LEFT JOIN), and a product the
caller may not read is not reachable at all (serve/peruser.py takes its paths out).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from sqlglot import exp

from tether.config import TetherConfig
from tether.context.names import ref, ref_parts


@dataclass(frozen=True)
class Hop:
    """One relationship followed: ``product`` joined as ``alias`` where its key equals the
    column of the row it is reached from (``parent``, an alias: the root is the product)."""

    alias: str
    product: str
    parent: str
    column: str
    key: str

    def on(self) -> exp.Expr:
        return exp.EQ(this=exp.column(self.key, table=self.alias, quoted=True),
                      expression=exp.column(self.column, table=self.parent, quoted=True))


@dataclass(frozen=True)
class Reached:
    """A column of a product a path reaches, named by its path."""

    path: str  # hop names and the column: Shelf.Label
    alias: str  # the joined product's alias: Shelf
    product: str
    column: str


def _edges(config: TetherConfig, columns: Callable[[str], Collection[str]] | None
           ) -> dict[str, list[tuple[str, str, str]]]:
    """{product: [(its column, product reached, that product's key)]} for each relationship
    that keeps one row per row (its other end the whole one-column primary key), and, where
    ``columns`` tells a product's columns, each column named as another product's one-column
    key (config_model.reference_of's rule by name: ``box_id`` -> ``boxes.box_id``)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    if columns is not None:
        keyed: dict[str, list[str]] = {}
        for name, p in config.products.items():
            if len(p.primary_key) == 1:
                keyed.setdefault(p.primary_key[0], []).append(name)
        for child, product in config.products.items():
            for column in columns(child):
                others = [o for o in keyed.get(column, []) if o != child]
                if others and product.primary_key != [column]:
                    out.setdefault(child, []).append((column, others[0], column))
    for r in config.relationships:
        ends = [ref_parts(r.from_), ref_parts(r.to)]
        pairs = {"many_to_one": [(0, 1)], "one_to_many": [(1, 0)],
                 "one_to_one": [(0, 1), (1, 0)]}[r.kind]
        for a, b in pairs:
            (child, *c), (parent, *k) = ends[a], ends[b]
            column, key = ".".join(c), ".".join(k)
            target = config.products.get(parent)
            if (child in config.products and target is not None and target.primary_key == [key]
                    and (column, parent, key) not in out.get(child, [])):
                out.setdefault(child, []).append((column, parent, key))
    return out


def hops(config: TetherConfig, product: str, most: int | None = None,
         columns: Callable[[str], Collection[str]] | None = None) -> list[Hop]:
    """Every hop reachable from ``product`` within ``most`` hops (serve.max_path_hops), nearest
    first: by name first (``columns``: each product's columns), then in the order tether.yaml
    declares the relationships."""
    most = config.serve.max_path_hops if most is None else most
    edges = _edges(config, columns)
    out: list[Hop] = []
    frontier: list[tuple[str, str, tuple[str, ...]]] = [(product, product, (product,))]
    for _ in range(most):
        nxt = []
        for alias, at, seen in frontier:
            mine = edges.get(at, [])
            for column, parent, key in mine:
                if parent in seen and parent != at:
                    continue  # never through a product twice (a self-reference once)
                if parent == at and alias != product:
                    continue
                alone = sum(1 for _c, p, _k in mine if p == parent) == 1 and parent != at
                name = parent if alone else column
                child_alias = name if alias == product else f"{alias}.{name}"
                hop = Hop(child_alias, parent, alias, column, key)
                out.append(hop)
                if parent != at:
                    nxt.append((child_alias, parent, (*seen, parent)))
        frontier = nxt
    return out


def chain(all_hops: list[Hop], alias: str) -> list[Hop]:
    """The hops to join, in order, to reach ``alias``."""
    by = {h.alias: h for h in all_hops}
    out: list[Hop] = []
    while alias in by:
        out.insert(0, by[alias])
        alias = by[alias].parent
    return out


def reached(all_hops: list[Hop], path: str) -> Reached | None:
    """The attribute a path names (``Box.Shelf.Label``), if the hops reach it."""
    for h in sorted(all_hops, key=lambda h: -len(h.alias)):
        prefix = h.alias + "."
        if path.startswith(prefix) and len(path) > len(prefix):
            return Reached(path, h.alias, h.product, ".".join(ref_parts(path[len(prefix):])))
    return None


def path_of(alias: str, column: str) -> str:
    """An attribute's name: the hop names and the column, dotted (a column holding a dot is
    quoted, as references are)."""
    return f"{alias}.{ref(column)}"


def join_hops(query: exp.Select, all_hops: list[Hop], aliases: set[str],
              table: Callable[[str, str], exp.Expr]) -> exp.Select:
    """``query`` with the hops to each of ``aliases`` LEFT JOINed, each once, nearest first:
    a row keeps its place (and no copy) whatever it points to. ``table(product, alias)`` is
    the product's relation under that alias (the executor then reads it as the caller may)."""
    wanted: list[Hop] = []
    for alias in sorted(aliases, key=lambda a: (a.count("."), a)):
        for h in chain(all_hops, alias):
            if h not in wanted:
                wanted.append(h)
    for h in wanted:
        query = query.join(table(h.product, h.alias), on=h.on(), join_type="left")
    return query


def products_on(all_hops: list[Hop], alias: str) -> list[str]:
    """The products a path to ``alias`` reads, nearest first."""
    return [h.product for h in chain(all_hops, alias)]
