"""Docs that the code generates stay true: every tether.yaml key and every command is documented."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import run_cli
from tether.cli.docgen import config_rows, targets

ROOT = Path(__file__).resolve().parents[1]


def test_reference_docs_are_up_to_date() -> None:
    for path, text in targets(ROOT / "docs").items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is stale: run python -m tether.cli.docgen --write")


def test_every_config_key_is_documented() -> None:
    doc = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    keys = [k for k, _, _, _ in config_rows()]
    assert {"products.*.metric_time", "policies.roles.*.row_filters", "clock",
            "profiling.enum_max_values"} <= set(keys)
    for key in keys:
        assert f"`{key}`" in doc


def test_every_command_is_documented() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = ("init", "profile", "demo init", "demo drift", "build", "tools", "lint", "serve",
                "versions", "token add", "token list", "token revoke", "check", "review approve",
                "review list", "review show", "review reject", "watch", "diff", "drift report",
                "ci", "doctor", "retire", "rollback", "import dbt", "import openlineage",
                "explain", "ui", "learn", "learn dismiss", "learn report")
    for cmd in commands:
        assert f"## `tether {cmd}" in doc, cmd
    res = run_cli("--help")
    assert res.returncode == 0
    for cmd in commands:
        assert cmd.split()[0] in res.stdout


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n", 3)[:3]
    text = "\n".join(head)
    assert "make demo" in text and "make test" in text


def test_version_and_usage_error() -> None:
    assert run_cli("--version").stdout.startswith("tether ")
    res = run_cli("profile", "--no-such-flag")
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_the_docs_stand_alone() -> None:
    """No doc, README, docstring or comment cites a document that is not in the repository (the
    project's planning notes live outside it); every relative link in a doc resolves."""
    outside = re.compile(r"CONTRACTS(\.md)?\b|GOTCHAS|DESIGN\.md|MCP-SDK-NOTES|\.\./shared|"
                         r"\bseeds/|issues show")
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml",
             *(ROOT / "docs").glob("*.md"), *(ROOT / "schemas").glob("*.json")]
    for folder in ("src", "bench", "proof", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in (
            ".py", ".yaml", ".json", ".md", "") and "__pycache__" not in p.parts
            and not p.relative_to(ROOT).as_posix().startswith("bench/out/")]  # made by benches
    cited = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.name != "test_docs.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if outside.search(line)]
    assert not cited, cited
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)", doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith(("mailto:", "../demo-out/", "demo-out/")):
                continue
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}, not here"
