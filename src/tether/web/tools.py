"""/tools: every published tool with its lint score and token size; a tool's page with its
current definition, each description sentence with its source, every version, deprecation
windows and who still calls a deprecated version."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tether.config import Project
from tether.context.meta import ToolContext, enum_of, retired_info
from tether.drift.history import history
from tether.lint import ToolReview, review_tools
from tether.registry import ToolVersion, content_hash
from tether.toolgen.describe import split_sentences
from tether.web.console import Console, Viewer, name_in_url, shared_registry

_LINTED: OrderedDict[str, ToolReview] = OrderedDict()
_LINT_KEEP = 4096


def lint(definitions: list[dict[str, Any]]) -> dict[str, ToolReview]:
    """The ten-point review of each definition, by name. A review depends only on the
    definition, so it is kept by content hash: a page lists a thousand tools without
    tokenising them again."""
    out: dict[str, ToolReview] = {}
    todo = []
    for d in definitions:
        key = content_hash(d) + str(d.get("description", ""))
        if key in _LINTED:
            out[d["name"]] = _LINTED[key]
        else:
            todo.append((key, d))
    if todo:
        by_name = {r.name: r for r in review_tools([d for _, d in todo], "console").tools}
        for key, d in todo:
            _LINTED[key] = out[d["name"]] = by_name[str(d["name"])]
        while len(_LINTED) > _LINT_KEEP:
            _LINTED.popitem(last=False)
    return out


def reach(console: Console, v: Viewer, current: dict[str, ToolVersion]
          ) -> dict[str, dict[str, Any]]:
    """{tool: definition as v's tools/list shows it}: the tools the user may call, asked of the
    project's own server (tool globs and `tables` together, the approved policy), each listed
    one shaped for them (enum values from their rows). A tool reached only through discovery
    is shown as published until its page is opened (shaping it reads the caller's values)."""
    if not current:
        return {}
    assert v.user is not None
    with console.lock:
        server = console.serving()
        listed = {x.name: x for x in server.visible(v.user)}
        return {x.name: listed.get(x.name, x).definition
                for x in server.reachable(v.user)}


def shaped_one(console: Console, v: Viewer, name: str) -> dict[str, Any] | None:
    """``name``'s definition as the user sees it, None when they may not call it."""
    assert v.user is not None
    with console.lock:
        server = console.serving()
        found = next((x for x in server.reachable(v.user) if x.name == name), None)
        return None if found is None else server.shaped(v.user, found).definition


def tool_rows(console: Console, v: Viewer) -> list[dict[str, Any]]:
    """Each tool the user may call, as they see it; a reviewer sees every published tool
    (what a review decides on), those they do not call as published and marked so."""
    registry = shared_registry(v.project)
    current = registry.current()
    mine = reach(console, v, current)
    shown = {n: mine.get(n, t.definition) for n, t in current.items()
             if v.reviewer or n in mine}
    reviews = lint(list(shown.values()))
    rows = []
    for name, definition in sorted(shown.items()):
        t = current[name]
        ctx = ToolContext.of(definition)
        r = reviews[name]
        rows.append({"name": name, "version": t.version, "published_at": t.published_at,
                     "kind": ctx.change_kind, "score": r.score, "tokens": r.tokens,
                     "products": ctx.products, "yours": name in mine,
                     "retired": retired_info(t.definition) is not None})
    return rows


def _params(schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    schema = schema or {}
    required = set(schema.get("required") or [])
    out = []
    for name, p in (schema.get("properties") or {}).items():
        p = p if isinstance(p, dict) else {}
        allowed = enum_of(p)
        out.append({"name": name, "type": json.dumps(p.get("type", p.get("anyOf", "")))
                    .strip('"'), "required": name in required,
                    "allowed": ", ".join(map(str, allowed)) if allowed else p.get("pattern", ""),
                    "description": p.get("description", "")})
    return out


def tool_view(project: Project, name: str, deprecation_days: int,
              shown: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """One tool's page: ``shown`` (its definition as the viewer sees it), else as published;
    its versions and who still calls a deprecated one."""
    registry = shared_registry(project)
    found = registry.versions(name)
    callers = registry.callers(name) if found else []
    if not found:
        return None
    d = shown if shown is not None else found[-1].definition
    ctx = ToolContext.of(d)
    sentences = [(s, ctx.sources.get(s)) for s in split_sentences(d.get("description", ""))]
    rows = history(found, deprecation_days)
    windows = {r["version"]: r["served_until"] for r in rows}
    review = lint([d])[name]
    return {"name": name, "current": found[-1].version, "description": d.get("description", ""),
            "sentences": sentences, "inputs": _params(d.get("inputSchema")),
            "outputs": _params(d.get("outputSchema")), "products": ctx.products,
            "json": json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False),
            "versions": list(reversed(rows)), "lint": review, "yours": shown is not None,
            "deprecations": ctx.deprecation,
            "callers": [c | {"served_until": windows.get(c["version"])} for c in callers]}


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        return console.page(request, "tools.html", tools=tool_rows(console, v))

    def show(request: Request) -> Response:
        v = console.signed_in(request)
        name = name_in_url(request.path_params["name"],
                           "There is no published tool of that name.")
        shown = shaped_one(console, v, name)
        if shown is None and not v.reviewer:
            raise HTTPException(404, f"There is no published tool {name} you may see.")
        view = tool_view(v.project, name, v.project.config.drift.deprecation_days, shown)
        if view is None:
            raise HTTPException(404, f"There is no published tool {name}.")
        return console.page(request, "tool.html", t=view)

    return [Route("/tools", index, methods=["GET"]),
            Route("/tools/{name}", show, methods=["GET"])]
