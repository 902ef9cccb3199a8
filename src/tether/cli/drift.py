"""`tether check` and `tether review`: drift, the gate, and the humans it waits for."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt, ProjectOpt
from tether.cli.output import err, out, print_json, progress
from tether.config import Project, load_project
from tether.drift.check import CheckResult, decide
from tether.drift.check import check as run_check
from tether.errors import ConfigError
from tether.registry import open_registry

if TYPE_CHECKING:
    from tether.eval.regression import RegressionResult


AuthorOpt = typer.Option(
    None, "--as", help="Who runs it: a user in policies.users (default: your login name). A "
    "policy change it opens for review is never approved by its author.")


def check(project: Path = ProjectOpt, as_json: bool = JsonOpt,
          full: bool = typer.Option(False, "--full", help="Profile every product, even those "
                                    "whose probe (schema, rows, newest time, enum checksum) "
                                    "moved nothing."),
          author: str | None = AuthorOpt) -> None:
    """One pass: detect drift, regenerate, classify, gate, publish; the access policy too (a
    change that can only narrow is published at once, any other waits for a reviewer who is
    not its author). Exit 0 no drift, 10 published, 11 waiting for review, 12 blocked, 2
    error."""
    proj = load_project(project)
    author = checked_author(proj, author)
    if proj.config.eval.regression_suite:  # a broken suite is a config error before any work
        from tether.eval.regression import suite_dir

        suite_dir(proj)
    with progress(len(proj.config.products) + 2, "checking for drift") as step:
        result = run_check(proj, progress=step, full=full, author=author)
    regression = None
    if result.publication is not None and proj.config.eval.regression_suite:
        regression = _regression(proj, result.publication, quiet=as_json)
    code = result.exit_code
    for w in result.warnings:
        err.print(f"warning: {escape(w)}")
    if regression is not None and regression.flipped and code in (0, 10):
        code = 11  # a flipped regression case waits for a person, like a review
    if as_json:
        print_json(result.to_json() | {"exit_code": code, "regression":
                                       regression.to_json() if regression else None})
    else:
        for e in result.events:
            out.print(f"event {escape(e['kind'])}: {escape(e['subject'])} "
                      f"{escape(json.dumps(e['details'], default=str))[:160]}")
        _outcomes(result)
        out.print(f"{len(result.events)} events; exit {code}")
    sys.exit(code)


def checked_author(proj: Project, author: str | None) -> str | None:
    """``--as NAME`` must name a user of tether.yaml (a typo is not an author)."""
    if author is None:
        return None
    from tether.policy.model import role_of

    role_of(proj.config, author)
    return author


def _outcomes(result: CheckResult) -> None:
    t = Table(show_edge=False, header_style="bold")
    for h in ("tool", "outcome", "version", "change", "note"):
        t.add_column(h, overflow="fold")
    for o in result.outcomes:
        if o.outcome == "unchanged":
            continue
        t.add_row(o.tool, o.outcome + (f" (review {o.review})" if o.review else ""),
                  o.version or "", f"{o.change_level or ''} {o.change_kind or ''}",
                  escape(o.change_note or ""))
    out.print(t)


def _finish(result: CheckResult, as_json: bool) -> None:
    code = result.exit_code
    if as_json:
        print_json(result.to_json())
    else:
        _outcomes(result)
        for rid in result.reviews:
            out.print(f"review {rid} waits: tether review approve {rid} --as NAME (or reject)")
        out.print(f"exit {code}")
    sys.exit(code)


def retire(tool: str = typer.Argument(..., help="The published tool to retire."),
           reason: str = typer.Option(None, "--reason", help="Why, in a few words (shown to "
                                      "models while the tool is still served)."),
           project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """Retire a published tool: a new major version says why, is served for
    drift.deprecation_days once published, then is gone. A removal is breaking, so a named
    person approves it (exit 11); blocked (12) if it exposes a restricted column."""
    from tether.drift.retiring import retire_tool

    _finish(retire_tool(load_project(project), tool, reason), as_json)


def rollback(tool: str = typer.Argument(..., help="The published tool."),
             to: str = typer.Option(..., "--to", help="The version whose definition to "
                                    "publish again."),
             project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """Publish an earlier version's definition of TOOL as a new version, through the gate:
    exit 10 published, 11 waits for review (a breaking difference), 12 blocked, 2 error.
    Revert tether.yaml too, or the next check proposes the newer definition again."""
    from tether.drift.retiring import rollback_tool

    _finish(rollback_tool(load_project(project), tool, to), as_json)


review_app = typer.Typer(help="Changes that wait for a named human.", no_args_is_help=True)


@review_app.command("list")
def review_list(project: Path = ProjectOpt, as_json: bool = JsonOpt,
                status: str = typer.Option(None, "--status", help="pending | blocked | ...")
                ) -> None:
    """Reviews, newest last."""
    proj = load_project(project)
    registry = open_registry(proj)
    try:
        rows = registry.reviews(status)
    finally:
        registry.close()
    summary = [{"id": r["id"], "status": r["status"], "route": r["route"],
                "tools": [f"{t['name']}@{t['version']} ({t['change_kind']})"
                          for t in r["body"]["tools"]],
                "created_at": r["created_at"], "decided_by": r["decided_by"],
                "comment": r["comment"]} for r in rows]
    if as_json:
        print_json(summary)
        return
    t = Table(show_edge=False, header_style="bold")
    for h in ("id", "status", "tools", "created", "by"):
        t.add_column(h, overflow="fold")
    for r in summary:
        t.add_row(str(r["id"]), r["status"], ", ".join(r["tools"]), r["created_at"],
                  r["decided_by"] or "")
    out.print(t)


@review_app.command("show")
def review_show(review_id: int = typer.Argument(...), project: Path = ProjectOpt) -> None:
    """The three diffs (schema, description, policy projection) and the change notes."""
    proj = load_project(project)
    registry = open_registry(proj)
    try:
        found = [r for r in registry.reviews() if r["id"] == review_id]
    finally:
        registry.close()
    if not found:
        raise ConfigError(f"there is no review {review_id}.", hint="See `tether review list`.")
    r = found[0]
    print_json({"id": r["id"], "status": r["status"], "route": r["route"],
                "decided_by": r["decided_by"], "comment": r["comment"],
                "notes": {t["name"]: t["change_note"] for t in r["body"]["tools"]},
                "diffs": r["body"]["diffs"]})


def _regression(proj: Project, publication: int, quiet: bool = False) -> RegressionResult | None:
    """Replay the project's regression suite against the tools just published."""
    from tether.eval.regression import rerun

    regression = rerun(proj, publication)
    if regression is not None and not quiet:
        out.print(f"regression suite: {regression.cases} cases replayed against the new tools "
                  f"({regression.run_dir}), {len(regression.flipped)} flipped")
        for f in regression.flipped:
            out.print(f"  {escape(f['case_id'])}: {escape(json.dumps(f['changed']))}")
    return regression


