"""/policy: what each role sees of each tool: the columns it shows, their masks, the row filter,
the restricted columns it never shows, and the tables the role may not read."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tether.context.meta import ToolContext
from tether.policy import role_projection, role_sees_tool
from tether.web.console import Console, Viewer, shared_registry


def _tool_columns(ctx: ToolContext, product: str, known: list[str]) -> list[str]:
    """The product's columns a tool's results come from; all of them for a tool that does not
    say (discovery, the probe)."""
    named = [ref.split(".", 1)[1] for ref in ctx.source_of_truth.values()
             if ref.startswith(f"{product}.")]
    return [c for c in known if c in named] or known


def policy_view(v: Viewer) -> list[dict[str, Any]]:
    """One entry per role (a reviewer sees every role; anyone else their own)."""
    config = v.project.config
    registry = shared_registry(v.project)
    current = registry.current()
    state = registry.state(prefix="product:")
    columns = {k.split(":", 1)[1]: list(s.get("columns", {})) for k, s in state.items()}
    roles = sorted(config.policies.roles) if v.reviewer else [v.role or ""]
    out = []
    for role in roles:
        r = config.policies.roles[role]
        tools = []
        for name, t in sorted(current.items()):
            if not role_sees_tool(config, role, name):
                continue
            ctx = ToolContext.of(t.definition)
            products = []
            for product in ctx.products:
                known = columns.get(product, [])
                p = role_projection(config, role, product, known)
                shown = set(_tool_columns(ctx, product, p["columns"]))
                products.append(p | {"product": product,
                                     "columns": [c for c in p["columns"] if c in shown]})
            tools.append({"name": name, "version": t.version, "products": products})
        denied = sorted(p for p in config.products if not role_projection(
            config, role, p, [])["readable"])
        out.append({"role": role, "description": r.description, "reviewer": r.reviewer,
                    "users": sorted(u for u, c in config.policies.users.items() if c.role == role),
                    "denied": denied, "tools": tools,
                    "hidden": sorted(n for n in current if not role_sees_tool(config, role, n))})
    return out


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        return console.page(request, "policy.html", roles=policy_view(v),
                            restricted=v.project.config.policies.restricted)

    return [Route("/policy", index, methods=["GET"])]
