"""`tether lint`: the ten-point review of the project's tools or any MCP server's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt, ModeOpt, ProjectOpt, mode_of
from tether.cli.output import out, print_json
from tether.config import load_project
from tether.lint import Review, review_tools
from tether.lint.targets import load_json_tools, load_server_tools, read_call_log
from tether.registry import open_registry

BELOW_MIN_SCORE = 1


def lint(
    target: str = typer.Argument(None, help="Project (default), tools JSON file or folder, "
                                 "stdio:'CMD ARGS', or an http(s) MCP URL."),
    project: Path = ProjectOpt,
    mode: str = ModeOpt,
    as_json: bool = JsonOpt,
    min_score: int = typer.Option(0, "--min-score", help="Exit 1 if any tool scores below N."),
    call_log: Path = typer.Option(None, "--call-log", help="JSONL call log: sort by call volume."),
) -> None:
    """Score each tool out of ten (one point per review item), with the reason and fix for
    every lost point, and its size in tokens."""
    tools, label = _load(target, project, mode)
    review = review_tools(tools, label, read_call_log(call_log) if call_log else None)
    if as_json:
        print_json(review.to_json())
    else:
        render(review)
    low = [t.name for t in review.tools if t.score < min_score]
    if low:
        if not as_json:
            out.print(f"{len(low)} tool(s) below --min-score {min_score}: {', '.join(low)}")
        raise typer.Exit(BELOW_MIN_SCORE)


def _load(target: str | None, project: Path, mode: str) -> tuple[list[dict[str, Any]], str]:
    if target and (target.startswith("stdio:") or target.startswith(("http://", "https://"))):
        return load_server_tools(target), target
    if target:
        return load_json_tools(Path(target)), target
    proj = load_project(project)
    m = mode_of(mode)
    if m == "grounded":
        registry = open_registry(proj)
        try:
            current = registry.current()
        finally:
            registry.close()
        if current:
            return [v.definition for v in current.values()], f"project {proj.root} (published)"
    from tether.profiling import profile_project
    from tether.toolgen import generate

    profiles = {p.product: p for p in profile_project(proj)}
    return [t.wire() for t in generate(proj, profiles, m)], f"project {proj.root} ({m})"


def render(review: Review) -> None:
    t = Table(show_edge=False, header_style="bold")
    cols = ["tool", "score", "tokens"] + (["calls"] if any(x.calls is not None
                                                             for x in review.tools) else [])
    cols.append("lost points (reason -> fix)")
    for h in cols:
        t.add_column(h, overflow="fold")
    for r in review.tools:
        lost = "\n".join(f"{f.item}. {f.reason} -> {f.fix}" for f in r.lost) or "-"
        row = [escape(r.name), f"{r.score}/10", str(r.tokens)]
        if "calls" in cols:
            row.append(str(r.calls or 0))
        t.add_row(*row, escape(lost))
    out.print(t)
    n = len(review.tools)
    out.print(f"{review.target}: {n} tools, average {review.average_score:.1f}/10, "
              f"{review.total_tokens} tokens in all ({review.total_tokens / max(n, 1):.0f} a tool; "
              f"{review.encoding})")
