"""Policy pushdown: the caller's row filters and column masks written into the query the engine
runs. User attributes become bound parameters (``:u_region``), never text."""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import TetherConfig
from tether.errors import TetherError
from tether.policy.model import restricted_columns, role_of

_TEMPLATE = re.compile(r"\{\{\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class PolicyError(TetherError):
    """The caller may not do this; the message says what is allowed."""


def user_params(config: TetherConfig, user: str) -> dict[str, Any]:
    """The user's attributes as bound parameters ``u_<attr>``."""
    u = config.policies.users[user]
    return {f"u_{k}": v for k, v in u.attributes().items()}


def row_filter_applies(config: TetherConfig, user: str, product: str) -> bool:
    return product in role_of(config, user)[1].row_filters


def row_filter(config: TetherConfig, user: str, product: str, alias: str,
               dialect: str = "duckdb") -> exp.Expr | None:
    """The role's row filter on ``product`` as an AST over ``alias``, or None when unfiltered."""
    _, role = role_of(config, user)
    template = role.row_filters.get(product)
    if template is None:
        return None
    attrs = config.policies.users[user].attributes()
    missing = sorted(set(_TEMPLATE.findall(template)) - set(attrs))
    if missing:
        raise PolicyError(f"user {user!r} has no attribute {', '.join(missing)}, which the row "
                          f"filter on {product!r} needs; access denied.",
                          hint="Add the attribute to the user in policies.users.")
    sql = _TEMPLATE.sub(lambda m: f":u_{m.group(1)}", template)
    pred = sqlglot.parse_one(sql, read=dialect)
    return _qualify_top_level(pred, alias)


def _qualify_top_level(pred: exp.Expr, alias: str) -> exp.Expr:
    """Qualify the predicate's own bare columns with the product alias (not a subquery's)."""
    def fix(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.find_ancestor(exp.Select) is None:
            return exp.column(node.name, table=alias, quoted=True)
        return node

    return pred.transform(fix)


def mask_of(config: TetherConfig, user: str, product: str, column: str) -> str | None:
    _, role = role_of(config, user)
    return role.masks.get(f"{product}.{column}")


def masked(expr: exp.Expr, mask: str) -> exp.Expr:
    """redact -> a constant, hash -> md5 of the text, null -> NULL (typed as text)."""
    text = exp.DataType.build("TEXT")
    if mask == "redact":
        return exp.cast(exp.Literal.string("[redacted]"), text)
    if mask == "hash":
        return exp.func("MD5", exp.cast(expr, text))
    return exp.cast(exp.null(), text)


def visible_columns(config: TetherConfig, product: str, columns: list[str]) -> list[str]:
    """Columns anyone may see: all but the restricted ones (policy globs, classification)."""
    hidden = restricted_columns(config, product, columns)
    return [c for c in columns if c not in hidden]
