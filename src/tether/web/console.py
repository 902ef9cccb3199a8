"""What every console page shares: the project it reads (Console), who is signed in (Viewer),
the registry it opens once, the error pages, and the checks on ids and names in URLs. The app
itself (app.py) assembles the pages.

Every page reads the project afresh (tether.yaml, the registry, run folders), so what a person
sees is what the CLI would print now. Pages call the same public functions the CLI calls; the one
action, deciding a review, goes through :func:`tether.drift.check.decide` as `tether review
approve|reject` does. Signing in takes a user's bearer token (`tether token add USER`); a user
whose role has ``reviewer: true`` may decide reviews and read evaluation traces.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tether.config import Project, load_project
from tether.errors import NotPermittedError, TetherError
from tether.keyfile import load_secret
from tether.policy import reviewers, role_of
from tether.registry import Registry
from tether.registry.policy import enforced
from tether.serve.identity import TokenStore
from tether.serve.server import TetherServer
from tether.web.guard import Allowed
from tether.web.render import environment
from tether.web.session import COOKIE, Session, Signer, csrf_ok, session_key

log = logging.getLogger("tether.web")

NAV = (("/reviews", "Reviews"), ("/tools", "Tools"), ("/drift", "Drift"), ("/eval", "Evaluations"),
       ("/policy", "Policy"), ("/learn", "Learn"))


_REGISTRIES: dict[tuple[str, str], Registry] = {}
_LOCK = threading.Lock()


def shared_registry(project: Project) -> Registry:
    """The project's registry, opened once per process and shared by every page: its engine
    keeps a pool of connections (on PostgreSQL a connection and the schema check cost more than
    most pages), and what the registry keeps of its append-only history stays warm. The
    decision itself opens its own, as the CLI does."""
    key = (project.config.registry.url, str(project.root))
    with _LOCK:
        found = _REGISTRIES.get(key)
        if found is None:
            found = _REGISTRIES[key] = Registry(project.config.registry.url, project.root)
        return found


class SignInNeeded(Exception):
    """The page needs a signed-in user; the handler sends the browser to /signin."""


class Forbidden(Exception):
    """A signed-in user may not do this: a 403 page that says who may."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class Viewer:
    """Who is looking, for one request."""

    session: Session
    project: Project  # with the access policy servers enforce (the last approved version)
    user: str | None = None
    role: str | None = None
    reviewer: bool = False
    new_cookie: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    file_project: Project | None = None  # tether.yaml as it stands (what a decision reads)

    @property
    def as_written(self) -> Project:
        return self.file_project or self.project


@dataclass
class Console:
    project_dir: Path
    runs: list[Path]
    allowed: Allowed

    def __post_init__(self) -> None:
        project = load_project(self.project_dir)  # a broken project fails at start, not later
        self.signer = Signer(session_key(load_secret(
            project.root / project.config.serve.cursor_key_file)))
        self._server: TetherServer | None = None
        self._server_lock = threading.Lock()

    def serving(self) -> TetherServer:
        """The project's MCP server, made once and brought up to the registry's newest
        publication (tools and approved policy) on each use: the tool pages show what its
        tools/list shows each user (one answer to what a role reaches, shaped per user). Used
        under :meth:`lock`; its sources open on the first tool page, not at start."""
        if self._server is None:
            self._server = TetherServer(load_project(self.project_dir))
        else:
            self._server.reload()
        return self._server

    @property
    def lock(self) -> threading.Lock:
        return self._server_lock

    def tokens(self, project: Project) -> TokenStore:
        return TokenStore(project.root / project.config.serve.tokens_file)

    def viewer(self, request: Request) -> Viewer:
        """The session (a new anonymous one when absent or void) and the user it names, if that
        user still exists and still holds the token they signed in with."""
        written = load_project(self.project_dir)
        # who may sign in, their role and whether they review: the approved policy, as servers
        # enforce it (an edit that waits for review grants nothing here either)
        project = enforced(written, shared_registry(written), required=False)[0]
        found = self.signer.load(request.cookies.get(COOKIE))
        session = found or Session.anonymous()
        v = Viewer(session, project, new_cookie=found is None, file_project=written)
        user = session.user
        if user and user in project.config.policies.users and (
                self.tokens(project).fingerprint(user) == session.token):
            v.user = user
            v.role = role_of(project.config, user)[0]
            v.reviewer = user in reviewers(project.config)
        elif user:  # the user was removed or the token revoked: start over
            v.session, v.new_cookie = Session.anonymous(), True
        request.state.viewer = v
        return v

    def signed_in(self, request: Request) -> Viewer:
        v = self.viewer(request)
        if v.user is None:
            raise SignInNeeded()
        return v

    def check_form(self, v: Viewer, form: Any) -> None:
        """Every form post carries the session's csrf value; a post without it (a form on
        another site, a replayed request) is refused."""
        if not csrf_ok(v.session, form.get("csrf")):
            raise Forbidden("This form has no valid token (it was not made by this console, or "
                            "your session changed). Reload the page and try again.")

    def page(self, request: Request, template: str, status: int = 200, **context: Any
             ) -> HTMLResponse:
        v: Viewer = getattr(request.state, "viewer", None) or self.viewer(request)
        html = environment().get_template(template).render(
            nav=NAV, here=request.url.path, viewer=v, csrf=v.session.csrf,
            now=v.project.now(), **context)
        response = HTMLResponse(html, status_code=status)
        if v.new_cookie:
            self.set_cookie(request, response, v.session)
        return response

    def set_cookie(self, request: Request, response: Response, session: Session) -> None:
        response.set_cookie(COOKIE, self.signer.dump(session), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/",
                            max_age=int(max(session.expires - time.time(), 0)))


