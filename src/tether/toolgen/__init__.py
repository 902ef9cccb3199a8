"""Tool generation: context -> MCP tool definitions (grounded, bare, generic) and query plans."""

from __future__ import annotations

from tether.config import Project
from tether.context.profile import ProductProfile
from tether.sources import source_dialect
from tether.toolgen.discovery import listed
from tether.toolgen.generate import generate_grounded
from tether.toolgen.model import GeneratedTool, Mode, QueryPlan
from tether.toolgen.modes import MODES, generic_tools, strip_grounding
from tether.toolgen.shared import metric_products

__all__ = ["MODES", "GeneratedTool", "Mode", "QueryPlan", "generate", "without_products"]


def without_products(project: Project, gone: set[str]) -> Project:
    """``project`` less the products that cannot be read now and what cannot be generated
    without them (the metrics that read one, the relationships and crosswalks through one), so
    that one product gone stops no other tool."""
    if not gone:
        return project
    clone = project.without(gone)
    config = clone.config
    dialect = source_dialect(next(iter(config.sources.values())))
    metrics = {n: m for n, m in config.metrics.items()
               if not set(metric_products(m, dialect)) & gone}
    relationships = [r for r in config.relationships
                     if r.from_.split(".")[0] not in gone and r.to.split(".")[0] not in gone]
    schemes = {n: s.model_copy(update={"crosswalk": None})
               if s.crosswalk and s.crosswalk.split(".")[0] in gone else s
               for n, s in config.identifier_schemes.items()}
    clone.config = config.model_copy(update={"metrics": metrics, "relationships": relationships,
                                             "identifier_schemes": schemes})
    return clone


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
