"""The discovery corpus: what each caller may find (find_data_for_question), the way to a
product's rows the probe offers, and the hints a refused generic listing gives.

Owns each caller's search index, built from the tools they reach as they see them and kept a
while per publication, policy in force and scope (users equal in role and attributes share
one). Answers the kinds the server answers itself (serve/runners.py's Finding: search, the
probe's query_with). May call: visibility (what the caller reaches, shaped) and the discovery
index (serve/discovery.py).
"""

from __future__ import annotations

import time
from typing import Any

from tether.serve import discovery, interpret, peruser
from tether.serve.arguments import validate
from tether.serve.kinds import Answered, Call, ToolError, Version
from tether.serve.visibility import Visibility


class Corpus:
    def __init__(self, visibility: Visibility):
        self.visibility = visibility
        self._docs: dict[tuple[Any, ...], tuple[float, discovery.Index]] = {}

    def index(self, user: str) -> discovery.Index:
        """What ``user`` may find, shaped for them (kept a while per publication and scope)."""
        seen = self.visibility
        key = (seen.publications.publication, seen.policy.generation, user,
               *seen.policy.executor.scope_key(user))
        hit = self._docs.get(key)
        if hit is None or time.monotonic() > hit[0]:
            docs = discovery.corpus([x for v in seen.reachable(user)
                                     if (x := seen.shaped_or_none(user, v)) is not None],
                                    seen.publications.listed.names, seen.policy.project.config)
            hit = self._docs[key] = (time.monotonic() + peruser.TTL, docs)
        return hit[1]

    def search(self, user: str, entry: Version, args: dict[str, Any]) -> Answered:
        validate(entry.definition, args)
        return discovery.found(entry, self.index(user), args)

    def query_with(self, user: str, product: str) -> dict[str, Any] | None:
        """The tool and arguments that read ``product``'s rows, as ``user`` reaches them."""
        try:
            listing = self.visibility.listing_for(user, product)
        except ToolError:
            listing = None  # its values could not be read: no arguments to offer
        return discovery.query_with(listing, listing is not None
                                    and listing.name in self.visibility.publications.listed)

    def taken_elsewhere(self, user: str, call: Call) -> str:
        """For a product read through the generic listing with arguments it does not take: the
        other products this caller reaches whose listing takes each such name (by the
        parameter's name, in any case style), so the next call can name the right product."""
        props = (call.definition.get("inputSchema") or {}).get("properties") or {}
        unknown = {interpret.norm(k): k for k in call.args if k not in props}
        if not unknown:
            return ""
        takers: dict[str, list[str]] = {}
        for product, v in self.visibility.index(user).listings.items():
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

    def products_for_words(self, user: str, args: dict[str, Any]) -> str:
        """For a generic listing called without a product it can read: the products whose
        words match the text given in its arguments (a question, a topic), best first."""
        text = " ".join(str(v) for v in _strings(args))
        if not text.strip():
            return ""
        try:
            matches = discovery.search(self.index(user), text, 3)
        except ToolError:
            return ""
        shown = [{k: v for k, v in m.items() if k != "arguments"} for m in matches]
        return (". For your words, " + discovery.search_words(None, {"matches": shown})
                if matches else "")


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (arguments as given: nested objects and lists opened)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
