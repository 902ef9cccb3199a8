"""Nothing named: tether's code is not shaped by the names of the warehouses it is tested on.

The words. They are read from the two warehouses themselves, never typed here:
- tables: the products, their ``table:`` and the tool names of each tether.yaml
  (src/tether/demo/tether.yaml and tests/warehouse2/tether.yaml, placeholders filled in), the
  metrics and glossary terms there, ``TABLES`` of tether.demo.warehouse and of the second
  warehouse's generator, and the tables of both warehouses generated at a tiny scale;
- columns: every column of both generated warehouses (DuckDB's catalog) and every column the
  tether.yaml files name (columns, keys, time columns, identifiers, freshness, filters, fields,
  dimensions);
- enum values: the distinct values of each generated string column that holds few values (at most
  20, each seen twice on average), and every quoted literal in the SQL of the tether.yaml files
  (glossary and metric predicates, measures, outputs, row filters), which adds the values the
  definitions name but the rows lack;
- case ids: the specs of tether.demo.cases and tests/warehouse2/cases.py (built with dummy ids);
- stems: each column name split on underscores; a stem shorter than 4 letters, or in
  ``GENERIC`` (words of any table's shape: naming, classifying, time, quantity), is left out. A
  one-word column (``status``) is its own stem and follows the same rule; a column of several
  words (``created_at``) is always looked for whole.

Where they are looked for: the string constants of every module under src/tether/ except
src/tether/demo/ (the demo is the one place its names belong), f-string parts included. A
string that is a statement on its own (a module, class, function or attribute docstring) is
exempt: it documents and does nothing. Identifiers are not checked: a variable or function name
is the program's own vocabulary and is never compared with, looked up in or shown as warehouse
data; a name can shape behaviour only as a value (a heuristic word list, a regex, a prompt, an
example in a hint), and values are string constants.

How they match: case-insensitively, as whole words, where a word is bounded by anything that is
not a letter or digit (so ``deals`` is found in ``open_deals`` and ``status`` in ``"status"``).
An enum value shorter than 4 characters (a country code, ``NEW``) matches only as the warehouse
writes it: in lower case such codes are English words and SQL keywords.

The allow-list (tests/named_allowlist.yaml): entries ``{word, reason, paths?}``. Every entry needs
a reason; none may be a table, product, tool, metric, term or case id; ``paths`` (optional)
narrows it to those files; an entry, or a path of it, that no longer matches is stale and fails.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tether"
EXEMPT = SRC / "demo"
LINT = SRC / "lint"
ALLOWLIST = Path(__file__).with_name("named_allowlist.yaml")
PROJECTS = (SRC / "demo" / "tether.yaml", ROOT / "tests" / "warehouse2" / "tether.yaml")

GENERIC = frozenset({
    "name", "full", "code",                                   # naming
    "kind", "state", "status", "open",                        # classifying
    "date", "year", "period", "start", "since", "zone",       # time
    "created", "opened", "closed", "loaded", "placed", "decided", "checked", "seen",
    "count", "amount", "total", "unit", "cents", "line",      # quantity
})
"""Stems of column names too generic to say anything about one warehouse."""
UNALLOWABLE = frozenset({"table", "product", "tool", "metric", "term", "case"})
"""Kinds of name that the allow-list may never hold."""
ENUM_MAX_VALUES = 20
SHORT = 4


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    word: str
    kinds: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.word!r} ({self.kinds}) in {self.text!r}"


# --- the names -----------------------------------------------------------------------------------

def _project(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8").replace("__SOURCE_URL__", "duckdb:///w.duckdb")
    data: dict[str, Any] = yaml.safe_load(text.replace("__SOURCE_SCHEMA__", ""))
    return data


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _columns_of(value: Any) -> Iterator[str]:
    """Column names in a key list, a mapping's keys, or ``table.column`` references."""
    items = value if isinstance(value, list) else list(value) if isinstance(value, dict) else [value]
    for item in items:
        if isinstance(item, str):
            yield item.rsplit(".", 1)[-1]


