"""How a server is reached: stdio (one user, named at start) and streamable HTTP (bearer tokens,
Host and Origin checked), each with the background loop that hears of publications, and a
clean stop (the call log written before the process ends).

Owns nothing but the transports' own setup. May call: the SDK's low-level server, the token
store, the OpenLineage route, and the two callables it is given (the background loop and the
server's close).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server

from tether.httpguard import Allowed
from tether.serve.identity import StoreVerifier, TokenStore
from tether.serve.lineage import lineage_route


class Transports:
    def __init__(self, server: Server[Any], root: Path, tokens_file: str,
                 watch: Callable[[], Coroutine[Any, Any, None]], close: Callable[[], None]):
        self.server, self.root, self.tokens_file = server, root, tokens_file
        self.watch, self.close = watch, close

    async def stdio(self) -> None:
        from mcp.server.lowlevel.server import NotificationOptions
        from mcp.server.stdio import stdio_server

        options = self.server.create_initialization_options(
            NotificationOptions(tools_changed=True))
        try:
            async with stdio_server() as (read, write), anyio.create_task_group() as tg:
                tg.start_soon(self.watch)
                tg.start_soon(self._stop_on_signal)
                await self.server.run(read, write, options)
                tg.cancel_scope.cancel()
        finally:
            self.close()

    async def _stop_on_signal(self) -> None:
        """SIGTERM (an MCP client tired of waiting for an exit, a supervisor) ends the server
        at once, but not before the pending calls reach the call log. (Cancelling is not
        enough: stdin is read in a thread that only EOF ends.)"""
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                self.close()
                os._exit(0)

    def http_app(self, host: str, port: int, allowed_hosts: list[str] | None = None,
                 allowed_origins: list[str] | None = None) -> Any:
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        store = TokenStore(self.root / self.tokens_file)
        # one Host/Origin rule for the MCP endpoint and every other route
        allowed = Allowed.for_server(host, allowed_hosts, allowed_origins)
        security = TransportSecuritySettings(**allowed.sdk_settings())
        return self.server.streamable_http_app(
            host=host, transport_security=security, token_verifier=StoreVerifier(store),
            custom_starlette_routes=[lineage_route(self.root, allowed)],
            auth=AuthSettings(issuer_url=f"http://{host}:{port}",
                              resource_server_url=f"http://{host}:{port}/mcp",
                              validate_token_resource=False))

    async def http(self, host: str, port: int, allowed_hosts: list[str] | None = None,
                   allowed_origins: list[str] | None = None,
                   ready: Callable[[], None] | None = None) -> None:
        import uvicorn

        app = self.http_app(host, port, allowed_hosts, allowed_origins)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch)
                if ready:
                    ready()
                await server.serve()
                tg.cancel_scope.cancel()
        finally:
            self.close()
