"""Host and Origin checks for the console, by the one check every HTTP route of tether makes
(:mod:`tether.httpguard`), and the security headers on every answer.

Every request's Host must be one the console serves (421 otherwise), and a request that names an
Origin must come from the console's own origin (403 otherwise). Bound to loopback, the defaults
are the loopback names at the console's port; bound elsewhere, the names are given with
``--allowed-host`` and ``--allowed-origin`` (the address itself is allowed when none are).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.httpguard import LOOPBACK, Allowed

__all__ = ["LOOPBACK", "SECURITY_HEADERS", "Allowed", "Guard"]

SECURITY_HEADERS = {
    # no script runs, no page may frame the console, forms post only to it
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' "
                               "data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class Guard:
    """ASGI middleware: 421 for a Host the console does not serve, 403 for a foreign Origin,
    and the security headers on every answer."""

    def __init__(self, app: ASGIApp, allowed: Allowed):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.allowed.refusal(Headers(scope=scope))
        if refusal is not None:
            refusal.headers.update(SECURITY_HEADERS)
            await refusal(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                present = {k.lower() for k, _ in raw}
                raw += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                        if k.encode() not in present]
                message["headers"] = raw
            await send(message)

        await self.app(scope, receive, with_headers)
