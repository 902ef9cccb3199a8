"""Discovery: the tools that keep a tool list bounded at any warehouse size, and which tools a
tools/list holds.

Three fixed tools stand in for the products that get no dedicated tool: a ranked search over
what the caller may read (`find_data_for_question`), the probe that describes one product and
the arguments its rows take (`explain_data_product`), and one grounded listing over any product
(`rows_from_data_product`), whose arguments the server validates exactly as the product's own
listing tool would. Which products keep a dedicated tool is `serve.dedicated_tools`; the list
never exceeds `serve.tool_list_token_budget`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from tether.config import TetherConfig
from tether.context.periods import resolve
from tether.errors import ConfigError
from tether.toolgen.kinds import Kind, kind, register
from tether.toolgen.model import READ_ONLY, GeneratedTool, QueryPlan, Sentence, join_sentences
from tether.toolgen.plan import fiscal_calendar, words_calendar
from tether.toolgen.shared import LISTING_PARAMS, Ctx, tool_meta
from tether.toolgen.tokens import tool_tokens

SEARCH = "find_data_for_question"
PROBE = "explain_data_product"
ROWS = "rows_from_data_product"
PRODUCT_ENUM_MAX = 50
"""Up to this many products, the discovery tools list them as an enum; beyond, the name is a
string the server checks (3,000 names would be a catalog resent on every turn)."""
SEARCH_LIMIT = 5


def product_param(products: list[str], what: str,
                  titles: dict[str, str] | None = None) -> dict[str, Any]:
    """The `product` argument of a discovery tool: an enum while the list is short, and with
    ``titles`` (product -> the question its listing tool answers) a one-line catalog, so a
    model that reads a product by name knows what each holds without a search (the deferred
    definitions a long list cannot carry: beyond PRODUCT_ENUM_MAX, names and catalog go)."""
    if len(products) > PRODUCT_ENUM_MAX:
        return {"type": "string", "description": what}
    said = [f"{p}: {titles[p]}" for p in products if titles and titles.get(p)]
    if said:
        what = f"{what} Products: {'; '.join(said)}"
    return {"type": "string", "enum": products, "description": what}


ROWS_PRODUCT = f"The data product ({SEARCH} finds it)."


SHAPING = frozenset(LISTING_PARAMS)
"""A listing's arguments the catalog does not name per product: those that shape its result
(every product has them), and ``period``, which every product with a time column takes and the
generic listing's description names once: named beside each product, a small model set it to
the day or quarter of its prompt where the question asked for every row."""


def product_titles(pairs: Iterable[tuple[str | None, Any, dict[str, Any] | None]]
                   ) -> dict[str, str]:
    """Each product's catalog line, from (product, its listing tool's title, its input schema)
    triples: the question it answers, then the arguments that pick its rows (as the caller's own
    tool takes them). A model reading a product by name then knows what to pass without a
    search: the arguments were what it guessed wrong when the catalog named none."""
    out = {}
    for p, t, schema in pairs:
        if not (p and t and str(t).strip()):
            continue
        picks = [a for a in ((schema or {}).get("properties") or {}) if a not in SHAPING]
        out[p] = str(t).strip() + (f" (arguments: {', '.join(picks)})" if picks else "")
    return out


Meta = Callable[[str, list[Sentence], dict[str, str], dict[str, Any]], dict[str, Any]]
"""Provenance for a tool: (kind, sentences, sentence -> source, limits) -> ``_meta``."""


def search_tool(has_glossary: bool, meta: Meta) -> GeneratedTool:
    """`find_data_for_question`: which products and metrics answer a question's words."""
    what = "names, descriptions, column meanings, values"
    if has_glossary:
        what = "names, descriptions, glossary terms and synonyms, column meanings, values"
    sentences = [
        Sentence(text=f"Finds the data products and metrics that can answer a question, ranked "
                 f"by its words against their {what}; only what you may read is searched.",
                 source="schema"),
        Sentence(text="Read-only; at most 20 rows (matches) per call (limit), no pagination.",
                 source="policy"),
        Sentence(text="Each match says which tool to call next and with what; call "
                 f"{PROBE} for a product's arguments before {ROWS}.", source="schema"),
    ]
    description, sources = join_sentences(sentences)
    props = {"question": {"type": "string", "minLength": 1,
                          "description": "The question, in the words it was asked."},
             "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": SEARCH_LIMIT,
                       "description": "Most matches returned."}}
    match = {"type": "object", "properties": {
        "name": {"type": "string"}, "kind": {"type": "string"},
        "score": {"type": "number", "description": "Relevance, higher is better; unit: none."},
        "matched": {"type": "array", "items": {"type": "string"}},
        "summary": {"type": "string"}, "call": {"type": "string"},
        "with": {"type": "object", "additionalProperties": {"type": "string"},
                 "description": "The arguments to call it with."},
        "arguments": {"type": "object", "additionalProperties": True,
                      "description": "The best product's own arguments (its JSON Schemas), "
                      "to pass inside rows_from_data_product's arguments."}}}
    out = {"type": "object", "properties": {
        "question": {"type": "string"},
        "matches": {"type": "array", "items": match},
        "row_count": {"type": "integer", "description": "Unit: matches."}}}
    return GeneratedTool(
        name=SEARCH, title="Which data answers this question?", description=description,
        input_schema={"type": "object", "properties": props, "additionalProperties": False,
                      "required": ["question"]},
        output_schema=out, annotations=dict(READ_ONLY),
        meta=meta("search", sentences, sources, {"max_rows": 20, "pagination": "none"}),
        plan=QueryPlan(kind="search"))


