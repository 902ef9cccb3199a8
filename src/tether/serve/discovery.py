"""Discovery on the server: search what a caller may read, describe how to read a product, and
run the generic listing as that product's own listing tool.

Everything here reads the caller's tool definitions as the server already shapes them for that
caller (serve/peruser.py: only the products their role may read, enums narrowed to their rows,
restricted columns never present), so search and describe see exactly what a dedicated tool
would show them, and no second policy exists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tether.context.meta import Evidence, ToolContext, enum_of
from tether.context.names import spaced
from tether.serve.kinds import Runner, register
from tether.toolgen.discovery import PROBE, ROWS, SEARCH_LIMIT
from tether.toolgen.kinds import kind

if TYPE_CHECKING:
    from tether.config import TetherConfig
    from tether.serve.executor import Answered
    from tether.toolgen.model import QueryPlan

WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    "a an and any are as at be by can did do does each for from get give had has have how i in "
    "is it its list many me much my of on or our per please show tell than that the their them "
    "there these this those to us was we were what when where which who whose why will with "
    "you your all".split()
    # the words every definition here uses of itself, which tell one product from none
    + "data product row record table tool call result field".split())
WEIGHTS = {"value": 4.0, "name": 3.0, "term": 3.0, "column": 2.0, "text": 1.0}
"""How much a question word found in each kind of field counts (one field per word: the best)."""


class _Shaped(Protocol):
    """What discovery reads of one served tool (the server's Version satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def definition(self) -> dict[str, Any]: ...
    @property
    def plan(self) -> QueryPlan: ...


def stem(word: str) -> str:
    """A plural's singular, roughly and the same way on both sides of a comparison."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> set[str]:
    """The stemmed words of ``text``, names split into theirs (``ShelfOfParts``: shelf, of, parts;
    context/names.py)."""
    return {stem(w) for w in WORD.findall(spaced(text).lower()) if w not in STOP and len(w) > 1}


@dataclass
class Doc:
    """One searchable product or metric: each word with the fields it was found in."""

    name: str
    kind: str
    call: str
    with_: dict[str, Any]
    summary: str
    fields: dict[str, list[tuple[float, str]]]
    arguments: dict[str, Any] | None = None  # a product's: what its rows take, as this caller

    def add(self, text: str, kind: str, why: str) -> None:
        weight = WEIGHTS[kind]
        for w in words(text):
            found = self.fields.setdefault(w, [])
            if (weight, why) not in found:
                found.append((weight, why))

    def hit(self, word: str) -> tuple[float, list[str]]:
        """The word's best weight here and why it is here (its best field, and every name,
        term or value it is, a few at most)."""
        found = self.fields.get(word)
        if not found:
            return 0.0, []
        best = max(w for w, _ in found)
        return best, [why for w, why in sorted(found, key=lambda t: -t[0])
                      if w == best or w >= WEIGHTS["name"]][:3]


def _doc(v: _Shaped, listed: bool, config: TetherConfig) -> Doc:
    d = v.definition
    metric = not kind(v.plan.kind).listing  # a metric: found and called by its own name
    product = v.plan.product or v.name
    name = v.name if metric else product
    call, with_ = (v.name, {}) if listed else (ROWS, {"product": product})
    description = str(d.get("description", ""))
    doc = Doc(name, "metric" if metric else "product", call, with_,
              description.split(". ")[0].rstrip(".") + "." if description else "", {},
              None if metric else (d.get("inputSchema") or {}).get("properties", {}))
    doc.add(name.replace("_", " "), "name", f"name {name}")
    doc.add(v.name.replace("_", " "), "name", f"tool {v.name}")
    doc.add(str(d.get("title") or ""), "text", "title")
    doc.add(description, "text", "description")
    props = (d.get("inputSchema") or {}).get("properties", {})
    for param, prop in props.items():
        doc.add(param.replace("_", " "), "column", f"argument {param}")
        doc.add(str(prop.get("description", "")), "text", f"meaning of {param}")
        for value in enum_of(prop) or []:
            text = str(value)
            if len(text) > 1 and not text.isdigit():
                doc.add(text, "value", f"value {text!r} of {param}")
    rows = ((d.get("outputSchema") or {}).get("properties", {}).get("rows") or {})
    for column, prop in ((rows.get("items") or {}).get("properties") or {}).items():
        doc.add(column.replace("_", " "), "column", f"column {column}")
        doc.add(str(prop.get("description", "")), "text", f"meaning of {column}")
    for term in ToolContext.of(d).definitions:
        g = config.glossary.get(term)
        doc.add(term, "term", f"glossary term {term!r}")
        for synonym in (g.synonyms if g else []):
            doc.add(synonym, "term", f"glossary synonym {synonym!r} of {term!r}")
    return doc


def corpus(reachable: Sequence[_Shaped], listed: set[str] | frozenset[str],
           config: TetherConfig) -> list[Doc]:
    """One document per product (its listing tool) and per metric the caller may reach."""
    return [_doc(v, v.name in listed, config) for v in reachable
            if kind(v.plan.kind).searchable]


def search(docs: list[Doc], question: str, limit: int = SEARCH_LIMIT) -> list[dict[str, Any]]:
    """The documents that match the question's words, best first (ties by name)."""
    asked = words(question)
    scored = []
    for doc in docs:
        hits = [doc.hit(w) for w in asked if w in doc.fields]
        if not hits:
            continue
        score = sum(weight for weight, _ in hits)
        why = sorted({reason for _, reasons in hits for reason in reasons})
        scored.append((-score, doc.name, doc, why))
    scored.sort(key=lambda t: (t[0], t[1]))
    out = [{"name": doc.name, "kind": doc.kind, "score": -neg, "matched": why,
            "summary": doc.summary, "call": doc.call, "with": doc.with_}
           for neg, _, doc, why in scored[:limit]]
    if scored and scored[0][2].arguments is not None and scored[0][2].call == ROWS:
        # the best product's arguments come with it: a model that goes straight to the rows
        # (as the real one did) need not guess them
        out[0]["arguments"] = scored[0][2].arguments
    return out


