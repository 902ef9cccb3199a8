"""`tether doctor`: what in the project's connections and files weakens the policy boundary."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt, ProjectOpt
from tether.cli.output import err, out, print_json
from tether.config import load_project
from tether.serve.doctor import diagnose

FOUND_WARNINGS = 1


def doctor(project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """Check the sources' roles (PostgreSQL: superuser, writes, ownership, server-file roles),
    DuckDB and secret file modes, and runner tokens; one line per finding with its fix. Exit 1
    on any warning, 0 when clean or with info lines only, 2 when the project cannot be checked."""
    found = diagnose(load_project(project))
    if as_json:
        print_json([f.as_dict() for f in found])
    elif found:
        t = Table(show_edge=False, header_style="bold")
        for h in ("severity", "check", "subject", "finding", "fix"):
            t.add_column(h)
        for f in found:
            t.add_row(f.severity, f.check, escape(f.subject), escape(f.message), escape(f.fix))
        out.print(t)
    warnings = sum(f.severity == "warning" for f in found)
    if not as_json:
        err.print(f"{warnings} warning(s), {len(found) - warnings} info line(s)" if found
                  else "no findings")
    if warnings:
        raise typer.Exit(FOUND_WARNINGS)
