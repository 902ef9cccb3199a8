"""A tool's versions as people read them: status, change, who or what approved it, and how long
a superseded version is still served (its deprecation window). `tether versions` and the
console's tool page both show this."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from tether.context.meta import ToolContext, retired_info
from tether.registry import ToolVersion


def history(found: Sequence[ToolVersion], deprecation_days: int) -> list[dict[str, Any]]:
    """One row per version of one tool, oldest first (``found`` as `Registry.versions` gives
    them): a version is served until ``deprecation_days`` after its successor (or, for a
    retirement, after itself) was published."""
    days = dt.timedelta(days=deprecation_days)
    rows = []
    for v, nxt in zip(found, [*found[1:], None], strict=True):
        ctx = ToolContext.of(v.definition)
        retired = nxt is None and retired_info(v.definition) is not None
        ends = nxt.published_at if nxt else v.published_at if retired else None
        until = (dt.datetime.fromisoformat(ends) + days).date().isoformat() if ends else None
        review = ctx.review or {}
        rows.append({"version": v.version, "published_at": v.published_at,
                     "publication": v.publication,
                     "change_level": ctx.change_level, "change_kind": ctx.change_kind,
                     "change_note": ctx.change_note,
                     "approved_by": review.get("by") or review.get("rule") or (
                         "initial" if ctx.supersedes is None else None),
                     "served_until": until,
                     "status": "retired" if retired else "current" if nxt is None
                     else "deprecated"})
    return rows
