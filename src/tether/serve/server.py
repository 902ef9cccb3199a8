"""`tether serve`: the published tools over MCP (official SDK, low-level Server), stdio and
streamable HTTP, protocol 2026-07-28 and 2025-11-25.

Tools are built per request for the caller (their role's visible tools, in a stable order).
Each call runs the plan of the version the caller gets (current, or a pinned one inside its
deprecation window), with the caller's policy pushed into the query, and is recorded in the
registry's call log. A background task watches the registry and tells connected clients of both
protocol eras when the published tool set changes.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio
import mcp_types as types
import sqlalchemy as sa
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tether import __version__
from tether.config import Project, load_project
from tether.context.meta import ToolContext, enum_of, refusal_meta, result_meta, retired_info
from tether.errors import ConfigError, TetherError
from tether.httpguard import Allowed
from tether.keyfile import load_secret
from tether.policy import exposure as exposing
from tether.policy.entitle import MaskKey, Refusal, table_allowed
from tether.policy.model import role_of, tool_visible
from tether.profiling import profile_project
from tether.registry import Registry, ToolVersion, open_registry
from tether.registry import policy as policyversion
from tether.registry.announce import Listener
from tether.serve import answer, discovery, interpret, peruser
from tether.serve.arguments import validate, without_blanks
from tether.serve.calls import STEPS, Turn
from tether.serve.executor import Executor
from tether.serve.health import Health
from tether.serve.identity import AS_USER_HEADER, RUNNER_SCOPE, StoreVerifier, TokenStore
from tether.serve.kinds import Answered, Call, SourceFailed, ToolError, runner
from tether.serve.lineage import lineage_route
from tether.serve.pagination import load_key
from tether.serve.sessions import Mount, SessionTools
from tether.sources.base import first_line
from tether.toolgen import Mode, QueryPlan, generate
from tether.toolgen.discovery import (
    PROBE,
    ROWS_KIND,
    ROWS_PRODUCT,
    SEARCH_KIND,
    Listed,
    Setting,
    listed,
    product_param,
    product_titles,
)
from tether.toolgen.discovery import instructions as discovery_instructions
from tether.toolgen.kinds import KINDS, kind
from tether.toolgen.modes import strip_grounding
from tether.toolgen.probe import PROBE_KIND
from tether.toolgen.tokens import tool_tokens

CATCH_UP = 5.0
"""Seconds between reads of a PostgreSQL registry when nothing was announced (what a missed
notification costs at most)."""
MAX_PENDING = 100_000
"""Call log entries kept while the registry cannot be reached; the oldest go past this."""

NOT_ANSWERED = "Not answered: fix the arguments and call {tool} again."
"""Ends the text of a call refused for its arguments: small models answered the refusal itself
(its allowed values, a parameter's description, or 0) where a call fixed would have answered."""


@dataclass
class Version:
    name: str
    version: str
    definition: dict[str, Any]
    plan: QueryPlan
    served_until: dt.datetime | None = None  # superseded versions, and a retired tool
    successor: str | None = None
    asked: str | None = None  # the superseded version a call pinned, run under these rules


@dataclass
class _Index:
    of: list[Version]  # the reachable list it indexes
    listed: list[Version]
    by_name: dict[str, Version]
    listings: dict[str, Version]  # product -> its listing tool
    listing_names: dict[str, Version]  # a reachable product's listing tool, by its name


class TetherServer:
    def __init__(self, project: Project, mode: Mode = "grounded", stdio_user: str | None = None,
                 clock: Callable[[], dt.datetime] | None = None,
                 dedicated_tools: Setting = None):
        self.file_project = project  # tether.yaml as it stands; its policy is not served
        self.mode = mode
        self.dedicated_tools = dedicated_tools
        self.clock = clock or project.now
        self.stdio_user = stdio_user
        self.registry: Registry = open_registry(project)
        try:  # the last approved policy, never tether.yaml's unreviewed edit
            self.enforced, self.policy_version = policyversion.enforced(
                project, self.registry, required=mode == "grounded")
            self.project = self.enforced  # less what is closed (serve/health.py)
            if stdio_user is not None:
                role_of(self.project.config, stdio_user)  # an unknown user fails at start
        except TetherError:
            self.registry.close()
            raise
        serve = project.config.serve
        self.cursor_key = load_key(project.root / serve.cursor_key_file)
        self.executor = Executor(self.project, self.cursor_key,
                                 MaskKey.from_secret(load_secret(project.root
                                                                 / serve.mask_key_file)),
                                 registry=self.registry)
        self.withheld: dict[tuple[str, str], list[str]] = {}
        self._shaped: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = {}
        self._visible: dict[str, tuple[int, float, list[Version]]] = {}
        self._tools: dict[str, tuple[list[Version], list[types.Tool]]] = {}
        self._indexes: dict[str, _Index] = {}
        self._docs: dict[tuple[Any, ...], tuple[float, discovery.Index]] = {}
        self.listed = Listed(frozenset(), "dedicated", 0, 0)
        self.health = Health(log)
        self.told = False  # a closure found outside the watch loop, for it to tell clients
        self._check_health(start=True)
        self.bus = InMemorySubscriptionBus()
        self.legacy_sessions: dict[Any, str] = {}
        serve = project.config.serve
        self.sessions = (SessionTools(serve.tool_list_token_budget) if serve.session_tools
                         else None)
        self._base_tokens: dict[str, tuple[list[Version], int]] = {}
        self.pending_calls: list[dict[str, Any]] = []
        self.lost_calls = 0
        self.registry_error: str | None = None  # why the registry could not be read, if so
        self.ear: Listener | None = None
        self.publication = -1
        self.current: dict[str, Version] = {}
        self.history: dict[tuple[str, str], Version] = {}
        self.reload()
        self.server: Server[Any] = Server(
            "tether", version=__version__,
            instructions=discovery_instructions(self.listed.route, self.sessions is not None),
            on_list_tools=self.list_tools, on_call_tool=self.call_tool,
            get_tool_input_schema=self.input_schema,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        self.server.middleware.append(self._track_legacy_sessions)

    def _source_of(self) -> Callable[[str], Any]:
        ex, config = self.executor, self.enforced.config
        return lambda p: ex.source(config.products[p].source)

    def _check_health(self, products: Any = None, start: bool = False) -> bool:
        """Check what can be read (serve/health.py: every product, or ``products`` and those
        whose rules read them); on a change, serve the project with the closed products
        denied. At start, a problem no product's closure answers stops the server."""
        try:
            moved = self.health.check(self.enforced, self._source_of(), products)
        except Exception:
            if not start:
                raise
            self.executor.close()
            self.registry.close()
            raise
        if moved:
            self._renew()
        elif start:
            self._seed()
        return moved

    def _seed(self) -> None:
        """The executor's columns of each table product, as the check just read them (not
        described twice)."""
        config = self.project.config
        self.executor.caches.columns.update({
            p: cols for p, cols in self.health.described.items()
            if p in config.products and config.products[p].table})

    def after_failure(self, products: list[str]) -> str:
        """A call failed reading ``products``: those that can no longer be read close (and the
        clients hear of it); what closed, in words, for the error the caller gets."""
        before = dict(self.health.closed)
        try:
            if not self.health.after_failure(self.enforced, self._source_of(), products):
                return ""
        except Exception as e:  # the check failing too changes nothing: the call says why
            log(f"tether: the check of {', '.join(products)[:200]} failed "
                f"({type(e).__name__}: {str(e)[:200]})")
            return ""
        self._renew()
        self.told = True
        shut = [p for p in products if p in self.health.closed and p not in before]
        return (f" ({', '.join(shut)} closed: it cannot be read now; every other tool still "
                "answers)") if shut else ""

    def _renew(self) -> None:
        """Serve the approved policy with the closed products denied, on a new executor over
        the same connections; nothing computed before is kept."""
        self.project = self.health.overlay(self.enforced)
        old = self.executor
        self.executor = Executor(self.project, self.cursor_key, old.mask_key,
                                 sources=old.sources, writers=old.writers,
                                 registry=self.registry)
        # new dicts rather than cleared ones: a call in flight keeps the ones it holds
        self._shaped, self._visible, self._tools, self._indexes, self._docs = {}, {}, {}, {}, {}
        self._seed()

    def closed_message(self, user: str, products: list[str]) -> str | None:
        """Why a product the caller asked for is closed to them, if it is."""
        try:
            role = role_of(self.project.config, user)[0]
        except TetherError:
            return None
        found = self.health.closed_for(role, products)
        return found.said() if found is not None else None

    def held_reviews(self) -> list[str]:
        """What tether.yaml holds that this server does not serve, in words (`tether serve`
        logs them at start): each policy change waiting for a reviewer (servers enforce the
        last approved policy meanwhile) and each change the gate blocked (never served)."""
        out = []
        for r in self.registry.reviews():
            if r["status"] == "blocked":
                out.append(f"review {r['id']} was blocked (it would expose a restricted "
                           "column): nothing of it is served")
            elif r["status"] == "pending" and policyversion.holds_policy(r):
                out.append(f"review {r['id']} holds a policy change waiting for a reviewer: "
                           f"serving the approved policy {self.policy_version or '(none)'}")
        return out

    def _apply_policy(self) -> bool:
        """On a publication: enforce the newest approved policy version, over tether.yaml as
        it stands now (a server running since before a product was added reads it as a new
        one would; a file that no longer loads keeps the last one that did). Every cache that
        holds what a role may read starts again. True if anything moved."""
        found = policyversion.approved_document(self.registry)
        fresh = self._reread()
        if fresh is None and (found is None or found[0] == self.policy_version):
            return False
        if fresh is not None:
            self.file_project = fresh
        self.enforced, self.policy_version = policyversion.enforced(
            self.file_project, self.registry, required=self.mode == "grounded")
        # the policy's rules checked again on the columns last read (no catalog read)
        self.health.policy_again(self.enforced, self._source_of())
        self._renew()  # the open connections are kept; nothing computed before is
        log(f"tether: now enforcing access policy {self.policy_version}")
        return True

    def _reread(self) -> Project | None:
        """tether.yaml again, when it changed since it was read (None: unchanged, or it does
        not load now, which the log says)."""
        try:
            fresh = load_project(self.file_project.root)
        except TetherError as e:
            log(f"tether: tether.yaml does not load now ({e.paragraph()}); serving it as it "
                "was last read")
            return None
        return None if fresh.config == self.file_project.config else fresh

    # --- the tool set ---

    def reload(self) -> bool:
        """Load the published (or generated) tools and the approved policy; True if either
        changed."""
        latest = self.registry.latest_publication()
        if latest == self.publication:
            return False
        moved = self._apply_policy()
        if self.mode != "grounded":
            self.publication = latest
            if self.current:
                return moved

            profiles = {p.product: p for p in profile_project(self.project)}
            tools = generate(self.project, profiles, "grounded" if self.mode == "bare"
                             else self.mode)
            # bare serves what grounded serves, with the grounding stripped: the same list
            self.listed = listed(self.project.config, [(t.name, t.wire(), t.plan) for t in tools],
                                 self.dedicated_tools)
            for t in tools:
                t = strip_grounding(t) if self.mode == "bare" else t
                self.current[t.name] = Version(t.name, "1.0.0", t.wire(), t.plan)
            return True
        versions = self.registry.versions()
        if not versions:
            raise ConfigError("no published tools to serve.", where=str(self.project.root),
                              hint="Run `tether build` first.")
        versions = self._safe(versions)
        days = self.project.config.drift.deprecation_days
        by_name: dict[str, list[Version]] = {}
        for v in versions:
            by_name.setdefault(v.name, []).append(
                Version(v.name, v.version, v.definition, QueryPlan.model_validate(v.plan)))
            if len(by_name[v.name]) > 1:
                prev = by_name[v.name][-2]
                prev.successor = v.version
                prev.served_until = dt.datetime.fromisoformat(v.published_at) + dt.timedelta(
                    days=days)
                # the superseded definition states its window where a pinned model reads it
                prev.definition = {**prev.definition, "description": (
                    f"{prev.definition.get('description', '')} Deprecated: served until "
                    f"{prev.served_until:%Y-%m-%d}; use version {v.version}.")}
        for vs in by_name.values():
            last = vs[-1]
            info = retired_info(last.definition)
            if info is None:
                continue
            published = next(v.published_at for v in versions
                             if (v.name, v.version) == (last.name, last.version))
            last.served_until = dt.datetime.fromisoformat(published) + dt.timedelta(days=days)
            last.definition = {**last.definition, "description": (
                f"{last.definition.get('description', '')} Served until "
                f"{last.served_until:%Y-%m-%d}, then removed.")}
        current = {n: vs[-1] for n, vs in by_name.items()}
        self.listed = listed(self.project.config, [(n, v.definition, v.plan)
                                                   for n, v in current.items()],
                             self.dedicated_tools)
        self.current = current
        self.history = {(v.name, v.version): v for vs in by_name.values() for v in vs}
        self.publication = latest
        return True

    def _safe(self, versions: list[ToolVersion]) -> list[ToolVersion]:
        """The versions the policy as it stands lets this server serve: a version that would
        expose a restricted column (however it reached the registry) is withheld, and the
        tool is served at its newest safe version, if any."""
        restricted = exposing.restricted_by(self.project, self.registry.state(prefix="product:"))
        safe = []
        for v in versions:
            plan_kind = str((v.plan or {}).get("kind", ""))
            if plan_kind not in KINDS:  # made by a plugin or a newer tether: not run here
                if (v.name, v.version) not in self.withheld:
                    self.withheld[(v.name, v.version)] = []
                    log(f"tether: not serving {v.name} {v.version}: its kind {plan_kind!r} is "
                        "not one this server knows (a plugin not loaded, or a newer tether)")
                continue
            found = exposing.exposure(v.definition, v.plan or {}, restricted)
            if not found:
                safe.append(v)
            elif (v.name, v.version) not in self.withheld:
                self.withheld[(v.name, v.version)] = found
                log(f"tether: not serving {v.name} {v.version}: it would expose the restricted "
                    f"{', '.join(found)}")
        return safe

    def visible(self, user: str) -> list[Version]:
        """The tools in ``user``'s tools/list: what they may reach (:meth:`reachable`) that the
        list holds (serve.dedicated_tools: the rest is read through discovery)."""
        return self._index(user).listed

    def _index(self, user: str) -> _Index:
        """The caller's reachable tools indexed, once per list (a call looks up by name and
        by product instead of scanning thousands of tools)."""
        shown = self.reachable(user)
        hit = self._indexes.get(user)
        if hit is None or hit.of is not shown:
            # shaped here whatever _compute_visible decided: a publication that moved
            # serve.dedicated_tools between the two never lists an unshaped tool
            listed = [self.shaped(user, v) for v in shown if v.name in self.listed]
            listings: dict[str, Version] = {}
            for v in shown:  # a renamed tool in its retirement window yields to its successor
                if kind(v.plan.kind).listing and v.plan.product and (
                        v.plan.product not in listings or v.served_until is None):
                    listings[v.plan.product] = v
            hit = self._indexes[user] = _Index(shown, listed, {v.name: v for v in listed},
                                               listings, {v.name: v for v in listings.values()})
        return hit

    def reachable(self, user: str) -> list[Version]:
        """The tools ``user`` may call, listed or reached through discovery: their role's tool
        globs, only tools whose products the role may read; the listed ones as the user sees
        them (serve/peruser.py: the probe over their products, the enums of filtered products
        narrowed to their rows), the others as published until reached (:meth:`shaped`). Kept
        per user until the next publication or until a narrowed definition is due to be read
        again."""
        hit = self._visible.get(user)
        if hit is not None and hit[0] == self.publication and time.monotonic() < hit[1]:
            return hit[2]
        publication = self.publication  # read first: a reload meanwhile makes this stale
        shown = self._compute_visible(user)
        self._visible[user] = (publication, time.monotonic() + peruser.TTL, shown)
        return shown

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's published input schema, for the SDK's header validation: looked up by name
        instead of the SDK building a whole tools/list on every call (not per caller: it is
        the schema before narrowing, whose parameters are the same for everyone)."""
        v = self.current.get(name)
        schema = v.definition.get("inputSchema") if v is not None else None
        return schema if isinstance(schema, dict) else None

    def _compute_visible(self, user: str) -> list[Version]:
        shown, failed = self._visible_now(user)
        if failed and self.after_failure(failed):  # closed now: the list without them
            return self._visible_now(user)[0]
        return shown

    def _visible_now(self, user: str) -> tuple[list[Version], list[str]]:
        """The tools ``user`` reaches, and the products whose values could not be read for
        them just now (their tools left out)."""
        config = self.project.config
        out = []
        failed: list[str] = []
        now = self.clock()
        for name, v in sorted(self.current.items()):
            routed = kind(v.plan.kind).routed  # a route to the listings, below
            if not routed and not tool_visible(config, user, name, writers_of(v.plan)):
                continue
            if v.served_until is not None and now > v.served_until:  # retired, window over
                continue
            products = ToolContext.of(v.definition).products
            if not kind(v.plan.kind).discovery and not all(
                    table_allowed(config, user, p) for p in products if p in config.products):
                continue
            if kind(v.plan.kind).discovery:  # listings and metrics: see _index, shaped()
                try:
                    v = self.shaped(user, v)
                except SourceFailed:  # left out: one product failing takes no other down
                    failed += [p for p in products if p in config.products]
                    continue
            out.append(v)
        # search, the probe and the generic listing reach exactly the products whose listing
        # tool the caller may call (their role's globs and tables together): offered when
        # there is one, over those products. This is the one answer to "may this caller
        # reach this product?" (tools/list, search, the probe, the generic listing and its
        # enum, `tether tools --as-user` and the console all read it)
        readable = {str(v.plan.product): v for v in out
                    if kind(v.plan.kind).listing and v.plan.product}
        return [_over(v, readable) if over_products(v) else v for v in out
                if readable or not kind(v.plan.kind).routed], failed

    # --- identity ---

    def current_user(self, ctx: ServerRequestContext[Any] | None) -> str:
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        if token is None:
            if self.stdio_user is None:
                raise ToolError("no user: start the server with --as-user NAME or TETHER_USER")
            return self.stdio_user
        user = token.subject or ""
        request = getattr(ctx, "request", None) if ctx is not None else None
        acting = request.headers.get(AS_USER_HEADER) if request is not None else None
        if acting:
            if RUNNER_SCOPE not in (token.scopes or []):
                raise ToolError(f"this token may not act as another user ({AS_USER_HEADER} "
                                "needs a runner token)")
            user = acting
        role_of(self.project.config, user)
        return user

    # --- handlers ---

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            user = self.current_user(ctx)
        except (ToolError, ConfigError):
            return types.ListToolsResult(tools=[])
        shown = self.reachable(user)  # the cached list: rebuilt on a publication or its TTL
        hit = self._tools.get(user)
        if hit is None or hit[0] is not shown:  # validated once per list, not per request
            hit = self._tools[user] = (shown, [types.Tool.model_validate(v.definition)
                                               for v in self.visible(user)])
        mounted = [types.Tool.model_validate(v.definition)
                   for v in self.session_tools(self._session(ctx, user), user)]
        return types.ListToolsResult(tools=hit[1] + mounted)

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        """The call through serve/calls.py's steps, the result or the error shaped for the
        client, and the call logged whatever happened."""
        turn = Turn(ctx, params.name, dict(params.arguments or {}))
        error: str | None = None
        refusal: str | None = None
        try:
            for step in STEPS:
                await step(self, turn)
            assert turn.answered is not None and turn.plan is not None and turn.entry
            result = answer.rows_last(turn.answered.result)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=answer.sentence(turn.plan, result)),
                         types.TextContent(type="text", text=json.dumps(
                             result, default=str, separators=(",", ":")))],
                structured_content=result,
                _meta=result_meta(turn.entry.version, turn.answered.evidence))
        except ToolError as e:
            error = str(e)
            refusal = (e.refusal or {}).get("reason")
            call = turn.call
            if call is not None and call.tool != params.name and not e.refusal:
                # a product reached by name: its arguments, to fix, and the products that take
                # an argument it does not
                error = (error.rstrip(".") + schema_hint(call)
                         + self._taken_elsewhere(turn.user, call))
            elif (call is None and not e.refusal and turn.entry is not None
                  and over_products(turn.entry) and kind(turn.entry.plan.kind).over_listings):
                error += await anyio.to_thread.run_sync(self._products_for_words, turn.user,
                                                        turn.args)
            if isinstance(e, SourceFailed):  # what can no longer be read closes, alone
                error += await anyio.to_thread.run_sync(self.after_failure, _read_by(turn))
                if self.told:
                    self.told = False
                    await self.tell_clients()
            if not e.refusal and turn.entry is not None:  # a refusal of policy is an answer
                error = f"{error.rstrip('.')}. {NOT_ANSWERED.format(tool=params.name)}"
            meta = refusal_meta(e.refusal) if e.refusal else None
            return types.CallToolResult(content=[types.TextContent(type="text", text=error)],
                                        is_error=True, _meta=meta)
        except (ConfigError, Exception) as e:  # never crash the server on one call
            error = f"{type(e).__name__}: {getattr(e, 'message', None) or e}"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"the call failed: {error}")],
                is_error=True)
        finally:
            self._log_call(turn, error, refusal)
            if len(self.pending_calls) >= 50 and self.registry_error is None:
                await anyio.to_thread.run_sync(self.flush_calls)  # never on the event loop

    def _log_call(self, turn: Turn, error: str | None, refusal: str | None = None) -> None:
        """The call in the registry's log (in batches of 50, and at shutdown)."""
        entry = turn.entry
        self.pending_calls.append({k: v.replace("\x00", "\ufffd") if isinstance(v, str) else v
                                   for k, v in {  # a NUL a client sent: no text column takes it
            "at": dt.datetime.now(dt.UTC).isoformat(), "user": turn.user, "role": turn.role,
            "tool": turn.name[:200], "version": entry.version if entry is not None else None,
            "arguments": logged_arguments(turn.args),
            "latency_ms": (time.perf_counter() - turn.started) * 1000,
            "rows": turn.result.get("row_count"), "error": error,
            "as_of": turn.result.get("as_of"),
            "deprecated": int(entry is not None and entry.successor is not None),
            "details": _details(turn, refusal),
        }.items()})

    def run_call(self, call: Call) -> tuple[str | None, Answered]:
        """The schema check and the answer, in one worker thread (one hop, not two)."""
        drift = self.executor.steps.schema_check(self.executor, call)
        try:
            return drift, self.executor.answer(call)
        except ToolError as e:  # a stale definition often fails: say why
            if drift:
                raise type(e)(f"{e} ({drift})", refusal=e.refusal) from None
            raise

    def call_of(self, user: str, entry: Version, args: dict[str, Any]) -> Call:
        """The call to execute: the tool's own, or for the generic listing, the named product's
        listing tool as this caller reaches it, with the arguments given for it (validated,
        refused and answered exactly as that tool's would be). A product the caller does not
        reach is unknown to the probe as to the generic listing."""
        if kind(entry.plan.kind).narrowed == "products":
            product = str(args.get("product"))
            if product in self.project.config.products and product not in self._index(
                    user).listings:
                self._refuse_unreached(user, product)
        if not kind(entry.plan.kind).over_listings:
            return Call(user, entry.name, entry.version, entry.definition, entry.plan, args)
        validate(entry.definition, without_blanks(
            Call(user, entry.name, entry.version, entry.definition, entry.plan, args)).args)
        product = str(args.get("product"))
        listing = self._listing_for(user, product)
        if listing is None:
            self._refuse_unreached(user, product)
        given = args.get("arguments") or {}
        if not isinstance(given, dict):
            raise ToolError("arguments must be an object of the product's arguments by name "
                            f"(see {PROBE})")
        return Call(user, listing.name, listing.version, listing.definition, listing.plan,
                    dict(given))

    def product_by_tool(self, user: str, entry: Version, args: dict[str, Any]
                         ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """A discovery tool's ``product`` given as the name of a product's listing tool (models
        copy the tool names they have seen): that product, for a tool the caller reaches, and
        what was read as what (the result says it). Anything else is left to be refused."""
        name = args.get("product")
        if (not over_products(entry) or not isinstance(name, str)
                or name in self.project.config.products):
            return args, None
        listing = self._index(user).listing_names.get(name)
        if listing is None or not listing.plan.product:
            return args, None
        return ({**args, "product": listing.plan.product},
                {"given": name, "product": listing.plan.product})

    def arguments_inside(self, entry: Version, args: dict[str, Any]
                         ) -> tuple[dict[str, Any], list[str]]:
        """For the generic listing, the names given beside ``product`` and ``arguments`` (a
        flattened call: ``{"product": "box", "limit": 5}``): read inside ``arguments``, and
        which they were (the result says so). The product's own tool then takes, interprets or
        refuses each as if it had been written there; a name given both ways with two values
        is refused."""
        props = (entry.definition.get("inputSchema") or {}).get("properties") or {}
        beside = [k for k in args if k not in props]
        given = args.get("arguments") or {}
        if (not beside or not kind(entry.plan.kind).over_listings
                or not isinstance(args.get("product"), str) or not isinstance(given, dict)):
            return args, []
        inner = dict(given)
        twice = [k for k in beside if k in inner and inner[k] != args[k]]
        if twice:
            raise ToolError(f"{', '.join(twice)[:200]} given both beside and inside arguments, "
                            "with different values; give each once, inside arguments")
        inner.update({k: args[k] for k in beside})
        return {**{k: v for k, v in args.items() if k in props}, "arguments": inner}, beside

    def _closed_tool(self, user: str, name: str) -> str | None:
        """Why a tool the caller would reach is closed to them just now (its products), if so."""
        v = self.current.get(name)
        if v is None or not tool_visible(self.enforced.config, user, name, writers_of(v.plan)):
            return None
        products = ToolContext.of(v.definition).products or (
            [v.plan.product] if v.plan.product else [])
        return self.closed_message(user, products)

    def _refuse_unreached(self, user: str, product: str) -> NoReturn:
        """A product the caller does not reach: closed just now (what failed), denied by the
        role's tables (a refusal that says so), else unknown to them (no listing tool they may
        call)."""
        closed = self.closed_message(user, [product])
        if closed is not None and table_allowed(self.enforced.config, user, product):
            raise ToolError(closed)
        config = self.project.config
        if product in config.products and not table_allowed(config, user, product):
            refusal = Refusal("denied_table", f"your role may not read {product}")
            raise ToolError(refusal.paragraph(), refusal=refusal.meta())
        raise ToolError(discovery.unknown_product(product))

    def _listing_for(self, user: str, product: str) -> Version | None:
        """The listing tool of ``product`` as ``user`` reaches it (None: none they may call)."""
        found = self._index(user).listings.get(product)
        return None if found is None else self.shaped(user, found)

    def shaped(self, user: str, v: Version) -> Version:
        """``v`` as ``user`` sees it (serve/peruser.py). Listed tools are shaped when the list
        is built; a tool reached only through discovery, when it is reached: a list of
        thousands of products costs nothing until one is read."""
        try:
            definition = peruser.shaped(self.executor, user, v.definition, v.plan, self._shaped)
        except TetherError:  # the source failed reading the caller's values: say so, no text
            raise SourceFailed(f"{v.plan.product or v.name}: its values could not be read for "
                               "you just now (the source failed); try again") from None
        return v if definition is v.definition else dataclasses.replace(v, definition=definition)

    def _shaped_or_none(self, user: str, v: Version) -> Version | None:
        """Shaped, or left out of search when its values cannot be read (never unshaped)."""
        try:
            return self.shaped(user, v)
        except ToolError:
            return None

    def query_with(self, user: str, product: str) -> dict[str, Any] | None:
        """The tool and arguments that read ``product``'s rows, as ``user`` reaches them."""
        try:
            listing = self._listing_for(user, product)
        except ToolError:
            listing = None  # its values could not be read: no arguments to offer
        return discovery.query_with(listing, listing is not None and listing.name in self.listed)

    def search(self, user: str, entry: Version, args: dict[str, Any]) -> Answered:
        validate(entry.definition, args)
        return discovery.found(entry, self._corpus(user), args)

    def _corpus(self, user: str) -> discovery.Index:
        """What ``user`` may find, shaped for them (kept a while per publication and scope)."""
        key = (self.publication, user, *self.executor.scope_key(user))
        hit = self._docs.get(key)
        if hit is None or time.monotonic() > hit[0]:
            docs = discovery.corpus([x for v in self.reachable(user)
                                     if (x := self._shaped_or_none(user, v)) is not None],
                                    self.listed.names, self.project.config)
            hit = self._docs[key] = (time.monotonic() + peruser.TTL, docs)
        return hit[1]

    def _taken_elsewhere(self, user: str, call: Call) -> str:
        """For a product read through the generic listing with arguments it does not take: the
        other products this caller reaches whose listing takes each such name (by the
        parameter's name, in any case style), so the next call can name the right product."""
        props = (call.definition.get("inputSchema") or {}).get("properties") or {}
        unknown = {interpret.norm(k): k for k in call.args if k not in props}
        if not unknown:
            return ""
        takers: dict[str, list[str]] = {}
        for product, v in self._index(user).listings.items():
            if product == call.plan.product:
                continue
            theirs = (v.definition.get("inputSchema") or {}).get("properties") or {}
            for name in {interpret.norm(p) for p in theirs} & set(unknown):
                takers.setdefault(unknown[name], []).append(product)
        said = [f"{k} is an argument of {' and '.join(sorted(ps)[:3])}"
                + (f" (and {len(ps) - 3} more)" if len(ps) > 3 else "")
                for k, ps in takers.items()]
        return (f". {'; '.join(said)}, not of {call.plan.product}: call again without it, or "
                "read the product that takes it") if said else ""

    def _products_for_words(self, user: str, args: dict[str, Any]) -> str:
        """For a generic listing called without a product it can read: the products whose
        words match the text given in its arguments (a question, a topic), best first."""
        text = " ".join(str(v) for v in _strings(args))
        if not text.strip():
            return ""
        try:
            matches = discovery.search(self._corpus(user), text, 3)
        except ToolError:
            return ""
        shown = [{k: v for k, v in m.items() if k != "arguments"} for m in matches]
        return (". For your words, " + discovery.search_words(None, {"matches": shown})
                if matches else "")

    def version_for(self, user: str, name: str, pin: Any) -> Version:
        index = self._index(user)
        shown = index.by_name
        if name not in shown and name in index.listing_names:
            # a product's own tool, mounted in a session or not: its product is reachable
            shown = {name: self.shaped(user, index.listing_names[name])}
        if name not in shown:
            gone = self.current.get(name)
            if (gone is not None and gone.served_until is not None
                    and tool_visible(self.project.config, user, name)):
                info = retired_info(gone.definition) or {}
                raise ToolError(f"{name} was retired on {gone.served_until:%Y-%m-%d} "
                                f"({info.get('reason', 'no longer served')})")
            closed = self._closed_tool(user, name)
            raise ToolError(closed or f"unknown tool {name[:100]!r}")
        if pin is None or str(pin) == shown[name].version:
            return shown[name]
        entry = self.history.get((name, str(pin)))
        current = self.current[name].version
        if entry is None:
            raise ToolError(f"{name} has no version {pin}; the current version is {current}")
        if entry.served_until is not None and self.clock() > entry.served_until:
            raise ToolError(f"{name}@{pin} was retired on {entry.served_until:%Y-%m-%d}; "
                            f"use {name}@{entry.successor} (current: {current})")
        if over_products(entry):  # over the caller's products, as the current
            return _over(entry, self._index(user).listings)
        pinned = self.shaped(user, entry)
        rules = runner(entry.plan.kind)
        if rules is not None and rules.pinned is not None:  # a shape, never a permission
            return rules.pinned(pinned, shown[name])
        return pinned

    # --- session tools (serve/sessions.py) ---

    def _session(self, ctx: Any, user: str) -> Any:
        """The session a request belongs to: its handshake-era connection (each request has a
        ServerSession of its own over it; the connection is private in mcp 2.3), else
        (protocol 2026-07-28 has no sessions) the caller."""
        conn = getattr(getattr(ctx, "session", None), "_connection", None)
        legacy = getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS
        return conn if legacy and conn is not None else ("user", user)

    def session_tools(self, session: Any, user: str) -> list[Version]:
        """The products mounted in ``session``, as ``user`` reaches them now (one that left
        their reach since is left out)."""
        if self.sessions is None:
            return []
        index = self._index(user)
        shaped = [self._shaped_or_none(user, index.listing_names[n])
                  for n in self.sessions.tools(session)
                  if n in index.listing_names and n not in index.by_name]
        return [v for v in shaped if v is not None]  # one unreadable just now: left out

    def _list_tokens(self, user: str) -> int:
        """The caller's base list's tokens (what never leaves)."""
        listed_now = self.visible(user)
        hit = self._base_tokens.get(user)
        if hit is None or hit[0] is not listed_now:
            hit = self._base_tokens[user] = (listed_now, sum(tool_tokens(v.definition)
                                                             for v in listed_now))
        return hit[1]

    async def mount_found(self, ctx: Any, user: str, entry: Version, args: dict[str, Any],
                           result: dict[str, Any]) -> None:
        """A product found by a search (its best product), explained by the probe or read by
        name through the generic listing joins the session's list as its own tool; the session
        is told its list changed. A call to a mounted tool marks it used."""
        if self.sessions is None:
            return
        session = self._session(ctx, user)
        self.sessions.touch(session, entry.name)
        if entry.plan.kind == SEARCH_KIND.name:
            product = next((m["name"] for m in result.get("matches") or []
                            if m.get("kind") == "product"), None)
        elif entry.plan.kind in (PROBE_KIND.name, ROWS_KIND.name):
            # explained, or read by name through the generic listing: its own tool next
            product = str(args.get("product") or "") or None
        else:
            return
        index = self._index(user)
        listing = index.listings.get(product) if product else None
        if listing is None or listing.name in index.by_name:
            return  # unknown, or already in the list
        shaped = self.shaped(user, listing)
        mount = Mount(str(product), shaped.name, tool_tokens(shaped.definition))
        if not self.sessions.mount(session, mount, self._list_tokens(user)):
            return
        if isinstance(session, tuple):
            await self.bus.publish(ToolsListChanged())  # 2026-07-28: the caller re-lists
        else:
            await ctx.session.send_tool_list_changed()

    def flush_calls(self) -> bool:
        """The pending calls into the registry's log. While the registry cannot be reached they
        wait (the oldest are dropped past MAX_PENDING, and the log says how many); False then."""
        batch, self.pending_calls = self.pending_calls, []
        try:
            self.registry.record_calls(batch)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as e:  # unreachable: wait
            kept = (batch + self.pending_calls)[-MAX_PENDING:]
            self.lost_calls += len(batch) + len(self.pending_calls) - len(kept)
            self.pending_calls = kept
            self._registry_down(e)
            return False
        except sa.exc.SQLAlchemyError:  # an entry the registry refuses: never the others
            for entry in batch:
                try:
                    self.registry.record_calls([entry])
                except sa.exc.SQLAlchemyError as e:
                    log(f"tether: a call log entry for {entry.get('tool')!r} was refused by "
                        f"the registry and dropped ({first_line(e)})")
        return True

    def _registry_down(self, e: Exception) -> None:
        if self.registry_error is None:
            log(f"tether: the registry cannot be reached ({first_line(e)}); serving what was "
                "last read, keeping the call log's new entries until it is back")
        self.registry_error = str(e)

    def _registry_up(self) -> None:
        if self.registry_error is not None:
            lost = f"; {self.lost_calls} call log entries were dropped" if self.lost_calls else ""
            log(f"tether: the registry is back{lost}")
        self.registry_error = None

    # --- tools/list_changed, both eras ---

    async def _track_legacy_sessions(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if (ctx.method == "notifications/initialized"
                and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS):
            session = ctx.session
            self.legacy_sessions[session] = "session"
            conn = getattr(session, "_connection", None)  # private in mcp 2.3: prune on close
            if conn is not None:
                conn.exit_stack.callback(self.legacy_sessions.pop, session, None)
                if self.sessions is not None:
                    conn.exit_stack.callback(self.sessions.drop, conn)
        return result

    async def watch(self, interval: float = 0.5) -> None:
        """Hear of publications and tell every connected client. On a PostgreSQL registry a
        publication is announced (registry/announce.py) and heard within ``interval``; the
        registry is read again every CATCH_UP seconds anyway, and on each tick otherwise. A
        registry that cannot be reached is logged and retried; the server keeps serving what it
        last read."""
        ear = self.registry.listener()
        self.ear = ear
        looked = time.monotonic()
        while True:
            if ear is None:
                await anyio.sleep(interval)
                look = True
            else:
                look = await anyio.to_thread.run_sync(ear.wait, interval, self.publication,
                                                      abandon_on_cancel=True)
            look = look or time.monotonic() - looked >= CATCH_UP
            if self.pending_calls:
                await anyio.to_thread.run_sync(self.flush_calls)
            if not look:
                continue
            looked = time.monotonic()
            try:
                moved = await anyio.to_thread.run_sync(self.reload)
            except sa.exc.SQLAlchemyError as e:
                self._registry_down(e)
                continue
            except TetherError as e:  # the registry emptied, a policy that no longer loads
                log(f"tether: the registry could not be read again ({e.paragraph()}); serving "
                    "what was last read")
                continue
            if not self.pending_calls:
                self._registry_up()
            moved = await anyio.to_thread.run_sync(self._sweep) or moved or self.told
            if moved:
                self.told = False
                await self.tell_clients()

    def _sweep(self) -> bool:
        """Every serve.health_seconds: closed products opened again once they can be read, and
        products whose table is gone closed (serve/health.py)."""
        try:
            moved = self.health.sweep(self.enforced, self._source_of())
        except Exception as e:  # a check that fails is logged; serving goes on as it was
            log(f"tether: the check of what can be read failed ({type(e).__name__}: {e})")
            return False
        if moved:
            self._renew()
        return moved

    async def tell_clients(self) -> None:
        """tools/list_changed to every session, both protocol eras."""
        await self.bus.publish(ToolsListChanged())
        for session in list(self.legacy_sessions):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that went away
                self.legacy_sessions.pop(session, None)

    def close(self) -> None:
        if self.ear is not None:
            self.ear.close()
        if not self.flush_calls() and self.pending_calls:
            log(f"tether: {len(self.pending_calls)} call log entries could not be written: the "
                "registry cannot be reached")
        self.executor.close()
        self.registry.close()

    # --- transports ---

    async def serve_stdio(self) -> None:
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

        store = TokenStore(self.project.root / self.project.config.serve.tokens_file)
        # one Host/Origin rule for the MCP endpoint and every other route
        allowed = Allowed.for_server(host, allowed_hosts, allowed_origins)
        security = TransportSecuritySettings(**allowed.sdk_settings())
        return self.server.streamable_http_app(
            host=host, transport_security=security, token_verifier=StoreVerifier(store),
            custom_starlette_routes=[lineage_route(self.project.root, allowed)],
            auth=AuthSettings(issuer_url=f"http://{host}:{port}",
                              resource_server_url=f"http://{host}:{port}/mcp",
                              validate_token_resource=False))

    async def serve_http(self, host: str, port: int, allowed_hosts: list[str] | None = None,
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


def _read_by(turn: Turn) -> list[str]:
    """The products a call read (or would have): its plan's and those its definition names."""
    found: list[str] = []
    for step in (turn.call, turn.entry):
        if step is not None:
            found += [*([step.plan.product] if step.plan.product else []),
                      *ToolContext.of(step.definition).products]
    return list(dict.fromkeys(found))


def writers_of(plan: QueryPlan) -> list[str] | None:
    """The roles a write tool's action names (None for a tool that reads)."""
    return plan.action.roles if plan.action is not None else None


def over_products(v: Version) -> bool:
    """Whether the tool takes a product argument over the products a caller reaches."""
    k = kind(v.plan.kind)
    return k.over_listings or k.narrowed == "products"


def _over(v: Version, listings: dict[str, Version]) -> Version:
    """A discovery tool offered over the products whose ``listings`` the caller reaches (where
    its schema lists products): the enum, and the generic listing's catalog of them."""
    prop = v.definition.get("inputSchema", {}).get("properties", {}).get("product", {})
    enum = prop.get("enum")
    if enum is None or set(enum) == set(listings):
        return v
    definition = copy.deepcopy(v.definition)
    kept = [p for p in enum if p in listings]
    if kind(v.plan.kind).over_listings:  # the catalog names only what the caller reaches
        titles = product_titles((p, listings[p].definition.get("title"),
                                 listings[p].definition.get("inputSchema")) for p in kept)
        new = product_param(kept, ROWS_PRODUCT, titles)
    else:
        new = dict(prop, enum=kept)
    definition["inputSchema"]["properties"]["product"] = new
    return dataclasses.replace(v, definition=definition)


LOGGED_ARGUMENTS = 4096
"""Bytes of a call's arguments the call log keeps; beyond that, a prefix and a sha256."""


def _details(turn: Turn, refusal: str | None) -> str | None:
    """What the server read a call as, for `tether learn`: the listing tool that answered (a
    product named to the generic listing: that product's), the product, the arguments it
    interpreted and the values it moved, and a refusal's reason."""
    plan = turn.plan
    found = {"answered_by": turn.call.tool if turn.call is not None else None,
             "product": plan.product if plan is not None else None,
             "interpreted": turn.result.get("interpreted"),
             "moved_values": turn.result.get("moved_values"), "refusal": refusal,
             "write": _write_details(turn.result)}
    kept = {k: v for k, v in found.items() if v}
    text = json.dumps(kept, sort_keys=True, default=str)
    write = kept.get("write")
    if len(text.encode()) > LOGGED_ARGUMENTS and isinstance(write, dict):  # the registry's
        kept["write"] = {k: v for k, v in write.items() if k != "changes"}  # writes keep them
        text = json.dumps(kept, sort_keys=True, default=str)
    if len(text.encode()) > LOGGED_ARGUMENTS:  # names a caller made up: capped like arguments
        kept = {k: v for k, v in kept.items() if k not in ("interpreted", "moved_values")}
        text = json.dumps(kept, sort_keys=True, default=str)
    return text if kept else None


def _write_details(result: dict[str, Any]) -> dict[str, Any] | None:
    """A write tool's call as the log keeps it: the write (its id in the registry's writes),
    whether it was a dry run, applied or a replay, and each row's before and after values."""
    if "action" not in result or "dry_run" not in result:
        return None
    return {k: result.get(k) for k in ("action", "write_id", "dry_run", "applied", "replayed",
                                       "row_count", "changes") if result.get(k) is not None}


def logged_arguments(args: dict[str, Any]) -> str:
    """A call's arguments as the call log stores them: the JSON when it is at most 4 KiB, else
    ``{"truncated": <its first 4000 bytes>, "sha256": ..., "bytes": ...}``."""
    text = json.dumps(args, sort_keys=True, default=str)
    data = text.encode()
    if len(data) <= LOGGED_ARGUMENTS:
        return text
    return json.dumps({"truncated": data[:4000].decode(errors="ignore"),
                       "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})


def log(message: str) -> None:
    """Diagnostics go to stderr: stdout is the MCP channel on stdio."""
    print(message, file=sys.stderr, flush=True)



def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (arguments as given: nested objects and lists opened)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def schema_hint(call: Call) -> str:
    """The arguments a product's listing takes for this caller, as a refused call through the
    generic listing states them: each parameter with its type and its values where it lists
    them (one more turn fixes the call instead of a search for the product's tool)."""
    props = (call.definition.get("inputSchema") or {}).get("properties") or {}
    said = []
    for name, prop in props.items():
        values = enum_of(prop)
        kind = prop.get("type", "string") if isinstance(prop, dict) else "string"
        takes = "one of " + ", ".join(map(str, values[:12])) if values else kind
        said.append(f"{name} ({takes})")
    product = call.plan.product or call.tool
    return f". The arguments {product} takes for you: " + "; ".join(said) if said else ""