def found(v: _Shaped, docs: list[Doc], args: dict[str, Any]) -> Answered:
    from tether.serve.executor import Answered

    question = str(args.get("question") or "")
    limit = int(args.get("limit") or SEARCH_LIMIT)
    matches = search(docs, question, limit)
    result = {"question": question, "matches": matches, "row_count": len(matches)}
    return Answered(result, Evidence(tool=v.name, version=v.version))


def query_with(listing: _Shaped | None, listed: bool) -> dict[str, Any] | None:
    """How the probe tells a caller to read a product's rows: the tool and its arguments."""
    if listing is None:
        return None
    schema = listing.definition.get("inputSchema") or {}
    out: dict[str, Any] = {"tool": listing.name if listed else ROWS}
    if not listed:
        out["product"] = listing.plan.product
    out["arguments"] = schema.get("properties", {})
    return out


def unknown_product(product: str) -> str:
    return (f"unknown data product {product[:100]!r} (or not one you may read); "
            f"find_data_for_question finds products by a question's words, and {PROBE} "
            "describes one")


def search_words(plan: QueryPlan, result: dict[str, Any]) -> str:
    """The whole answer: the matches, best first, and what the best one takes."""
    matches = result.get("matches") or []
    if not matches:
        return ("Nothing you may read matches these words; try other words (what a column "
                "means, a value, a glossary term).")
    named = []
    for m in matches:
        how = m.get("call", "")
        if m.get("with"):
            how += " with " + ", ".join(f"{k}={v}" for k, v in m["with"].items())
        named.append(f"{m.get('name')} ({m.get('kind')}; call {how})")
    best = matches[0]
    why = "; ".join(best.get("matched") or [])[:300]
    takes = ""
    if best.get("arguments") is not None:
        takes = (f" Its rows take the arguments {', '.join(best['arguments']) or 'none'} "
                 "(schemas under matches[0].arguments), inside `arguments`.")
    return (f"{len(matches)} match{'es' if len(matches) != 1 else ''}, best first: "
            f"{'; '.join(named)}. The best matched on {why}.{takes}")


RUNNER = register(Runner("search", None, opening=search_words, whole=True,
                         answer_here=lambda server, user, entry, args: server.search(
                             user, entry, args)))
