"""Drift metrics from the registry: how fast drift is seen and fixed, and who still relies on
old versions."""

from __future__ import annotations

import datetime as dt
import itertools
import statistics
from typing import Any

from tether.registry import Registry, VersionInfo


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
    """Time to detect, time to publish, auto-approve rate, open reviews, deprecated-version use.

    Reads only what it counts (event times, each version's publication facts, the call log's
    aggregates), so it stays fast with thousands of versions, events and calls."""
    events = registry.event_stats()
    reviews = registry.reviews()
    decided = [((_t(r["decided_at"]) or now) - (_t(r["created_at"]) or now)).total_seconds()
               for r in reviews if r["status"] == "approved"]
    versions = registry.version_index()
    later = [v for v in versions if v.supersedes]
    auto = [v for v in later if v.review.get("mode") == "auto"]
    open_reviews = [{"id": r["id"], "status": r["status"],
                     "tools": [t["name"] for t in r["body"]["tools"]],
                     "age_hours": round((now - (_t(r["created_at"]) or now)).total_seconds()
                                        / 3600, 2)}
                    for r in reviews if r["status"] in ("pending", "blocked")]
    successors: dict[tuple[str, str], dt.datetime] = {}
    by_name: dict[str, list[VersionInfo]] = {}
    for v in versions:
        by_name.setdefault(v.name, []).append(v)
    for vs in by_name.values():
        for old, new in itertools.pairwise(vs):
            successors[(old.name, old.version)] = (_t(new.published_at) or now) + dt.timedelta(
                days=deprecation_days)
    calls = registry.call_summary()
    pinned = []
    for c in calls["deprecated"]:
        until = successors.get((c["tool"], c["version"]))
        pinned.append({"user": c["user"], "tool": c["tool"], "version": c["version"],
                       "served_until": until.date().isoformat() if until else None,
                       "days_left": (until - now).days if until else None})
    return {
        "events": events["count"],
        "events_by_kind": events["by_kind"],
        "time_to_detect": _hours(events["detect_seconds"]),
        "time_to_publish_reviewed": _hours(decided),
        "auto_approve_rate": round(len(auto) / len(later), 3) if later else None,
        "versions_after_initial": len(later),
        "open_reviews": open_reviews,
        "calls": calls["calls"],
        "calls_to_deprecated_versions": calls["deprecated_calls"],
        "pinned_users": sorted(pinned, key=lambda p: (p["days_left"] or 0, p["user"])),
    }
