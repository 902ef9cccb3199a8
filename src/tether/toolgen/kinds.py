"""Tool kinds, registered: each kind says once how its tools are generated and what every other
part needs to know of it (which products a call reads, whether it is a listing, whether the
tool list carries it only for discovery, how a caller's copy is narrowed).

A kind lives in one module per layer: its generation and plan here in toolgen (listing.py,
metric.py, probe.py, discovery.py, modes.py), its execution and answer sentence in serve
(serve/runners.py registers the runner). Generation must never import serving (layers), so the
two halves meet only in this registry's name. The labeller needs nothing per kind: it reads a
result's evidence, which every kind writes the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tether.toolgen.model import GeneratedTool
    from tether.toolgen.shared import Ctx

Generate = Callable[["Ctx", list["GeneratedTool"]], list["GeneratedTool"]]
"""(context, the tools of the kinds generated before it) -> this kind's tools."""


@dataclass(frozen=True)
class Kind:
    """One kind of tool (a plan's ``kind``)."""

    name: str
    generate: Generate | None = None
    """Its grounded tools; None for a kind only another mode makes (generic's run_sql)."""
    listing: bool = False
    """One product's rows, a tool per product: what rows_from_data_product routes to, and what
    serve.dedicated_tools chooses among."""
    routed: bool = False
    """Reached only by way of discovery (search, the generic listing): the tool list holds it
    only while some product has no dedicated tool, and a caller sees it only if they may call
    some listing."""
    discovery: bool = False
    """Served whatever serve.dedicated_tools says: it keeps every product reachable."""
    narrowed: Literal["values", "products", None] = None
    """How a caller's copy is narrowed: its enums to the values the caller's rows hold, or its
    product argument to the products the caller's role may read."""
    searchable: bool = False
    """Found by find_data_for_question (a product's listing, a metric)."""
    over_listings: bool = False
    """Takes a product argument ranging over the listings the caller may call, and runs that
    product's listing tool with the arguments given for it (the generic listing)."""
    bare: Literal["query", "get"] = "get"
    """What bare mode's one-line description says: "Query <product>." or "Get <tool>."."""


KINDS: dict[str, Kind] = {}
"""Every registered kind, by name, in registration order (the order of generation)."""


def register(kind: Kind) -> Kind:
    """Add a kind (a second kind of the same name is a programming error)."""
    if kind.name in KINDS and KINDS[kind.name] != kind:
        raise ValueError(f"tool kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


def kind(name: str) -> Kind:
    """The registered kind ``name``; a plan of an unknown kind (a registry row written by a
    newer tether, say) gets the traits of none, so it is listed and run by nothing special."""
    return KINDS.get(name) or Kind(name)
