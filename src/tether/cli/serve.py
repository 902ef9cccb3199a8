"""`tether serve`, `tether token`, `tether versions`."""

from __future__ import annotations

from pathlib import Path

import anyio
import typer
from rich.table import Table

from tether.cli.options import JsonOpt, ModeOpt, ProjectOpt, dedicated_setting, default_user, mode_of
from tether.cli.output import err, out, print_json
from tether.config import load_project
from tether.errors import ConfigError
from tether.policy.model import role_of
from tether.registry import open_registry


def serve(
    project: Path = ProjectOpt,
    transport: str = typer.Option("stdio", "--transport", help="stdio | http."),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP bind address."),
    port: int = typer.Option(8765, "--port", help="HTTP port."),
    as_user: str = typer.Option(None, "--as-user", help="stdio: the user every call runs as "
                                "(else env TETHER_USER)."),
    mode: str = ModeOpt,
    allowed_host: list[str] = typer.Option(None, "--allowed-host",
                                           help="HTTP Host values accepted beyond loopback "
                                           "(repeatable), e.g. mcp.internal:*"),
    allowed_origin: list[str] = typer.Option(None, "--allowed-origin",
                                             help="Browser origins accepted (repeatable)."),
    dedicated_tools: str = typer.Option(
        None, "--dedicated-tools", help="Products served with their own tool: all, none (the "
        "discovery-only configuration) or a comma-separated list; default: "
        "serve.dedicated_tools."),
) -> None:
    """Serve the published tools over MCP (stdio or streamable HTTP) with the caller's identity
    and policy enforced in every query."""
    from tether.serve.doctor import startup_warnings
    from tether.serve.server import TetherServer, log

    proj = load_project(project)
    m = mode_of(mode)
    dedicated = dedicated_setting(dedicated_tools)
    for line in startup_warnings(proj):  # stderr: stdout is the MCP channel on stdio
        log(line)
    if transport == "stdio":
        user, how = default_user(as_user)
        if how != "given":  # whoever starts the process chooses; say whom it chose
            log(f"stdio: every call runs as {user} ({how}; --as-user NAME to choose)")
        server = TetherServer(proj, m, stdio_user=user, dedicated_tools=dedicated)
        for line in server.held_reviews():
            log(line)
        anyio.run(server.serve_stdio)
    elif transport == "http":
        server = TetherServer(proj, m, dedicated_tools=dedicated)
        for line in server.held_reviews():
            log(line)
        log(f"tether serving {len(server.listed.names)} {m} tools ({server.listed.route}, "
            f"{server.listed.tokens:,} tokens) on http://{host}:{port}/mcp "
            "(bearer tokens: tether token add USER)")
        anyio.run(lambda: server.serve_http(host, port, allowed_host or None,
                                            allowed_origin or None))
    else:
        raise ConfigError(f"--transport must be stdio or http (got {transport!r}).")


token_app = typer.Typer(help="Bearer tokens for the HTTP transport.", no_args_is_help=True)


def _store(project: Path):  # type: ignore[no-untyped-def]
    from tether.serve.identity import TokenStore

    proj = load_project(project)
    return proj, TokenStore(proj.root / proj.config.serve.tokens_file)


@token_app.command("add")
def token_add(
    user: str = typer.Argument(..., help="A user from policies.users."),
    runner: bool = typer.Option(False, "--runner", help="May act as any user via "
                                "X-Tether-As-User (for the evaluation harness)."),
    admin: bool = typer.Option(False, "--admin", help="May post OpenLineage events to "
                               "POST /api/v1/lineage (a lineage emitter: USER need not be a "
                               "user of policies.users, and reads no data unless it is one)."),
    project: Path = ProjectOpt,
) -> None:
    """Create a token for USER and print it once (it is stored hashed). A user holds one token:
    an existing one is replaced (and says so)."""
    proj, store = _store(project)
    if not admin or runner:
        role_of(proj.config, user)
    before = next((r for r in store.list() if r["user"] == user), None)
    token = store.add(user, runner=runner, admin=admin)
    kinds = [k for k, on in (("runner", runner), ("admin", admin)) if on]
    if before is not None:  # one token per user: the old one stops working now
        was = [k for k in ("runner", "admin") if before[k]]
        err.print(f"replaced {user}'s previous token{' (' + ', '.join(was) + ')' if was else ''}"
                  f", made {before['created'] or 'earlier'}: it no longer works")
    err.print(f"token for {user}{' (' + ', '.join(kinds) + ')' if kinds else ''}; shown once, "
              "store it now:")
    print(token)


