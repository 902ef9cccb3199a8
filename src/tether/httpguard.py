"""The Host and Origin check of every HTTP route tether serves: the MCP endpoint, ``POST
/api/v1/lineage`` and the console (`tether ui`).

A browser on the user's machine can be pointed at a local server by any web page (DNS
rebinding, a cross-site form or fetch). So a request's Host must be one the server answers to
(421 otherwise) and a request that names an Origin must come from an allowed one (403
otherwise). The rule is the mcp SDK's ``TransportSecurityMiddleware``'s, written once here:
a name matches exactly, or ``NAME:*`` matches that name at any port; an absent Origin passes
(a program, a same-origin GET), ``null`` does not. :meth:`Allowed.sdk_settings` hands the same
lists to the SDK, so the MCP endpoint and the other routes refuse the same requests.

Defaults: bound to loopback, the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``);
bound elsewhere, the names given with ``--allowed-host`` and ``--allowed-origin`` (the bound
address itself when no host is named). The MCP server's defaults allow any port
(:meth:`Allowed.for_server`, the SDK's own); the console's name its port exactly
(:meth:`Allowed.for_console`), since its clients are browsers whose other tabs run other
sites' pages, and another port on the same host is another site.

Layer 0: the standard library and starlette only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
HOST_REFUSED = ("Invalid Host header: this server does not answer to that name (see "
                "--allowed-host).")
ORIGIN_REFUSED = ("Invalid Origin header: requests from another site are refused (see "
                  "--allowed-origin).")


class SdkSettings(TypedDict):
    """The keyword arguments of the mcp SDK's ``TransportSecuritySettings``."""

    enable_dns_rebinding_protection: bool
    allowed_hosts: list[str]
    allowed_origins: list[str]


def _name(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _matches(value: str, allowed: Sequence[str]) -> bool:
    return any(value == a or (a.endswith(":*") and value.startswith(a[:-1])) for a in allowed)


@dataclass(frozen=True)
class Allowed:
    """The Host values and Origins a server answers."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    @classmethod
    def for_server(cls, host: str, hosts: Sequence[str] | None = None,
                   origins: Sequence[str] | None = None) -> Allowed:
        """What `tether serve --transport http` answers on every route: given hosts, else the
        loopback names at any port (bound to loopback) or the bound address at any port; given
        origins, else the loopback origins over http (bound to loopback) or none."""
        if hosts:
            names = tuple(hosts)
        elif host in LOOPBACK:
            names = tuple(f"{n}:*" for n in _LOOPBACK_NAMES)
        else:
            names = (f"{_name(host)}:*",)
        if origins:
            allowed = tuple(origins)
        elif not hosts and host in LOOPBACK:
            allowed = tuple(f"http://{n}:*" for n in _LOOPBACK_NAMES)
        else:
            allowed = ()
        return cls(names, allowed)

    @classmethod
    def for_console(cls, host: str, port: int, hosts: Sequence[str] | None = None,
                    origins: Sequence[str] | None = None) -> Allowed:
        """What the console answers: given names win; else the loopback names (bound to
        loopback) or the bound address, at the console's port exactly; the origins default to
        those names over http and https."""
        if hosts:
            names = list(hosts)
        elif host in LOOPBACK:
            names = [f"{n}:{port}" for n in _LOOPBACK_NAMES]
        else:
            names = [f"{_name(host)}:{port}"]
        return cls(tuple(names), tuple(origins or [f"{scheme}://{n}" for n in names
                                                   for scheme in ("http", "https")]))

    # the console's name for it, kept for callers written before the check was shared
    for_bind = for_console

    def host_ok(self, value: str | None) -> bool:
        return bool(value) and _matches(str(value), self.hosts)

    def origin_ok(self, value: str | None) -> bool:
        """An absent Origin passes (a same-origin GET, a program); ``null`` (a sandboxed or
        privacy-stripped page) does not unless it is named."""
        return not value or _matches(value, self.origins)

    def refusal(self, headers: Headers) -> PlainTextResponse | None:
        """421 for a Host this server does not answer to, 403 for a foreign Origin; None when
        the request may go on."""
        if not self.host_ok(headers.get("host")):
            return PlainTextResponse(HOST_REFUSED, status_code=421)
        if not self.origin_ok(headers.get("origin")):
            return PlainTextResponse(ORIGIN_REFUSED, status_code=403)
        return None

    def sdk_settings(self) -> SdkSettings:
        """Keyword arguments of the mcp SDK's ``TransportSecuritySettings`` that make the MCP
        endpoint refuse what :meth:`refusal` refuses."""
        return {"enable_dns_rebinding_protection": True, "allowed_hosts": list(self.hosts),
                "allowed_origins": list(self.origins)}
