"""Policy coverage: a product whose rows belong to a row-filtered product must be filtered too.

A row filter on `shipments` keeps a depot manager to their depot's shipments; if `parcels`
holds the shipment key and has no filter of its own, the same manager reads the parcels of every
other depot's shipments. A product is the child of another when it holds that product's key (any
of its key columns by name, unless the name is generic; a column of the scheme its one-column
key is declared in, `identifiers`), is the many side of a declared relationship, is downstream
of it in the lineage, or its SQL reads it (such a product inherits the filter: policy/inherit.py).

For each role, a product is *scoped* when the role filters it or may not read it at all; a
child of a scoped product that the role reads must be filtered by a filter related to its
parent's (one naming the same user attributes, or reading the parent), or inherit one. Scope
follows the links, so a chain through a denied product still counts. Each child that fails is
a gap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tether.config import TetherConfig
from tether.policy import templates
from tether.policy.inherit import reads

GENERIC_KEYS = frozenset({"id", "uuid", "key", "pk", "row_id", "rowid", "code", "date"})
"""Key names that say nothing of what they key: tables keyed `id` all "hold" each other's key by
name, so such a key links only through its identifier scheme or a declared relationship."""


@dataclass(frozen=True)
class Link:
    child: str
    parent: str
    via: str  # how the child holds the parent's key, in words


@dataclass(frozen=True)
class Gap:
    role: str
    product: str
    link: Link
    parent_is: str = "filtered"  # filtered | denied | scoped (through a chain)
    unrelated: str | None = None  # the child's own filter, when it does not follow the parent's

    def sentence(self) -> str:
        if self.unrelated is not None:
            return (f"{self.product}'s row filter for role {self.role} ({self.unrelated}) does "
                    f"not follow the filter on {self.link.parent}, which it joins "
                    f"({self.link.via}): the role reads the {self.product} of "
                    f"{self.link.parent} outside its scope")
        return (f"{self.product} has no row filter for role {self.role}, yet it joins "
                f"{self.link.parent} ({self.link.via}), which is {self.parent_is}: the role "
                f"reads the {self.product} of {self.link.parent} outside its scope")


def links(config: TetherConfig, columns: Mapping[str, list[str]]) -> Iterator[Link]:
    """Every (child, parent) pair of products: the child holds the parent's key, is the many
    side of a relationship, is downstream of it, or reads it in its SQL."""
    products = config.products
    holding: dict[str, set[str]] = {}  # column -> the products holding it (an index: the
    by_scheme: dict[str, set[str]] = {}  # pairs are found in time linear in the columns)
    for name, c in products.items():
        for col in set(columns.get(name, [])) | set(c.primary_key) | set(c.identifiers):
            holding.setdefault(col, set()).add(name)
        for s in c.identifiers.values():
            by_scheme.setdefault(s, set()).add(name)
    for parent, p in products.items():
        key = list(p.primary_key)
        scheme = p.identifiers.get(key[0]) if len(key) == 1 else None
        named = [k for k in key if k not in GENERIC_KEYS]
        by_key = set().union(*(holding.get(k, set()) for k in named)) if named else set()
        for child in sorted(by_key | by_scheme.get(scheme or "", set())):
            if child == parent:
                continue
            c = products[child]
            part = [k for k in named if child in holding.get(k, set())]
            if part:
                whole = len(part) == len(key)
                yield Link(child, parent, f"{', '.join(part)}, "
                           f"{'the key' if whole else 'part of the key'} of {parent}")
                continue
            held = sorted(col for col, s in c.identifiers.items() if scheme and s == scheme)
            if held:
                yield Link(child, parent, f"{held[0]}, a {scheme} like the key of {parent}")
    for r in config.relationships:
        left, right = r.from_.split(".", 1)[0], r.to.split(".", 1)[0]
        if left == right or left not in products or right not in products:
            continue
        pairs = {"many_to_one": [(left, right)], "one_to_many": [(right, left)],
                 "one_to_one": [(left, right), (right, left)]}[r.kind]
        for child, parent in pairs:
            yield Link(child, parent, f"relationship {r.from_} -> {r.to}")
    for e in config.lineage:
        if e.from_ in products and e.to in products and e.from_ != e.to:
            yield Link(e.to, e.from_, "downstream of it in the lineage"
                       + (f", {e.via}" if e.via else ""))
    for child in products:
        for parent in reads(config, child, "duckdb"):
            yield Link(child, parent, SQL_READ)


def related(config: TetherConfig, role: str, child: str, parent: str) -> bool:
    """Whether the role's filter on ``child`` follows its scope on ``parent``: it names every
    user attribute the parent's filter names, or reads the parent's table; a denied parent is
    followed by any filter of the child."""
    r = config.policies.roles[role]
    mine, theirs = r.row_filters.get(child), r.row_filters.get(parent)
    if mine is None:
        return False
    if theirs is None:
        return True
    if set(templates.attributes(theirs)) <= set(templates.attributes(mine)):
        return True
    table = (config.products[parent].table or "").split(".")[-1].lower()
    return bool(table) and table in {t.lower() for t in _tables(mine)}


def _tables(text: str) -> set[str]:
    from sqlglot import exp


    try:
        return {t.name for t in templates.parse(text).expr.find_all(exp.Table)}
    except templates.TemplateError:
        return set()


SQL_READ = "its SQL reads it"


def gaps(config: TetherConfig, columns: Mapping[str, list[str]]) -> list[Gap]:
    """Each product a role reads unfiltered (or filtered unrelatedly) while a product it is a
    child of is scoped for the role: filtered, denied, or scoped itself through a chain."""
    found: dict[tuple[str, str], Gap] = {}
    every = list(links(config, columns))
    sql_parents: dict[str, set[str]] = {}
    for link in every:
        if link.via == SQL_READ:
            sql_parents.setdefault(link.child, set()).add(link.parent)

    def inherits(child: str, scoped: set[str]) -> bool:
        """Its SQL reads a scoped product, so it reads that product's scope (inherit.py)."""
        return bool(sql_parents.get(child, set()) & scoped)

    for role_name, role in sorted(config.policies.roles.items()):
        rule = role.tables
        denied = {p for p in config.products if not rule.reads(p)}
        # a denied product scopes nothing by itself: holding its key is not reading its rows
        # (a child of it reads what the role could read anyway); scope starts at a filter
        scoped = set(role.row_filters)
        grew = bool(scoped)
        while grew:  # scope follows the links, through denied products and inherited SQL
            grew = False
            for link in every:
                child, parent = link.child, link.parent
                if parent not in scoped or (role_name, child) in found:
                    continue
                if child in denied:  # a chain through a denied product still counts
                    if child not in scoped:
                        scoped.add(child)
                        grew = True
                    continue
                if inherits(child, scoped) or child in role.row_filters:
                    if (not inherits(child, scoped) and parent in role.row_filters
                            and not related(config, role_name, child, parent)):
                        found[(role_name, child)] = Gap(role_name, child, link,
                                                        unrelated=role.row_filters[child])
                    elif child not in scoped:  # inherits the scope, or follows it
                        scoped.add(child)
                        grew = True
                    continue
                state = ("filtered" if parent in role.row_filters else
                         "denied" if parent in denied else "scoped")
                found[(role_name, child)] = Gap(role_name, child, link, state)
    return list(found.values())