def _from_project(data: dict[str, Any], add: Any) -> None:
    for name, p in (data.get("products") or {}).items():
        add(name, "product")
        if p.get("table"):
            add(p["table"], "table")
        tool = p.get("tool") or {}
        if tool.get("name"):
            add(tool["name"], "tool")
        for key in ("columns", "primary_key", "time_columns", "identifiers", "metric_time"):
            for c in _columns_of(p.get(key) or []):
                add(c, "column")
        for c in _columns_of((p.get("freshness") or {}).get("column") or []):
            add(c, "column")
        for c in _columns_of(tool.get("filters") or []):
            add(c, "column")
    for term, g in (data.get("glossary") or {}).items():
        add(term, "term")
        for c in _columns_of(g.get("fields") or []):
            add(c, "column")
    for name, m in (data.get("metrics") or {}).items():
        add(name, "metric")
        if (m.get("tool") or {}).get("name"):
            add(m["tool"]["name"], "tool")
        for key in ("time", "time_end", "dimensions"):
            for c in _columns_of(m.get(key) or []):
                add(c, "column")
    for text in _strings(data):
        for literal in re.findall(r"'([^'{}]+)'", text):
            add(literal, "enum")


def _from_warehouse(db: Path, add: Any) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        columns = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                              "WHERE NOT internal").fetchall()
        for table, column, kind in columns:
            add(table, "table")
            add(column, "column")
            if kind != "VARCHAR":
                continue
            distinct, count = con.execute(
                f'SELECT count(DISTINCT "{column}"), count("{column}") FROM "{table}"').fetchall()[0]
            if distinct <= ENUM_MAX_VALUES and count >= 2 * distinct:
                for (value,) in con.execute(f'SELECT DISTINCT "{column}" FROM "{table}" '
                                            f'WHERE "{column}" IS NOT NULL').fetchall():
                    add(value, "enum")
    finally:
        con.close()


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """word -> its kinds (table, product, tool, metric, term, column, enum, case, stem). Words of
    SHORT or more characters are keyed in lower case, shorter ones as written."""
    from tether.demo import cases as demo_cases
    from tether.demo import warehouse as demo_warehouse

    second_cases = importlib.import_module("warehouse2.cases")
    second_generate = importlib.import_module("warehouse2.generate")
    out: dict[str, set[str]] = defaultdict(set)

    def add(word: str, kind: str) -> None:
        word = str(word).strip()
        if kind == "column" and word.lower() in GENERIC:
            return  # a one-word column is its own stem, under the same rule
        if word:
            out[word.lower() if len(word) >= SHORT else word].add(kind)

    for path in PROJECTS:
        _from_project(_project(path), add)
    for table in (*demo_warehouse.TABLES, *second_generate.TABLES):
        add(table, "table")
    d = tmp_path_factory.mktemp("named")
    demo_warehouse.build_warehouse(d / "demo.duckdb", scale=0.001)
    second_generate.write_duckdb(d / "second.duckdb", second_generate.generate(0.01, 11))
    for db in ("demo.duckdb", "second.duckdb"):
        _from_warehouse(d / db, add)
    for spec in demo_cases.specs(defaultdict(str)) + second_cases.second_specs(defaultdict(str)):
        add(spec.case_id, "case")
    for column in [w for w, kinds in out.items() if "column" in kinds]:
        for stem in column.split("_"):
            if len(stem) >= SHORT and stem.isalpha() and stem not in GENERIC:
                add(stem, "stem")
    return dict(out)


# --- where they are looked for -------------------------------------------------------------------

def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if EXEMPT not in p.parents)


def _constants(tree: ast.AST) -> Iterator[tuple[ast.Constant, str]]:
    """String constants that do something: not a statement on its own (a docstring)."""
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n, n.value


_WORD = re.compile(r"[A-Za-z0-9]+")


def _pattern(word: str) -> re.Pattern[str]:
    flags = re.I if len(word) >= SHORT else 0
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])", flags)


def _segment(lines: list[str], node: ast.Constant) -> str:
    """The constant's source text from its first line (to place a match on its own line)."""
    end = node.end_lineno or node.lineno
    return "\n".join(lines[node.lineno - 1:end])


