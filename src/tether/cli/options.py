"""Options every command shares."""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

import typer

from tether.errors import ConfigError
from tether.toolgen import MODES, Mode
from tether.toolgen.discovery import Setting

ProjectOpt = typer.Option(
    Path("."), "--project", "-p", help="Project directory holding tether.yaml.",
    file_okay=False,
)
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON on stdout.")
ModeOpt = typer.Option("grounded", "--mode", help="grounded | bare | generic.")


def mode_of(value: str) -> Mode:
    """--mode, checked."""
    if value not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)} (got {value!r}).")
    return value


def dedicated_setting(value: str | None) -> Setting:
    """--dedicated-tools as serve.dedicated_tools takes it (None: the project's setting)."""
    if value is None:
        return None
    if value.strip() in ("all", "none"):
        return "all" if value.strip() == "all" else "none"
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise ConfigError("--dedicated-tools takes all, none or a comma-separated list of "
                          "products.")
    return names


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
