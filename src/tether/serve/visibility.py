"""What each caller reaches: the one answer to "may this caller reach this tool, this product?".

Owns each caller's reachable tools (their role's tool globs and tables together, retired tools
out, the discovery tools over exactly the products whose listing they may call), their index by
name and by product, each definition as the caller sees it (serve/peruser.py: enums narrowed to
their rows, masked columns typed as masked), the validated tool list tools/list returns, and the
version a call runs (current, pinned inside its window, or the current rules under a pinned
shape). tools/list, search, the probe, the generic listing and its enum, `tether tools
--as-user` and the console all read it. Its caches start again when a publication or the policy
in force moves. May call: the publications, the policy in force (its executor, what is closed)
and the kinds' runners (a pinned version's rules).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import mcp_types as types

from tether.context.meta import ToolContext, retired_info
from tether.errors import TetherError
from tether.policy.entitle import Refusal, table_allowed
from tether.policy.model import tool_visible
from tether.registry.store import unnoted
from tether.serve import discovery, peruser
from tether.serve.arguments import validate, without_blanks
from tether.serve.inforce import PolicyInForce
from tether.serve.kinds import Call, SourceFailed, ToolError, Version
from tether.serve.publications import Publications
from tether.serve.runners import runner
from tether.toolgen.discovery import PROBE, ROWS_PRODUCT, product_param, product_titles
from tether.toolgen.kinds import kind
from tether.toolgen.model import QueryPlan


@dataclass
class Index:
    of: list[Version]  # the reachable list it indexes
    listed: list[Version]
    by_name: dict[str, Version]
    listings: dict[str, Version]  # product -> its listing tool
    listing_names: dict[str, Version]  # a reachable product's listing tool, by its name


class Visibility:
    def __init__(self, publications: Publications, policy: PolicyInForce,
                 clock: Callable[[], dt.datetime]):
        self.publications = publications
        self.policy = policy
        self.clock = clock
        self._gen = policy.generation
        self._shaped: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = {}
        self._visible: dict[str, tuple[int, float, list[Version]]] = {}
        self._tools: dict[str, tuple[list[Version], list[types.Tool]]] = {}
        self._indexes: dict[str, Index] = {}

    def _fresh(self) -> None:
        """Nothing computed under another policy in force is kept (new dicts rather than
        cleared ones: a call in flight keeps the ones it holds)."""
        if self._gen != self.policy.generation:
            self._gen = self.policy.generation
            self._shaped, self._visible, self._tools, self._indexes = {}, {}, {}, {}

    def visible(self, user: str) -> list[Version]:
        """The tools in ``user``'s tools/list: what they may reach (:meth:`reachable`) that the
        list holds (serve.dedicated_tools: the rest is read through discovery)."""
        return self.index(user).listed

    def tools(self, user: str) -> list[types.Tool]:
        """``user``'s tools/list, validated once per list (not per request)."""
        shown = self.reachable(user)  # the cached list: rebuilt on a publication or its TTL
        hit = self._tools.get(user)
        if hit is None or hit[0] is not shown:
            hit = self._tools[user] = (shown, [types.Tool.model_validate(v.definition)
                                               for v in self.visible(user)])
        return hit[1]

    def index(self, user: str) -> Index:
        """The caller's reachable tools indexed, once per list (a call looks up by name and
        by product instead of scanning thousands of tools)."""
        shown = self.reachable(user)
        hit = self._indexes.get(user)
        if hit is None or hit.of is not shown:
            # shaped here whatever _compute decided: a publication that moved
            # serve.dedicated_tools between the two never lists an unshaped tool
            listed = [self.shaped(user, v) for v in shown
                      if v.name in self.publications.listed]
            listings: dict[str, Version] = {}
            for v in shown:  # a renamed tool in its retirement window yields to its successor
                if kind(v.plan.kind).listing and v.plan.product and (
                        v.plan.product not in listings or v.served_until is None):
                    listings[v.plan.product] = v
            hit = self._indexes[user] = Index(shown, listed, {v.name: v for v in listed},
                                              listings, {v.name: v for v in listings.values()})
        return hit

    def reachable(self, user: str) -> list[Version]:
        """The tools ``user`` may call, listed or reached through discovery: their role's tool
        globs, only tools whose products the role may read; the listed ones as the user sees
        them (serve/peruser.py: the probe over their products, the enums of filtered products
        narrowed to their rows), the others as published until reached (:meth:`shaped`). Kept
        per user until the next publication or until a narrowed definition is due to be read
        again."""
        self._fresh()
        publication = self.publications.publication  # read first: a reload makes this stale
        hit = self._visible.get(user)
        if hit is not None and hit[0] == publication and time.monotonic() < hit[1]:
            return hit[2]
        shown = self._compute(user)
        self._visible[user] = (publication, time.monotonic() + peruser.TTL, shown)
        return shown

    def _compute(self, user: str) -> list[Version]:
        shown, failed = self._reached_now(user)
        if failed and self.policy.after_failure(failed):  # closed now: the list without them
            return self._reached_now(user)[0]
        return shown

    def _reached_now(self, user: str) -> tuple[list[Version], list[str]]:
        """The tools ``user`` reaches, and the products whose values could not be read for
        them just now (their tools left out)."""
        config = self.policy.project.config
        out = []
        failed: list[str] = []
        now = self.clock()
        for name, v in sorted(self.publications.current.items()):
            routed = kind(v.plan.kind).routed  # a route to the listings, below
            if not routed and not tool_visible(config, user, name, writers_of(v.plan)):
                continue
            if v.served_until is not None and now > v.served_until:  # retired, window over
                continue
            if v.noted_until is not None and now > v.noted_until:  # the change is history now
                v = dataclasses.replace(v, definition=unnoted(v.definition), noted_until=None)
            products = ToolContext.of(v.definition).products
            if not kind(v.plan.kind).discovery and not all(
                    table_allowed(config, user, p) for p in products if p in config.products):
                continue
            if kind(v.plan.kind).discovery:  # listings and metrics: see index, shaped()
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
        return [over(v, readable) if over_products(v) else v for v in out
                if readable or not kind(v.plan.kind).routed], failed

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's published input schema, for the SDK's header validation: looked up by name
        instead of the SDK building a whole tools/list on every call (not per caller: it is
        the schema before narrowing, whose parameters are the same for everyone)."""
        v = self.publications.current.get(name)
        schema = v.definition.get("inputSchema") if v is not None else None
        return schema if isinstance(schema, dict) else None

    def shaped(self, user: str, v: Version) -> Version:
        """``v`` as ``user`` sees it (serve/peruser.py). Listed tools are shaped when the list
        is built; a tool reached only through discovery, when it is reached: a list of
        thousands of products costs nothing until one is read."""
        self._fresh()
        try:
            definition = peruser.shaped(self.policy.executor, user, v.definition, v.plan,
                                        self._shaped)
        except TetherError:  # the source failed reading the caller's values: say so, no text
            raise SourceFailed(f"{v.plan.product or v.name}: its values could not be read for "
                               "you just now (the source failed); try again") from None
        return v if definition is v.definition else dataclasses.replace(v, definition=definition)

    def shaped_or_none(self, user: str, v: Version) -> Version | None:
        """Shaped, or left out of search when its values cannot be read (never unshaped)."""
        try:
            return self.shaped(user, v)
        except ToolError:
            return None

    def listing_for(self, user: str, product: str) -> Version | None:
        """The listing tool of ``product`` as ``user`` reaches it (None: none they may call)."""
        found = self.index(user).listings.get(product)
        return None if found is None else self.shaped(user, found)

    # --- the version a call runs ---

    def version_for(self, user: str, name: str, pin: Any) -> Version:
        index = self.index(user)
        shown = index.by_name
        if name not in shown and name in index.listing_names:
            # a product's own tool, mounted in a session or not: its product is reachable
            shown = {name: self.shaped(user, index.listing_names[name])}
        if name not in shown:
            self._not_reached(user, name)
        if pin is None or str(pin) == shown[name].version:
            return shown[name]
        entry = self.publications.history.get((name, str(pin)))
        current = self.publications.current[name].version
        if entry is None:
            raise ToolError(f"{name} has no version {pin}; the current version is {current}")
        if entry.served_until is not None and self.clock() > entry.served_until:
            raise ToolError(f"{name}@{pin} was retired on {entry.served_until:%Y-%m-%d}; "
                            f"use {name}@{entry.successor} (current: {current})")
        if over_products(entry):  # over the caller's products, as the current
            return over(entry, self.index(user).listings)
        pinned = self.shaped(user, entry)
        rules = runner(entry.plan.kind)
        if rules is not None and rules.pinned is not None:  # a shape, never a permission
            return rules.pinned(pinned, shown[name])
        return pinned

    def _not_reached(self, user: str, name: str) -> NoReturn:
        """A tool the caller does not reach: retired, closed just now, or unknown to them."""
        gone = self.publications.current.get(name)
        if (gone is not None and gone.served_until is not None
                and tool_visible(self.policy.project.config, user, name)):
            info = retired_info(gone.definition) or {}
            raise ToolError(f"{name} was retired on {gone.served_until:%Y-%m-%d} "
                            f"({info.get('reason', 'no longer served')})")
        closed = self._closed_tool(user, name)
        raise ToolError(closed or f"unknown tool {name[:100]!r}")

    def _closed_tool(self, user: str, name: str) -> str | None:
        """Why a tool the caller would reach is closed to them just now (its products), if so."""
        products = self._guarded(user, name)
        return None if products is None else self.policy.closed_message(user, products)

    def _guarded(self, user: str, name: str) -> list[str] | None:
        """The products a tool the caller would reach reads (None: not such a tool)."""
        v = self.publications.current.get(name)
        if v is None or not tool_visible(self.policy.enforced.config, user, name,
                                         writers_of(v.plan)):
            return None
        return ToolContext.of(v.definition).products or (
            [v.plan.product] if v.plan.product else [])

    def reopen(self, user: str, name: str) -> bool:
        """A call to a tool closed to the caller: its products checked again (at most once a
        moment, serve/health.py); True when they can be read now and the call may go on."""
        products = self._guarded(user, name)
        if not products or self.policy.closed_message(user, products) is None:
            return False
        return self.policy.reopen(products) and self.policy.closed_message(
            user, products) is None

    def call_of(self, user: str, entry: Version, args: dict[str, Any]) -> Call:
        """The call to execute: the tool's own, or for the generic listing, the named product's
        listing tool as this caller reaches it, with the arguments given for it (validated,
        refused and answered exactly as that tool's would be). A product the caller does not
        reach is unknown to the probe as to the generic listing."""
        if kind(entry.plan.kind).narrowed == "products":
            product = str(args.get("product"))
            if product in self.policy.project.config.products and product not in self.index(
                    user).listings:
                self.refuse_unreached(user, product)
        if not kind(entry.plan.kind).over_listings:
            return Call(user, entry.name, entry.version, entry.definition, entry.plan, args)
        validate(entry.definition, without_blanks(
            Call(user, entry.name, entry.version, entry.definition, entry.plan, args)).args)
        product = str(args.get("product"))
        listing = self.listing_for(user, product)
        if listing is None:
            self.refuse_unreached(user, product)
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
                or name in self.policy.project.config.products):
            return args, None
        listing = self.index(user).listing_names.get(name)
        if listing is None or not listing.plan.product:
            return args, None
        return ({**args, "product": listing.plan.product},
                {"given": name, "product": listing.plan.product})

    def refuse_unreached(self, user: str, product: str) -> NoReturn:
        """A product the caller does not reach: closed just now (what failed), denied by the
        role's tables (a refusal that says so), else unknown to them (no listing tool they may
        call)."""
        closed = self.policy.closed_message(user, [product])
        if closed is not None and table_allowed(self.policy.enforced.config, user, product):
            raise ToolError(closed)
        config = self.policy.project.config
        if product in config.products and not table_allowed(config, user, product):
            refusal = Refusal("denied_table", f"your role may not read {product}")
            raise ToolError(refusal.paragraph(), refusal=refusal.meta())
        raise ToolError(discovery.unknown_product(product))


def arguments_inside(entry: Version, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """For the generic listing, the names given beside ``product`` and ``arguments`` (a
    flattened call: ``{"product": "box", "limit": 5}``): read inside ``arguments``, and which
    they were (the result says so). The product's own tool then takes, interprets or refuses
    each as if it had been written there; a name given both ways with two values is refused."""
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


def writers_of(plan: QueryPlan) -> list[str] | None:
    """The roles a write tool's action names (None for a tool that reads)."""
    return plan.action.roles if plan.action is not None else None


def over_products(v: Version) -> bool:
    """Whether the tool takes a product argument over the products a caller reaches."""
    k = kind(v.plan.kind)
    return k.over_listings or k.narrowed == "products"


def over(v: Version, listings: dict[str, Version]) -> Version:
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
