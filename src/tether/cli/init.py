"""`tether init`: a commented starter tether.yaml from a live source."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import typer

from tether.cli.options import default_user
from tether.cli.output import err, out
from tether.config import PROJECT_FILE, SourceConfig, parse_project
from tether.errors import ConfigError, ProjectExistsError
from tether.profiling.joins import infer_references
from tether.profiling.starter import (
    infer_products,
    render_api_starter,
    render_starter,
    starter_url,
)
from tether.sources import open_source, resolve_duckdb_path

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def init(
    directory: Path = typer.Argument(None, help="Project directory (default: --project or .)."),
    source: str = typer.Option(None, "--source", help="DuckDB file or SQLAlchemy URL to read "
                               "(a relative file path is relative to the current directory; "
                               "${VAR} in a URL is read from the environment)."),
    schema: str = typer.Option(None, "--schema", help="Schema to read (PostgreSQL and other "
                               "engines with schemas; default: the engine's)."),
    project: Path = typer.Option(None, "--project", "-p", help="Project directory."),
    user: str = typer.Option(None, "--user", help="The example user tether.yaml names "
                             "(default: TETHER_USER, else the login name)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing tether.yaml."),
    openapi: str = typer.Option(None, "--openapi", help="An OpenAPI 3 description (a file, "
                                "JSON or YAML, or an http(s) URL) instead of --source: one "
                                "product per read operation (docs/openapi.md)."),
    base_url: str = typer.Option(None, "--base-url", help="With --openapi: where the API is "
                                 "(default: the spec's first server)."),
) -> None:
    """Write a commented tether.yaml that serves as written: one product per table (inferences
    marked for a person), or with --openapi one per read operation of an HTTP API; one example
    role that sees everything, and you as its user."""
    root = (directory or project or Path(".")).resolve()
    target = root / PROJECT_FILE
    if target.exists() and not force:
        raise ProjectExistsError(f"{target} already exists.",
                                 hint="Edit it, or pass --force to write a new one over it.")
    if openapi is not None:
        if source is not None or schema is not None:
            raise ConfigError("--openapi reads an API: it takes no --source or --schema.")
        _init_openapi(root, target, openapi, base_url, user)
        return
    if base_url is not None:
        raise ConfigError("--base-url goes with --openapi.")
    if source is None:
        found = sorted(root.glob("*.duckdb")) if root.is_dir() else []
        if len(found) != 1:
            raise ConfigError("tether init needs --source URL (a DuckDB file or a SQLAlchemy URL).",
                              hint="e.g. --source warehouse.duckdb or --source "
                              "postgresql://user@host/db")
        source = str(found[0])
    connect_url = _expand(source)
    path = resolve_duckdb_path(connect_url, Path.cwd())  # as the user typed it: from here
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"--source {source}: no DuckDB file at {path}.",
                              hint="Give the path of an existing .duckdb file (relative to the "
                              "current directory, or absolute).")
        connect_url = f"duckdb:///{path.resolve()}"
    name, _ = default_user(user)
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
        config = SourceConfig.model_validate({"url": connect_url, "schema": schema})
        with open_source("main", config, root) as src:
            products = infer_products(src)
            references = infer_references(src, products)
        if not products:
            where = f"schema {schema!r}" if schema else "the source's default schema"
            raise ConfigError(f"--source {source}: {where} has no tables or views.",
                              hint="Pass --schema NAME for the schema that holds the tables "
                              "(PostgreSQL's default is public).")
        if path is not None:
            url, env_var = starter_url(connect_url, root)  # relative when inside the project
        elif _ENV.search(source):
            url, env_var = source, None  # the user's own variable, written as given
        else:
            url, env_var = starter_url(source, root)
        text = render_starter(url, products, schema=schema, user=name, references=references)
        _validate(text, target, env_var)
        target.write_text(text, encoding="utf-8")
    except BaseException:
        if created:  # a failed init leaves nothing behind
            shutil.rmtree(root, ignore_errors=True)
        raise
    out.print(f"wrote {target} ({len(products)} products, user {name!r} in an example role that "
              "sees everything). Review each '# inferred: confirm' and narrow the role.")
    if env_var:
        err.print(f"the password was replaced by ${{{env_var}}}: export {env_var} before running "
                  "tether.")


def _init_openapi(root: Path, target: Path, ref: str, base_url: str | None,
                  user: str | None) -> None:
    from tether.sources.openapi import load_spec

    remote = ref.startswith(("http://", "https://"))
    spec = load_spec(ref, Path.cwd())  # a file as the user typed it: from here
    if not spec.operations:
        raise ConfigError(f"--openapi {ref}: the API has no read operation with a JSON "
                          "response; there is nothing to serve.")
    if remote:
        spec_ref = ref
    else:
        path = (Path.cwd() / ref).resolve()
        try:
            spec_ref = str(path.relative_to(root))
        except ValueError:
            spec_ref = str(path)
    if base_url is None and not any(s.startswith(("http://", "https://")) for s in spec.servers):
        raise ConfigError(f"--openapi {ref}: the spec names no absolute server URL.",
                          hint="Pass --base-url URL (where the API is).")
    name, _ = default_user(user)
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
        text = render_api_starter(spec_ref, base_url, spec, name)
        _validate(text, target, None)
        target.write_text(text, encoding="utf-8")
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        raise
    out.print(f"wrote {target} ({len(spec.operations)} products, one per read operation; "
              f"{len(spec.left_out)} operations that change state left out; user {name!r} in "
              "an example role that sees everything).")


def _expand(url: str) -> str:
    """``${VAR}`` in a --source URL, from the environment (a password kept out of the shell's
    history); a missing variable is an error naming it."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(f"--source uses ${{{m.group(1)}}}, but the environment variable "
                              f"{m.group(1)} is not set.", hint=f"Export {m.group(1)} first.")
        return os.environ[m.group(1)]
    return _ENV.sub(sub, url)


def _validate(text: str, target: Path, env_var: str | None) -> None:
    """What we write must load, with the password variable it names set as it will be."""
    saved = os.environ.get(env_var) if env_var else None
    try:
        if env_var and saved is None:
            os.environ[env_var] = "placeholder"
        parse_project(text, target)
    finally:
        if env_var and saved is None:
            os.environ.pop(env_var, None)
