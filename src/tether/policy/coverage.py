"""Policy coverage: a product whose rows belong to a row-filtered product must be filtered too.

A row filter on `shipments` keeps a depot manager to their depot's shipments; if `parcels`
holds the shipment key and has no filter of its own, the same manager reads the parcels of every
other depot's shipments. A product is the child of another when it holds that product's key:
all of its primary-key columns by name, a column of the scheme its one-column key is declared
in (`identifiers`), or the many side of a declared relationship. Each child that a role can read
unfiltered while the role filters its parent is a gap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tether.config import TetherConfig

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

    def sentence(self) -> str:
        return (f"{self.product} has no row filter for role {self.role}, yet it joins "
                f"{self.link.parent} ({self.link.via}), which is filtered: the role reads the "
                f"{self.product} of {self.link.parent} outside its scope")


def links(config: TetherConfig, columns: Mapping[str, list[str]]) -> Iterator[Link]:
    """Every (child, parent) pair of products: the child holds the parent's key."""
    products = config.products
    for parent, p in products.items():
        key = list(p.primary_key)
        scheme = p.identifiers.get(key[0]) if len(key) == 1 else None
        for child, c in products.items():
            if child == parent:
                continue
            have = set(columns.get(child, [])) | set(c.primary_key) | set(c.identifiers)
            if key and set(key) <= have and not set(key) <= GENERIC_KEYS:
                yield Link(child, parent, f"{', '.join(key)}, the key of {parent}")
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


def readable(allow: list[str], deny: list[str], product: str) -> bool:
    """A role's ``tables`` rule: deny wins over allow (policy/entitle.py reads it the same)."""
    return (not any(fnmatchcase(product, g) for g in deny)
            and any(fnmatchcase(product, g) for g in allow))


def gaps(config: TetherConfig, columns: Mapping[str, list[str]]) -> list[Gap]:
    """Each product a role reads unfiltered while it filters a product it joins as a child."""
    found: dict[tuple[str, str], Gap] = {}
    every = list(links(config, columns))
    for role_name, role in sorted(config.policies.roles.items()):
        filtered = set(role.row_filters)
        if not filtered:
            continue
        for link in every:
            if (link.parent in filtered and link.child not in filtered
                    and readable(role.tables.allow, role.tables.deny, link.child)
                    and (role_name, link.child) not in found):
                found[(role_name, link.child)] = Gap(role_name, link.child, link)
    return list(found.values())
