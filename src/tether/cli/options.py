"""Options every command shares."""

from __future__ import annotations

from pathlib import Path

import typer

ProjectOpt = typer.Option(
    Path("."), "--project", "-p", help="Project directory holding tether.yaml.",
    file_okay=False,
)
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON on stdout.")
