"""Tool generation: context -> MCP tool definitions (grounded, bare, generic) and query plans."""

from __future__ import annotations

from tether.config import Project
from tether.context.profile import ProductProfile
from tether.toolgen.discovery import listed
from tether.toolgen.generate import generate_grounded
from tether.toolgen.model import GeneratedTool, Mode, QueryPlan
from tether.toolgen.modes import MODES, generic_tools, strip_grounding

__all__ = ["MODES", "GeneratedTool", "Mode", "QueryPlan", "generate"]


def generate(project: Project, profiles: dict[str, ProductProfile], mode: Mode = "grounded"
             ) -> list[GeneratedTool]:
    """The tools of ``mode`` for a profiled project, sorted by name (deterministic)."""
    if mode == "generic":
        serve = project.config.serve
        return generic_tools(next(iter(project.config.sources)),
                             min(200, serve.max_result_rows), serve.max_result_bytes)
    tools = generate_grounded(project, profiles)
    listed(project.config, [(t.name, t.wire(), t.plan) for t in tools])  # over budget: an error
    if mode == "bare":
        tools = [strip_grounding(t) for t in tools]
    return tools
