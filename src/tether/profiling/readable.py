"""Whether each product can be read now, and why not: its source reached, its table or SQL
described by the engine. A product that cannot be read is closed where it fails (a server's
serve/health.py, `tether check`'s drift), never the others; so are the products whose row filter
or SQL reads its table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from tether.config import Project
from tether.context.config_model import api_product
from tether.context.schema import Column
from tether.errors import TetherError
from tether.policy import templates
from tether.profiling.policycheck import base_relation
from tether.sources import Source

KINDS = ("missing_table", "source_unreachable", "policy")


@dataclass(frozen=True)
class Closed:
    """Why a product is closed, and for whom (``roles`` None: every role)."""

    product: str
    kind: str
    reason: str
    roles: frozenset[str] | None = None

    def applies_to(self, role: str) -> bool:
        return self.roles is None or role in self.roles

    def said(self) -> str:
        """What a caller is told: what failed and what to do. Never the policy's rules, a
        source's address or any row's value: the engine's words only for a table gone."""
        what = {"missing_table": f"its table or SQL cannot be read on its source "
                                 f"({self.reason[:200]})",
                "source_unreachable": "its source cannot be reached",
                "policy": "a rule of the access policy that guards it no longer holds on its "
                          "source, so it is closed for your role"}[self.kind]
        return (f"{self.product} is closed just now: {what}. Every other tool still answers; "
                "try again later, or ask an administrator to run `tether check`, which "
                "reports it")


def read_product(project: Project, source: Callable[[str], Source], product: str
                 ) -> list[Column] | Closed:
    """The product's columns as its source describes them now, or why it cannot be read (a
    driver's own error included: a source fails in many ways)."""
    try:
        src = source(product)
    except Exception as e:
        return Closed(product, "source_unreachable", _said(e))
    try:
        table = project.config.products[product].table
        found = src.describe(src.table_expr(table) if table else base_relation(
            src, project, product), label=product)
    except Exception as e:
        return Closed(product, "missing_table" if _answers(src) else "source_unreachable",
                      _said(e))
    return found


def column_names(columns: list[Column]) -> list[str]:
    """Every column's name, nested fields as ``a.b``: what the policy's rules are checked on."""
    return sorted({c.name for col in columns for c in [col, *col.leaves()]})


def _said(e: Exception) -> str:
    text = e.message if isinstance(e, TetherError) else f"{type(e).__name__}: {e}"
    return (text.strip().splitlines() or [""])[0]


def _answers(src: Source) -> bool:
    """Whether the source answers at all (its catalog can be read)."""
    try:
        src.tables()
    except Exception:
        return False
    return True


def unlisted(project: Project, source: Callable[[str], Source]) -> set[str]:
    """Products reading a table their source's catalog no longer lists (one read per source;
    every product of a source that cannot be read)."""
    config = project.config
    by_source: dict[str, list[str]] = {}
    for name, p in config.products.items():
        if p.table and not api_product(config, name):
            by_source.setdefault(project.source_name(name), []).append(name)
    out: set[str] = set()
    for products in by_source.values():
        try:
            listed = {t.lower() for t in source(products[0]).tables()}
        except Exception:  # a source that fails in any way: its products are checked
            out |= set(products)
            continue
        last = {t.split(".")[-1] for t in listed}
        out |= {p for p in products if str(config.products[p].table).lower() not in listed
                and str(config.products[p].table).split(".")[-1].lower() not in last}
    return out


def readers(project: Project, products: set[str]) -> set[str]:
    """Products whose row filter or SQL reads the table of one of ``products``: a table gone
    under them closes them too."""
    config = project.config
    names = {str(config.products[p].table or p).split(".")[-1].lower() for p in products}
    out: set[str] = set()
    for role in config.policies.roles.values():
        for product, text in role.row_filters.items():
            if product in config.products and _tables(text, template=True) & names:
                out.add(product)
    for name, p in config.products.items():
        if p.sql and _tables(p.sql) & names:
            out.add(name)
    return out - products


def _tables(text: str, template: bool = False) -> set[str]:
    try:
        tree = templates.parse(text).with_nulls() if template else sqlglot.parse_one(text)
    except (TetherError, sqlglot.errors.SqlglotError):
        return set()
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name}
