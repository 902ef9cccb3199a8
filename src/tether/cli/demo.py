"""`tether demo`: the embedded demo warehouse."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from tether.cli.output import out, progress
from tether.demo import init_demo
from tether.demo.drift import STEPS

app = typer.Typer(help="The embedded demo warehouse.", no_args_is_help=True)


@app.command("init")
def init(
    directory: Path = typer.Argument(None, help="Where to build it (default: --project or .)."),
    scale: float = typer.Option(1.0, "--scale", help="1: ~200k order lines; 50: ~10M."),
    seed: int = typer.Option(7, "--seed", help="Seed of the deterministic generator."),
    source: str = typer.Option(
        None, "--source", help="Load into this PostgreSQL URL instead of a DuckDB file."
    ),
    schema: str = typer.Option(None, "--schema", help="PostgreSQL schema (default tether_demo)."),
    project: Path = typer.Option(None, "--project", "-p", help="Project directory."),
    force: bool = typer.Option(False, "--force", help="Replace an existing demo there."),
) -> None:
    """Build the demo warehouse (deterministic, seeded) and its tether.yaml."""
    root = (directory or project or Path(".")).resolve()
    started = time.perf_counter()
    with progress(9, "building the demo warehouse") as step:

        def note(msg: str) -> None:
            step(msg)
            step.advance()  # type: ignore[attr-defined]

        result = init_demo(root, scale=scale, seed=seed, source_url=source, schema=schema,
                           force=force, step=note)
    t = Table(show_edge=False, header_style="bold")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in result.rows.items():
        t.add_row(name, f"{n:,}")
    out.print(t)
    out.print(
        f"demo built in {time.perf_counter() - started:.1f}s: {root / 'tether.yaml'} "
        f"-> {result.source_url}. Next: tether profile --project {root}"
    )


@app.command("drift")
def drift(
    step: str = typer.Argument(..., help=" | ".join(STEPS)),
    project: Path = typer.Option(Path("."), "--project", "-p", help="The demo project."),
) -> None:
    """Apply one step of the demo's drift story to the demo warehouse or its tether.yaml."""
    from tether.demo.drift import apply

    out.print(f"{step}: {apply(project.resolve(), step)} Next: tether check --project {project}")


@app.command("cases")
def cases(
    project: Path = typer.Option(Path("."), "--project", "-p", help="The demo project."),
    writes: bool = typer.Option(False, "--writes", help="Write write-cases.jsonl instead: "
                                "requests to change the demo warehouse's rows, each with the rows it "
                                "must change (or none), for the write tools (docs/write.md)."),
) -> None:
    """(Re)write the demo's cases.jsonl: its questions with gold answers computed by the
    governed definitions on the warehouse as it is now (after `tether demo drift`, too)."""
    from tether.demo.cases import write_cases
    from tether.demo.writecases import write_write_cases
    from tether.eval.cases import load_cases

    path = (write_write_cases if writes else write_cases)(project.resolve())
    out.print(f"wrote {path}: {len(load_cases(path).cases)} cases. Next: tether eval run "
              f"--server stdio:'tether serve --project {project}' --cases {path}")
