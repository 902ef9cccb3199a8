"""Lint item 10 for any server: a third-party MCP server (the official SDK's low-level server,
not tether) that states each description sentence's source under
``_meta["tether/context"].sources`` scores 10/10; the same tool without that key scores 9/10."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from tether.lint import DEFAULT_CHECKS

FIRST = "Overdue book loans per branch, one row per branch and loan status."
SECOND = "Counts are in loans and late fees in EUR cents; read-only, at most 40 rows, no pagination."
THIRD = "A loan is overdue the day after its due date, in the branch's time zone."

TOOL: dict[str, Any] = {
    "name": "overdue_loans_by_branch",
    # Sentences wrapped across lines: the sources match them whitespace-insensitively.
    "description": f"{FIRST}\n{SECOND}  {THIRD}",
    "inputSchema": {"type": "object", "properties": {
        "loan_status": {"type": "string", "enum": ["OVERDUE", "LOST"],
                        "description": "Which loans to count."},
        "branch_code": {"type": "string", "pattern": "^BR-\\d{3}$",
                        "description": "The library's branch code, BR- and three digits."},
        "due_before": {"type": "string", "format": "date",
                       "description": "Only loans due before this day (UTC)."},
    }},
    "outputSchema": {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {
            "branch_code": {"type": "string", "description": "The branch."},
            "loans": {"type": "integer", "description": "unit: loans (count)"},
            "late_fees": {"type": "integer", "description": "unit: EUR cents"},
        }}}}},
    "annotations": {"readOnlyHint": True},
    "_meta": {"tether/context": {"sources": {FIRST: "glossary", SECOND: "schema",
                                             THIRD: "policy"}}},
}

SERVER = '''import json
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = json.loads(sys.argv[1])


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool.model_validate(TOOL)])


async def main():
    server = Server("library-loans", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
'''


def lint_server(tmp_path: Path, tool: dict[str, Any]) -> dict[str, Any]:
    script = tmp_path / "library_server.py"
    script.write_text(SERVER, encoding="utf-8")
    command = shlex.join([sys.executable, str(script), json.dumps(tool)])
    res = run_cli("lint", f"stdio:{command}", "--json")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    data = json.loads(res.stdout)
    assert data["tool_count"] == 1
    result: dict[str, Any] = data["tools"][0]
    return result


def without_sources(tool: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tool.items() if k != "_meta"}


def test_a_third_party_tool_with_sources_scores_ten(tmp_path: Path) -> None:
    review = lint_server(tmp_path, TOOL)
    assert review["name"] == "overdue_loans_by_branch"
    assert review["score"] == 10, review["lost"]


def test_the_same_tool_without_sources_loses_item_ten_only(tmp_path: Path) -> None:
    review = lint_server(tmp_path, without_sources(TOOL))
    assert review["score"] == 9
    assert [f["item"] for f in review["lost"]] == [10]
    assert '_meta["tether/context"].sources' in review["lost"][0]["fix"]


def item_ten(tool: dict[str, Any]) -> bool:
    """Whether item 10 is earned (checked in process, on the wire form)."""
    return DEFAULT_CHECKS[9](tool) is None


@pytest.mark.parametrize(("sources", "earned"), [
    ({FIRST: "glossary", SECOND: "schema", THIRD: "policy"}, True),
    ({FIRST: "glossary", SECOND: "schema"}, False),  # a sentence without a source
    ({FIRST: "glossary", SECOND: "schema", THIRD: "a wiki"}, False),  # not in the vocabulary
    ({FIRST: "glossary", SECOND: "schema", THIRD: ["policy"]}, False),  # one source a sentence
    ([FIRST, SECOND, THIRD], False),  # not a map
])
def test_item_ten_reads_the_documented_key(sources: Any, earned: bool) -> None:
    tool = without_sources(TOOL) | {"_meta": {"tether/context": {"sources": sources}}}
    assert item_ten(tool) is earned
    other_key = without_sources(TOOL) | {"_meta": {"provenance": {"sources": sources}}}
    assert not item_ten(other_key)
