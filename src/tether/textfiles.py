"""Reading a text, YAML or JSON file a person gave tether, with errors that name the file and
place.

Layer 0: only the standard library, ``yaml`` and :mod:`tether.errors`. Every failure is a
:class:`~tether.errors.TetherError` (a :class:`~tether.errors.ConfigError` unless the caller
names another class) saying what is wrong, where, and what to do; never a ``UnicodeDecodeError``,
``IsADirectoryError``, ``MemoryError`` or ``RecursionError`` traceback.

YAML is loaded safely *and* with a budget on aliases: :func:`check_yaml_aliases` reads the
document's events once (without building it) and refuses

- a recursive alias: ``*a`` inside the node anchored ``&a`` (it would be a cyclic structure), and
- aliases that together add more than :data:`ALIAS_BUDGET` nodes to the document when expanded
  (a "billion laughs" alias bomb, which would otherwise take minutes and all memory to walk).

An alias adds the expanded size of its anchored node, less one for the alias itself; the size of
every anchored node is computed once, when it ends, so the check is linear in the document's
length however large the expansion would be. Plain anchors and aliases (``<<: *defaults``, a
repeated list) stay far below the budget.

JSON (a dbt manifest or catalog, OpenLineage events, cases, traces) is read by :func:`load_json`:
nesting deeper than :data:`MAX_JSON_DEPTH` and a number of more digits than Python converts are
``error`` naming the file and line, as a syntax error is; :func:`read_bytes` takes a cap on the
file's size (``max_bytes``), checked before a byte is read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tether.errors import ConfigError, TetherError

ALIAS_BUDGET = 100_000
"""Most nodes a YAML document's aliases may add when expanded (beyond its own nodes)."""
MAX_YAML_DEPTH = 200
"""Deepest nesting of mappings and sequences tether reads (its own files use fewer than 10)."""
MAX_JSON_DEPTH = 200
"""Deepest nesting of objects and arrays tether reads in JSON (a dbt manifest nests about 10
deep, an OpenLineage event about 8; pydantic's own JSON parser stops at 200 too)."""

_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_UTF8_HINT = "Save it as UTF-8 text (e.g. `iconv -f latin1 -t utf-8 FILE`)."
_BINARY_HINT = "Give the text file itself (UTF-8), not a binary or compressed one."


def _join(first: str, then: str | None) -> str:
    return f"{first} {then}" if then else first


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def size_words(n: int) -> str:
    """A byte count as people say it: 256 MiB, 16 MiB, 900 KiB, 12 bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{n} bytes"


def over_cap(size: int, cap: int, what: str, where: str, *,
             error: type[TetherError] = ConfigError, hint: str | None = None) -> TetherError:
    """The error for an input of ``size`` bytes over the cap of ``cap`` bytes."""
    return error(f"{what} is {size_words(size)}, over tether's cap of {size_words(cap)} "
                 f"({cap:,} bytes) for this input.", where=where,
                 hint=_join("Check that this is the file you meant; nothing was read.", hint))


def read_bytes(path: Path, what: str = "the file", *, error: type[TetherError] = ConfigError,
               hint: str | None = None, name: str | None = None,
               max_bytes: int | None = None) -> bytes:
    """The file's bytes; a directory, a missing or an unreadable file is ``error``, as is one
    larger than ``max_bytes`` (refused by its size, before it is read)."""
    where = name or str(path)
    try:
        if max_bytes is not None:
            size = Path(path).stat().st_size
            if size > max_bytes and not Path(path).is_dir():
                raise over_cap(size, max_bytes, what, where, error=error, hint=hint)
        return Path(path).read_bytes()
    except IsADirectoryError:
        raise error(f"{what} is a directory, not a file.", where=where,
                    hint=_join("Give the path of the file itself.", hint)) from None
    except FileNotFoundError:
        raise error(f"{what} does not exist.", where=where,
                    hint=_join("Check the path.", hint)) from None
    except NotADirectoryError:
        raise error(f"{what} does not exist (a part of its path is a file, not a folder).",
                    where=where, hint=_join("Check the path.", hint)) from None
    except PermissionError:
        raise error(f"{what} cannot be read: permission denied.", where=where,
                    hint="Check the file's permissions (it must be readable by this user).") \
            from None
    except OSError as e:
        raise error(f"{what} cannot be read ({e.strerror or e}).", where=where,
                    hint=_join("Check the path and the disk.", hint)) from None


def text_problem(data: bytes) -> tuple[int, str, bool] | None:
    """Why ``data`` is not UTF-8 text, as (byte offset, what that byte is, binary); None when it
    is text. A NUL byte anywhere makes it binary (text never holds one; UTF-16 does)."""
    nul = data.find(b"\0")
    if nul >= 0:
        return nul, "a NUL byte (a binary file, or text saved as UTF-16)", True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start, f"0x{data[e.start]:02x}, not valid UTF-8", False
    return None


def decode_text(data: bytes, path: Path, what: str = "the file", *,
                error: type[TetherError] = ConfigError, hint: str | None = None,
                name: str | None = None) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped); anything else is ``error``
    naming the file, the line and the byte offset."""
    problem = text_problem(data)
    if problem is not None:
        offset, byte, binary = problem
        fix = _BINARY_HINT if binary else _UTF8_HINT
        raise error(f"{what} is not {'text' if binary else 'UTF-8 text'}: byte {offset} is "
                    f"{byte}.", where=f"{name or path}:{_line_of(data, offset)}",
                    hint=_join(fix, hint))
    text = data.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: Path, what: str = "the file", *, error: type[TetherError] = ConfigError,
              hint: str | None = None, name: str | None = None,
              max_bytes: int | None = None) -> str:
    """The file as UTF-8 text; a directory, missing, unreadable, binary or non-UTF-8 file is
    ``error`` (one paragraph naming the file, and the line for bad bytes), as is one larger than
    ``max_bytes``."""
    data = read_bytes(path, what, error=error, hint=hint, name=name, max_bytes=max_bytes)
    return decode_text(data, path, what, error=error, hint=hint, name=name)