def rows_tool(products: list[str], meta: Meta,
              titles: dict[str, str] | None = None) -> GeneratedTool:
    """`rows_from_data_product`: one grounded listing over any product."""
    sentences = [
        Sentence(text="Reads the rows of one data product with the filters, period, totals "
                 "(count_by, sum_and_average_of) and policy of its own listing tool; every "
                 "result states its window, units and as_of.", source="schema"),
        Sentence(text="Read-only; at most the product's limit a page (200 rows unless it says "
                 "less), the rest through next_cursor.", source="policy"),
        Sentence(text=f"Its arguments are the product's own ({PROBE} lists them); the server "
                 "checks them as that product's tool would.", source="schema"),
        Sentence(text="A product with a time column also takes period, which bounds that "
                 "column; leave period out for every row.", source="schema"),
    ]
    description, sources = join_sentences(sentences)
    props = {
        "product": product_param(products, ROWS_PRODUCT, titles),
        "arguments": {"type": "object", "default": {},
                      "description": "The product's arguments by name ({} for the first "
                      "page of every row)."},
    }
    out = {"type": "object", "properties": {
        "rows": {"type": "array", "items": {
            "type": "object", "additionalProperties": True,
            "description": "The product's columns, as query_with describes them."}},
        "row_count": {"type": "integer", "description": "Unit: rows."},
        "total_rows": {"type": "integer", "description": "All matching rows; unit: rows."},
        "next_cursor": {"type": ["string", "null"]},
        "as_of": {"type": ["string", "null"], "format": "date-time"}}}
    return GeneratedTool(
        name=ROWS, title="Rows of any data product", description=description,
        input_schema={"type": "object", "properties": props, "additionalProperties": False,
                      "required": ["product"]},
        output_schema=out, annotations=dict(READ_ONLY),
        meta=meta("rows", sentences, sources, {"max_rows": None, "pagination": "cursor"}),
        plan=QueryPlan(kind="rows"))


def _meta_over_every_product(ctx: Ctx) -> Meta:
    products = sorted(ctx.profiles)

    def meta(kind: str, sentences: list[Sentence], sources: dict[str, str],
             limits: dict[str, Any]) -> dict[str, Any]:  # as the probe's: over every product
        return tool_meta(ctx, kind, sentences, sources, products, canonical_ids={},
                         deprecated={}, source_of_truth={}, limits=limits, definitions=[],
                         upstream=False)
    return meta


