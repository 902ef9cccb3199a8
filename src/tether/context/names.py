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


DATE_PART_WORDS = frozenset({"year", "quarter", "month", "week", "weekday", "day", "hour",
                             "minute", "second"})
"""The last word of a number's name that says it is a part of a date or time (``birth_year``,
``month``, ``hour``): counted by and bounded, never totalled, and no unit to find."""


def date_part(name: str) -> bool:
    """Whether the name says it holds a part of a date or time: its last word is one."""
    words = name_words(name)
    return bool(words) and words[-1] in DATE_PART_WORDS


def identifier_like(name: str) -> bool:
    """Whether the name says it holds an identifier: its last word is an identifier word."""
    words = name_words(name)
    return bool(words) and words[-1] in IDENTIFIER_WORDS


def column_prefix(names: list[str]) -> list[str]:
    """The leading words every column of a table shares (``bx_boxkey``, ``bx_shelfnum`` -> ``bx``;
    ``vatLabel``, ``vatId`` -> ``vat``), where a table names its columns so: a convention of
    the table, not part of what a column holds. Empty for fewer than two columns or where a
    column would be left with no word of its own."""
    split = [name_words(n) for n in names]
    if len(split) < 2:
        return []
    shared: list[str] = []
    for words in zip(*split, strict=False):
        if len(set(words)) != 1:
            break
        shared.append(words[0])
    return [] if any(len(w) <= len(shared) for w in split) else shared


def bare_name(name: str, prefix: list[str]) -> str:
    """A column's name without its table's shared leading words, its words run together
    (``bx_shelfnum`` with prefix ``bx`` -> ``shelfnum``; ``sh_ShelfNum`` with ``sh`` ->
    ``shelfnum``):
    what two tables' columns are compared by when each table prefixes its own."""
    words = name_words(name)
    return "".join(words[len(prefix):] if words[:len(prefix)] == prefix else words)


_RUN_TOGETHER = {"key": 3, "number": 3, "id": 4}
"""Identifier words a name may run into the word before them (``boxkey``, ``slotnumber``,
``userid``), each with the fewest letters that word must keep (many a word ends in "id":
``valid``, ``humid``)."""


def says_identifier(name: str) -> bool:
    """Whether the name says it holds an identifier, an identifier word run into the word
    before it counted too (``bx_binkey``, ``userid``; not ``valid``)."""
    words = name_words(name)
    return bool(words) and (words[-1] in IDENTIFIER_WORDS or any(
        words[-1].endswith(w) and len(words[-1]) >= len(w) + least
        for w, least in _RUN_TOGETHER.items()))


def subject(name: str, prefix: list[str] | None = None) -> str:
    """What an identifier identifies, in words (``widgetID`` -> ``widget``, ``crate_line_no``
    -> ``crate line``, ``bs_boxkey`` with its table's prefix ``bs`` -> ``box``); other names
    as their words (``step`` -> ``step``)."""
    words = name_words(name)
    if prefix and words[:len(prefix)] == prefix and len(words) > len(prefix):
        words = words[len(prefix):]
    if len(words) > 1 and words[-1] in IDENTIFIER_WORDS:
        words = words[:-1]
    elif len(words) == 1:  # one word: an identifier word run into it
        ending = next((w for w, least in _RUN_TOGETHER.items() if words[0].endswith(w)
                       and len(words[0]) >= len(w) + least), None)
        if ending:
            words = [words[0][:-len(ending)]]
    return " ".join(words) or name


def key_grain(key: list[str], prefix: list[str] | None = None) -> str | None:
    """One row per what a key's columns identify, in words: ``[widgetID, batchNo, step]`` ->
    "one row per widget, batch and step"; ``[bs_boxkey, bs_slotnumber]`` with their
    table's prefix ``bs`` (column_prefix) -> "one row per box and slot" (None without a key)."""
    if not key:
        return None
    words = [subject(c, prefix) for c in key]
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
