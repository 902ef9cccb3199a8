"""Row filters through relationships: ``row_filters: {Invoice: {via: Customer}}`` means the
invoices whose customer the role may read. It is compiled, when tether.yaml is read, into the
statement a person would have written by hand: ``"CustomerId" IN (SELECT "CustomerId" FROM
"Customer" WHERE <the role's filter on Customer>)``, quoted for the product's engine, hops chained
along the declared relationships (``InvoiceLine: {via: Customer}`` reaches the customer through
the invoice), and through the parent's own ``via``. Every reader of a row filter (the policy
path, the oracle, item 13, the narrowing classifier) then reads one SQL text, as before: there
is one implementation of "read a product as this role may".

A parent the role may not read at all leaves no row (``1 = 0``); a parent the role reads whole
keeps every row that has one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from sqlglot import exp

from tether.context.config_model import VIA_MARK, RoleConfig, TetherConfig
from tether.context.dialects import source_dialect
from tether.errors import ConfigError

Where = Callable[..., str]
"""``tether.yaml:LINE`` of a key path (config.Project.where)."""

def _parent_of(text: str) -> str | None:
    text = text.strip()
    head, tail = VIA_MARK.split("%s")
    if text.startswith(head) and text.endswith(tail):
        return text[len(head):len(text) - len(tail)].strip()
    return None


def compile_via(config: TetherConfig, where: Where) -> None:
    """Every ``{via: P}`` of every role compiled into its SQL, in place; a ConfigError naming
    the file and line for a parent that is no product, that no chain of relationships reaches,
    that is a SQL product, or a chain of vias that comes back to itself."""
    for rname, role in config.policies.roles.items():
        done: dict[str, str] = {}
        for product in list(role.row_filters):
            role.row_filters[product] = _compiled(config, where, rname, role, product, done, ())


def _compiled(config: TetherConfig, at: Where, rname: str, role: RoleConfig, product: str,
              done: dict[str, str], seen: tuple[str, ...]) -> str:
    if product in done:
        return done[product]
    text = role.row_filters[product]
    parent = _parent_of(text)
    if parent is None:
        done[product] = text
        return text
    where = at("policies", "roles", rname, "row_filters", product)
    if product in seen:
        raise ConfigError(f"role {rname}'s row filters read each other in a circle through "
                          f"via: {' -> '.join([*seen, product])}.", where=where,
                          hint="End the chain at a product with a row filter of its own.")
    if parent not in config.products:
        raise ConfigError(f"role {rname}'s row filter on {product} is via {parent!r}, which is "
                          "no product.", where=where,
                          hint="Name a product of tether.yaml that rows of this one point to.")
    chain = _chain(config, product, parent)
    if chain is None:
        raise ConfigError(f"role {rname}'s row filter on {product} is via {parent}, but no "
                          f"chain of relationships leads from {product} to {parent}.",
                          where=where, hint="Declare the relationship (relationships: "
                          f"{{from: {product}.COLUMN, to: {parent}.KEY}}) or name the "
                          "product it points to directly.")
    if not role.tables.reads(parent):
        out = "1 = 0"  # the parent is denied to the role: no row reaches one it may read
    else:
        inner = (_compiled(config, at, rname, role, parent, done, (*seen, product))
                 if parent in role.row_filters else None)
        out = inner or ""
        for child, column, target, key in reversed(chain):
            dialect = source_dialect(config.sources[_source(config, child)])
            table = _table(config, target, dialect, where)
            select = f"SELECT {_name(key, dialect)} FROM {table}"
            out = (f"{_name(column, dialect)} IN ({select}"
                   + (f" WHERE {out}" if out else "") + ")")
    done[product] = out
    return out


def _chain(config: TetherConfig, start: str, goal: str) -> list[tuple[str, str, str, str]] | None:
    """The shortest chain of many-to-one relationships from ``start`` to ``goal``: each hop
    (child product, its column, parent product, the parent's key)."""
    edges: dict[str, list[tuple[str, str, str]]] = {}
    for rel in config.relationships:
        if rel.kind not in ("many_to_one", "one_to_one") or "." not in rel.from_ + rel.to:
            continue
        child, column = rel.from_.split(".", 1)
        parent, key = rel.to.split(".", 1)
        edges.setdefault(child, []).append((column, parent, key))
    queue: deque[tuple[str, list[tuple[str, str, str, str]]]] = deque([(start, [])])
    seen = {start}
    while queue:
        at, path = queue.popleft()
        for column, parent, key in edges.get(at, []):
            if parent in seen:
                continue
            hop = [*path, (at, column, parent, key)]
            if parent == goal:
                return hop
            seen.add(parent)
            queue.append((parent, hop))
    return None


def _source(config: TetherConfig, product: str) -> str:
    return config.products[product].source or next(iter(config.sources))


def _name(column: str, dialect: str) -> str:
    return exp.to_identifier(column, quoted=True).sql(dialect=dialect)


def _table(config: TetherConfig, product: str, dialect: str, where: str) -> str:
    p = config.products[product]
    if not p.table:
        raise ConfigError(f"a row filter via {product} needs {product} to be a table (it is "
                          "defined by SQL).", where=where,
                          hint="Write that row filter's subquery by hand.")
    schema = config.sources[_source(config, product)].schema_
    db, _, name = p.table.rpartition(".")
    return exp.table_(name, db=db or schema, quoted=True).sql(dialect=dialect)
