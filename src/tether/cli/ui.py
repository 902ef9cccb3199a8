"""`tether ui`: the console in a browser."""

from __future__ import annotations

import socket
from pathlib import Path

import typer

from tether.cli.options import ProjectOpt
from tether.cli.output import err
from tether.errors import ConfigError

DEFAULT_PORT = 8766


def _free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror}.",
                              hint="Choose another port with --port, or stop what uses it."
                              ) from None


def ui(
    project: Path = ProjectOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address (loopback by default; "
                             "beyond it, name --allowed-host and put TLS in front)."),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port."),
    runs: list[Path] = typer.Option(None, "--runs", help="A run folder, or a folder of them, "
                                    "to list beside eval.runs_dir (repeatable)."),
    allowed_host: list[str] = typer.Option(None, "--allowed-host", help="Host header values "
                                           "accepted beyond loopback (repeatable), e.g. "
                                           "tether.internal:443"),
    allowed_origin: list[str] = typer.Option(None, "--allowed-origin", help="Browser origins "
                                             "accepted (repeatable), e.g. "
                                             "https://tether.internal"),
) -> None:
    """Serve the console: reviews (approve or reject as a reviewer), tools, drift, evaluations
    and policy. Sign in with a user token from `tether token add USER`."""
    import uvicorn

    from tether.web import create_app

    missing = [str(r) for r in runs or [] if not r.is_dir()]
    if missing:
        raise ConfigError(f"--runs {missing[0]} is not a folder.",
                          hint="Give a run folder written by `tether eval run`, or a folder "
                          "holding several.")
    app = create_app(project, list(runs or []), host, port, allowed_host or None,
                     allowed_origin or None)
    _free(host, port)
    shown = f"[{host}]" if ":" in host else host
    err.print(f"tether console on http://{shown}:{port}/ (sign in with a token from "
              "`tether token add USER`; reviewers decide reviews)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
