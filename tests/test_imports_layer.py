"""Import layers under tether.yaml (merge, origins, damaged layers) and glossary documents
(`glossary_dir:`), on the demo and on the second warehouse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import copy_project, run_cli
from tether.config import load_project
from tether.drift.check import check
from tether.drift.publish import build
from tether.errors import ConfigError
from tether.layers.model import ImportLayer, layer_path, merge, write_layer
from tether.profiling import profile_project
from tether.toolgen import generate


def test_merge_is_key_by_key_and_the_higher_layer_wins() -> None:
    lower = {"products": {"p": {"table": "t", "description": "imported",
                                "columns": {"a": {"unit": "EUR", "description": "d"},
                                            "b": {"classification": "restricted"}}}},
             "lineage": [{"from": "x", "to": "p", "via": "dbt:m"}]}
    higher = {"products": {"p": {"sql": "SELECT 1", "columns": {
        "a": {"unit_column": "currency"}, "b": {"classification": "public"}}}},
        "lineage": [{"from": "y", "to": "p"}]}
    out = merge(lower, higher)
    p = out["products"]["p"]
    assert "table" not in p and p["sql"] == "SELECT 1"  # one of table/sql: the typed one
    assert p["description"] == "imported"  # what tether.yaml leaves out, the layer fills
    assert p["columns"]["a"] == {"unit_column": "currency", "description": "d"}
    assert p["columns"]["b"]["classification"] == "restricted"  # never lifted by a layer above
    assert out["lineage"] == [{"from": "y", "to": "p"}, {"from": "x", "to": "p", "via": "dbt:m"}]
    assert lower["products"]["p"]["table"] == "t"  # inputs untouched


@pytest.fixture
def demo(demo_dir: Path, tmp_path: Path) -> Path:
    return copy_project(demo_dir, tmp_path / "demo")


@pytest.fixture
def second(second_dir: Path, tmp_path: Path) -> Path:
    return copy_project(second_dir, tmp_path / "second")


def layer_with(config: dict[str, Any], origins: list[Any] | None = None) -> ImportLayer:
    return ImportLayer(kind="dbt", imported_at="2026-01-01T00:00:00+00:00", config=config,
                       origins=origins or [])


def test_a_layer_value_that_does_not_validate_names_the_layer(demo: Path) -> None:
    project = load_project(demo)
    product = next(iter(project.config.products))
    write_layer(demo, layer_with({"products": {product: {"columns": {"x": {"unit": 3}}}}},
                                 [[["products", product], "model.pkg.thing"]]))
    with pytest.raises(ConfigError) as e:
        load_project(demo)
    assert ".tether/imports/dbt.json" in e.value.paragraph()
    assert "model.pkg.thing" in e.value.paragraph()


def test_a_damaged_layer_file_is_one_paragraph_exit_2(demo: Path) -> None:
    path = layer_path(demo, "dbt")
    path.parent.mkdir(parents=True)
    path.write_text('{"kind": "dbt", "config": ')
    res = run_cli("tools", "--project", str(demo))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert ".tether/imports/dbt.json" in res.stderr and "import dbt" in res.stderr


def move_term_to_document(project_dir: Path) -> tuple[str, Path]:
    """Move the term of the project's first governed metric from tether.yaml into
    glossary/<term>.md (front matter and body); return the term and the file."""
    path = project_dir / "tether.yaml"
    data = yaml.safe_load(path.read_text())
    term = next(m["term"] for m in data["metrics"].values() if m.get("term"))
    entry = data["glossary"].pop(term)
    data["glossary_dir"] = "glossary"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    folder = project_dir / "glossary"
    folder.mkdir()
    doc = folder / (term.replace(" ", "-") + ".md")
    front = {k: v for k, v in entry.items() if k != "definition"}
    doc.write_text("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n"
                   + entry["definition"] + "\n")
    return term, doc


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_glossary_document_edit_is_drift_naming_the_file(
        which: str, request: pytest.FixtureRequest) -> None:
    d: Path = request.getfixturevalue(which)
    before = load_project(d).config.glossary
    term, doc = move_term_to_document(d)
    project = load_project(d)
    assert project.config.glossary[term] == before[term]  # the same term, read from Markdown
    origin = project.origin("glossary", term, "definition")
    assert origin is not None and origin.kind == "glossary_dir"
    assert origin.where is not None and origin.where.startswith(f"glossary/{doc.name}:")
    assert build(project).exit_code == 0
    assert check(load_project(d)).exit_code == 0
    body_line = doc.read_text().splitlines().index(before[term].definition) + 1
    doc.write_text(doc.read_text().replace(before[term].definition,
                                           before[term].definition + " Reviewed yearly."))
    result = check(load_project(d))
    assert result.exit_code == 11
    [event] = [e for e in result.events if e["kind"] == "definition_changed"]
    assert event["subject"] == f"term:{term}"
    assert event["details"]["where"] == f"glossary/{doc.name}:{body_line}"
    notes = [o.change_note or "" for o in result.outcomes if o.outcome == "pending"]
    assert notes and all(f"glossary/{doc.name}:{body_line}" in n for n in notes)
    # the generated metric's governed sentence records the document it came from
    loaded = load_project(d)
    tools = generate(loaded, {p.product: p for p in profile_project(loaded)}, "grounded")
    origins = [o for t in tools for o in t.meta["tether/context"].get("origins", {}).values()]
    assert any(o.startswith(f"glossary_dir:glossary/{doc.name}:") for o in origins)


@pytest.mark.parametrize("text, where, said", [
    ("---\npredicate: [unclosed\n---\nA term.\n", ":3", "not valid YAML"),  # where YAML noticed
    ("---\npredicate: x = 1\n", ":1", "never closed"),
    ("---\nwho: me\n---\nA term.\n", ":2", "unknown key 'who'"),
    ("---\nfields: [a.b]\n---\n\n", ":4", "no definition"),
])
def test_broken_front_matter_exits_2_naming_file_and_line(
        second: Path, text: str, where: str, said: str) -> None:
    (second / "glossary").mkdir()
    (second / "glossary" / "broken-term.md").write_text(text)
    p = second / "tether.yaml"
    p.write_text(p.read_text() + "\nglossary_dir: glossary\n")
    for args in (("build",), ("check",), ("explain", "glossary")):
        res = run_cli(*args, "--project", str(second))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert f"glossary/broken-term.md{where}" in res.stderr and said in res.stderr, res.stderr


def test_a_missing_glossary_dir_names_the_key(second: Path) -> None:
    p = second / "tether.yaml"
    p.write_text(p.read_text() + "\nglossary_dir: nowhere\n")
    res = run_cli("tools", "--project", str(second))
    assert res.returncode == 2 and "tether.yaml:" in res.stderr and "nowhere" in res.stderr


def test_explain_names_tether_yaml_and_its_line(second: Path) -> None:
    project = load_project(second)
    product = next(iter(project.config.products))
    res = run_cli("explain", f"products.{product}.table", "--project", str(second), "--json")
    assert res.returncode == 0, res.stderr
    [row] = json.loads(res.stdout)
    line = next(i for i, text in enumerate((second / "tether.yaml").read_text().splitlines(), 1)
                if text.strip().startswith("table:"))
    assert row["layer"] == "tether.yaml" and row["from"] == f"tether.yaml:{line}"
    res = run_cli("explain", "products.no_such_thing", "--project", str(second))
    assert res.returncode == 2 and "no value" in res.stderr


def test_the_importers_sit_at_layer_zero() -> None:
    """The layer reader (tether.layers) sits beside the configuration that loads it: it imports
    only context, errors, text files and itself, never the configuration. The importers
    (tether.imports) read files into layers and import only layer 0 (the configuration, the
    layers, context, errors, text files) and themselves, so nothing they import can reach a
    source, the registry or a server."""
    import ast

    root = Path(__file__).resolve().parents[1] / "src" / "tether"
    rules = {"layers": ("tether.context", "tether.errors", "tether.textfiles", "tether.layers"),
             "imports": ("tether.config", "tether.context", "tether.errors", "tether.textfiles",
                         "tether.layers", "tether.imports")}
    found = []
    for room, allowed in rules.items():
        for path in sorted((root / room).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [(room, path.name, n) for n in names
                          if n.startswith("tether") and not n.startswith(allowed)]
    assert not found, found


def test_exclusive_keys_apply_to_their_own_mappings_only() -> None:
    """`table`/`sql` exclude each other in a product, not as the names of two columns."""
    lower = {"products": {"p": {"table": "t", "columns": {"sql": {"description": "imported"}},
                                "freshness": {"column": "loaded_at"}}}}
    higher = {"products": {"p": {"columns": {"table": {"description": "typed"}},
                                 "freshness": {"load_time": True}}}}
    out = merge(lower, higher)["products"]["p"]
    assert out["table"] == "t"
    assert out["columns"] == {"sql": {"description": "imported"},
                              "table": {"description": "typed"}}
    assert out["freshness"] == {"load_time": True}  # that group still holds where it belongs


def test_a_symlinked_glossary_document_is_not_read(second: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("# secret term\nRead from outside the folder.\n")
    folder = second / "glossary"
    folder.mkdir()
    (folder / "plain-term.md").write_text("A term of the folder.\n")
    (folder / "linked-term.md").symlink_to(outside)
    (folder / "sub").symlink_to(tmp_path, target_is_directory=True)
    p = second / "tether.yaml"
    p.write_text(p.read_text() + "\nglossary_dir: glossary\n")
    glossary = load_project(second).config.glossary
    assert "plain term" in glossary
    assert "secret term" not in glossary and "linked term" not in glossary


def test_a_failed_layer_write_is_an_error_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = layer_path(tmp_path, "dbt")
    path.mkdir(parents=True)  # a folder where the file goes: the rename must fail
    with pytest.raises(ConfigError) as e:
        write_layer(tmp_path, layer_with({}))
    assert ".tether/imports/dbt.json" in e.value.paragraph()
    assert sorted(p.name for p in path.parent.iterdir()) == ["dbt.json"]
