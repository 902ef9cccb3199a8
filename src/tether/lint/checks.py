"""The ten-point review of a tool definition, one registered check per point, and a finding
beyond the ten that costs a point (text that speaks to the model).

Each check reads only the MCP wire form (what tools/list returns), so it works on any server's
tools; `_meta["tether/context"]` is used where a server provides it (sentence sources, deprecated
values). A check returns None when the point is earned, else a Finding with the reason and fix.
The heuristics are documented in docs/lint.md; they are deliberately strict and explainable, and
they name no warehouse's tables, columns or values (tests/test_nothing_named.py holds them to it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tether.context.meta import SOURCES_AT, ToolContext
from tether.context.names import IDENTIFIER_WORDS, name_words
from tether.context.outside import instruction_signs
from tether.toolgen.describe import split_sentences
from tether.toolgen.model import SOURCES

Tool = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    item: int
    title: str
    reason: str
    fix: str


@dataclass(frozen=True)
class Check:
    item: int
    title: str
    run: Callable[[Tool], tuple[str, str] | None]  # (reason, fix) when the point is lost
    penalty: bool = False
    """A finding beyond the ten points: it earns none, and costs one when it fires (a tool that
    speaks to the model cannot score 10/10 however well it is described)."""

    def __call__(self, tool: Tool) -> Finding | None:
        lost = self.run(tool)
        return Finding(self.item, self.title, *lost) if lost else None


def _props(schema: Any) -> dict[str, Any]:
    return dict(schema.get("properties", {})) if isinstance(schema, dict) else {}


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    return set(t) if isinstance(t, list) else ({t} if isinstance(t, str) else set())


def _walk_fields(schema: Any, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for name, s in _props(schema).items():
        if not isinstance(s, dict):
            continue
        yield prefix + name, s
        yield from _walk_fields(s, f"{prefix}{name}.")
        if isinstance(s.get("items"), dict):
            yield from _walk_fields(s["items"], f"{prefix}{name}[].")


def _context(tool: Tool) -> ToolContext:
    """What the tool says of itself (empty when it says nothing, or nothing well formed)."""
    return ToolContext.of(tool)


def _tokens(name: str) -> list[str]:
    return name_words(name)


# 1 -----------------------------------------------------------------------------------------------
OPERATIONS = {"get", "list", "describe", "execute", "exec", "run", "query", "read", "write",
              "search", "find", "fetch", "select", "show", "create", "update", "delete", "insert",
              "call", "do", "lookup", "retrieve"}
GENERIC = {"table", "tables", "sql", "query", "queries", "data", "row", "rows", "record",
           "records", "schema", "schemas", "database", "databases", "db", "object", "objects",
           "result", "results", "info", "item", "entity", "entities", "resource", "resources"}
_STOP = {"by", "and", "of", "for", "in", "a", "an", "the", "to", "per", "with", "from", "on"}


def _business_name(tool: Tool) -> tuple[str, str] | None:
    tokens = _tokens(str(tool.get("name", "")))
    meaningful = [t for t in tokens if t not in OPERATIONS | GENERIC | _STOP]
    only_op_table = len(tokens) <= 2 and (len(tokens) == 1 or tokens[0] in OPERATIONS)
    if not meaningful or only_op_table:
        return (f"'{tool.get('name')}' names an operation or a table, not the business question "
                "it answers",
                "Name it for the question it answers: the business measure or listing and its "
                "main breakdown or window, not the operation or the table it reads.")
    return None


# 2 -----------------------------------------------------------------------------------------------
_SCOPE = re.compile(r"\b(one row per|per|by|filtered|window|scope|only|all|each|excludes?|within|"
                    r"as of|for the)\b", re.I)
_UNITS = re.compile(r"\b(USD|EUR|GBP|cents?|units?|UTC|percent|ratio|counts?|rows|days|hours|"
                    r"currency|amounts?)\b|%|\b(values|amounts|counts|totals|numbers) are "
                    r"(given |stated |counted )?in\b|\bmeasured in\b", re.I)
_CONSEQUENCE = re.compile(r"\b(read-only|read only|writes?|deletes?|modif\w*|changes? nothing|"
                          r"no side effects|destructive|irreversible)\b", re.I)


def _first_two(tool: Tool) -> tuple[str, str] | None:
    head = " ".join(split_sentences(str(tool.get("description") or ""))[:2])
    missing = [what for what, rx in (("scope", _SCOPE), ("units", _UNITS),
                                     ("consequence (read-only or what it changes)", _CONSEQUENCE))
               if not rx.search(head)]
    if missing:
        return (f"the first two sentences do not state {', '.join(missing)}",
                "Open with what it answers and its scope, then units and whether it is "
                "read-only or what it changes.")
    return None


# 3 -----------------------------------------------------------------------------------------------
_ID = re.compile(r"(^id$|_id$|_ids$|_ref$|_no$|_number$|_key$|uuid|^ids?_)", re.I)


def _identifiers(tool: Tool) -> tuple[str, str] | None:
    bad = []
    for name, s in _props(tool.get("inputSchema")).items():
        if isinstance(s, dict) and s.get("type") == "array" and isinstance(s.get("items"), dict):
            s = {**s["items"], "description": s.get("description", "")}  # one or several ids
        if not isinstance(s, dict) or not (_ID.search(name) or s.get("format") == "uuid"):
            continue
        if s.get("enum") or (s.get("items") or {}).get("enum"):
            continue  # every value it takes is listed: that says the identifier exactly
        typed = s.get("pattern") or s.get("format") or _types(s) & {"integer"}
        if not (typed and s.get("description")):
            bad.append(name)
    if bad:
        return (f"identifier parameter(s) {', '.join(bad)} do not say which identifier (scheme "
                "and format)",
                "Describe the identifier system each takes and give its pattern or format; "
                "point to the crosswalk for the others.")
    return None


# 4 -----------------------------------------------------------------------------------------------
_FINITE = re.compile(r"(^|_)(status|state|phase|type|kind|category|class|level|tier|mode|"
                     r"severity)$", re.I)
"""Words that name a classification in any domain (the last word of a parameter's name). Domain
nouns are not guessed from names: their parameters are caught by the values they list."""
_LISTED = re.compile(r"\bone of\b|\b[A-Z][A-Z0-9_]+(, [A-Z][A-Z0-9_]+)*,? or [A-Z][A-Z0-9_]+\b")
"""A description that lists the values (``X, Y or Z`` in capitals, ``one of``)."""


def _finite(name: str, s: dict[str, Any]) -> bool:
    if s.get("type") == "array" and isinstance(s.get("items"), dict):  # several at once
        s = {**s["items"], "description": s.get("description", "")}
    if "enum" in s or not ("string" in _types(s) or not _types(s)):
        return False
    if _FINITE.search(name):
        return True
    keyed = _ID.search(name) or s.get("pattern") or s.get("format")
    return not keyed and bool(_LISTED.search(str(s.get("description", ""))))


def _enums(tool: Tool) -> tuple[str, str] | None:
    props = _props(tool.get("inputSchema"))
    bad = [n for n, s in props.items() if isinstance(s, dict) and _finite(n, s)]
    unmarked = [n for n, values in _context(tool).deprecated_values.items()
                if values and isinstance(props.get(n), dict)
                and "deprecat" not in str(props[n].get("description", "")).lower()]
    if bad or unmarked:
        parts = []
        if bad:
            parts.append(f"finite-valued parameter(s) {', '.join(bad)} have no enum")
        if unmarked:
            parts.append(f"dormant values of {', '.join(unmarked)} are not marked deprecated")
        return ("; ".join(parts),
                "Use an enum of the values observed in the data and mark dormant ones deprecated.")
    return None


# 5 -----------------------------------------------------------------------------------------------
_TIME = re.compile(r"(date|time|_at$|_at_|_from$|_to$|_on$|since|until|after|before|as_of|"
                   r"period|quarter|month|year|^day$)", re.I)
_TZ = re.compile(r"(UTC|time ?zone|offset|[A-Z][a-z]+/[A-Z][a-z]+)")
_FORMS_SAID = re.compile(r"\b(yyyy-mm-dd|yyyy-mm\[-dd\]|ISO ?8601)", re.I)
"""A description that states the format its values take (the forms a period grammar reads)."""


def _dates(tool: Tool) -> tuple[str, str] | None:
    bad = []
    for name, s in _props(tool.get("inputSchema")).items():
        if not isinstance(s, dict) or not _TIME.search(name) or _types(s) & {"integer", "number"}:
            continue
        has_format = (s.get("format") in ("date", "date-time", "time") or s.get("pattern")
                      or _FORMS_SAID.search(str(s.get("description", ""))))
        if not (has_format and _TZ.search(str(s.get("description", "")))):
            bad.append(name)
    if bad:
        return (f"date/time parameter(s) {', '.join(bad)} lack a format or a time zone",
                "Give format date or date-time (or a pattern) and say the time zone.")
    return None


# 6 -----------------------------------------------------------------------------------------------
_UNIT_TEXT = re.compile(r"\bunit\b|\b(USD|EUR|GBP|cents?|percent|ratio|days|hours|seconds|rows)\b",
                        re.I)


_NO_UNIT = re.compile(r"\bno known unit\b", re.I)


def _units(tool: Tool) -> tuple[str, str] | None:
    out = tool.get("outputSchema")
    if not isinstance(out, dict):
        return ("there is no output schema, so no output states a unit",
                "Add an outputSchema whose numeric fields say their unit or currency.")
    bad = [n for n, s in _walk_fields(out) if _types(s) & {"integer", "number"}
           and (not _UNIT_TEXT.search(text := str(s.get("description", "")))
                or _NO_UNIT.search(text))]
    if bad:
        return (f"numeric output(s) {', '.join(bad)} state no unit",
                "Say the unit or currency of each numeric field (tether.yaml: `columns: {C: "
                "{unit: seconds}}`, or `unit: none` for a dimensionless value).")
    return None


# 7 -----------------------------------------------------------------------------------------------
def _output_schema(tool: Tool) -> tuple[str, str] | None:
    out = tool.get("outputSchema")
    if not isinstance(out, dict) or not _props(out):
        return ("there is no output schema naming the fields",
                "Add an outputSchema with every field, its type and meaning.")
    unnamed = [n for n, s in _walk_fields(out) if "object" in _types(s) and not _props(s)
               and not s.get("additionalProperties")]
    unnamed += [f"{n}[]" for n, s in _walk_fields(out) if "array" in _types(s)
                and isinstance(s.get("items"), dict) and "object" in _types(s["items"])
                and not _props(s["items"]) and not s["items"].get("additionalProperties")]
    if unnamed:
        return (f"object field(s) {', '.join(unnamed)} do not name their fields",
                "Name every field of nested objects and array items.")
    return None


# 8 -----------------------------------------------------------------------------------------------
_LIMIT = re.compile(r"(at most \d+|\blimit\b|max(imum)?[_ ]rows|\bmaximum\b|rows a page)", re.I)
_PAGING = re.compile(r"(cursor|\bpage\b|pagination|paginat)", re.I)


def _paging(tool: Tool) -> tuple[str, str] | None:
    props = _props(tool.get("inputSchema"))
    text = " ".join([str(tool.get("description") or "")]
                    + [str(s.get("description", "")) for s in props.values() if isinstance(s, dict)])
    limit = _LIMIT.search(text) or any(isinstance(s, dict) and "maximum" in s and
                                       re.search(r"limit|rows", n) for n, s in props.items())
    if not (limit and _PAGING.search(text)):
        return ("the row limit and the pagination contract are not stated",
                "State the most rows one call returns and how to get the rest (cursor), or "
                "that there is no pagination.")
    if "cursor" in props and _GRAIN.search(text) and not any(
            _narrows(n, s) for n, s in props.items() if n not in _SHAPING):
        return ("a paged listing of one row per thing takes no parameter on that thing (its "
                "key, an identifier or a time): a question about one of them pages everything",
                "Offer the key's columns (or an identifier, or a period) as parameters.")
    return None


_GRAIN = re.compile(r"\bone row (per|for each)\b", re.I)
_KEY_SAID = re.compile(r"\b(key|identifier|id)\b|at most one row", re.I)
_SHAPING = {"limit", "cursor", "count_by", "sum_and_average_of", "order_by", "order", "range"}
"""Parameters that shape a listing's answer without narrowing its rows."""


def _narrows(name: str, schema: Any) -> bool:
    """A parameter that picks rows by what they are about: a time (``period``, a date format),
    an identifier (its name says so, or a pattern), or an integer (one key part's value)."""
    if not isinstance(schema, dict):
        return False
    words = name_words(name)
    said = _KEY_SAID.search(str(schema.get("description", ""))) is not None
    return (name == "period" or bool(words and words[-1] in IDENTIFIER_WORDS) or said
            or "pattern" in schema or schema.get("format") in ("date", "date-time")
            or schema.get("type") == "integer")


# 9 -----------------------------------------------------------------------------------------------
def _annotations(tool: Tool) -> tuple[str, str] | None:
    a = tool.get("annotations") or {}
    if a.get("readOnlyHint") is True or "destructiveHint" in a:
        return None
    return ("neither readOnlyHint nor destructiveHint is declared",
            "Declare annotations.readOnlyHint (and destructiveHint for writes), and enforce it.")


# 10 ----------------------------------------------------------------------------------------------
def _sources(tool: Tool) -> tuple[str, str] | None:
    """Read from the wire form of any server: ``_meta["tether/context"].sources`` maps each
    sentence (whitespace-insensitive) to its source."""
    sources = _context(tool).sources
    sentences = split_sentences(str(tool.get("description") or ""))
    if not sources:
        return ("no sentence of the description records where it came from",
                f'Map each sentence to its source ({", ".join(SOURCES)}) under '
                f'{SOURCES_AT} in the tool definition.')
    by_text = {" ".join(str(k).split()): v for k, v in sources.items()}
    unknown = [s for s in sentences if by_text.get(s) not in SOURCES]
    if unknown or not sentences:
        return (f"{len(unknown)} of {len(sentences)} sentences have no known source",
                "Give every sentence, exactly as the description words it, an entry with a "
                "source from the vocabulary; a sentence edited by hand needs its entry updated.")
    return None


# 11 (beyond the ten) ------------------------------------------------------------------------------
def _texts(tool: Tool) -> Iterator[tuple[str, str]]:
    """(where, text) of every piece of words a model is shown: the title, the description, and
    each parameter's and output field's description."""
    yield "the title", str(tool.get("title") or "")
    yield "the description", str(tool.get("description") or "")
    for schema, what in ((tool.get("inputSchema"), "parameter"),
                         (tool.get("outputSchema"), "output field")):
        for name, s in _walk_fields(schema):
            yield f"{what} {name}'s description", str(s.get("description") or "")


def _speaks_to_the_model(tool: Tool) -> tuple[str, str] | None:
    """Text that gives the model orders, hides from the user, or carries markup (the signs of
    tether.context.outside), in any server's tool; quoted words are flagged too, so a person
    sees what a source tried to say."""
    said = []
    for where, text in _texts(tool):
        reasons = list(dict.fromkeys(s.reason for s in instruction_signs(text)))
        if reasons:
            said.append(f"{where} {' and '.join(reasons)}")
    if said:
        return ("; ".join(said),
                "Words from a spec, a dbt project or a glossary must describe data, never "
                "instruct the model: mend them at their source, or give the tool its own words "
                "in tether.yaml (description, notes).")
    return None


DEFAULT_CHECKS: tuple[Check, ...] = (
    Check(1, "name states the business question", _business_name),
    Check(2, "scope, units and consequence in the first two sentences", _first_two),
    Check(3, "identifier parameters name their identifier", _identifiers),
    Check(4, "finite-valued parameters are enums, dormant values marked", _enums),
    Check(5, "date/time parameters have format and time zone", _dates),
    Check(6, "numeric outputs have units", _units),
    Check(7, "output schema names every field", _output_schema),
    Check(8, "pagination and row limits stated", _paging),
    Check(9, "read-only or destructive declared", _annotations),
    Check(10, "every sentence has a known source", _sources),
    Check(11, "no text speaks to the model", _speaks_to_the_model, penalty=True),
)
"""The ten points, in order, then the findings that cost a point beyond them. Callers may pass
their own tuple (a third party's extra check)."""