def scan(names: dict[str, set[str]], under: Path = SRC) -> list[Hit]:
    """Every match in the string constants of the modules under ``under``."""
    patterns = {w: (_pattern(w), [t if len(w) < SHORT else t.lower() for t in _WORD.findall(w)])
                for w in names}
    hits: list[Hit] = []
    for path in _modules(under):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        lines = source.splitlines()
        for node, text in _constants(ast.parse(source, filename=rel)):
            words = set(_WORD.findall(text))
            words |= {w.lower() for w in words}
            for word, (rx, parts) in patterns.items():
                if not (parts and all(t in words for t in parts) and rx.search(text)):
                    continue
                segment = _segment(lines, node)
                at = rx.search(segment)
                line = node.lineno + (segment[:at.start()].count("\n") if at else 0)
                hits.append(Hit(rel, line, word, ",".join(sorted(names[word])),
                                " ".join(text.split())[:80]))
    return sorted(set(hits), key=lambda h: (h.path, h.line, h.word))


# --- the allow-list ------------------------------------------------------------------------------

def allowlist() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALLOWLIST.read_text(encoding="utf-8"))
    assert isinstance(data, list), f"{ALLOWLIST.name} must be a list of {{word, reason}}"
    return data


def _key(word: str) -> str:
    return word.lower() if len(word) >= SHORT else word


def allowed(hit: Hit, entries: list[dict[str, Any]]) -> bool:
    return any(_key(str(e["word"])) == hit.word
               and (not e.get("paths") or hit.path in e["paths"]) for e in entries)


def test_the_names_come_from_both_warehouses(names: dict[str, set[str]]) -> None:
    """A sanity check that gathering works (not a list of what to look for)."""
    by_kind: dict[str, int] = defaultdict(int)
    for kinds in names.values():
        for k in kinds:
            by_kind[k] += 1
    assert by_kind["table"] >= 14 and by_kind["case"] >= 40 and by_kind["enum"] >= 60
    assert by_kind["column"] >= 70 and by_kind["stem"] >= 40 and by_kind["tool"] >= 18


def test_allowlist_entries_have_reasons_and_hold_no_table_or_case_id(
        names: dict[str, set[str]]) -> None:
    problems = []
    for e in allowlist():
        word = str(e.get("word") or "")
        if set(e) - {"word", "reason", "paths"}:
            problems.append(f"{word}: unknown keys {sorted(set(e) - {'word', 'reason', 'paths'})}")
        if not word:
            problems.append(f"an entry has no word: {e}")
        if not str(e.get("reason") or "").strip():
            problems.append(f"{word}: no reason")
        kinds = names.get(_key(word), set())
        if kinds & UNALLOWABLE:
            problems.append(f"{word}: is a {'/'.join(sorted(kinds & UNALLOWABLE))} name")
        for p in e.get("paths") or []:
            if not (ROOT / p).is_file():
                problems.append(f"{word}: path {p} does not exist")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def hits(names: dict[str, set[str]]) -> list[Hit]:
    return scan(names)


def test_allowlist_has_no_stale_entries(hits: list[Hit]) -> None:
    stale = []
    for e in allowlist():
        key = _key(str(e["word"]))
        where = {h.path for h in hits if h.word == key}
        if not where:
            stale.append(f"{e['word']}: no longer appears in src/tether/")
        for p in e.get("paths") or []:
            if p not in where:
                stale.append(f"{e['word']}: no longer appears in {p}")
    assert not stale, "\n".join(stale)


def test_lint_names_nothing(names: dict[str, set[str]]) -> None:
    """tether lint reviews any server's tools: its heuristics and advice name no warehouse."""
    bad = [h for h in scan(names, LINT) if not allowed(h, allowlist())]
    assert not bad, "\n".join(map(str, bad))





def test_src_names_nothing(hits: list[Hit]) -> None:
    bad = [h for h in hits if not allowed(h, allowlist())]
    assert not bad, f"{len(bad)} names of a test warehouse in src/tether/:\n" + "\n".join(
        map(str, bad))
