"""The console: a Starlette app of server-rendered pages over one project.

Every page reads the project afresh (tether.yaml, the registry, run folders), so what a person
sees is what the CLI would print now. Pages call the same public functions the CLI calls; the one
action, deciding a review, goes through :func:`tether.drift.check.decide` as `tether review
approve|reject` does. Signing in takes a user's bearer token (`tether token add USER`); a user
whose role has ``reviewer: true`` may decide reviews and read evaluation traces. What the pages
share is in console.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from tether.web import auth, drift, evals, learn, policy, reviews, tools
from tether.web.console import Console, error_handlers
from tether.web.guard import Allowed, Guard


def create_app(project_dir: Path, runs: list[Path] | None = None, host: str = "127.0.0.1",
               port: int = 8766, allowed_hosts: list[str] | None = None,
               allowed_origins: list[str] | None = None) -> Any:
    """The console as an ASGI app (Host and Origin checked before anything runs)."""
    allowed = Allowed.for_console(host, port, allowed_hosts, allowed_origins)
    console = Console(Path(project_dir), list(runs or []), allowed)
    routes: list[Route] = [Route("/", _home, methods=["GET"])]
    for module in (auth, reviews, tools, drift, evals, policy, learn):
        routes += module.routes(console)
    app = Starlette(routes=routes, exception_handlers=error_handlers(console))
    app.state.console = console
    return Guard(app, allowed)


async def _home(request: Request) -> Response:
    return RedirectResponse("/reviews", status_code=303)