@token_app.command("credential")
def token_credential(
    user: str = typer.Argument(..., help="A user from policies.users."),
    source: str = typer.Option(..., "--source", help="An `openapi` source of tether.yaml."),
    revoke: bool = typer.Option(False, "--revoke", help="Remove USER's credential instead."),
    project: Path = ProjectOpt,
) -> None:
    """Keep USER's own API credential for an `openapi` source, read from standard input (one
    line; never an argument, which other users of the machine could read). Every request USER
    makes through that source's tools carries it; a user with none is refused."""
    import sys

    from tether.sources.credentials import CredentialStore

    proj = load_project(project)
    cfg = proj.config.sources.get(source)
    if cfg is None or cfg.kind != "openapi":
        apis = sorted(n for n, c in proj.config.sources.items() if c.kind == "openapi")
        raise ConfigError(f"{source!r} is not an `openapi` source of {proj.path.name}.",
                          hint="API sources there: " + (", ".join(apis) or "(none)") + ".")
    role_of(proj.config, user)
    store = CredentialStore(proj.root / proj.config.serve.credentials_file)
    if revoke:
        if not store.remove(source, user):
            raise ConfigError(f"{user} holds no credential for {source}.")
        out.print(f"removed {user}'s credential for {source}")
        return
    if sys.stdin.isatty():
        import getpass

        secret = getpass.getpass(f"{user}'s credential for {source}: ")
    else:
        secret = sys.stdin.readline()
    secret = secret.strip()
    if not secret:
        raise ConfigError("no credential was given on standard input.",
                          hint=f"echo \"$TOKEN\" | tether token credential {user} --source "
                          f"{source}")
    store.set(source, user, secret)
    out.print(f"kept {user}'s credential for {source} (in {proj.config.serve.credentials_file}, "
              "mode 600)")


@token_app.command("list")
def token_list(project: Path = ProjectOpt, as_json: bool = JsonOpt) -> None:
    """Users that hold a token (never the tokens)."""
    _, store = _store(project)
    rows = store.list()
    if as_json:
        print_json(rows)
        return
    t = Table(show_edge=False, header_style="bold")
    for h in ("user", "runner", "admin", "created"):
        t.add_column(h)
    for r in rows:
        t.add_row(r["user"], "yes" if r["runner"] else "", "yes" if r["admin"] else "",
                  r["created"] or "")
    out.print(t)


@token_app.command("revoke")
def token_revoke(user: str = typer.Argument(...), project: Path = ProjectOpt) -> None:
    """Revoke USER's token."""
    _, store = _store(project)
    if not store.revoke(user):
        raise ConfigError(f"{user!r} holds no token.", hint="See `tether token list`.")
    out.print(f"revoked the token of {user}")


def versions(tool: str = typer.Argument(..., help="Tool name."), project: Path = ProjectOpt,
             as_json: bool = JsonOpt) -> None:
    """Every published version of TOOL, oldest first."""
    proj = load_project(project)
    registry = open_registry(proj)
    try:
        found = registry.versions(tool)
    finally:
        registry.close()
    if not found:
        raise ConfigError(f"no published versions of {tool!r}.", hint="See `tether tools`.")
    from tether.drift.history import history

    rows = [{k: r[k] for k in ("version", "published_at", "change_level", "served_until",
                               "status")}
            for r in history(found, proj.config.drift.deprecation_days)]
    if as_json:
        print_json(rows)
        return
    t = Table(show_edge=False, header_style="bold")
    for h in ("version", "status", "published_at", "change", "served until"):
        t.add_column(h)
    for r in rows:
        t.add_row(r["version"], r["status"], r["published_at"], r["change_level"] or "",
                  r["served_until"] or "")
    out.print(t)
