"""/reviews: changes that wait for a person, what decided the others, and the decision itself.

A decision goes through :func:`tether.drift.check.decide`, the function `tether review
approve|reject` calls, as the signed-in user; with a regression suite configured, an approval
replays it as the CLI does (:func:`tether.eval.regression.rerun`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from tether.config import Project
from tether.context.meta import context_of
from tether.drift.check import Blocked, decide, definition_diff
from tether.errors import ConfigError
from tether.eval.regression import rerun
from tether.policy import reviewers
from tether.policy.versions import POLICY_KIND
from tether.registry.policy import holds_policy
from tether.web.console import Console, Viewer, id_in_url, shared_registry

OPEN = ("pending", "blocked")
AUTO_SHOWN = 50


def _js(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str, ensure_ascii=False)


def diff_lines(lines: list[str]) -> list[tuple[str, str]]:
    """(class, text) per line of a unified diff, headers left out."""
    out = []
    for line in lines:
        if line.startswith(("---", "+++", "@@")):
            continue
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        out.append((kind, line))
    return out


def evidence(event: dict[str, Any]) -> dict[str, Any]:
    """What the detector saw, in the words a reviewer needs: the new value, when first seen,
    how many rows; other details as they are."""
    d = dict(event.get("details") or {})
    known = {k: d.pop(k) for k in ("value", "rows", "first_seen") if k in d}
    return {"kind": event["kind"], "subject": event["subject"], "value": known.get("value"),
            "rows": known.get("rows"),
            "first_seen": event.get("first_observed_at") or known.get("first_seen"),
            "detected_at": event.get("detected_at"), "details": _js(d) if d else None}


def review_view(review: dict[str, Any]) -> dict[str, Any]:
    body = review["body"]
    diffs = body.get("diffs", {})
    tools = []
    for t in body.get("tools", []):
        name = t["name"]
        entry = {
            "name": name, "version": t["version"], "level": t.get("change_level"),
            "kind": t.get("change_kind"), "note": t.get("change_note"),
            "retire": t.get("retire"), "description": t["definition"].get("description", "")}
        if name == POLICY_KIND:  # the access policy itself: each change in words, per role
            entry["changes"] = [{"role": c.get("role") or "every role", "words": c.get("words"),
                                 "effect": c.get("effect")}
                                for c in t["definition"].get("changes", [])]
            tools.append(entry)
            continue
        policy = diffs.get("policy", {}).get(name) or {}
        tools.append(entry | {
            "schema": [(path, _js(c["before"]), _js(c["after"]))
                       for path, c in (diffs.get("schema", {}).get(name) or {}).items()],
            "description_diff": diff_lines(
                (diffs.get("description", {}).get(name) or "").splitlines()),
            "policy": [(key.split(":", 1)[1].replace(":", " on "), _js(c.get("before")),
                        _js(c.get("after"))) for key, c in policy.items() if ":" in key]})
    decided = review["decided_by"] or review["rule"]
    return {**{k: review[k] for k in ("id", "status", "route", "created_at", "decided_at",
                                      "comment")},
            "author": review.get("author"), "decided": decided, "tools": tools,
            "holds_policy": holds_policy(review),
            "events": [evidence(e) for e in body.get("events", [])]}


def auto_publications(project: Project, limit: int = AUTO_SHOWN) -> list[dict[str, Any]]:
    """Publications a rule approved (every `auto: ...` one), newest first."""
    registry = shared_registry(project)
    pubs = registry.publications(limit=limit * 4)
    return [p for p in pubs if str(p["rule"]).startswith("auto")][:limit]


def publication_view(project: Project, pid: int) -> dict[str, Any] | None:
    """One rule-approved publication: each version with what changed since the one before."""
    registry = shared_registry(project)
    pubs = [p for p in registry.publications() if p["id"] == pid]
    if not pubs:
        return None
    tools = []
    for v in registry.versions(publication=pid):
        history = registry.versions(v.name)
        before = [h for h in history if h.publication < pid]
        prev = before[-1].definition if before else {}
        d = definition_diff(prev, v.definition, before[-1].version if before else "none",
                            v.version)
        ctx = context_of(v.definition)
        tools.append({"name": v.name, "version": v.version,
                      "kind": ctx.get("change_kind"), "note": ctx.get("change_note"),
                      "schema": [(p, _js(c["before"]), _js(c["after"]))
                                 for p, c in d["schema"].items()],
                      "description_diff": diff_lines(d["description"])})
    return {**pubs[0], "tools": tools}


def _lists(project: Project) -> dict[str, Any]:
    registry = shared_registry(project)
    reviews = registry.reviews()
    summary = [{"id": r["id"], "status": r["status"], "created_at": r["created_at"],
                "decided": r["decided_by"] or r["rule"], "comment": r["comment"],
                "tools": [f"{t['name']}@{t['version']} ({t.get('change_kind')})"
                          for t in r["body"].get("tools", [])]} for r in reversed(reviews)]
    return {"open": [r for r in summary if r["status"] in OPEN],
            "decided": [r for r in summary if r["status"] not in OPEN],
            "auto": auto_publications(project)}


def _decide(console: Console, v: Viewer, rid: int, approve: bool, comment: str) -> dict[str, str]:
    """Decide as the signed-in user; the outcome as query parameters for the page after."""
    assert v.user is not None
    try:
        pid = decide(v.as_written, rid, approve, v.user, comment)
    except Blocked:  # the review is now blocked in the registry; its page says why
        return {"decided": "blocked"}
    out = {"decided": "approved" if approve else "rejected"}
    if pid is not None:
        out["publication"] = str(pid)
        if v.project.config.eval.regression_suite:

            regression = rerun(v.as_written, pid)
            if regression is not None:
                out["flipped"] = str(len(regression.flipped))
    return out


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        return console.page(request, "reviews.html", **_lists(v.project))

    def show(request: Request) -> Response:
        v = console.signed_in(request)
        rid = id_in_url(request.path_params["rid"], "review")
        registry = shared_registry(v.project)
        review = registry.review(rid)
        if review is None:
            raise HTTPException(404, f"There is no review {rid}.")

        q = request.query_params  # only fixed words and numbers: the page never echoes text
        outcome = {"decided": q.get("decided") if q.get("decided") in (
                       "approved", "rejected", "blocked") else None,
                   "publication": q.get("publication", "") if q.get("publication", "").isdigit()
                   else None,
                   "flipped": q.get("flipped", "") if q.get("flipped", "").isdigit() else None}
        return console.page(request, "review.html", r=review_view(review), outcome=outcome,
                            reviewers=reviewers(v.project.config))

    def auto(request: Request) -> Response:
        v = console.signed_in(request)
        pid = id_in_url(request.path_params["pid"], "publication")
        pub = publication_view(v.project, pid)
        if pub is None:
            raise HTTPException(404, f"There is no publication {pid}.")
        return console.page(request, "publication.html", p=pub)

    async def decide_post(request: Request) -> Response:
        form = await request.form()
        v = await run_in_threadpool(console.signed_in, request)
        console.check_form(v, form)
        rid = id_in_url(request.path_params["rid"], "review")
        choice = form.get("decision")
        if choice not in ("approve", "reject"):
            raise ConfigError("choose approve or reject.")
        comment = str(form.get("comment") or "")[:4000]
        outcome = await run_in_threadpool(_decide, console, v, rid, choice == "approve", comment)
        return RedirectResponse(f"/reviews/{rid}?{urlencode(outcome)}", status_code=303)

    # ids are read by id_in_url, not the router's int convertor: 10**30 must be a 404, not an
    # integer the registry cannot hold (and 5,000 digits are no integer Python converts)
    return [Route("/reviews", index, methods=["GET"]),
            Route("/reviews/auto/{pid}", auto, methods=["GET"]),
            Route("/reviews/{rid}", show, methods=["GET"]),
            Route("/reviews/{rid}/decide", decide_post, methods=["POST"])]
