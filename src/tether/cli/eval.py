"""`tether eval run | label | report | diff`: the evaluation harness."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt
from tether.cli.output import err, out, print_json, progress
from tether.errors import ConfigError

eval_app = typer.Typer(help="Evaluate any MCP server: run cases as named users, label, report.",
                       no_args_is_help=True)


def _options(pairs: list[str]) -> dict[str, str]:
    opts = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise ConfigError(f"--agent-option {p!r} is not key=value.",
                              hint="E.g. --agent-option model=qwen2.5 --agent-option constrained=true")
        opts[key.strip()] = value
    return opts


def _headers(pairs: list[str]) -> dict[str, str]:
    h = {}
    for p in pairs:
        key, sep, value = p.partition(":")
        if not sep or not key.strip():
            raise ConfigError(f"--header {p!r} is not 'Name: value'.")
        h[key.strip()] = value.strip()
    return h


def server_name(target: str) -> str:
    """A default configuration name: tether-<mode> for `tether serve`, else the program."""
    if target.startswith("stdio:"):
        argv = shlex.split(target[len("stdio:"):])
        prog = Path(argv[0]).name if argv else "stdio"
        if prog == "tether" or (prog.startswith("python") and "tether" in argv):
            mode = argv[argv.index("--mode") + 1] if "--mode" in argv[:-1] else "grounded"
            dedicated = (argv[argv.index("--dedicated-tools") + 1]
                         if "--dedicated-tools" in argv[:-1] else None)
            if mode == "grounded" and dedicated == "none":  # the discovery-only configuration
                return "tether-discovery"
            return f"tether-{mode}"
        return prog
    return urlparse(target).netloc or target


@eval_app.command("run")
def run(
    server: str = typer.Option(..., "--server", help="stdio:'CMD ARGS' or an http(s) MCP URL."),
    cases: Path = typer.Option(..., "--cases", help="cases.jsonl", dir_okay=False),
    agent: str = typer.Option("baseline", "--agent",
                              help="openai | anthropic | replay | baseline, or a plug-in."),
    as_user_via: str = typer.Option(
        None, "--as-user-via", help="How each case's as_user reaches the server: env:VAR (stdio; "
        "default env:TETHER_USER), header:NAME, runner-token (tether over HTTP: Bearer "
        "$TETHER_RUNNER_TOKEN plus X-Tether-As-User), or none."),
    concurrency: int = typer.Option(1, "--concurrency", min=1, max=64),
    out_dir: Path = typer.Option(Path("eval-out/run"), "--out", help="Run folder (resumable)."),
    name: str = typer.Option(None, "--name", help="Configuration name in the report "
                             "(default: tether-<mode> for tether serve, else the program)."),
    agent_option: list[str] = typer.Option([], "--agent-option", help="key=value, repeatable."),
    header: list[str] = typer.Option([], "--header", help="'Name: value' sent on every HTTP "
                                     "request, repeatable."),
    replay: Path = typer.Option(None, "--replay", help="Recorded run folder for --agent replay.",
                                file_okay=False),
    max_turns: int = typer.Option(6, "--max-turns", min=1, max=50),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per case."),
    as_json: bool = JsonOpt,
) -> None:
    """Run each case against the server as its as_user and write one trace per case plus an
    index to --out. Exit 0 when every case finished; 1 when a case ended in error or a line of
    the cases file was invalid (the valid cases still run)."""
    from tether.eval.agents import make_agent
    from tether.eval.cases import load_cases
    from tether.eval.runner import Identity, RunOptions, parse_target, run_cases

    parse_target(server)  # a bad target is a usage error, before any case runs
    if not cases.is_file():
        raise ConfigError(f"cases file {cases} does not exist.")
    loaded = load_cases(cases)
    for bad in loaded.errors:
        err.print(f"[yellow]skipped[/] {escape(str(bad))}")
    if agent == "replay" and replay is None:
        raise ConfigError("--agent replay needs --replay RUN_DIR (the recorded traces).")
    the_agent = make_agent(agent, _options(agent_option))
    opts = RunOptions(target=server, server_name=name or server_name(server),
                      identity=Identity.parse(as_user_via, server, _headers(header)),
                      out=out_dir, concurrency=concurrency, max_turns=max_turns,
                      timeout_s=timeout, cases_file=str(cases), recorded=replay)
    with progress(len(loaded.cases), f"{opts.server_name}: running cases") as step:
        def note(message: str) -> None:
            step(message)
            step.advance()  # type: ignore[attr-defined]

        index = asyncio.run(run_cases(loaded.cases, the_agent, opts, note))
    failed = [e for e in index.entries if e.status == "error"]
    if as_json:
        print_json({"run_dir": str(out_dir), "run_id": index.run_id, "server": index.server,
                    "cases": len(index.entries), "errors": [e.model_dump() for e in failed],
                    "invalid_lines": [str(e) for e in loaded.errors]})
    else:
        out.print(f"{index.server}: {len(index.entries)} traces in {out_dir} "
                  f"({len(failed)} errors, {len(loaded.errors)} invalid lines)")
        for e in failed:
            out.print(f"  {escape(e.case_id)}: {escape(e.error or '')}")
    sys.exit(1 if failed or loaded.errors else 0)


@eval_app.command("label")
def label(
    run_dir: Path = typer.Argument(..., help="A run folder written by `tether eval run`.",
                                   file_okay=False),
    project: Path = typer.Option(Path("."), "--project", "-p", help="The tether project whose "
                                 "sources, glossary and policy the labeller checks against "
                                 "(without tether.yaml there: answers, SQL and costs only).",
                                 file_okay=False),
    price_table: Path = typer.Option(None, "--prices", help="Price table YAML (default: "
                                     "eval.price_table of the project).", dir_okay=False),
    oracle: str = typer.Option(None, "--oracle", help="A policy-oracle command instead of "
                               "tether's own (JSON on stdin and stdout: docs/eval-label.md)."),
    as_json: bool = JsonOpt,
) -> None:
    """Score every trace: correct, grounded, fields, definition match, freshness, policy,
    cost and failure class; writes RUN_DIR/labels.jsonl."""
    from tether.config import PROJECT_FILE, load_project
    from tether.eval.label.pipeline import label_run
    from tether.eval.prices import load_prices

    if not (run_dir / "index.json").is_file():
        raise ConfigError(f"{run_dir} holds no index.json: not a run folder.",
                          hint="Give the --out folder of `tether eval run`.")
    proj = load_project(project) if (project / PROJECT_FILE).is_file() else None
    if proj is not None:  # what a user may see is what servers enforce: the approved policy
        from tether.registry.policy import as_enforced

        proj = as_enforced(proj)
    prices_path = price_table
    if prices_path is None and proj is not None and proj.config.eval.price_table:
        prices_path = proj.root / proj.config.eval.price_table
    lines = label_run(run_dir, proj, load_prices(prices_path), oracle)
    if as_json:
        print_json([ln.model_dump(mode="json") for ln in lines])
        return
    t = Table(show_edge=False, header_style="bold")
    for h in ("case", "correct", "grounded", "precision", "recall", "definition", "fresh",
              "violations", "class", "review"):
        t.add_column(h, overflow="fold")
    for ln in lines:
        t.add_row(escape(ln.case_id), _fmt(ln.correct), _fmt(ln.grounded),
                  _fmt(ln.grounding_precision), _fmt(ln.grounding_recall),
                  _fmt(ln.definition_match), _fmt(ln.freshness_pass), str(ln.policy_violations),
                  ln.failure_class or "", escape(ln.review_reason or ""))
    out.print(t)
    out.print(f"wrote {run_dir / 'labels.jsonl'}: {len(lines)} cases")


@eval_app.command("report")
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Labelled run folders, one per server."),
    out_dir: Path = typer.Option(None, "--out", help="Where report.json and report.html go "
                                 "(default: beside the first run folder)."),
    price_table: Path = typer.Option(None, "--prices", help="Price table YAML.", dir_okay=False),
    as_json: bool = JsonOpt,
) -> None:
    """report.json (one object per server configuration: the metrics side by side) and
    report.html."""
    from tether.eval.prices import load_prices
    from tether.eval.report import write_report

    target = out_dir or run_dirs[0].parent
    json_path, html_path = write_report(run_dirs, target, load_prices(price_table))
    data = json.loads(json_path.read_text())
    if as_json:
        print_json(data)
        return
    t = Table(show_edge=False, header_style="bold")
    cols = ("server", "cases", "correct", "correct_and_grounded", "grounding_precision",
            "grounding_recall", "definition_match_rate", "freshness_pass_rate",
            "policy_violation_rate", "cost_per_correct_answer_usd")
    for c in cols:
        t.add_column(c.replace("_", " "), overflow="fold")
    for row in data:
        t.add_row(*[_fmt(row.get(c)) for c in cols])
    out.print(t)
    f = Table(show_edge=False, header_style="bold", title="failed or ungrounded cases, by class")
    f.add_column("server")
    classes = ("entity", "semantic", "structural", "temporal", "policy")
    for c in (*classes, "needs review"):
        f.add_column(c, justify="right")
    for row in data:
        by = row["failures_by_class"]
        f.add_row(escape(row["server"]), *[str(by.get(c, 0)) for c in classes],
                  str(row["needs_human_review"]))
    out.print(f)
    out.print(f"wrote {json_path} and {html_path}")


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 1 or v != int(v) else f"{v:.0f}"
    return escape(str(v))


@eval_app.command("harvest")
def harvest(
    out_file: Path = typer.Option(..., "--out", help="Candidate cases (cases.jsonl format).",
                                  dir_okay=False),
    project: Path = typer.Option(None, "--project", "-p", help="Read the server's call log "
                                 "(the default when --otel is not given).", file_okay=False),
    otel: Path = typer.Option(None, "--otel", help="An OTLP JSON export of GenAI/MCP spans.",
                              dir_okay=False),
    per_stratum: int = typer.Option(5, "--per-stratum", min=1, help="Cases per (tool, role, "
                                    "outcome)."),
    oversample: float = typer.Option(3.0, "--oversample", min=1.0, help="Weight of retries and "
                                     "clarifications."),
    seed: int = typer.Option(0, "--seed"),
    retry_window: float = typer.Option(300.0, "--retry-window", help="Seconds within which the "
                                       "same call again after an error or empty result is a "
                                       "retry."),
    cases_file: Path = typer.Option(None, "--cases", help="Filter these cases instead of "
                                    "harvesting (with --keep-discriminating).", dir_okay=False),
    keep: list[Path] = typer.Option([], "--keep-discriminating", help="Labelled run folder; "
                                    "repeat: keep only cases some configuration failed or passed "
                                    "ungrounded."),
    as_json: bool = JsonOpt,
) -> None:
    """Candidate cases from the call log or OpenTelemetry spans, stratified by tool, role and
    outcome, oversampling retries and clarifications; a person writes the gold."""
    from tether.config import load_project
    from tether.eval.cases import load_cases
    from tether.eval.harvest import (
        call_log_candidates,
        keep_discriminating,
        strata,
        stratify,
        write_candidates,
    )
    from tether.eval.otlp import otel_candidates
    from tether.registry import open_registry

    items: list[Any]
    if cases_file is not None:
        if not keep:
            raise ConfigError("--cases only makes sense with --keep-discriminating RUN_DIR.")
        items = list(load_cases(cases_file).cases)
    else:
        proj = load_project(project or Path(".")) if (project or otel is None) else None
        pool: list[Any] = []
        if proj is not None:
            registry = open_registry(proj)
            try:
                pool += call_log_candidates(registry.calls(), retry_window_s=retry_window)
            finally:
                registry.close()
        if otel is not None:
            pool += otel_candidates(otel, project=proj, retry_window_s=retry_window)
        items = stratify(pool, per_stratum=per_stratum, oversample=oversample, seed=seed)
    summary: dict[str, Any] = {}
    if keep:
        result = keep_discriminating(items, keep)
        items = list(result.kept)
        summary = {"kept": len(result.kept), "dropped": len(result.dropped),
                   "unlabelled": len(result.unlabelled), "reasons": dict(result.reasons)}
    n = write_candidates(items, out_file)
    if as_json:
        counts: dict[tuple[str, str, str], int] = strata(items) if cases_file is None else {}
        print_json({"out": str(out_file), "cases": n, **summary,
                    "strata": [{"tool": t, "role": r, "outcome": o, "cases": c}
                               for (t, r, o), c in sorted(counts.items())]})
        return
    if cases_file is None:
        t = Table(show_edge=False, header_style="bold")
        for h in ("tool", "role", "outcome", "cases"):
            t.add_column(h)
        for (tool, role, outcome), c in sorted(strata(items).items()):
            t.add_row(escape(tool), escape(role), outcome, str(c))
        out.print(t)
    if summary:
        out.print(f"kept {summary['kept']}, dropped {summary['dropped']} (every configuration "
                  f"passed grounded), {summary['unlabelled']} unlabelled")
    out.print(f"wrote {n} candidate cases to {out_file}: write each question and gold by hand")


@eval_app.command("diff")
def diff(
    a: Path = typer.Argument(..., help="A run folder, report folder or report.json (before)."),
    b: Path = typer.Argument(..., help="The same for after."),
    only_changes: bool = typer.Option(False, "--only-changes"),
    as_json: bool = JsonOpt,
) -> None:
    """Metric deltas and the cases that flipped between two reports. Exit 1 when a case that
    was correct and grounded no longer is."""
    from tether.eval.report import diff_paths, render_diff

    d = diff_paths(a, b)
    if as_json:
        print_json(d)
    else:
        out.print(escape(render_diff(d, only_changes=only_changes)))
    sys.exit(1 if (d.get("regressed") or 0) > 0 else 0)
