"""One template grammar: `{{ user.ATTR }}` and `{{ clock }}` are parsed by policy/templates.py
only. Every other module of tether hands a row filter or a freshness condition to it; a module
that matches, substitutes or splits `{{ ... }}` itself is a second parser and fails here.

dbt's Jinja (`{{ ref(...) }}`, `{{ source(...) }}`, MetricFlow's `{{ Dimension(...) }}`) is
another language read by the dbt importer; it is allowed where the pattern names it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tether.errors import ConfigError
from tether.policy import templates

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"
OWNER = SRC / "policy" / "templates.py"
DBT_JINJA = ("ref", "source", "Dimension", "TimeDimension", "Entity")
# dbt's own Jinja, checked by the dbt importer: a MetricFlow filter with Jinja left after its
# Dimension()/Entity() calls are translated is refused (that is dbt's language, not ours)
DBT_READERS = {("imports/dbt_semantic.py", "'{{' in ...")}
# calls that match, substitute or split text: given a template-shaped string, a parser
TEXT_CALLS = {"compile", "sub", "subn", "search", "match", "fullmatch", "findall", "finditer",
              "split", "replace", "find", "index", "rfind", "startswith", "endswith",
              "partition", "count"}


def _parsers(path: Path, root: Path = SRC) -> list[str]:
    """Where ``path`` handles template text itself: a pattern for `{{` (regex or plain) given
    to a matching, substituting or splitting call, or compared with ``in``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []

    def templated(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if ("{{" in text or r"\{\{" in text) and not any(name in text
                                                           for name in DBT_JINJA):
                return text
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (
                func.id if isinstance(func, ast.Name) else "")
            if name in TEXT_CALLS:
                for arg in node.args:
                    text = templated(arg)
                    if text is not None:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {name}({text!r})")
        elif isinstance(node, ast.Compare) and any(isinstance(o, ast.In | ast.NotIn)
                                                   for o in node.ops):
            text = templated(node.left)
            if text is not None:
                found.append(f"{path.relative_to(root)}:{node.lineno} {text!r} in ...")
    return found


def test_no_module_outside_policy_parses_a_template() -> None:
    offenders = [hit for path in sorted(SRC.rglob("*.py"))
                 if path.parent != SRC / "policy" for hit in _parsers(path)
                 if (hit.split(":")[0], hit.split(" ", 1)[1]) not in DBT_READERS]
    assert not offenders, "parse templates with tether.policy.templates:\n" + "\n".join(offenders)


def test_the_scan_sees_a_second_parser(tmp_path: Path) -> None:
    """The check above would fail on the forms a second parser takes."""
    for line in ('re.compile(r"\\{\\{\\s*user\\.(\\w+)\\s*\\}\\}")',
                 'text.replace("{{ clock }}", ":clock")',
                 'text.split("{{")',
                 '"{{" in text'):
        f = tmp_path / "m.py"
        f.write_text(f"import re\ntext = ''\n{line}\n")
        hits = _parsers_at(f)
        assert hits, line
    f = tmp_path / "m.py"
    f.write_text("import re\nREF = re.compile(r\"\\{\\{\\s*ref\\(\\s*'([^']+)'\\s*\\)\")\n")
    assert not _parsers_at(f)


def _parsers_at(path: Path) -> list[str]:
    return _parsers(path, path.parent)


def test_the_owner_is_the_grammar() -> None:
    """The parser itself: both templates as bound placeholders, anything else refused."""
    assert OWNER.is_file()
    t = templates.parse("region = {{ user.region }} AND {{user.team}} = team")
    assert t.attributes == ("region", "team") and not t.clock
    assert t.bind({"region": "EMEA", "team": "a"}) == {"u_region": "EMEA", "u_team": "a"}
    f = templates.parse("happened_at <= {{ clock }}", kind="freshness")
    assert f.clock and f.attributes == ()
    for text, kind in (("a = {{ clock }}", "row_filter"), ("a = {{ user.x }}", "freshness"),
                       ("a = {{ user['x'] }}", "row_filter")):
        with pytest.raises(ConfigError):
            templates.parse(text, kind=kind)  # type: ignore[arg-type]
