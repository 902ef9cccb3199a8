"""The one gate every publisher goes through (build, check, review approve, and whatever
publishes later), and the check a server runs again on every version it loads.

Routes: wording and additive changes publish at once by a named rule; breaking, semantic and
policy changes wait for a named human; a definition that would expose a restricted column (by
the policy as it stands or as the last check saw it) is blocked, paged and never published.
Generation leaves restricted columns out; this gate checks again on its own (defence in depth),
reading only what a definition says it reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

from tether.config import Project
from tether.context.meta import ToolContext
from tether.drift.classify import classify
from tether.drift.detectors import Event
from tether.policy.exposure import Restricted, exposure
from tether.registry.semver import Level
from tether.toolgen import GeneratedTool
from tether.toolgen.model import QueryPlan


def related(t: GeneratedTool, events: list[Event]) -> list[Event]:
    """The events that concern a tool: its products, its governed terms, its metric."""
    ctx = ToolContext.of(t.wire())
    products = set(ctx.products)
    terms = set(ctx.definitions)
    out = []
    for e in events:
        subject = e["subject"]
        if e["kind"] == "definition_changed":
            kind, _, name = subject.partition(":")
            if (kind == "term" and name in terms) or (kind == "metric"
                                                      and name in _metric_of(t)):
                out.append(e)
        elif e["kind"] == "policy_changed":
            if subject.split(":", 1)[1] in products:
                out.append(e)
        elif subject.split(".")[0] in products:
            out.append(e)
    return out


def _metric_of(t: GeneratedTool) -> set[str]:
    truth = ToolContext.of(t.wire()).source_of_truth
    return {v.split(":", 1)[1] for v in truth.values() if v.startswith("metric:")}


def route(t: GeneratedTool, wire: dict[str, Any], prev: dict[str, Any] | None,
          events: list[Event], restricted: Restricted, policy_widens: bool = True,
          moved: bool = False) -> tuple[str, Level, str]:
    """(route, level, kind) for a changed tool: auto, human or blocked. A change the policy
    made (``policy_changed``) waits for a person only when the policy change widens access
    (``policy_widens``); one that can only narrow is published with it, at once. An API tool
    whose requests would go to another server (``moved``: :func:`server_moved`) is semantic:
    the callers' credentials would go there, so a person decides."""
    level: Level
    level, kind = ("minor", "additive") if prev is None else classify(prev, wire)
    structural = kind
    near = related(t, events)
    # a policy change wins over a semantic one it comes with: both wait for a person, but only
    # a pending policy change keeps a server from starting on the projection it moved
    semantic = any(e["kind"] == "definition_changed" for e in near) or bool(
        transform_changed(prev, wire)) or write_changed(prev, wire) or moved
    if any(e["kind"] == "policy_changed" for e in near):
        level, kind = ("major" if level == "major" or semantic else "minor"), "policy"
    elif semantic:
        level, kind = "major", "semantic"
    if exposure(wire, t.plan.model_dump(), restricted):
        return "blocked", level, kind
    if prev is None:
        return "auto", level, kind
    if kind == "policy" and not policy_widens and not semantic and structural != "breaking":
        return "auto", level, kind
    if kind in ("breaking", "semantic", "policy"):
        return "human", level, kind
    return "auto", level, kind


def server_moved(project: Project, prev_plan: dict[str, Any] | None, plan: QueryPlan
                 ) -> str | None:
    """For an API tool whose requests go to the spec's server (tether.yaml names no
    base_url), what moved when that server changed ("the API's server moved from A to B"),
    else None. The definition may not change by a word while every credential would go
    elsewhere."""
    if plan.kind != "api" or not prev_plan or prev_plan.get("kind") != "api":
        return None
    source = project.config.sources.get(plan.source or "")
    if source is None or source.base_url:
        return None
    old = (prev_plan.get("request") or {}).get("server")
    new = (plan.request or {}).get("server")
    if old == new:
        return None
    return f"the API's server moved from {old or 'none'} to {new or 'none'}"


def write_changed(prev: dict[str, Any] | None, wire: dict[str, Any]) -> bool:
    """A write tool whose roles, moves or preconditions changed: who may change what, and what
    must hold, moved with it; a person decides (its consequences' words are wording)."""
    if prev is None:
        return False
    return ToolContext.of(prev).write != ToolContext.of(wire).write


def transform_changed(prev: dict[str, Any] | None, wire: dict[str, Any]) -> list[str]:
    """Transforms above the tool whose fingerprint moved (a dbt model's SQL changed): what the
    rows mean may have changed with it, so a person decides, as for a governed definition."""
    if prev is None:
        return []
    old, new = ToolContext.of(prev).upstream, ToolContext.of(wire).upstream
    return sorted(k for k, v in new.items() if k in old and old[k] != v)


def page_blocked(project: Project, review: int | None, tools: list[str],
                 exposed: list[str] | None = None) -> None:
    """A blocked change pages a human: the configured command and/or webhook, and the log.
    Restricted columns are named as the policy names them (``product.column``), never a value."""
    where = f"blocked review {review}" if review is not None else "blocked publication"
    what = f" ({', '.join(exposed)})" if exposed else ""
    message = (f"tether: {where}: {', '.join(tools)} would expose a restricted column{what}; "
               "nothing was published.")
    print(message, file=sys.stderr, flush=True)
    page = project.config.drift.page
    if page is None:
        return
    if page.command:
        env = {**os.environ, "TETHER_REVIEW_ID": str(review or ""), "TETHER_MESSAGE": message}
        subprocess.run(page.command, shell=True, env=env, timeout=30, check=False)
    if page.webhook:
        data = json.dumps({"review": review, "tools": tools, "message": message}).encode()
        req = urllib.request.Request(page.webhook, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10).close()
        except OSError as e:
            print(f"tether: the page webhook failed: {e}", file=sys.stderr, flush=True)