def _search(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [search_tool(bool(ctx.config.glossary), _meta_over_every_product(ctx))]


def _rows(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    listings = [t for t in before if kind(t.plan.kind).listing and t.plan.product]
    products = sorted(str(t.plan.product) for t in listings)
    titles = product_titles((t.plan.product, t.title, t.input_schema) for t in listings)
    return [rows_tool(products, _meta_over_every_product(ctx), titles)]


SEARCH_KIND = register(Kind("search", generate=_search, routed=True, discovery=True))
ROWS_KIND = register(Kind("rows", generate=_rows, routed=True, discovery=True,
                         over_listings=True))


GROUNDED = ("Grounded tools over governed data products. Results carry as_of and units; "
            "identifiers name their scheme.")


def instructions(route: str, session_tools: bool, calendar: str = "") -> str:
    """The server's instructions (the initialize result): how its list is reached, and what the
    project's quarter and year words mean (``calendar``: :func:`calendar_sentence`). Where some
    products have no tool of their own, the way to them is said first, since a client that shows
    these instructions to its model is the one place to say it once for every tool."""
    tail = f" {calendar}" if calendar else ""
    if route == "dedicated":
        return GROUNDED + tail
    joins = (" A product it finds joins your tool list (tools/list_changed): call that tool."
             if session_tools else "")
    return (f"Some data products have no tool of their own here. For a question that no listed "
            f"metric answers exactly, call {SEARCH} with the question first; each match names the "
            f"tool and arguments to call next.{joins}{tail}")


def calendar_sentence(config: TetherConfig, today: dt.date) -> str:
    """Once for every tool: the project's quarter and year words are fiscal (every listing reads
    them so, and each metric's own calendar is said in its period), and how to ask for calendar
    ones. Empty where they are calendar quarters."""
    fiscal = fiscal_calendar(config, words_calendar(config))
    if fiscal is None or fiscal.start_month == 1:
        return ""
    year = resolve("this_year", today, fiscal)
    assert year is not None
    return (f"Quarter and year words (this_quarter, last_year, QTD, YTD) mean fiscal quarters "
            f"and years in every tool unless its period says otherwise ({year.label} = "
            f"{year.start}..{year.end - dt.timedelta(days=1)}); write 'last calendar quarter', "
            f"'calendar YTD' or yyyy-Qn for calendar ones.")


# --- which tools a tools/list holds --------------------------------------------------------------

Setting = Literal["all", "none"] | list[str] | None


@dataclass(frozen=True)
class Listed:
    """The tools a tools/list holds (before each caller's role and entitlement), and why."""

    names: frozenset[str]
    route: Literal["dedicated", "discovery", "mixed"]
    tokens: int
    budget: int
    reason: str = ""  # why the list is this one, in words (tether tools and build print it)

    def __contains__(self, name: object) -> bool:
        return name in self.names


def listed(config: TetherConfig, tools: Iterable[tuple[str, dict[str, Any], QueryPlan]],
           setting: Setting = None) -> Listed:
    """The tool names served in tools/list for ``setting`` (else ``serve.dedicated_tools``):
    every governed metric; the products with a dedicated listing tool (all, none, or those
    named; by default all while the whole list fits the budget, otherwise none); and the probe,
    plus the search and the generic listing whenever some product has no dedicated tool. A
    list over ``serve.tool_list_token_budget`` is a ConfigError (fails closed)."""
    budget = config.serve.tool_list_token_budget
    chosen = config.serve.dedicated_tools if setting is None else setting
    tools = list(tools)
    listings = {p.product: n for n, _d, p in tools if kind(p.kind).listing and p.product}
    listing_names = {n for n, _d, p in tools if kind(p.kind).listing}  # a renamed one's too
    definitions = {n: d for n, d, _p in tools}
    sizes: dict[str, int] = {}

    def size(name: str) -> int:  # tokenised when needed: a list over budget stops counting
        if name not in sizes:
            sizes[name] = tool_tokens(definitions[name])
        return sizes[name]

    def fits(names: set[str]) -> bool:
        total = 0
        for n in sorted(names):
            total += size(n)
            if total > budget:
                return False
        return True

    discovery_only = {n for n, _d, p in tools if kind(p.kind).routed}
    everything = {n for n in definitions if n not in discovery_only}
    route: Literal["dedicated", "discovery", "mixed"]
    if chosen == "all" or (chosen is None and fits(everything)):
        names, route = everything, "dedicated"
        reason = ("every product has its own tool (serve.dedicated_tools: all)" if chosen == "all"
                  else "every product has its own tool: the whole list fits "
                  f"serve.tool_list_token_budget ({budget:,} tokens)")
    else:
        wanted = [] if chosen in (None, "none") else list(chosen)
        dedicated = set()
        for want in wanted:
            name = listings.get(want, want if want in listings.values() else None)
            if name is None:
                raise ConfigError(
                    f"serve.dedicated_tools names {want!r}, which is neither a product nor a "
                    "listing tool of this project.", where="tether.yaml",
                    hint=f"Name products from products: ({', '.join(sorted(listings)[:8])}"
                    f"{', ...' if len(listings) > 8 else ''}).")
            dedicated.add(name)
        names = {n for n in definitions if n not in listing_names or n in dedicated}
        route = "mixed" if dedicated else "discovery"
        through = f"through {SEARCH}, {PROBE} and {ROWS}"
        if chosen is None:
            reason = (f"discovery only: a tool for each of the {len(listings):,} products "
                      f"would take over serve.tool_list_token_budget ({budget:,} tokens), so "
                      f"every product is reached {through}")
        elif route == "discovery":
            reason = (f"discovery only, as serve.dedicated_tools (or --dedicated-tools) says: "
                      f"every product is reached {through}")
        else:
            reason = (f"{len(dedicated)} of {len(listings):,} products with their own tool "
                      f"(serve.dedicated_tools); the others are reached {through}")
    total = sum(size(n) for n in names)
    if total > budget:
        raise ConfigError(
            f"the tool list would hold {total:,} tokens ({len(names)} tools), over "
            f"serve.tool_list_token_budget ({budget:,}).", where="tether.yaml",
            hint="Name fewer products in serve.dedicated_tools (the rest stay reachable through "
            f"{SEARCH} and {ROWS}), or raise the budget.")
    return Listed(frozenset(names), route, total, budget, reason)
