"""`tether build` and `tether tools`: generate, publish, export, and list what a user sees."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from tether.cli.options import JsonOpt, ModeOpt, ProjectOpt, dedicated_setting, mode_of
from tether.cli.output import err, out, print_json, progress
from tether.config import Project, load_project
from tether.context.meta import ToolContext, context_of
from tether.drift.publish import build as run_build
from tether.errors import ConfigError
from tether.policy import role_of
from tether.policy.versions import POLICY_KIND
from tether.registry import open_registry
from tether.toolgen import Mode, generate
from tether.toolgen.discovery import Listed, Setting

TABLE_ROWS = 60
"""A build of thousands of tools prints this many rows; --json lists them all."""
def build(project: Path = ProjectOpt, mode: str = ModeOpt, as_json: bool = JsonOpt,
          author: str = typer.Option(None, "--as", help="Who runs it: a user in "
                                     "policies.users (default: your login name); recorded on "
                                     "the reviews it opens.")) -> None:
    """Generate tool definitions from the data and tether.yaml; publish grounded ones as
    versions in the registry (through the same gate as tether check), with the access policy,
    and export each as tools/NAME.json (the MCP wire form). Exit 0 published or unchanged, 11
    something waits for review, 12 blocked, 2 error."""
    from tether.cli.drift import checked_author

    proj = load_project(project)
    m = mode_of(mode)
    with progress(len(proj.config.products) + 2, f"building {m} tools") as step:
        result = run_build(proj, m, progress=step, author=checked_author(proj, author))
    if as_json:
        print_json({"mode": result.mode, "publication": result.publication,
                    "export_dir": str(result.export_dir), "exit_code": result.exit_code,
                    "reviews": result.reviews, "skipped": result.skipped,
                    "tools": [o.__dict__ for o in result.outcomes]})
    else:
        t = Table(show_edge=False, header_style="bold")
        for h in ("tool", "version", "outcome", "change"):
            t.add_column(h)
        shown = result.outcomes
        if len(shown) > TABLE_ROWS:  # what needs a person first, then what changed
            rank = {"blocked": 0, "pending": 1, "published": 2}
            shown = sorted(shown, key=lambda o: rank.get(o.outcome, 3))
        for o in shown[:TABLE_ROWS]:
            t.add_row(o.name, o.version or "", o.outcome + (f" (review {o.review})"
                                                            if o.review else ""),
                      f"{o.change_level or ''} {o.change_kind or ''}".strip())
        out.print(t)
        if len(result.outcomes) > TABLE_ROWS:
            out.print(f"... and {len(result.outcomes) - TABLE_ROWS:,} more tools (--json lists "
                      "every one)")
        tools = [o for o in result.outcomes if o.name != POLICY_KIND]
        policy = next((o for o in result.outcomes if o.name == POLICY_KIND), None)
        counts = {k: sum(o.outcome == k for o in tools) for k in ("published", "pending",
                                                                   "blocked")}
        out.print(f"{m}: {len(tools)} tools, {counts['published']} published"
                  + (f", {counts['pending']} waiting for review (tether review list)"
                     if counts["pending"] else "")
                  + (f", {counts['blocked']} blocked" if counts["blocked"] else "")
                  + (f"; access policy {policy.version} {policy.outcome}" if policy else "")
                  + f"; exported to {result.export_dir}")
        if m == "grounded":  # nothing published to list (each tool blocked or waiting): said
            with contextlib.suppress(ConfigError):
                out.print(f"tools/list: {_published(proj, m, None)[1].reason}")
    for why in result.skipped:
        err.print(f"skipped: {why}", markup=False, highlight=False)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def tools(
    project: Path = ProjectOpt,
    as_user: str = typer.Option(None, "--as-user", help="Show what this user sees."),
    mode: str = ModeOpt,
    as_json: bool = JsonOpt,
    x_context: bool = typer.Option(False, "--x-context",
                                   help="Mirror _meta.tether/context as x-context."),
    dedicated_tools: str = typer.Option(
        None, "--dedicated-tools", help="As tether serve takes it: all, none or a "
        "comma-separated list of products (default: serve.dedicated_tools)."),
) -> None:
    """Print the tool list a given user would see: exactly what tools/list gives them (the
    server's own answer, under the last approved policy: their tool globs and tables, enums
    narrowed to their rows, their defaults); without --as-user, every tool the list holds
    (serve.dedicated_tools) as published."""
    proj = load_project(project)
    m = mode_of(mode)
    setting = dedicated_setting(dedicated_tools)
    visible, served = (_as_served(proj, m, as_user, setting) if as_user is not None
                       else _published(proj, m, setting))
    if x_context:
        visible = [_mirror(d) for d in visible]
    if as_json:
        print_json(visible)
        return
    t = Table(show_edge=False, header_style="bold")
    t.add_column("tool", overflow="fold")
    t.add_column("version", no_wrap=True)
    t.add_column("description", overflow="fold")  # wrapped at word boundaries, never cut
    for d in visible:
        ctx = ToolContext.of(d)
        t.add_row(d["name"], ctx.version or "", d.get("description", ""))
    out.print(t)
    out.print(f"{len(visible)} tools" + (f" visible to {as_user}" if as_user else "")
              + (f"; {served.reason}" if served.reason else ""))


def _as_served(proj: Project, mode: Mode, user: str, setting: Setting
               ) -> tuple[list[dict[str, Any]], Listed]:
    """``user``'s tools/list, from the server itself (one answer for every surface), and why
    the list is that one."""
    from tether.serve.server import TetherServer

    server = TetherServer(proj, mode=mode, dedicated_tools=setting)
    try:
        role_of(server.project.config, user)  # unknown under the policy servers enforce
        return [v.definition for v in server.visible(user)], server.listed
    finally:
        server.close()


def _published(proj: Project, mode: Mode, setting: Setting
               ) -> tuple[list[dict[str, Any]], Listed]:
    """Every tool the list holds, as published (or generated, for bare and generic), and why
    the list is that one."""
    from tether.toolgen.discovery import listed
    from tether.toolgen.kinds import kind
    from tether.toolgen.model import QueryPlan

    if mode == "grounded":
        registry = open_registry(proj)
        try:
            tools = [(v.definition, QueryPlan.model_validate(v.plan))
                     for v in registry.current().values()]
        finally:
            registry.close()
        if not tools:
            raise ConfigError("no published tools yet.", where=str(proj.root),
                              hint="Run `tether build` first.")
    else:
        from tether.profiling import profile_project

        profiles = {p.product: p for p in profile_project(proj)}
        tools = [(t.wire(), t.plan) for t in generate(proj, profiles, mode)]
    served = listed(proj.config, [(d["name"], d, p) for d, p in tools], setting)
    routed = any(kind(p.kind).listing for _d, p in tools)
    return sorted((d for d, p in tools if d["name"] in served and (
        routed if kind(p.kind).routed else True)), key=lambda d: d["name"]), served


def _mirror(d: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(d)
    ctx = context_of(d)
    if ctx:
        d["x-context"] = ctx
    return d
