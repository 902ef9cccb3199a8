"""An independent policy oracle: what a user may receive, checked without the pushdown code.

The server enforces policy by rewriting queries (pushdown.py). The oracle takes the other road:
it reads the rows the user is entitled to with its own plain SQL (the row filter as written in
tether.yaml, the user's attributes bound as parameters) and checks a result against them, column
by column. Used by the tests and by the evaluation harness to count policy violations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tether.config import TetherConfig
from tether.policy.model import restricted_columns, role_of

_TEMPLATE = re.compile(r"\{\{\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
REDACTED = "[redacted]"


@dataclass
class Violations:
    rows_outside_entitlement: list[Any] = field(default_factory=list)
    unmasked: list[str] = field(default_factory=list)
    restricted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rows_outside_entitlement or self.unmasked or self.restricted)


def entitled_keys(config: TetherConfig, run: Any, dialect: str, user: str, product: str
                  ) -> set[tuple[Any, ...]]:
    """Primary keys of the rows ``user`` may see. ``run(sql, params)`` executes engine SQL."""
    p = config.products[product]
    _, role = role_of(config, user)
    keys = ", ".join(f't."{k}"' for k in p.primary_key)
    sql = f"SELECT {keys} FROM {p.table} t"
    params: dict[str, Any] = {}
    template = role.row_filters.get(product)
    if template is not None:
        attrs = config.policies.users[user].attributes()
        marker = "$" if dialect == "duckdb" else ":"

        def bind(m: re.Match[str]) -> str:
            params[f"o_{m.group(1)}"] = attrs[m.group(1)]
            return f"{marker}o_{m.group(1)}"

        sql += " WHERE " + _TEMPLATE.sub(bind, template)
    return {tuple(str(v) for v in r) for r in run(sql, params)}


def check_rows(config: TetherConfig, user: str, product: str, rows: list[dict[str, Any]],
               entitled: set[tuple[Any, ...]] | None) -> Violations:
    """Every row entitled (when keys are known), every mask applied, nothing restricted."""
    v = Violations()
    p = config.products[product]
    _, role = role_of(config, user)
    columns = sorted({c for r in rows for c in r})
    v.restricted = sorted(restricted_columns(config, product, columns))
    for target, mask in role.masks.items():
        table, _, column = target.partition(".")
        if table != product:
            continue
        for r in rows:
            if column in r and not _is_masked(r[column], mask):
                v.unmasked.append(f"{product}.{column}={r[column]!r}")
    if entitled is not None and p.primary_key:
        for r in rows:
            key = tuple(str(r.get(k)) for k in p.primary_key)
            if key not in entitled:
                v.rows_outside_entitlement.append(key)
    return v


def _is_masked(value: Any, mask: str) -> bool:
    if mask == "redact":
        return bool(value == REDACTED)
    if mask == "null":
        return value is None
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value) is not None