def check_yaml_aliases(text: str, name: str, *, error: type[TetherError] = ConfigError,
                       loader: Any = None) -> None:
    """Refuse a recursive alias, aliases adding more than :data:`ALIAS_BUDGET` nodes, or nesting
    deeper than :data:`MAX_YAML_DEPTH`, naming ``name:line``. Reads events only: nothing is
    built or expanded. A syntax error is left to the caller's loader (``yaml.YAMLError``)."""
    stack: list[list[Any]] = []  # [expanded size so far, anchor] of each open collection
    sizes: dict[str, int] = {}  # expanded size of each anchored node that has ended
    added = 0
    for ev in yaml.parse(text, Loader=loader or _SafeLoader):
        line = ev.start_mark.line + 1 if ev.start_mark else 1
        if isinstance(ev, yaml.DocumentStartEvent):
            sizes.clear()
        elif isinstance(ev, yaml.CollectionStartEvent):
            if len(stack) >= MAX_YAML_DEPTH:
                raise error(f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep.",
                            where=f"{name}:{line}", hint="Flatten the file; tether's files "
                            "need only a few levels.")
            stack.append([1, ev.anchor])
        elif isinstance(ev, yaml.CollectionEndEvent):
            size, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
            if stack:
                stack[-1][0] += size
        elif isinstance(ev, yaml.ScalarEvent):
            if ev.anchor is not None:
                sizes[ev.anchor] = 1
            if stack:
                stack[-1][0] += 1
        elif isinstance(ev, yaml.AliasEvent):
            if any(anchor == ev.anchor for _, anchor in stack):
                raise error(f"the alias *{ev.anchor} sits inside the node anchored &{ev.anchor}: "
                            "a recursive alias, which would make an endless structure.",
                            where=f"{name}:{line}",
                            hint=f"Write out what *{ev.anchor} should repeat, or anchor a node "
                            "that does not contain the alias.")
            size = sizes.get(ev.anchor or "", 1)  # an undefined alias is the loader's error to report
            added += size - 1
            if added > ALIAS_BUDGET:
                raise error(f"aliases would expand this file by more than {ALIAS_BUDGET:,} "
                            f"nodes (here *{ev.anchor} alone stands for {size:,}): a YAML alias "
                            "bomb, refused before it exhausts memory.", where=f"{name}:{line}",
                            hint="Write the repeated content out or use fewer, smaller aliases; "
                            f"tether allows aliases to add at most {ALIAS_BUDGET:,} nodes.")
            if stack:
                stack[-1][0] += size


