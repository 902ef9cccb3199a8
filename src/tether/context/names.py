"""The words of a name as people and engines write it: ``widget_id``, ``widgetID``,
``ShelfOfParts``, ``Box Label``, ``bin.key``, ``HTTPStatus2xx``.

One implementation for every reader that needs a name's words: the starter's identifier and key
inference, search, lint and the labeller. Layer 0: the standard library only.
"""

from __future__ import annotations

import re

_BOUNDARY = re.compile(
    r"(?<=[a-z])(?=[A-Z])"          # camelCase: a lower letter, then an upper one
    r"|(?<=[A-Z])(?=[A-Z][a-z])"    # an acronym, then a word: HTTPServer -> HTTP Server
    r"|(?<=[A-Za-z])(?=[0-9])"      # letters, then digits
    r"|(?<=[0-9])(?=[A-Za-z])")     # digits, then letters
_SEPARATOR = re.compile(r"[^A-Za-z0-9]+")

IDENTIFIER_WORDS = frozenset({"id", "key", "code", "no", "number", "ref", "uuid", "guid"})
"""A name whose last word is one of these names an identifier (``widget_id``, ``widgetID``,
``BinKey``, ``line_no``)."""


def name_words(name: str) -> list[str]:
    """The lower-case words of ``name``: split at separators (anything not a letter or digit),
    camelCase and PascalCase boundaries, and between letters and digits."""
    return [w.lower() for part in _SEPARATOR.split(name) if part
            for w in _BOUNDARY.split(part) if w]


def spaced(text: str) -> str:
    """``text`` with every name in it split into its words (``ShelfOfParts`` -> ``Shelf Of
    Parts``); other characters kept."""
    return _BOUNDARY.sub(" ", text)


_CASE_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def words_of(name: str) -> str:
    """A name as a sentence says it: ``_`` and case boundaries become spaces, letters keep
    their case and digits stay with their word (``HomeSpots`` -> ``Home Spots``,
    ``box_v2`` -> ``box v2``)."""
    return " ".join(_CASE_BOUNDARY.sub(" ", name).replace("_", " ").split())


def identifier_like(name: str) -> bool:
    """Whether the name says it holds an identifier: its last word is an identifier word."""
    words = name_words(name)
    return bool(words) and words[-1] in IDENTIFIER_WORDS


def subject(name: str) -> str:
    """What an identifier identifies, in words (``widgetID`` -> ``widget``, ``crate_line_no``
    -> ``crate line``); other names as their words (``step`` -> ``step``)."""
    words = name_words(name)
    if len(words) > 1 and words[-1] in IDENTIFIER_WORDS:
        words = words[:-1]
    return " ".join(words) or name


def key_grain(key: list[str]) -> str | None:
    """One row per what a key's columns identify, in words: ``[widgetID, batchNo, step]`` ->
    "one row per widget, batch and step" (None without a key)."""
    if not key:
        return None
    words = [subject(c) for c in key]
    said = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"one row per {said}"


# --- references: ``product.column`` and ``product.column.field`` as plans and policies write them

def ref(*parts: str) -> str:
    """A reference from its identifiers, joined with dots; an identifier that holds a dot or a
    double quote is double-quoted (``t."bin.key"``), so a column named ``bin.key`` is never read
    as the field ``key`` of a column ``bin``."""
    return ".".join('"' + p.replace('"', '""') + '"' if ("." in p or '"' in p) else p
                    for p in parts)


def ref_parts(reference: str) -> list[str]:
    """The identifiers of a reference written by :func:`ref` (a plain ``a.b.c`` splits at each
    dot, as references written by hand always have)."""
    if '"' not in reference:
        return reference.split(".")
    parts: list[str] = []
    i, n = 0, len(reference)
    while i <= n:
        if i < n and reference[i] == '"':
            j, word = i + 1, []
            while j < n:
                if reference[j] == '"':
                    if j + 1 < n and reference[j + 1] == '"':
                        word.append('"')
                        j += 2
                        continue
                    break
                word.append(reference[j])
                j += 1
            parts.append("".join(word))
            i = j + 2  # past the closing quote and the dot after it
        else:
            j = reference.find(".", i)
            j = n if j < 0 else j
            parts.append(reference[i:j])
            i = j + 1
    return parts


def ref_column(reference: str) -> tuple[str, str]:
    """``(product, column name)`` of a reference: the name as the schema writes it (a nested
    field's parts joined with dots, a dotted column's name whole)."""
    head, *rest = ref_parts(reference)
    return head, ".".join(rest)