def _decide(review_id: int, approve: bool, by: str, project: Path, comment: str | None
            ) -> None:
    if not by.strip():
        raise ConfigError("--as NAME is required: a named human decides.")
    proj = load_project(project)
    pid = decide(proj, review_id, approve, by, comment, via="cli")
    verb = "approved and published" if approve else "rejected"
    out.print(f"review {review_id} {verb} by {by}"
              + (f" (publication {pid})" if pid else ""))
    if pid and proj.config.eval.regression_suite:
        regression = _regression(proj, pid)
        if regression and regression.flipped:
            sys.exit(11)


CommentOpt = typer.Option(None, "--comment", help="Why, in a few words (kept with the "
                          "decision; the console shows it).")


@review_app.command("approve")
def review_approve(review_id: int = typer.Argument(...),
                   by: str = typer.Option(..., "--as", help="Who approves: a user whose role "
                                          "has reviewer: true."),
                   comment: str = CommentOpt, project: Path = ProjectOpt) -> None:
    """Approve a pending review: its versions are published in one transaction."""
    _decide(review_id, True, by, project, comment)


@review_app.command("reject")
def review_reject(review_id: int = typer.Argument(...),
                  by: str = typer.Option(..., "--as", help="Who rejects: a user whose role "
                                         "has reviewer: true."),
                  comment: str = CommentOpt, project: Path = ProjectOpt) -> None:
    """Reject a pending review: nothing is published."""
    _decide(review_id, False, by, project, comment)