def load_yaml(text: str, name: str, *, error: type[TetherError] = ConfigError,
              hint: str | None = None) -> Any:
    """Safely load one YAML document after :func:`check_yaml_aliases`; a syntax error is ``error``
    naming ``name:line``."""
    try:
        check_yaml_aliases(text, name, error=error)
        return yaml.load(text, Loader=_SafeLoader)  # a safe loader, aliases checked
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise error(f"this is not valid YAML: {e.problem or e}"
                    + (f" ({e.context})" if e.context else "") + ".",
                    where=f"{name}:{mark.line + 1 if mark else 1}",
                    hint=hint or "Check indentation and quoting on that line.") from None
    except yaml.YAMLError as e:
        raise error(f"this is not valid YAML: {e}.", where=name, hint=hint) from None


# --- JSON ----------------------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_DIGITS_LIMIT = re.compile(r"Exceeds the limit \((\d+) digits\)")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests objects and arrays more than ``limit`` deep; one
    pass over the containers, no recursion."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nxt = []
        for x in level:
            if type(x) is dict:
                nxt += [c for c in x.values() if type(c) is dict or type(c) is list]
            elif type(x) is list:
                nxt += [c for c in x if type(c) is dict or type(c) is list]
        level = nxt
    return False


def json_depth_line(text: str, limit: int) -> int | None:
    """The line where ``text`` first opens an object or array deeper than ``limit``, outside
    strings; None when it never does."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return text.count("\n", 0, m.start()) + 1
        elif ch in "]}":
            depth -= 1
    return None


class JSONProblem(ValueError):
    """Why a text is not JSON tether reads. ``kind``: syntax | depth | number; ``reason``: the
    sentence after the input's name ("is not valid JSON: ..."); ``detail``: the parser's own
    words for a syntax error; ``line``: where (None when unknown); ``hint``: what to do."""

    def __init__(self, kind: str, reason: str, line: int | None, hint: str, detail: str = ""):
        super().__init__(reason)
        self.kind, self.reason, self.line, self.hint, self.detail = (kind, reason, line, hint,
                                                                      detail)


def parse_json(text: str, *, one_line: bool = False, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` as JSON, or :class:`JSONProblem`: a syntax error, nesting deeper than
    ``max_depth``, a number of more digits than Python converts. Never a ``RecursionError``.
    ``one_line``: the text is one line of a file (a column is named, not a line)."""
    deep = JSONProblem("depth", f"nests objects and arrays more than {max_depth} deep: tether "
                       f"reads JSON nested at most {max_depth} levels (real files nest fewer "
                       "than 20)", None, "Check that this is the input you meant, or flatten "
                       "the deeply nested value.")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        ends = text.rstrip().endswith(("}", "]"))
        cut = "" if ends or one_line else " (it ends before its last closing brace: truncated?)"
        detail = f"{e.msg} at column {e.colno}" if one_line else \
            f"{e.msg} at line {e.lineno}, column {e.colno}"
        raise JSONProblem("syntax", f"is not valid JSON: {detail}{cut}", e.lineno,
                          "", detail) from None
    except RecursionError:
        deep.line = json_depth_line(text, max_depth)
        raise deep from None
    except ValueError as e:  # int() refuses a number of more digits than sys.int_info allows
        m = _DIGITS_LIMIT.search(str(e))
        digits = f"{int(m.group(1)):,}" if m else "thousands of"
        raise JSONProblem("number", f"holds a number of more than {digits} digits, which "
                          "tether does not read", None,
                          "Check that this is the input you meant.") from None
    if _too_deep(value, max_depth):
        deep.line = json_depth_line(text, max_depth)
        raise deep
    return value


def load_json(text: str, name: str, what: str = "the file", *,
              error: type[TetherError] = ConfigError, hint: str | None = None,
              line: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """One JSON document, parsed (:func:`parse_json`); what is not JSON tether reads is
    ``error`` naming ``name:line`` and saying what to do. ``line``: the document is that one
    line of ``name`` (a JSON lines file); else the line is counted in ``text``."""
    try:
        return parse_json(text, one_line=line is not None, max_depth=max_depth)
    except JSONProblem as p:
        at = line if line is not None else (p.line or 1)
        raise error(f"{what} {p.reason}.", where=f"{name}:{at}",
                    hint=_join(p.hint, hint) if p.hint else hint) from None
