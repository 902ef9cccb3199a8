"""Host and Origin checks for the console, as tether's HTTP server makes them.

A browser on the user's machine can be pointed at the console by any web page (DNS rebinding,
a cross-site form). So every request's Host must be one the console serves (421 otherwise), and
a request that names an Origin must come from the console's own origin (403 otherwise). Bound
to loopback, the defaults are the loopback names; bound elsewhere, the names are given with
``--allowed-host`` and ``--allowed-origin`` (the address itself is allowed when none are).

Unlike the MCP server, whose clients are programs, the console's clients are browsers whose
other tabs run other sites' pages: an origin on the same host but another port is another site,
so the default origins name the console's port exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK = ("127.0.0.1", "localhost", "::1")

SECURITY_HEADERS = {
    # no script runs, no page may frame the console, forms post only to it
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' "
                               "data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


@dataclass(frozen=True)
class Allowed:
    """The Host values and Origins the console answers."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    @classmethod
    def for_bind(cls, host: str, port: int, hosts: Sequence[str] | None = None,
                 origins: Sequence[str] | None = None) -> Allowed:
        """Given names win; else the loopback names (bound to loopback) or the bound address,
        at the console's port; the origins default to those names over http and https."""
        if hosts:
            names = list(hosts)
        elif host in LOOPBACK:
            names = [f"{n}:{port}" for n in ("127.0.0.1", "localhost", "[::1]")]
        else:
            names = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        return cls(tuple(names), tuple(origins or [f"{scheme}://{n}" for n in names
                                                   for scheme in ("http", "https")]))

    def host_ok(self, value: str | None) -> bool:
        if not value:
            return False
        return any(value == a or (a.endswith(":*") and value.startswith(a[:-1]))
                   for a in self.hosts)

    def origin_ok(self, value: str | None) -> bool:
        """An absent Origin passes (a same-origin GET, a program); the CSRF token still guards
        every form post. ``null`` (a sandboxed or privacy-stripped page) does not."""
        if value is None:
            return True
        return any(value == a or (a.endswith(":*") and value.startswith(a[:-1]))
                   for a in self.origins)


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
        headers = Headers(scope=scope)
        refusal = None
        if not self.allowed.host_ok(headers.get("host")):
            refusal = PlainTextResponse("Invalid Host header: this console does not serve that "
                                        "name (see --allowed-host).", status_code=421)
        elif not self.allowed.origin_ok(headers.get("origin")):
            refusal = PlainTextResponse("Invalid Origin header: requests from another site are "
                                        "refused (see --allowed-origin).", status_code=403)
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
