"""The package's layout holds by test, not by habit: each `_meta` key has one home
(tether/context/meta.py, its readers and writers side by side), read and written nowhere else by
name; imports follow the layers (a module imports only from rooms below its own), serve never
imports drift, the module-level import graph has no cycle, and no import inside a function is
there to break one (the few that stay, for start-up time, are listed with their reasons)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
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


# --- the import graph ---------------------------------------------------------------------------

RANK = {"errors": 0.0, "keyfile": 0.1, "httpguard": 0.1, "textfiles": 0.2, "context": 0.3,
        "layers": 0.4, "config": 0.5, "": 0.6,
        "sources": 1.0, "policy": 1.0, "imports": 1.5,
        "profiling": 2.0, "registry": 2.0,
        "toolgen": 3.0,
        "plan": 2.5,
        "drift": 4.0, "lint": 4.0,
        "serve": 5.0, "eval": 5.0, "learn": 5.5,
        "web": 6.0, "demo": 6.0, "cli": 6.5, "__main__": 7.0}
"""Each room's place (the layers: 0 context, config, errors and what the configuration loads
with; 1 sources, policy; 2 profiling, registry, then the join planner; 3 toolgen; 4 drift, lint;
5 serve, eval; 6 the console, the demo and the CLI on top). A module imports only from rooms of
a lower rank: two rooms of one layer never import each other (eval never imports serve)."""

START_UP = {
    ("tether.sources", "tether.sources.duckdb"):
        "an engine's driver loads when a source of that engine is opened, not with every command",
    ("tether.sources", "tether.sources.sqlalchemy"):
        "SQLAlchemy loads only for a project with a SQLAlchemy source",
    ("tether.sources", "tether.sources.apisource"):
        "the HTTP client loads only for a project with an API source",
    ("tether.sources", "tether.sources.spark"):
        "the Spark Connect client (grpc, Arrow) loads only for a project with a Spark source",
    ("tether.demo.drift", "tether.sources.sqlalchemy"):
        "the demo's PostgreSQL step loads SQLAlchemy only when it runs",
}
"""Imports inside a function that stay, each for start-up time (never to break a cycle). The
CLI's command modules (tether.cli.*) also import their parts when a command runs, so `tether
--help` and shell completion load no engine, SDK or web stack."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    inner: bool  # inside a function
    typing: bool  # under `if TYPE_CHECKING:`


def room(module: str) -> str:
    return [*module.split("."), ""][1]


def edges() -> list[Edge]:
    names = {m for m, _ in modules()}

    def resolve(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for mod, tree in modules():
        inner, typing = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inner |= {id(n) for n in ast.walk(node)}
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typing |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from pkg import sub` loads the submodule; `from pkg import name`, the package
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in names
                           else node.module for a in node.names]
            for t in targets:
                target = resolve(t) if t.split(".")[0] == "tether" else None
                if target and target != mod:
                    out.append(Edge(mod, target, node.lineno, id(node) in inner,
                                    id(node) in typing))
    return out


def loads() -> dict[str, set[str]]:
    """module -> the modules its module-level imports (not type-only) load."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges():
        if not e.inner and not e.typing:
            graph[e.source].add(e.target)
    return graph


def reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return False


def test_imports_follow_the_layers() -> None:
    wrong = [f"{e.source}:{e.line} imports {e.target}" for e in edges()
             if room(e.source) != room(e.target)
             and RANK[room(e.target)] >= RANK[room(e.source)]]
    assert not wrong, "\n".join(wrong)
    assert {room(m) for m, _ in modules()} <= set(RANK), "a new room needs its place in RANK"


def test_serve_imports_nothing_of_drift() -> None:
    """The server reads the registry, the policy and the exposure check in their own rooms;
    publishing (drift) is never loaded to serve."""
    found = [f"{e.source}:{e.line}" for e in edges()
             if room(e.source) == "serve" and room(e.target) == "drift"]
    assert not found, found


def test_compiling_a_plan_asks_no_registry() -> None:
    """toolgen/plan.py turns a plan and arguments into SQL from what it is given: whether the
    plan pages its rows is said by the runner that calls it, not looked up in the kinds
    registry (the registry sits above the plan compiler)."""
    found = [f"{e.source}:{e.line}" for e in edges()
             if e.source == "tether.toolgen.plan" and e.target == "tether.toolgen.kinds"]
    assert not found, found


def test_the_module_level_import_graph_has_no_cycle() -> None:
    graph = loads()
    cycles = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                    if reaches(graph, t, m))
    assert not cycles, "\n".join(cycles)


def test_no_circle_of_any_kind() -> None:
    """Type-only imports included: two modules that name each other's types are one room in
    two files (the shared type moves to where both can import it)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges():
        if not e.inner:
            graph[e.source].add(e.target)
    cycles = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                    if reaches(graph, t, m))
    assert not cycles, "\n".join(cycles)


SERVER_READERS = {"tether.cli.build", "tether.cli.serve", "tether.web.console",
                  "tether.demo.policy_tour", "tether.demo.write_tour"}
"""Who may import the server's module: the commands that start one, the console, the demo."""


def test_no_part_of_serving_imports_the_server() -> None:
    """The server only assembles the parts (docs/serve.md, "The server in parts"): a part takes
    the few operations it uses (a Protocol, or the other parts), never the server, so no module
    of serve/ imports serve/server.py, at run time or for types."""
    found = sorted(f"{e.source}:{e.line}" for e in edges() if e.target == "tether.serve.server"
                   and e.source not in SERVER_READERS)
    assert not found, found


def test_no_module_of_serving_is_a_house_of_its_own() -> None:
    """No file of serve/ over 600 lines, and the server's class under 200."""
    long = sorted(f"{f.name}: {n}" for f in (SRC / "serve").glob("*.py")
                  if (n := len(f.read_text().splitlines())) > 600)
    assert not long, long
    tree = ast.parse((SRC / "serve" / "server.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TetherServer")
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 < 200


def test_no_import_inside_a_function_is_there_to_break_a_cycle() -> None:
    """An import inside a function whose module imports this one back (at module level) would
    close a cycle if written at the top: there is none. The others stay only for start-up
    time: the CLI's commands, and START_UP with its reasons (each still there)."""
    graph = loads()
    inner = [e for e in edges() if e.inner and not e.typing]
    breaking = [f"{e.source}:{e.line} imports {e.target}" for e in inner
                if reaches(graph, e.target, e.source)]
    assert not breaking, "\n".join(breaking)
    unexplained = [f"{e.source}:{e.line} imports {e.target}" for e in inner
                   if room(e.source) != "cli" and (e.source, e.target) not in START_UP]
    assert not unexplained, "\n".join(unexplained)
    assert set(START_UP) <= {(e.source, e.target) for e in inner}, "a stale START_UP entry"


def test_the_graph_sees_what_it_forbids() -> None:
    """The checks above read real imports: the server's module imports the registry at the top,
    the sources' package opens its engines inside a function, and a TYPE_CHECKING import is
    told apart."""
    found = {(e.source, e.target): e for e in edges()}
    assert not found[("tether.serve.server", "tether.registry")].inner
    assert found[("tether.sources", "tether.sources.duckdb")].inner
    assert found[("tether.serve.runners", "tether.serve.executor")].typing
    assert reaches(loads(), "tether.serve.server", "tether.config")
