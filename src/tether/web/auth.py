"""Signing in with a bearer token and signing out."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from tether.web.console import Console
from tether.web.session import Session


def _safe_next(value: object) -> str:
    """Only a path on this console: never another site (an open redirect)."""
    text = value if isinstance(value, str) else ""
    parts = urlsplit(text)
    if not text.startswith("/") or text.startswith("//") or parts.scheme or parts.netloc:
        return "/reviews"
    return text


def routes(console: Console) -> list[Route]:
    def signin_form(request: Request) -> Response:
        v = console.viewer(request)
        return console.page(request, "signin.html", next=_safe_next(request.query_params.get(
            "next")), message=None, signed_in_as=v.user)

    async def signin(request: Request) -> Response:
        form = await request.form()
        v = await run_in_threadpool(console.viewer, request)
        console.check_form(v, form)
        token = str(form.get("token") or "").strip()
        found = await run_in_threadpool(console.tokens(v.project).lookup, token) if token else None
        user = found[0] if found else None
        if user is None or user not in v.project.config.policies.users:
            return console.page(request, "signin.html", 401, next=_safe_next(form.get("next")),
                                message="That token is not valid here. Ask whoever runs tether "
                                "for one: tether token add YOUR_NAME.", signed_in_as=None)
        fingerprint = console.tokens(v.project).fingerprint(user) or ""
        session = v.session.signed_in(user, fingerprint)
        response = RedirectResponse(_safe_next(form.get("next")), status_code=303)
        console.set_cookie(request, response, session)
        return response

    async def signout(request: Request) -> Response:
        form = await request.form()
        v = await run_in_threadpool(console.viewer, request)
        console.check_form(v, form)
        response = RedirectResponse("/signin", status_code=303)

        console.set_cookie(request, response, Session.anonymous())
        return response

    return [Route("/signin", signin_form, methods=["GET"]),
            Route("/signin", signin, methods=["POST"]),
            Route("/signout", signout, methods=["POST"])]
