"""Discovery on the server: search what a caller may read, describe how to read a product, and
run the generic listing as that product's own listing tool.

Everything here reads the caller's tool definitions as the server already shapes them for that
caller (serve/peruser.py: only the products their role may read, enums narrowed to their rows,
restricted columns never present), so search and describe see exactly what a dedicated tool
would show them, and no second policy exists.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol

from tether.context.meta import Evidence, ToolContext, enum_of
from tether.context.names import spaced
from tether.serve.kinds import Answered
from tether.serve.runners import Runner, register
from tether.toolgen.discovery import PROBE, ROWS, SEARCH_LIMIT
from tether.toolgen.kinds import kind
from tether.toolgen.shared import LISTING_PARAMS

if TYPE_CHECKING:
    from tether.config import TetherConfig
    from tether.serve.kinds import Answered
    from tether.toolgen.model import QueryPlan

WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    "a an and any are as at be by can did do does each for from get give had has have how i in "
    "is it its list many me much my of on or our per please show tell than that the their them "
    "there these this those to us was we were what when where which who whose why will with "
    "you your all".split()
    # the words every definition here uses of itself, which tell one product from none
    + "data product row record table tool call result field".split())
BOOST = {"name": 8.0, "term": 6.0, "exact": 5.0, "title": 4.0, "column": 3.0, "value": 2.0,
         "text": 1.0}
"""Each field's weight in a document's score (BM25F-style boosts): what a product is called
counts most, then the glossary's words for it, then a value it holds written whole in the
question (``CLOSED_LOST``, ``Run Off``), then its title (one line saying what the whole product
answers: an API operation's summary), then its columns, then a word of one of its values, then
the prose about it. A word the question shares with a product's name outranks the same word as
another product's value."""
RUN = re.compile(r"[A-Za-z0-9]+(?:[_\-./:][A-Za-z0-9]+)*")


def exact(text: str) -> str:
    """A value as one token: its letters and digits, lower case (``CLOSED_LOST``, ``closed
    lost`` and ``Closed-Lost`` are all ``closedlost``)."""
    return "".join(WORD.findall(text.lower()))


def said_whole(question: str) -> set[str]:
    """Every run of one to three of the question's words as one token: what a value written
    whole in it would be (``exact``)."""
    runs = [exact(r) for r in RUN.findall(question)]
    return {"".join(runs[i:i + n]) for n in (1, 2, 3) for i in range(len(runs) - n + 1)
            if n > 1 or runs[i] not in STOP}


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


def tokens(text: str) -> list[str]:
    """The stemmed words of ``text`` in order, repeats kept, names split into theirs
    (``ShelfOfParts``: shelf, of, parts; context/names.py)."""
    return [stem(w) for w in WORD.findall(spaced(text).lower()) if w not in STOP and len(w) > 1]


def words(text: str) -> set[str]:
    """The distinct stemmed words of ``text``."""
    return set(tokens(text))


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
    rows: list[tuple[str, list[str]]] = field(default_factory=list)  # (field, its tokens)

    def add(self, text: str, kind: str, why: str, row: bool = True) -> list[str]:
        """One field of this document: a name, a column, a value, a term or some prose (with
        ``row`` false, only why its words are here, for a field the caller indexes); its
        tokens."""
        weight = BOOST[kind]
        said = tokens(text)
        whole = exact(text)
        # a name or value said whole in a question counts as itself (``hall of fame`` is
        # HallOfFame, ``closed lost`` is CLOSED_LOST): where it is more than its one word
        whole = whole if kind in ("name", "value") and whole and whole not in said else ""
        if said and row:
            self.rows.append((kind, [*said, whole] if whole and kind == "name" else said))
        if whole and kind == "value":
            self.rows.append(("exact", [whole]))
        if whole:
            said = [*said, whole]
        for w in set(said):
            found = self.fields.setdefault(w, [])
            if (weight, why) not in found:
                found.append((weight, why))
        return said

    def hit(self, word: str) -> list[str]:
        """Why the word is here: the fields it was found in, the weightiest first (three at
        most)."""
        found = self.fields.get(word) or []
        return [why for _, why in sorted(found, key=lambda t: -t[0])][:3]


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
    # a product's name and its tool's name: one field
    called = doc.add(name.replace("_", " "), "name", f"name {name}", row=False)
    if v.name != name:
        called += doc.add(v.name.replace("_", " "), "name", f"tool {v.name}", row=False)
    doc.rows.append(("name", called))
    doc.add(str(d.get("title") or ""), "title", "title")
    doc.add(description, "text", "description")
    props = (d.get("inputSchema") or {}).get("properties", {})
    for param, prop in props.items():
        if param in LISTING_PARAMS:
            continue  # every listing's own; their enums name columns, indexed as columns
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


class Index:
    """BM25 over one caller's documents, by SQLite's FTS5: one row per field of each document
    (its name, each column, each value, each term, each piece of prose), so a word's rarity is
    measured over all fields and a short field that holds it counts for more than a long one; a
    document scores, for each of the question's terms, the BM25 of the field that holds it best
    (times the field's boost): a common word repeated in many fields counts once."""

    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        # the words are ours already (split, stemmed, stop words gone): FTS5 splits on spaces
        self._db.execute("CREATE VIRTUAL TABLE f USING fts5(body, doc UNINDEXED, "
                         "kind UNINDEXED, tokenize = 'unicode61')")
        self._db.executemany("INSERT INTO f (body, doc, kind) VALUES (?, ?, ?)",
                             [(" ".join(said), i, kind) for i, d in enumerate(docs)
                              for kind, said in d.rows])

    def scores(self, question: str) -> tuple[set[str], dict[int, float]]:
        """The question's terms and each matching document's score for them (higher is
        better): its words, each run of words said whole (a value of two words, ``Run Off`` or
        ``CLOSED_LOST``, counts as itself where the question says it so) and each two words
        it says together as a phrase."""
        said = tokens(question)
        terms = set(said) | said_whole(question)
        pairs = {f"{a} {b}" for a, b in pairwise(said) if a != b}
        phrases = sorted(terms) + sorted(pairs)
        if not phrases:
            return terms, {}
        out: dict[int, float] = {}
        with self._lock:
            for phrase in phrases:  # each term counts once per document: in its best field
                best: dict[int, float] = {}
                for doc, field_kind, score in self._db.execute(
                        "SELECT doc, kind, -bm25(f) FROM f WHERE f MATCH ?",
                        ('"' + phrase + '"',)):
                    best[doc] = max(best.get(doc, 0.0), BOOST[field_kind] * max(score, 0.0))
                for doc, value in best.items():
                    out[doc] = out.get(doc, 0.0) + value
        return terms, out


def corpus(reachable: Sequence[_Shaped], listed: set[str] | frozenset[str],
           config: TetherConfig) -> Index:
    """One document per product (its listing tool) and per metric the caller may reach,
    indexed for search."""
    return Index([_doc(v, v.name in listed, config) for v in reachable
                  if kind(v.plan.kind).searchable])


def search(index: Index, question: str, limit: int = SEARCH_LIMIT) -> list[dict[str, Any]]:
    """The documents that match the question's words, best first by BM25 (ties by name)."""
    asked, scores = index.scores(question)
    scored = []
    for i, score in scores.items():
        doc = index.docs[i]
        why = sorted({reason for w in asked for reason in doc.hit(w)})
        scored.append((-score, doc.name, doc, why))
    scored.sort(key=lambda t: (t[0], t[1]))
    out = [{"name": doc.name, "kind": doc.kind, "score": round(-neg, 3), "matched": why,
            "summary": doc.summary, "call": doc.call, "with": doc.with_}
           for neg, _, doc, why in scored[:limit]]
    if scored and scored[0][2].arguments is not None and scored[0][2].call == ROWS:
        # the best product's arguments come with it: a model that goes straight to the rows
        # (as the real one did) need not guess them
        out[0]["arguments"] = scored[0][2].arguments
    return out


def found(v: _Shaped, docs: Index, args: dict[str, Any]) -> Answered:

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


def search_words(plan: QueryPlan | None, result: dict[str, Any]) -> str:
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
