"""Session tools: a product a caller finds (find_data_for_question), explains
(explain_data_product) or reads by name (rows_from_data_product) joins that session's tools/list
as its own listing tool, so that the next turn calls it by name with its own schema instead of
guessing through the generic listing.

The list stays within ``serve.tool_list_token_budget``: the caller's base list (governed metrics,
the discovery tools, any dedicated tools) never leaves; mounted products do, least recently used
first (a call to one, or finding it again, counts as use). A session is the handshake-era
connection (stdio, or HTTP with an Mcp-Session-Id); at protocol 2026-07-28, which has no
sessions, the caller's own list is the session (shared by their connections). A client that
ignores the notification loses nothing: ``rows_from_data_product`` still reads every product.
At 2026-07-28 the SDK's listen bus tells every listener of any change (it carries no user), so
every client of that era lists again and gets its own list back.

Owns each session's mounted products (:class:`SessionTools`), the caller's base list's size in
tokens (:class:`SessionList`), and who hears that a list changed (:class:`Clients`: the listen
bus for 2026-07-28, each 2025-11-25 session by its connection). May call: visibility (what the
caller reaches, shaped) and the SDK's sessions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tether.serve.kinds import Version
from tether.serve.visibility import Visibility
from tether.toolgen.discovery import ROWS_KIND, SEARCH_KIND
from tether.toolgen.probe import PROBE_KIND
from tether.toolgen.tokens import tool_tokens


@dataclass(frozen=True)
class Mount:
    product: str
    tool: str
    tokens: int


class SessionTools:
    """Each session's mounted products, least recently used first."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._by_session: dict[Hashable, OrderedDict[str, Mount]] = {}

    def tools(self, session: Hashable) -> list[str]:
        """The mounted tools' names, sorted (a list's order stays the same while it holds the
        same tools: prompt caches stay warm)."""
        return sorted(m.tool for m in self._by_session.get(session, {}).values())

    def tokens(self, session: Hashable) -> int:
        return sum(m.tokens for m in self._by_session.get(session, {}).values())

    def touch(self, session: Hashable, tool: str) -> None:
        """A mounted tool used: the last to leave."""
        mounted = self._by_session.get(session)
        for product, m in list((mounted or {}).items()):
            if m.tool == tool:
                mounted.move_to_end(product)  # type: ignore[union-attr]

    def mount(self, session: Hashable, m: Mount, base_tokens: int) -> bool:
        """Add ``m`` (or mark it used), evicting the least recently used mounted products until
        the whole list fits the budget; whether the list changed. A product that alone would
        not fit beside the base list is not mounted."""
        mounted = self._by_session.setdefault(session, OrderedDict())
        if m.product in mounted and mounted[m.product].tool == m.tool:
            mounted.move_to_end(m.product)
            return False
        mounted.pop(m.product, None)  # its tool renamed by a publication: mounted again
        if base_tokens + m.tokens > self.budget:
            return False
        while mounted and base_tokens + self.tokens(session) + m.tokens > self.budget:
            mounted.popitem(last=False)
        mounted[m.product] = m
        return True

    def drop(self, session: Hashable) -> None:
        """A session that ended."""
        self._by_session.pop(session, None)


class Clients:
    """Who hears that the tool list changed: every 2026-07-28 listener through the SDK's
    listen bus, and each 2025-11-25 session, tracked from its handshake to its end."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.legacy: dict[Any, str] = {}
        self.on_end: list[Any] = []  # what else a session's end drops (its mounted tools)

    async def track(self, ctx: Any, call_next: Any) -> Any:
        """Middleware: a 2025-11-25 session, from its notifications/initialized."""
        result = await call_next(ctx)
        if (ctx.method == "notifications/initialized"
                and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS):
            session = ctx.session
            self.legacy[session] = "session"
            conn = getattr(session, "_connection", None)  # private in mcp 2.3: prune on close
            if conn is not None:
                conn.exit_stack.callback(self.legacy.pop, session, None)
                for drop in self.on_end:
                    conn.exit_stack.callback(drop, conn)
        return result

    async def tell(self) -> None:
        """tools/list_changed to every session, both protocol eras."""
        await self.bus.publish(ToolsListChanged())
        for session in list(self.legacy):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that went away
                self.legacy.pop(session, None)


class SessionList:
    """The session tools of one server: what each session has mounted, as its caller reaches
    it now, within the token budget beside the caller's base list."""

    def __init__(self, visibility: Visibility, clients: Clients, budget: int | None):
        self.visibility = visibility
        self.clients = clients
        self.sessions = SessionTools(budget) if budget is not None else None
        self._base_tokens: dict[str, tuple[list[Version], int]] = {}
        if self.sessions is not None:
            clients.on_end.append(self.sessions.drop)

    @staticmethod
    def session(ctx: Any, user: str) -> Any:
        """The session a request belongs to: its handshake-era connection (each request has a
        ServerSession of its own over it; the connection is private in mcp 2.3), else
        (protocol 2026-07-28 has no sessions) the caller."""
        conn = getattr(getattr(ctx, "session", None), "_connection", None)
        legacy = getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS
        return conn if legacy and conn is not None else ("user", user)

    def tools(self, session: Any, user: str) -> list[Version]:
        """The products mounted in ``session``, as ``user`` reaches them now (one that left
        their reach since is left out)."""
        if self.sessions is None:
            return []
        index = self.visibility.index(user)
        shaped = [self.visibility.shaped_or_none(user, index.listing_names[n])
                  for n in self.sessions.tools(session)
                  if n in index.listing_names and n not in index.by_name]
        return [v for v in shaped if v is not None]  # one unreadable just now: left out

    def _list_tokens(self, user: str) -> int:
        """The caller's base list's tokens (what never leaves)."""
        listed_now = self.visibility.visible(user)
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
        session = self.session(ctx, user)
        self.sessions.touch(session, entry.name)
        if entry.plan.kind == SEARCH_KIND.name:
            product = next((m["name"] for m in result.get("matches") or []
                            if m.get("kind") == "product"), None)
        elif entry.plan.kind in (PROBE_KIND.name, ROWS_KIND.name):
            # explained, or read by name through the generic listing: its own tool next
            product = str(args.get("product") or "") or None
        else:
            return
        index = self.visibility.index(user)
        listing = index.listings.get(product) if product else None
        if listing is None or listing.name in index.by_name:
            return  # unknown, or already in the list
        shaped = self.visibility.shaped(user, listing)
        mount = Mount(str(product), shaped.name, tool_tokens(shaped.definition))
        if not self.sessions.mount(session, mount, self._list_tokens(user)):
            return
        if isinstance(session, tuple):
            await self.clients.bus.publish(ToolsListChanged())  # 2026-07-28: the caller lists
        else:
            await ctx.session.send_tool_list_changed()
