"""`tether learn`: proposals from the call log and labelled runs; apply, dismiss, report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.drift import AuthorOpt, checked_author
from tether.cli.options import JsonOpt, ProjectOpt
from tether.cli.output import out, print_json, progress
from tether.config import load_project
from tether.errors import ConfigError

if TYPE_CHECKING:
    from tether.learn.model import Proposal

learn_app = typer.Typer(invoke_without_command=True, no_args_is_help=False)
PidArg = typer.Argument(..., metavar="ID", help="The proposal's id (`tether learn` lists them).")
SubProjectOpt = typer.Option(None, "--project", "-p", file_okay=False,
                             help="Project directory holding tether.yaml (default: the one given "
                             "to `tether learn`, else .).")


def _project(ctx: typer.Context, project: Path | None) -> Path:
    given = (ctx.obj or {}).get("project") if isinstance(ctx.obj, dict) else None
    return project or given or Path(".")


@learn_app.callback()
def learn(ctx: typer.Context, project: Path = ProjectOpt, as_json: bool = JsonOpt,
          since: str | None = typer.Option(
              None, "--since", help="Read calls from then on: a date, a time (UTC unless it "
              "says), or a span back from now (7d, 24h, 30m)."),
          from_eval: list[Path] = typer.Option(
              [], "--from-eval", help="A labelled run folder to learn from too (repeat it).",
              file_okay=False),
          apply_id: int | None = typer.Option(
              None, "--apply", help="Apply proposal ID through the gate (one `tether check` "
              "pass)."),
          author: str | None = AuthorOpt) -> None:
    """Read the call log (every replica's) and labelled runs, and propose notes for the tools'
    descriptions, each with its evidence. Exit 0; with --apply, `tether check`'s codes (10
    published, 11 waiting for a reviewer, 12 blocked), 2 error."""
    if ctx.invoked_subcommand is not None:  # `tether learn -p DIR dismiss ID` reads DIR too
        if apply_id is not None or since or from_eval:
            raise ConfigError(f"--apply, --since and --from-eval go with `tether learn` alone, "
                              f"not with `tether learn {ctx.invoked_subcommand}`.",
                              hint="Give them without the subcommand.")
        ctx.obj = {"project": project}
        return
    proj = load_project(project)
    if apply_id is not None:
        from tether.learn.apply import apply

        who = checked_author(proj, author)
        with progress(3, f"applying proposal {apply_id}") as step:
            step("writing the learn layer and checking")
            done = apply(proj, apply_id, who)
        if as_json:
            print_json(done.to_json())
        else:
            p = done.proposal
            out.print(f"proposal {p.id} applied: {escape(p.change.where())} += "
                      f"{escape(p.change.sentence)!r}; {escape(p.outcome or '')}")
            for o in done.check.outcomes if done.check else []:
                if o.outcome != "unchanged":
                    out.print(f"  {escape(o.tool)} {o.outcome} {o.version} "
                              f"({o.change_level}, {o.change_kind})")
            if p.report:
                _report_lines(p)
            out.print(f"exit {done.exit_code}")
        sys.exit(done.exit_code)
    from tether.learn.propose import learn as run_learn

    with progress(2, "learning from calls") as step:
        step("reading the call log")
        result = run_learn(proj, since, from_eval)
    if as_json:
        print_json(result.to_json())
        return
    out.print(f"{result.calls:,} calls and {result.cases} labelled cases read; "
              f"{len(result.proposals)} open proposals ({result.new} new, {result.reopened} "
              "back with new evidence)")
    if result.proposals:
        _table(result.proposals)
        out.print("Apply one with `tether learn --apply ID`, or `tether learn dismiss ID`.")


def _table(proposals: list[Proposal]) -> None:
    t = Table(show_edge=False, header_style="bold")
    for h in ("id", "rule", "tool", "support", "change"):
        t.add_column(h, overflow="fold")
    for p in proposals:
        t.add_row(str(p.id), p.rule, p.tool, str(p.support),
                  escape(f"{p.change.where()} += {p.change.sentence!r}"))
    out.print(t)


@learn_app.command("dismiss")
def dismiss(ctx: typer.Context, pid: int = PidArg, project: Path | None = SubProjectOpt,
            as_json: bool = JsonOpt, author: str | None = AuthorOpt) -> None:
    """Dismiss a proposal: it stays away until newer evidence arrives (an applied one has its
    sentence taken out again through the gate)."""
    from tether.learn.apply import dismiss as run_dismiss

    proj = load_project(_project(ctx, project))
    p, result = run_dismiss(proj, pid, checked_author(proj, author))
    if as_json:
        print_json({"proposal": p.model_dump(mode="json"),
                    "check": result.to_json() if result else None})
        return
    out.print(f"proposal {pid} dismissed" + (
        f"; its sentence was taken out (exit {result.exit_code})" if result else ""))
    if result is not None and result.exit_code in (11, 12):
        sys.exit(result.exit_code)  # taking it out waits for a person, or was blocked


@learn_app.command("report")
def report(ctx: typer.Context, pid: int = PidArg, project: Path | None = SubProjectOpt,
           as_json: bool = JsonOpt) -> None:
    """The proposal, its evidence, and the regression suite's metrics before and after it was
    applied."""
    from tether.learn.apply import report as run_report

    p = run_report(load_project(_project(ctx, project)), pid)
    if as_json:
        print_json(p.model_dump(mode="json"))
        return
    out.print(f"proposal {p.id} ({p.rule}, {p.status}): {escape(p.summary)}")
    out.print(f"  change: {escape(p.change.where())} += {escape(p.change.sentence)!r}")
    out.print(f"  support: {p.support} (newest {p.newest})")
    for s in p.sample:
        out.print("  - " + escape(_seen(s.model_dump())))
    if p.report:
        _report_lines(p)
    elif p.status == "applied":
        out.print("  no regression suite ran (set eval.regression_suite to measure each "
                  "publication)")


def _seen(s: dict[str, Any]) -> str:
    if s.get("case_id"):
        return f"case {s['case_id']} ({s.get('tool')}): {s.get('said') or ''}"
    what = (f"error: {s['error']}" if s.get("error") else f"{s.get('rows')} rows")
    return (f"{s.get('at')} {s.get('user')} {s.get('tool')} {s.get('arguments')} -> {what}, "
            f"{s.get('latency_ms')} ms")


def _report_lines(p: Proposal) -> None:
    assert p.report is not None
    before, after = p.report["before"], p.report["after"]
    t = Table(show_edge=False, header_style="bold", title="regression suite")
    for h in ("", "before", "after"):
        t.add_column(h)
    for k in ("cases", "correct", "correct_and_grounded"):
        t.add_row(k, str(before[k]), str(after[k]))
    for cls in sorted(set(before["failures_by_class"]) | set(after["failures_by_class"])):
        t.add_row(f"failures: {cls}", str(before["failures_by_class"].get(cls, 0)),
                  str(after["failures_by_class"].get(cls, 0)))
    out.print(t)
    out.print(f"  {len(p.report.get('flipped') or [])} cases flipped ({p.report['run_dir']})")