drift_app = typer.Typer(help="Drift reporting.", no_args_is_help=True)


@drift_app.command("report")
def drift_report(project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """Time to detect, time to publish, auto-approve rate, open reviews and their age, calls to
    deprecated versions and who is still pinned."""
    from tether.drift.metrics import drift_report as compute

    proj = load_project(project)
    registry = open_registry(proj)
    try:
        report = compute(registry, proj.now(), proj.config.drift.deprecation_days)
    finally:
        registry.close()
    if as_json:
        print_json(report)
        return
    t = Table(show_edge=False, header_style="bold", show_header=False)
    t.add_column("metric")
    t.add_column("value", overflow="fold")
    for k, v in report.items():
        t.add_row(k.replace("_", " "), escape(json.dumps(v, default=str)))
    out.print(t)


def watch(project: Path = ProjectOpt,
          interval: float = typer.Option(300.0, "--interval", help="Seconds between checks."),
          count: int = typer.Option(0, "--count", help="Stop after N checks (0: forever)."),
          author: str | None = AuthorOpt) -> None:
    """Run `tether check` every --interval seconds; one line per check."""
    import time

    n = 0
    while True:
        proj = load_project(project)
        result = run_check(proj, author=checked_author(proj, author))
        n += 1
        changed = [f"{o.tool}:{o.outcome}" for o in result.outcomes if o.outcome != "unchanged"]
        out.print(f"check {n}: exit {result.exit_code}, {len(result.events)} events"
                  + (f", {', '.join(changed)}" if changed else ""))
        if count and n >= count:
            return
        time.sleep(interval)


def diff(tool: str = typer.Argument(...), a: str = typer.Argument(..., help="Version A."),
         b: str = typer.Argument(..., help="Version B."), project: Path = ProjectOpt,
         as_json: bool = JsonOpt) -> None:
    """The schema and description differences between two published versions of TOOL."""
    from tether.drift.check import definition_diff

    proj = load_project(project)
    registry = open_registry(proj)
    try:
        versions = {v.version: v for v in registry.versions(tool)}
    finally:
        registry.close()
    missing = [v for v in (a, b) if v not in versions]
    if missing:
        raise ConfigError(f"{tool} has no version {', '.join(missing)}.",
                          hint="Versions: " + (", ".join(versions) or "none") + ".")
    da, db = versions[a].definition, versions[b].definition
    result: dict[str, Any] = {"tool": tool, "from": a, "to": b, **definition_diff(da, db, a, b)}
    if as_json:
        print_json(result)
        return
    for path, change in result["schema"].items():
        out.print(f"{escape(path)}: {escape(json.dumps(change['before']))} -> "
                  f"{escape(json.dumps(change['after']))}")
    for line in result["description"]:
        out.print(escape(line))


def ci(project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """The fourteen context-CI items, evaluated against this project: which hold and why. Exit 1
    if any fails; exit 2 when the policy names something the sources do not have."""
    from tether.drift.checklist import FAILS, evaluate
    from tether.profiling.policycheck import check_against_sources

    proj = load_project(project)
    check_against_sources(proj)  # a policy naming nothing is an error (exit 2), not a pass
    registry = open_registry(proj)
    try:
        items = evaluate(proj, registry)
    finally:
        registry.close()
    if as_json:
        print_json(items)
    else:
        t = Table(show_edge=False, header_style="bold")
        for h in ("#", "item", "status", "why"):
            t.add_column(h, overflow="fold")
        for i in items:
            t.add_row(str(i["item"]), i["title"], i["status"], escape(i["why"]))
        out.print(t)
    if any(i["status"] == FAILS for i in items):
        raise typer.Exit(1)
