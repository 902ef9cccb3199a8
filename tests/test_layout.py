"""The package's layout holds by test, not by habit: each `_meta` key has one home
(tether/context/meta.py, its readers and writers side by side), read and written nowhere else by
name."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"
KEY_NAMES = {"CONTEXT_KEY", "EVIDENCE_KEY", "REFUSAL_KEY", "PIN_KEY"}
KEY = re.compile(r'^tether/[\w.-]+$|["{,]tether/')
"""A `_meta` key as code uses it: the key itself, or a JSON path through it (a sentence that
names the key for people, a help text, is not a read or a write)."""


def modules() -> Iterator[tuple[str, ast.Module]]:
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC.parent).with_suffix("")
        yield ".".join(rel.parts).removesuffix(".__init__"), ast.parse(f.read_text(), str(f))


def docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def outside_context() -> Iterator[tuple[str, ast.Module]]:
    return ((m, t) for m, t in modules() if not m.startswith("tether.context"))


def test_no_module_outside_context_names_a_meta_key() -> None:
    """No string that is a `_meta` key ("tether/...") or a JSON path through one outside
    tether.context, docstrings aside; and no import of the key constants: every read and write
    goes through context/meta.py's functions."""
    found = []
    for mod, tree in outside_context():
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and KEY.search(node.value) and id(node) not in skip):
                found.append(f"{mod}:{node.lineno}: {node.value!r}")
            if isinstance(node, ast.ImportFrom) and node.module == "tether.context.meta":
                found += [f"{mod}:{node.lineno}: imports {a.name}" for a in node.names
                          if a.name in KEY_NAMES]
    assert not found, "\n".join(found)


def test_the_rule_sees_what_it_forbids() -> None:
    """The check above finds a key or a JSON path spelled out in code and ignores one in a
    docstring, a sentence or a file path."""
    tree = ast.parse('"""About _meta["tether/context"]."""\nx = d["_meta"]["tether/context"]\n'
                     'y = "json_extract(d, \'$._meta.\\"tether/pin\\".v\')"\n'
                     'z = ("Mirror _meta.tether/context here.", ".tether/exported.json")\n'
                     'w = "(d::jsonb) #>> \'{_meta,tether/context,v}\'"\n')
    skip = docstrings(tree)
    hits = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and KEY.search(n.value) and id(n) not in skip]
    assert sorted(n.lineno for n in hits) == [2, 3, 5]


def test_one_evidence_model() -> None:
    """The evidence a result carries has one model (tether.context.meta.Evidence): no other
    module defines a class of that name."""
    found = [f"{mod}:{n.lineno}" for mod, tree in modules() for n in ast.walk(tree)
             if isinstance(n, ast.ClassDef) and n.name == "Evidence"]
    assert found == [f"tether.context.meta:{_line('Evidence')}"], found


def _line(cls: str) -> int:
    tree = ast.parse((SRC / "context" / "meta.py").read_text())
    return next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
