"""Glossary documents: a folder of Markdown files, one term per file, named by ``glossary_dir:``.

A file is YAML front matter between ``---`` lines (the keys of a tether.yaml glossary term:
``predicate`` or ``measure``, ``fields``, ``synonyms``, ``owner``) and a body, which is the
term's definition. The term is named by the body's first ``# Heading`` when it has one, else by
the file's name (``late-parcel.md`` is "late parcel"). Both are outside words, kept as data:
markup and hidden characters removed, the length bounded (tether.context.outside); a tool quotes
the definition as its document's. The folder is read every time
the project loads (a layer above the imports, below tether.yaml), so an edit is seen by the next
``tether check``; every key records the file and line it came from. A symbolic link, and any file
that resolves outside the folder, is skipped: a definition is read from the folder named, never
from wherever a link points (another project's files, a secret).

Layer 0: files in, a layer out; nothing is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tether.context.config_model import GlossaryTerm
from tether.context.outside import NAME_CHARS, TEXT_CHARS, clean
from tether.errors import ConfigError
from tether.layers.model import ImportLayer, InputFile, now_stamp
from tether.textfiles import decode_text, load_yaml, read_bytes

KIND = "glossary_dir"
FRONT_KEYS = tuple(k for k in GlossaryTerm.model_fields if k != "definition")
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$")


def read_glossary_dir(root: Path, folder: str) -> ImportLayer:
    """Every ``*.md`` file under ``root / folder`` as one layer of glossary terms."""
    base = (root / folder).resolve()
    if not base.is_dir():
        raise ConfigError(f"glossary_dir names {folder!r}, which is not a folder.",
                          where=str(base), hint="Create it with one Markdown file per term, "
                          "or remove glossary_dir from tether.yaml.")
    terms: dict[str, Any] = {}
    origins: list[tuple[list[str | int], str]] = []
    inputs = []
    for path in sorted(base.rglob("*.md")):
        if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(base):
            continue
        shown = _shown(root, path)
        name, term, lines = read_term(path, shown)
        if name in terms:
            first = next(w for p, w in origins if p == ["glossary", name])
            raise ConfigError(f"the term {name!r} is defined twice: here and in {first}.",
                              where=shown, hint="Keep one file per term (rename or merge one).")
        terms[name] = term
        origins.append((["glossary", name], f"{shown}:1"))
        origins += [(["glossary", name, key], f"{shown}:{line}") for key, line in lines.items()]
        inputs.append(InputFile(path=shown, sha256=_sha(path)))
    return ImportLayer(kind=KIND, imported_at=now_stamp(), inputs=inputs,
                       config={"glossary": terms} if terms else {}, origins=origins)


def read_term(path: Path, shown: str) -> tuple[str, dict[str, Any], dict[str, int]]:
    """(term name, the term's tether.yaml mapping, the line of each key) of one file."""
    text = decode_text(read_bytes(path, "the glossary document", name=shown), path,
                       "the glossary document", name=shown)
    lines = text.splitlines()
    front: dict[str, Any] = {}
    key_lines: dict[str, int] = {}
    body_start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is None:
            raise ConfigError("the front matter opened on line 1 is never closed.",
                              where=f"{shown}:1", hint="End it with a line holding only ---.")
        # a blank first line in place of the opening ---: YAML's line numbers are the file's
        data = load_yaml("\n" + "\n".join(lines[1:end]), shown,
                         hint="Fix the front matter (YAML between the --- lines) on that line.")
        if data is not None and not isinstance(data, dict):
            raise ConfigError("the front matter must be a mapping of keys (predicate:, "
                              "fields:, ...).", where=f"{shown}:2",
                              hint=f"Keys allowed: {', '.join(FRONT_KEYS)}.")
        front = data or {}
        for i in range(1, end):
            m = re.match(r"^([A-Za-z_][\w-]*)\s*:", lines[i])
            if m:
                key_lines.setdefault(m.group(1), i + 1)
        body_start = end + 1
    name, definition, def_line = _body(lines, body_start, path)
    if not definition:
        raise ConfigError("the document has no definition (its body is empty).",
                          where=f"{shown}:{body_start + 1}",
                          hint="Write the term's definition below the front matter.")
    term = {**front, "definition": definition}
    try:
        GlossaryTerm.model_validate(term)
    except ValidationError as e:
        first = e.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "definition"
        line = key_lines.get(key, def_line if key == "definition" else 1)
        msg = (f"unknown key {key!r}" if first["type"] == "extra_forbidden"
               else f"{key}: {first['msg']}")
        raise ConfigError(f"{msg}.", where=f"{shown}:{line}",
                          hint=f"Front matter keys: {', '.join(FRONT_KEYS)}; the body is the "
                          "definition.") from None
    key_lines["definition"] = def_line
    return name, term, key_lines


def _body(lines: list[str], start: int, path: Path) -> tuple[str, str, int]:
    """(name, definition, the definition's first line) from the body."""
    rest = list(enumerate(lines[start:], start + 1))
    while rest and not rest[0][1].strip():
        rest.pop(0)
    name = re.sub(r"[-_]+", " ", path.stem).strip()
    if rest:
        m = _HEADING.match(rest[0][1])
        if m:
            name = clean(m.group(1), NAME_CHARS) or name
            rest.pop(0)
            while rest and not rest[0][1].strip():
                rest.pop(0)
    # the document's words are data: markup and hidden characters out, bounded (tools quote it)
    definition = clean("\n".join(line for _, line in rest), TEXT_CHARS)
    return name, definition, rest[0][0] if rest else start + 1


def _shown(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
