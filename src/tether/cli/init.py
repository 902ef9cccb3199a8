"""`tether init`: a commented starter tether.yaml from a live source."""

from __future__ import annotations

from pathlib import Path

import typer

from tether.cli.output import err, out
from tether.config import PROJECT_FILE, SourceConfig, parse_project
from tether.errors import ConfigError, ProjectExistsError
from tether.profiling.starter import infer_products, render_starter, starter_url
from tether.sources import open_source


def init(
    directory: Path = typer.Argument(None, help="Project directory (default: --project or .)."),
    source: str = typer.Option(None, "--source", help="DuckDB file or SQLAlchemy URL to read."),
    project: Path = typer.Option(None, "--project", "-p", help="Project directory."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing tether.yaml."),
) -> None:
    """Write a commented tether.yaml: one product per table, inferences marked for a person."""
    root = (directory or project or Path(".")).resolve()
    target = root / PROJECT_FILE
    if target.exists() and not force:
        raise ProjectExistsError(f"{target} already exists.",
                                 hint="Edit it, or pass --force to write a new one over it.")
    if source is None:
        found = sorted(root.glob("*.duckdb"))
        if len(found) != 1:
            raise ConfigError("tether init needs --source URL (a DuckDB file or a SQLAlchemy URL).",
                              hint="e.g. --source warehouse.duckdb or --source "
                              "postgresql://user@host/db")
        source = str(found[0])
    root.mkdir(parents=True, exist_ok=True)
    with open_source("main", SourceConfig(url=source), root) as src:
        products = infer_products(src)
    url, env_var = starter_url(source, root)
    text = render_starter(url, products)
    parse_project(text, target)  # what we write must load
    target.write_text(text, encoding="utf-8")
    out.print(f"wrote {target} ({len(products)} products). Review each '# inferred: confirm'.")
    if env_var:
        err.print(f"the password was replaced by ${{{env_var}}}: export {env_var} before running tether.")
