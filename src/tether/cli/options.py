"""Options every command shares."""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

import typer

ProjectOpt = typer.Option(
    Path("."), "--project", "-p", help="Project directory holding tether.yaml.",
    file_okay=False,
)
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON on stdout.")


def default_user(given: str | None = None) -> tuple[str, str]:
    """The user a command acts as when none is named, and how it was chosen: ``given``, else
    env TETHER_USER, else the login name (what `tether init` writes into its starter, so that
    `tether serve` after it needs no flag; a name no policy holds reads nothing)."""
    if given:
        return given, "given"
    if env := os.environ.get("TETHER_USER"):
        return env, "TETHER_USER"
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    return re.sub(r"[^\w.@-]", "_", name) or "me", "the login name"
