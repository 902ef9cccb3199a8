"""Drift metrics from the registry: how fast drift is seen and fixed, and who still relies on
old versions."""

from __future__ import annotations

import datetime as dt
import itertools
import statistics
from typing import Any

from tether.context.meta import ToolContext
from tether.registry import Registry


def _t(s: str | None) -> dt.datetime | None:
    if not s:
        return None
    v = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return v if v.tzinfo else v.replace(tzinfo=dt.UTC)


def _hours(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"median_hours": None, "max_hours": None, "count": 0}
    return {"median_hours": round(statistics.median(seconds) / 3600, 2),
            "max_hours": round(max(seconds) / 3600, 2), "count": len(seconds)}


def drift_report(registry: Registry, now: dt.datetime, deprecation_days: int) -> dict[str, Any]:
    """Time to detect, time to publish, auto-approve rate, open reviews, deprecated-version use."""
    events = registry.events()
    detect = [((_t(e["detected_at"]) or now) - first).total_seconds() for e in events
              if (first := _t(e["first_observed_at"])) is not None]
    reviews = registry.reviews()
    decided = [((_t(r["decided_at"]) or now) - (_t(r["created_at"]) or now)).total_seconds()
               for r in reviews if r["status"] == "approved"]
    versions = registry.versions()
    later = [v for v in versions if ToolContext.of(v.definition).supersedes]
    auto = [v for v in later if ToolContext.of(v.definition).review.get("mode") == "auto"]
    open_reviews = [{"id": r["id"], "status": r["status"],
                     "tools": [t["name"] for t in r["body"]["tools"]],
                     "age_hours": round((now - (_t(r["created_at"]) or now)).total_seconds()
                                        / 3600, 2)}
                    for r in reviews if r["status"] in ("pending", "blocked")]
    successors: dict[tuple[str, str], dt.datetime] = {}
    by_name: dict[str, list[Any]] = {}
    for v in versions:
        by_name.setdefault(v.name, []).append(v)
    for vs in by_name.values():
        for old, new in itertools.pairwise(vs):
            successors[(old.name, old.version)] = (_t(new.published_at) or now) + dt.timedelta(
                days=deprecation_days)
    calls = registry.calls()
    deprecated_calls = [c for c in calls if c["deprecated"]]
    pinned: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in deprecated_calls:
        until = successors.get((c["tool"], c["version"]))
        key = (c["username"], c["tool"], c["version"])
        pinned[key] = {"user": c["username"], "tool": c["tool"], "version": c["version"],
                       "served_until": until.date().isoformat() if until else None,
                       "days_left": (until - now).days if until else None}
    return {
        "events": len(events),
        "events_by_kind": {k: sum(e["kind"] == k for e in events)
                           for k in sorted({e["kind"] for e in events})},
        "time_to_detect": _hours(detect),
        "time_to_publish_reviewed": _hours(decided),
        "auto_approve_rate": round(len(auto) / len(later), 3) if later else None,
        "versions_after_initial": len(later),
        "open_reviews": open_reviews,
        "calls": len(calls),
        "calls_to_deprecated_versions": len(deprecated_calls),
        "pinned_users": sorted(pinned.values(), key=lambda p: (p["days_left"] or 0, p["user"])),
    }
