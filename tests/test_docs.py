"""Docs that the code generates stay true: every tether.yaml key and every command is documented."""

from __future__ import annotations

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
    keys = [k for k, _, _ in config_rows()]
    assert {"products.*.metric_time", "policies.roles.*.row_filters", "clock",
            "profiling.enum_max_values"} <= set(keys)
    for key in keys:
        assert f"`{key}`" in doc


def test_every_command_is_documented() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = ("init", "profile", "demo init", "demo drift", "build", "tools", "lint", "serve",
                "versions", "token add", "token list", "token revoke", "check", "review approve",
                "review list", "review show", "review reject", "watch", "diff", "drift report",
                "ci", "doctor")
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
