"""Small, pure helpers that turn context into schema fragments and sentences."""

from __future__ import annotations

import re
from typing import Any

from tether.context.names import words_of
from tether.context.profile import ColumnProfile
from tether.context.schema import TypeKind

_JSON_TYPES: dict[TypeKind, dict[str, Any]] = {
    "string": {"type": "string"},
    "uuid": {"type": "string", "format": "uuid"},
    "integer": {"type": "integer"},
    "decimal": {"type": "number"},
    "float": {"type": "number"},
    "boolean": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "timestamp": {"type": "string", "format": "date-time"},
    "timestamptz": {"type": "string", "format": "date-time"},
    "time": {"type": "string", "format": "time"},
    "json": {},
    "struct": {"type": "object"},
    "list": {"type": "array"},
    "map": {"type": "object"},
}


def json_type(kind: TypeKind) -> dict[str, Any]:
    return dict(_JSON_TYPES.get(kind, {"type": "string"}))


def humanize(name: str) -> str:
    """``placed_at`` -> ``Placed at``."""
    words = re.sub(r"[_.]+", " ", name).strip()
    return words[:1].upper() + words[1:]


def plural(noun: str) -> str:
    """``order line`` -> ``order lines``, ``category`` -> ``categories``, ``box`` -> ``boxes``."""
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    if re.search(r"(ss|x|z|ch|sh)$", noun):
        return noun + "es"
    return noun + "s"


def singular(noun: str) -> str:
    """``categories`` -> ``category``, ``addresses`` -> ``address``, ``airlines`` -> ``airline``."""
    if re.search(r"[^aeiou]ies$", noun):
        return noun[:-3] + "y"
    if re.search(r"(ss|x|z|ch|sh)es$", noun):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith(("ss", "us", "is")):
        return noun[:-1]
    return noun


def grain_noun(grain: str | None, fallback: str) -> str:
    """``one row per shipment leg`` -> ``shipment leg``; without a grain, the table name's
    singular (``shipment_legs`` -> ``shipment leg``)."""
    if grain:
        return re.sub(r"^one row per\s+", "", grain.strip().rstrip("."), flags=re.I)
    return singular(words_of(fallback))


def enum_note(c: ColumnProfile) -> str | None:
    """"Deprecated (not seen since 2025-01): A, B." for dormant enum values."""
    dormant = [e for e in c.enum or [] if e.deprecated]
    if not dormant:
        return None
    newest = max((e.last_seen for e in dormant if e.last_seen), default=None)
    since = f" since {newest:%Y-%m}" if newest else ""
    return f"Deprecated (not seen{since}): {', '.join(str(e.value) for e in dormant)}."


def join_words(words: list[str], last: str = "and") -> str:
    if len(words) <= 2:
        return f" {last} ".join(words)
    return ", ".join(words[:-1]) + f" {last} " + words[-1]


def sentence(text: str) -> str:
    """One sentence: first letter upper-case (unless it starts with an identifier), one period."""
    text = " ".join(text.split()).rstrip(".")
    first = text.split(" ", 1)[0]
    if "_" not in first:
        text = text[:1].upper() + text[1:]
    return text + "."


_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """Sentences of a description: split after . ! or ? followed by whitespace."""
    return [s for s in _BOUNDARY.split(" ".join(text.split())) if s]
