"""Context -> grounded MCP tool definitions and their query plans.

The registered kinds (toolgen/kinds.py) each make their tools: a listing tool per data product
(listing.py), a task tool per governed metric (metric.py), the probe (probe.py), and the
discovery tools (discovery.py). Every sentence of every description records its source.
Restricted columns never reach a definition or a plan. Output is deterministic: tools sorted by
name, schemas built in a fixed order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.config import ProductConfig, Project
from tether.context.config_model import api_product
from tether.context.profile import ProductProfile
from tether.errors import ConfigError
from tether.toolgen.api import API_KIND, api_names, shared_credential, unsampled
from tether.toolgen.discovery import PROBE, ROWS_KIND, SEARCH_KIND
from tether.toolgen.kinds import Kind
from tether.toolgen.listing import LISTING_KIND
from tether.toolgen.metric import METRIC_KIND, predicate_values
from tether.toolgen.model import GeneratedTool
from tether.toolgen.probe import NOT_AVAILABLE, PROBE_KIND
from tether.toolgen.shared import Ctx, size_words
from tether.toolgen.write import WRITE_KIND

GROUNDED: tuple[Kind, ...] = (LISTING_KIND, API_KIND, METRIC_KIND, WRITE_KIND, PROBE_KIND,
                              SEARCH_KIND, ROWS_KIND)
"""The kinds a grounded build generates, in order (a kind may read the tools made before it:
the generic listing names the products that have a listing)."""


def generate_grounded(project: Project, profiles: dict[str, ProductProfile],
                      kinds: Sequence[Kind] = GROUNDED) -> list[GeneratedTool]:
    """Every grounded tool of the project, sorted by name."""
    apis = [n for n in project.config.products if api_product(project.config, n)]
    # one user's sample is told to no one: an API read with each caller's own credential
    # is described from its spec alone
    ctx = Ctx(project, {n: unsampled(p) if n in apis and not shared_credential(project, n)
                        else p for n, p in profiles.items()})
    named = api_names(project, apis) if apis else {}
    for name, p in project.config.products.items():
        ctx.tool_names[name] = named.get(name) or product_tool_name(name, p)
    for name, m in project.config.metrics.items():
        ctx.tool_names[f"metric:{name}"] = (m.tool.name if m.tool and m.tool.name else name)
    for name, p in project.config.products.items():
        for action in p.actions:
            ctx.tool_names[f"action:{name}.{action}"] = action
    _no_duplicate_names(project, ctx.tool_names)
    tools: list[GeneratedTool] = []
    for k in kinds:
        if k.generate is not None:
            tools += k.generate(ctx, list(tools))
    return sorted(tools, key=lambda t: t.name)


def _no_duplicate_names(project: Project, names: dict[str, str]) -> None:
    seen: dict[str, str] = {}
    for owner, tool in names.items():
        if tool in seen:
            raise ConfigError(
                f"two tools would be named {tool!r}: {seen[tool]} and {owner}.",
                where=project.path.name, hint="Give one of them another tool: {name: ...}.")
        seen[tool] = owner


def product_tool_name(name: str, p: ProductConfig) -> str:
    if p.tool and p.tool.name:
        return p.tool.name
    if p.tool and p.tool.question:
        words = re.findall(r"[a-z0-9]+", p.tool.question.lower())
        named = "_".join(w for w in words if w not in {"which", "what", "the", "a", "an", "are",
                                                       "is", "do", "does"})[:60].strip("_")
        if re.fullmatch(r"[a-z][a-z0-9_]*", named):
            return named
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}_by_attributes"


__all__ = ["GROUNDED", "NOT_AVAILABLE", "PROBE", "generate_grounded", "predicate_values",
           "product_tool_name", "size_words"]
