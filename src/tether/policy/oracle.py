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

from sqlglot import exp

from tether.config import PII_SELECTOR, TetherConfig
from tether.policy import templates
from tether.policy.model import restricted_columns, role_of

REDACTED = "[redacted]"
_HEX64 = re.compile(r"[0-9a-f]{64}")


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
    return set(entitled_rows(config, run, dialect, user, product))


def entitled_rows(config: TetherConfig, run: Any, dialect: str, user: str, product: str
                  ) -> dict[tuple[Any, ...], dict[str, Any]]:
    """{primary key: {masked column: its real value}} of the rows ``user`` may see (an empty
    dict where the role masks nothing), read with the row filter as written in tether.yaml."""
    p = config.products[product]
    _, role = role_of(config, user)
    hidden = sorted(masks_of(config, user, product))
    keys = ", ".join(f't."{k}"' for k in p.primary_key)
    extra = "".join(f', t."{c}"' for c in hidden)
    sql = f"SELECT {keys}{extra} FROM {p.table} t"
    params: dict[str, Any] = {}
    template = role.row_filters.get(product)
    if template is not None:
        attrs = config.policies.users[user].attributes()
        parsed = templates.parse(template, dialect)
        marker = "$" if dialect == "duckdb" else ":"

        def bind(node: exp.Expr) -> exp.Expr:
            name = str(node.name) if isinstance(node, exp.Placeholder) else ""
            if not name.startswith(templates.USER_PREFIX):
                return node
            attr = name[len(templates.USER_PREFIX):]
            params[f"o_{attr}"] = attrs[attr]
            return exp.var(f"{marker}o_{attr}")

        sql += " WHERE " + parsed.tree().transform(bind).sql(dialect=dialect)
    n = len(p.primary_key)
    return {tuple(str(v) for v in r[:n]): dict(zip(hidden, r[n:], strict=True))
            for r in run(sql, params)}


def masks_of(config: TetherConfig, user: str, product: str) -> dict[str, str]:
    """{column: mask} the role applies to ``product``, read from tether.yaml directly."""
    _, role = role_of(config, user)
    out: dict[str, str] = {}
    if PII_SELECTOR in role.masks and product in config.products:
        out |= {c: role.masks[PII_SELECTOR] for c, f in config.products[product].columns.items()
                if f.classification == "pii"}
    for target, mask in role.masks.items():
        table, _, column = target.partition(".")
        if table == product and column:
            out[column] = mask
    return out


def check_rows(config: TetherConfig, user: str, product: str, rows: list[dict[str, Any]],
               entitled: set[tuple[Any, ...]] | dict[tuple[Any, ...], dict[str, Any]] | None,
               digest: Any = None) -> Violations:
    """Every row entitled (when keys are known), every mask applied, nothing restricted. With
    ``entitled`` from :func:`entitled_rows` and ``digest`` (the project's keyed hash of a text),
    a hashed value must be exactly the keyed hash of the row's real value."""
    v = Violations()
    p = config.products[product]
    columns = sorted({c for r in rows for c in r})
    v.restricted = sorted(restricted_columns(config, product, columns))
    real = entitled if isinstance(entitled, dict) else {}
    for column, mask in masks_of(config, user, product).items():
        for r in rows:
            if column not in r:
                continue
            key = tuple(str(r.get(k)) for k in p.primary_key)
            raw = real.get(key, {}).get(column) if p.primary_key else None
            if not _is_masked(r[column], mask, raw, digest):
                v.unmasked.append(f"{product}.{column}")  # never the value: labels are kept
    if entitled is not None and p.primary_key:
        for r in rows:
            key = tuple(str(r.get(k)) for k in p.primary_key)
            if key not in entitled:
                v.rows_outside_entitlement.append(key)
    return v


def _is_masked(value: Any, mask: str, raw: Any = None, digest: Any = None) -> bool:
    if mask == "redact":
        return bool(value == REDACTED)
    if mask == "null":
        return value is None
    if raw is None or digest is None:
        return value is None or (isinstance(value, str) and _HEX64.fullmatch(value) is not None)
    return bool(value == digest(str(raw)))
