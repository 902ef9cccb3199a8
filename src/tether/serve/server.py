"""`tether serve`: the published tools over MCP (official SDK, low-level Server), stdio and
streamable HTTP, protocol 2026-07-28 and 2025-11-25.

:class:`TetherServer` is the one public entry; it only assembles the parts, each of which owns
one concern (docs/serve.md, "The server in parts"):

- the policy in force (serve/inforce.py): the approved policy, what is closed, the executor;
- the publications (serve/publications.py): the versions served, pins, the background loop;
- visibility (serve/visibility.py): what each caller reaches, as they see it;
- the discovery corpus (serve/corpus.py): search and the hints a refused call gives;
- session tools and clients (serve/sessions.py): mounted products, list_changed to both eras;
- the call log (serve/calllog.py); a call's steps (serve/calls.py);
- the transports (serve/transports.py).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import ListenHandler

from tether import __version__
from tether.config import Project
from tether.errors import ConfigError
from tether.policy.model import role_of
from tether.registry import open_registry
from tether.serve import calls
from tether.serve.calllog import CallLog
from tether.serve.corpus import Corpus
from tether.serve.identity import caller
from tether.serve.inforce import PolicyInForce
from tether.serve.kinds import Answered, Call, ToolError, Version
from tether.serve.publications import Publications
from tether.serve.sessions import Clients, SessionList
from tether.serve.transports import Transports
from tether.serve.visibility import Visibility
from tether.toolgen import Mode
from tether.toolgen.discovery import Setting, calendar_sentence
from tether.toolgen.discovery import instructions as discovery_instructions
from tether.toolgen.modes import GENERIC_INSTRUCTIONS


class TetherServer:
    def __init__(self, project: Project, mode: Mode = "grounded", stdio_user: str | None = None,
                 clock: Callable[[], dt.datetime] | None = None,
                 dedicated_tools: Setting = None):
        self.mode, self.stdio_user = mode, stdio_user
        self.registry = open_registry(project)
        try:
            self.policy = PolicyInForce(project, self.registry, mode == "grounded",
                                        stdio_user, log)
            self.policy.start()
        except Exception:
            self.registry.close()
            raise
        self.publications = Publications(self.registry, self.policy, mode, dedicated_tools,
                                         log)
        self.seen = Visibility(self.publications, self.policy, clock or project.now)
        self.finding = self.corpus = Corpus(self.seen)
        self.clients = Clients()
        serve = project.config.serve
        self.sessions = SessionList(self.seen, self.clients, serve.tool_list_token_budget
                                    if serve.session_tools else None)
        self.calls = CallLog(self.registry, log)
        self.reload()
        self.server: Server[Any] = Server(
            "tether", version=__version__,
            instructions=GENERIC_INSTRUCTIONS if mode == "generic" else discovery_instructions(
                self.listed.route, serve.session_tools,
                calendar_sentence(project.config, self.seen.clock().date())),
            on_list_tools=self.list_tools, on_call_tool=self.call_tool,
            get_tool_input_schema=self.seen.input_schema,
            on_subscriptions_listen=ListenHandler(self.clients.bus))
        self.server.middleware.append(self.clients.track)
        self.transports = Transports(self.server, project.root, serve.tokens_file, self.watch,
                                     self.close)

    # --- what other commands read (the CLI, the console, tests) ---

    @property
    def project(self) -> Project:
        """The project served: the approved policy, the closed products denied."""
        return self.policy.project

    @property
    def executor(self) -> Any:
        return self.policy.executor

    @property
    def policy_version(self) -> str | None:
        return self.policy.version

    @property
    def current(self) -> dict[str, Version]:
        return self.publications.current

    @property
    def history(self) -> dict[tuple[str, str], Version]:
        return self.publications.history

    @property
    def listed(self) -> Any:
        return self.publications.listed

    @property
    def withheld(self) -> dict[tuple[str, str], list[str]]:
        return self.publications.withheld

    def held_reviews(self) -> list[str]:
        return self.policy.held_reviews()

    def reload(self) -> bool:
        """The registry read again (the approved policy, then the tools); True if either
        moved."""
        return self.publications.reload()

    def visible(self, user: str) -> list[Version]:
        return self.seen.visible(user)

    def reachable(self, user: str) -> list[Version]:
        return self.seen.reachable(user)

    def shaped(self, user: str, v: Version) -> Version:
        return self.seen.shaped(user, v)

    # --- the handlers ---

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            user = self.identify(ctx)[0]
        except (ToolError, ConfigError):  # no user, or one the policy does not know: no tools
            return types.ListToolsResult(tools=[])
        mounted = [types.Tool.model_validate(v.definition)
                   for v in self.sessions.tools(self.sessions.session(ctx, user), user)]
        return types.ListToolsResult(tools=self.seen.tools(user) + mounted)

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return await calls.handle(self, ctx, params)

    # --- a call's site (serve/calls.py's CallSite) ---

    def identify(self, ctx: Any) -> tuple[str, str]:
        user = caller(ctx, self.stdio_user)
        return user, role_of(self.project.config, user)[0]

    def version_for(self, user: str, name: str, pin: Any) -> Version:
        return self.seen.version_for(user, name, pin)

    def reopen(self, user: str, name: str) -> bool:
        return self.seen.reopen(user, name)

    def product_by_tool(self, user: str, entry: Version, args: dict[str, Any]
                        ) -> tuple[dict[str, Any], dict[str, str] | None]:
        return self.seen.product_by_tool(user, entry, args)

    def call_of(self, user: str, entry: Version, args: dict[str, Any]) -> Call:
        return self.seen.call_of(user, entry, args)

    def run_call(self, call: Call) -> tuple[str | None, Answered]:
        """The schema check and the answer, in one worker thread (one hop, not two)."""
        pipeline = self.policy.pipeline
        drift = pipeline.steps.schema_check(pipeline.ex, call)
        try:
            return drift, pipeline.answer(call)
        except ToolError as e:  # a stale definition often fails: say why
            if drift:
                raise type(e)(f"{e} ({drift})", refusal=e.refusal) from None
            raise

    async def mount_found(self, ctx: Any, user: str, entry: Version, args: dict[str, Any],
                          result: dict[str, Any]) -> None:
        await self.sessions.mount_found(ctx, user, entry, args, result)

    def hints(self, user: str, call: Call | None, args: dict[str, Any]) -> str:
        return (self.corpus.taken_elsewhere(user, call) if call is not None
                else self.corpus.products_for_words(user, args))

    def after_failure(self, products: list[str]) -> str:
        return self.policy.after_failure(products)

    async def settle(self, entry: dict[str, Any]) -> None:
        """After every call: its log entry, a due batch written (never on the event loop),
        and the clients told of what a failure closed."""
        self.calls.record(entry)
        if self.calls.due:
            await anyio.to_thread.run_sync(self.calls.flush)
        if self.policy.told:
            self.policy.told = False
            await self.clients.tell()

    # --- running ---

    async def watch(self, interval: float = 0.5) -> None:
        await self.publications.watch(self.calls, self.clients, interval)

    async def serve_stdio(self) -> None:
        await self.transports.stdio()

    async def serve_http(self, host: str, port: int, allowed_hosts: list[str] | None = None,
                         allowed_origins: list[str] | None = None,
                         ready: Callable[[], None] | None = None) -> None:
        await self.transports.http(host, port, allowed_hosts, allowed_origins, ready)

    def http_app(self, host: str, port: int, allowed_hosts: list[str] | None = None,
                 allowed_origins: list[str] | None = None) -> Any:
        return self.transports.http_app(host, port, allowed_hosts, allowed_origins)

    def flush_calls(self) -> bool:
        return self.calls.flush()

    def close(self) -> None:
        self.publications.close()
        self.calls.close()
        self.policy.close()
        self.registry.close()


def log(message: str) -> None:
    """Diagnostics go to stderr: stdout is the MCP channel on stdio."""
    print(message, file=sys.stderr, flush=True)