Handler = Callable[[Request], Awaitable[Response]]

MAX_ID = 2**63 - 1
"""Largest id the registry stores (a signed 64-bit integer on SQLite and PostgreSQL)."""
MAX_NAME = 128
"""Longest tool name (the MCP specification's limit) and case id the console looks up."""
MAX_KEY = 1024
"""Longest run key (root number / folder path) the console resolves."""


def id_in_url(text: object, what: str) -> int:
    """A registry id from a URL: ASCII digits that fit the registry's integers, else 404 (never
    a conversion error or an integer the database refuses)."""
    value = text if isinstance(text, str) else ""
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or int(value) > MAX_ID:
        raise HTTPException(404, f"There is no {what} {value[:40]}"
                            f"{'...' if len(value) > 40 else ''}.")
    return int(value)


def name_in_url(text: object, missing: str, limit: int = MAX_NAME) -> str:
    """A name from a URL (a tool, a case): at most ``limit`` printable characters and no path
    separator, else 404 saying ``missing``."""
    value = text if isinstance(text, str) else ""
    if not value or len(value) > limit or not value.isprintable() or "/" in value \
            or "\\" in value:
        raise HTTPException(404, missing)
    return value


def _error_page(console: Console, request: Request, status: int, title: str, message: str
                ) -> Response:
    """The error page in the console's layout; a bare page if even that cannot be made (the
    project itself no longer loads: its error is the message)."""
    try:
        return console.page(request, "error.html", status, title=title, message=message)
    except TetherError as e:
        return HTMLResponse(f"<!DOCTYPE html><title>{escape(title)}</title><h1>{escape(title)}"
                            f"</h1><p>{escape(message)}</p><p>{escape(e.paragraph())}</p>",
                            status_code=status)


def error_handlers(console: Console) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    async def sign_in(request: Request, exc: Exception) -> Response:
        return RedirectResponse(f"/signin?next={request.url.path}", status_code=303)

    async def forbidden(request: Request, exc: Exception) -> Response:
        message = exc.message if isinstance(exc, Forbidden) else str(exc)
        return _error_page(console, request, 403, "Not permitted", message)

    async def tether_error(request: Request, exc: Exception) -> Response:
        return _error_page(console, request, 400, "That did not work",
                           exc.paragraph() if isinstance(exc, TetherError) else str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "Something went wrong."
        return _error_page(console, request, code, f"{code}", str(detail))

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("console error on %s", request.url.path)  # the trace goes to the log only
        return HTMLResponse("<!DOCTYPE html><title>error</title><p>The console failed on this "
                            "page; its log has the details.</p>", status_code=500)

    return {SignInNeeded: sign_in, Forbidden: forbidden, NotPermittedError: forbidden,
            TetherError: tether_error, HTTPException: http_error, Exception: crash}
