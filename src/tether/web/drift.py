"""/drift: a timeline of drift events and publications with time to detect and time to
publish, the open reviews and their age, and the context-CI checklist (`tether ci`)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tether.drift.checklist import evaluate
from tether.drift.metrics import drift_report
from tether.eval.charts import hbars, no_data
from tether.registry import Registry
from tether.web.console import Console, Viewer, shared_registry

PAGE = 100
MAX_PAGE = 10**9
"""Highest page number read (beyond it the offset would overflow the registry's integers)."""
REVIEWED = re.compile(r"^review (\d+) by ")


def _t(s: str | None) -> dt.datetime | None:
    if not s:
        return None
    v = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return v if v.tzinfo else v.replace(tzinfo=dt.UTC)


def _hours(a: str | None, b: str | None) -> float | None:
    ta, tb = _t(a), _t(b)
    return round((tb - ta).total_seconds() / 3600, 2) if ta and tb else None


def timeline(registry: Registry, page: int) -> tuple[list[dict[str, Any]], bool]:
    """One page of events (newest first) and the publications made in the same span of time,
    and whether an older page exists. A reviewed publication's time to publish runs from the
    review's opening to its decision; a rule's publication is made by the check that detected
    the change (no wait)."""
    events = registry.events(limit=PAGE + 1, offset=page * PAGE)
    more = len(events) > PAGE
    events = events[:PAGE]
    newer = registry.events(limit=1, offset=page * PAGE - 1) if page else []
    upper = newer[0]["detected_at"] if newer else None  # shown on the newer page
    lower = events[-1]["detected_at"] if more and events else None  # on the older page
    reviews = {r["id"]: r for r in registry.reviews()}
    items: list[dict[str, Any]] = [
        {"type": "event", "at": e["detected_at"], "kind": e["kind"], "subject": e["subject"],
         "detect_hours": _hours(e["first_observed_at"], e["detected_at"]),
         "first_seen": e["first_observed_at"]} for e in events]
    for p in registry.publications():
        at = _t(p["published_at"])
        if (upper and at and at > (_t(upper) or at)) or (lower and at and at < (_t(lower) or at)):
            continue
        m = REVIEWED.match(str(p["rule"]))
        review = reviews.get(int(m.group(1))) if m else None
        items.append({"type": "publication", "at": p["published_at"], "id": p["id"],
                      "rule": p["rule"], "tools": p["tools"],
                      "review": review["id"] if review else None,
                      "publish_hours": _hours(review["created_at"], review["decided_at"])
                      if review else (0.0 if str(p["rule"]).startswith("auto") else None)})
    items.sort(key=lambda i: _t(str(i["at"])) or dt.datetime.min.replace(tzinfo=dt.UTC),
               reverse=True)
    return items, more


def drift_view(v: Viewer, page: int) -> dict[str, Any]:
    registry = shared_registry(v.project)
    report = drift_report(registry, v.project.now(), v.project.config.drift.deprecation_days)
    items, more = timeline(registry, page)
    checklist = evaluate(v.as_written, registry)  # item 14: tether.yaml against the served
    kinds = report["events_by_kind"]
    chart = hbars("Drift events by kind", list(kinds), ["events"], [[n] for n in kinds.values()],
                  fmt=lambda x: "n/a" if x is None else f"{x:g}") if kinds else no_data(
        "No drift event yet: `tether check` (or `tether watch`) records them.")
    return {"report": report, "items": items, "page": page, "more": more,
            "checklist": checklist, "chart": chart}


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        raw = request.query_params.get("page", "0")
        digits = raw.isascii() and raw.isdigit()  # "-1" or "x" is the first page, as before
        if digits and (len(raw) > 10 or int(raw) > MAX_PAGE):
            raise HTTPException(404, "There is no such page of the timeline.")
        page = int(raw) if digits else 0
        return console.page(request, "drift.html", **drift_view(v, page))

    return [Route("/drift", index, methods=["GET"])]
