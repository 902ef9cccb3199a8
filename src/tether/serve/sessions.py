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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass


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
