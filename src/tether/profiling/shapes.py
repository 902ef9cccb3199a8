"""The shape of an identifier's values as a pattern: read from its smallest and largest value,
then checked against every value in the engine by the caller (the starter's identifier schemes,
the profile's pattern of a key part or an identifier-named column without one).

A pattern is written in the regular expressions DuckDB (RE2) and PostgreSQL share: only
metacharacters are escaped (RE2 refuses an escaped space or letter).
"""

from __future__ import annotations

import re

UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_META = frozenset(".^$*+?()[]{}|\\")


def literal(ch: str) -> str:
    """One character as a pattern matches it."""
    return "\\" + ch if ch in _META else ch


def exact(value: str) -> str:
    """``A-0012`` -> ``^A-\\d{4}$``: everything kept literally but digits, which are counted."""
    out, i = "", 0
    while i < len(value):
        if value[i].isdigit():
            j = i
            while j < len(value) and value[j].isdigit():
                j += 1
            out += f"\\d{{{j - i}}}"
            i = j
        else:
            out += literal(value[i])
            i += 1
    return f"^{out}$"


def runs(value: str) -> str | None:
    """``abcde01`` -> ``^[a-z]+\\d+$``: each run of lower letters, upper letters or digits as its
    class, any length (ids made of a name and a number); other characters kept. None when the
    value has no letters or no digits (a word or a number is not an id's shape)."""
    if not (re.search(r"[A-Za-z]", value) and re.search(r"\d", value)):
        return None
    classes = {"l": "[a-z]+", "u": "[A-Z]+", "d": "\\d+"}
    out, prev = "", None
    for ch in value:
        kind = "l" if ch.islower() else "u" if ch.isupper() else "d" if ch.isdigit() else None
        if kind is None:
            out, prev = out + literal(ch), None
        elif kind != prev:
            out, prev = out + classes[kind], kind
    return f"^{out}$"


def fixed(lo: str, hi: str) -> list[str]:
    """Codes of one length over a few character classes (``ALT`` .. ``WSU``: ``^[A-Z]{3}$``,
    then ``^[A-Z0-9]{3}$`` since a middle value may hold a digit); none when the two ends differ
    in length or hold anything but letters and digits."""
    if len(lo) != len(hi) or not lo or not (lo + hi).isascii() or not (lo + hi).isalnum():
        return []
    have = [cls for test, cls in ((str.isupper, "A-Z"), (str.islower, "a-z"),
                                  (str.isdigit, "0-9")) if any(test(ch) for ch in lo + hi)]
    out = [f"^[{''.join(have)}]{{{len(lo)}}}$"]
    if "0-9" not in have:
        out.append(f"^[{''.join(have)}0-9]{{{len(lo)}}}$")
    return out


def candidates(lo: str, hi: str, loose: bool = True) -> list[str]:
    """Patterns both ends fit, most exact first: a UUID, one exact shape, letter and digit runs,
    then (``loose``) fixed-length codes. Only the engine can say that every value fits one."""
    out = [UUID] if re.fullmatch(UUID, lo.lower()) and re.fullmatch(UUID, hi.lower()) else []
    if exact(lo) == exact(hi):
        out.append(exact(lo))
    elif (r := runs(lo)) and r == runs(hi):
        out.append(r)
    if loose:
        out += [p for p in fixed(lo, hi) if p not in out]
    return out


def loosened(pattern: str) -> str:
    r"""``pattern`` with every counted run of any length (``\d{4}`` -> ``\d+``, ``[A-Z0-9]{3}``
    -> ``[A-Z0-9]+``): the shape, not today's lengths."""
    return re.sub(r"(\\d|\])\{\d+(,\d+)?\}", r"\1+", pattern)
