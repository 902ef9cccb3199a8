"""What a role sees of a product, from tether.yaml alone: readable or denied, the columns it
sees, their masks, its row filter and the restricted columns no tool shows. The console's policy
page shows this per role and tool; serving enforces the same rules through :func:`entitle`."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from tether.config import TetherConfig
from tether.policy.entitle import role_masks
from tether.policy.model import restricted_columns


def role_sees_tool(config: TetherConfig, role: str, tool: str) -> bool:
    """Whether members of ``role`` see ``tool`` in their list (its ``tools`` globs)."""
    return any(fnmatchcase(tool, g) for g in config.policies.roles[role].tools)


def role_projection(config: TetherConfig, role: str, product: str, columns: Sequence[str]
                    ) -> dict[str, Any]:
    """{readable, columns, masks, row_filter, restricted} of ``product`` for ``role``, over
    the product's ``columns`` (top-level names)."""
    r = config.policies.roles[role]
    restricted = restricted_columns(config, product, list(columns))
    shown = [c for c in columns if c not in restricted]
    masks = role_masks(config, r, product)
    return {"readable": r.tables.reads(product),
            "columns": shown, "masks": {c: m for c, m in masks.items() if c in shown},
            "row_filter": r.row_filters.get(product), "restricted": sorted(restricted)}
