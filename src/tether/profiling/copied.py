"""Personal data copied past its mask: a column of one product whose values repeat a column
another product masks for some role, which that role reads unmasked (an invoice's billing
address that copies its customer's address, masked for the analyst). `tether ci` (item 13)
names each, as the policy's coverage: mask it too, or accept the finding with a reason.

Only columns a name already ties to the masked one are compared (the same kind of personal data
by name, or the same name), one statement each on the engine: no sample leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from tether.config import PII_SELECTOR, Project
from tether.errors import TetherError
from tether.policy.inherit import reads
from tether.profiling.personal import personal_by_name
from tether.profiling.policycheck import base_relation, sources_of
from tether.sources import Source

SHARE = 0.5
"""A column repeats another when at least this share of its distinct values are the other's."""
_TEXT = ("CHAR", "TEXT", "STRING")


@dataclass(frozen=True)
class Copy:
    product: str
    column: str
    source_product: str
    source_column: str
    roles: tuple[str, ...]
    shared: int
    distinct: int

    def sentence(self) -> str:
        return (f"{self.product}.{self.column} repeats {self.source_product}."
                f"{self.source_column} ({self.shared} of its {self.distinct} values), which role"
                f"{'s' if len(self.roles) > 1 else ''} {', '.join(self.roles)} "
                f"{'mask' if len(self.roles) > 1 else 'masks'} but read"
                f"{'' if len(self.roles) > 1 else 's'} here unmasked: mask it too")


def _masked(project: Project) -> dict[tuple[str, str], set[str]]:
    """(product, column) -> the roles that mask it."""
    config = project.config
    out: dict[tuple[str, str], set[str]] = {}
    for rname, role in config.policies.roles.items():
        for target in role.masks:
            if target == PII_SELECTOR:
                for pname, p in config.products.items():
                    for col, facts in p.columns.items():
                        if facts.classification == "pii":
                            out.setdefault((pname, col), set()).add(rname)
            elif "." in target:
                product, column = target.split(".", 1)
                out.setdefault((product, column), set()).add(rname)
    return out


def _kind(project: Project, product: str, column: str) -> str | None:
    facts = project.config.products[product].columns.get(column)
    return (facts.personal if facts is not None and facts.personal
            else personal_by_name(column, "string"))


def copies(project: Project, columns: Mapping[str, Mapping[str, Sequence[object]]]
           ) -> list[Copy]:
    """Each text column that repeats a masked column's values for a role that reads it
    unmasked (``columns``: product -> column -> [type, nullable], as a check recorded them)."""
    config = project.config
    masked = _masked(project)
    if not masked:
        return []
    found: list[Copy] = []
    with sources_of(project) as source:
        for (product, column), roles in sorted(masked.items()):
            if product not in config.products or column not in columns.get(product, {}):
                continue
            kind = _kind(project, product, column)
            for other, cols in sorted(columns.items()):
                if other == product or other not in config.products:
                    continue
                if project.source_name(other) != project.source_name(product):
                    continue  # one engine answers the comparison
                if product in reads(config, other, source(other).dialect):
                    continue  # its SQL reads the masked product: it inherits the mask
                for col, spec in sorted(cols.items()):
                    text = any(t in str(spec[0] if spec else "").upper() for t in _TEXT)
                    unmasked = tuple(sorted(r for r in roles
                                            if (other, col) not in masked
                                            or r not in masked[(other, col)]))
                    tied = col == column or (kind is not None
                                             and _kind(project, other, col) == kind)
                    if not text or not unmasked or not tied:
                        continue
                    share = _shared(source(other), project, other, col, product, column)
                    if share is not None and share[1] and share[0] >= SHARE * share[1]:
                        found.append(Copy(other, col, product, column, unmasked, *share))
    return found


def _shared(src: Source, project: Project, product: str, column: str, source_product: str,
            source_column: str) -> tuple[int, int] | None:
    """(distinct values of product.column found in source_product.source_column, its distinct
    values), counted by the engine; None when it cannot say."""
    try:
        mine = base_relation(src, project, product)
        theirs = base_relation(src, project, source_product)
        col = exp.column(column, table=product, quoted=True)
        inner = exp.select(exp.column(source_column, table=source_product, quoted=True)
                           ).from_(theirs)
        held = exp.Case(ifs=[exp.If(this=exp.In(this=col.copy(), query=exp.Subquery(
            this=inner)), true=col.copy())])
        row = src.query(exp.select(exp.Count(this=exp.Distinct(expressions=[col.copy()])),
                                   exp.Count(this=exp.Distinct(expressions=[held])))
                        .from_(mine))[0]
    except TetherError:
        return None
    return int(row[1] or 0), int(row[0] or 0)
