"""The ten-point review: each check on crafted tools, the CLI on files, and real third-party
MCP servers over stdio."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from tether.lint import DEFAULT_CHECKS, review_tools
from tether.lint.tokens import tool_tokens
from thirdparty import duckdb15_copy, server_command, sqlite_copy

GOOD: dict[str, Any] = {
    "name": "order_backlog_by_status",
    "description": "Orders waiting to ship, by status: one row per status. Values are in orders "
                   "and USD cents; read-only, at most 2 rows, no pagination.",
    "inputSchema": {"type": "object", "properties": {
        "status": {"type": "string", "enum": ["NEW", "PAID"]},
        "crm_account_id": {"type": "string", "pattern": "^A-\\d{7}$",
                           "description": "CRM account id."},
        "placed_after": {"type": "string", "format": "date-time", "description": "UTC."},
    }},
    "outputSchema": {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"orders": {"type": "integer",
                                                    "description": "unit: orders count"}}}}}},
    "annotations": {"readOnlyHint": True},
    "_meta": {"tether/context": {"sources": {
        "Orders waiting to ship, by status: one row per status.": "glossary",
        "Values are in orders and USD cents; read-only, at most 2 rows, no pagination.": "schema",
    }}},
}


def lost(tool: dict[str, Any]) -> set[int]:
    return {f.item for f in (c(tool) for c in DEFAULT_CHECKS) if f is not None}


def variant(**changes: Any) -> dict[str, Any]:
    t = copy.deepcopy(GOOD)
    for path, value in changes.items():
        node = t
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return t


def test_the_reference_tool_scores_ten() -> None:
    assert lost(GOOD) == set()


@pytest.mark.parametrize(("change", "item"), [
    ({"name": "list_orders"}, 1),
    ({"name": "run_sql"}, 1),
    ({"name": "orders"}, 1),
    ({"description": "Orders. More orders."}, 2),
    ({"inputSchema__properties__crm_account_id": {"type": "string"}}, 3),
    ({"inputSchema__properties__status": {"type": "string"}}, 4),
    ({"inputSchema__properties__placed_after": {"type": "string", "format": "date-time"}}, 5),
    ({"outputSchema__properties__rows__items__properties__orders": {"type": "integer"}}, 6),
    ({"outputSchema": None}, 7),
    ({"annotations": None}, 9),
    ({"_meta": None}, 10),
])
def test_each_check_catches_its_failure(change: dict[str, Any], item: int) -> None:
    assert item in lost(variant(**change))


def test_pagination_and_dormant_values() -> None:
    t = variant(description="Orders waiting to ship, by status: one row per status. Values are "
                "in orders and USD cents; read-only.")
    assert 8 in lost(t)
    t = variant(_meta={"tether/context": {"deprecated_values": {"status": ["NEW"]}}})
    assert 4 in lost(t)


def test_tokens_count_only_the_model_visible_part() -> None:
    bigger = variant(_meta={"tether/context": {"sources": {"x" * 50: "schema"}}})
    assert tool_tokens(bigger) == tool_tokens(GOOD)
    assert tool_tokens(variant(description=GOOD["description"] * 3)) > tool_tokens(GOOD)


def test_cli_on_a_json_file_min_score_and_call_log(tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps({"tools": [GOOD, variant(name="list_orders")]}))
    res = run_cli("lint", str(f), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["encoding"] == "cl100k_base" and data["tool_count"] == 2
    assert {t["name"]: t["score"] for t in data["tools"]} == {"order_backlog_by_status": 10,
                                                              "list_orders": 9}
    lost_point = data["tools"][0]["lost"][0]
    assert lost_point["item"] == 1 and lost_point["fix"]
    assert run_cli("lint", str(f), "--min-score", "10").returncode == 1
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join(json.dumps({"tool": n}) for n in
                             ["list_orders", "order_backlog_by_status", "list_orders"]))
    data = json.loads(run_cli("lint", str(f), "--json", "--call-log", str(log)).stdout)
    assert [(t["name"], t["calls"]) for t in data["tools"]] == [("list_orders", 2),
                                                               ("order_backlog_by_status", 1)]


def test_cli_bad_json_file(tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text('{"tools": [\n  {"name": "x",}\n]}')
    res = run_cli("lint", str(f))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "tools.json:2" in res.stderr and "not valid JSON" in res.stderr


def test_lint_the_project_and_its_export(demo_dir: Path, tmp_path: Path) -> None:
    from conftest import copy_project

    d = copy_project(demo_dir, tmp_path / "p")
    assert run_cli("build", "--project", str(d)).returncode == 0
    res = run_cli("lint", "--project", str(d), "--min-score", "10", "--json")
    assert res.returncode == 0, res.stdout
    from_files = json.loads(run_cli("lint", str(d / "tools"), "--json").stdout)
    assert from_files["total_tokens"] == json.loads(res.stdout)["total_tokens"]


@pytest.fixture(scope="module")
def sqlite_db(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sqlite_copy(demo_dir / "warehouse.duckdb", tmp_path_factory.mktemp("sq") / "demo.db")


def test_third_party_sqlite_server_over_stdio(sqlite_db: Path) -> None:
    exe = server_command("sqlite")
    res = run_cli("lint", f"stdio:{exe} --db-path {sqlite_db}", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout)
    scores = {t["name"]: t for t in data["tools"]}
    assert {"read_query", "write_query", "list_tables", "describe_table"} <= set(scores)
    for name in ("read_query", "list_tables", "describe_table"):
        assert 1 in {f["item"] for f in scores[name]["lost"]}, name
    assert all(t["score"] <= 6 for t in data["tools"])
    assert data["total_tokens"] > 0


def test_third_party_motherduck_server_over_stdio(demo_dir: Path, tmp_path: Path) -> None:
    db = duckdb15_copy(demo_dir / "warehouse.duckdb", tmp_path / "demo15.duckdb")
    exe = server_command("motherduck")
    res = run_cli("lint", f"stdio:{exe} --db-path {db}", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout)
    names = {t["name"] for t in data["tools"]}
    assert "execute_query" in names and "list_tables" in names
    assert all(1 in {f["item"] for f in t["lost"]} for t in data["tools"])
    assert all(t["score"] < 10 for t in data["tools"])


def test_unreachable_server_is_a_clean_error() -> None:
    res = run_cli("lint", "stdio:/nonexistent/mcp-server")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: ")


def test_review_sorted_by_name_without_calls() -> None:
    r = review_tools([variant(name="zeta_by_status"), GOOD], "x")
    assert [t.name for t in r.tools] == ["order_backlog_by_status", "zeta_by_status"]


def test_third_party_server_over_http(demo_dir: Path, tmp_path: Path) -> None:
    from conftest import free_port, http_process

    db = duckdb15_copy(demo_dir / "warehouse.duckdb", tmp_path / "demo15.duckdb")
    port = free_port()
    argv = [str(server_command("motherduck")), "--transport", "http", "--host", "127.0.0.1",
            "--port", str(port), "--db-path", str(db)]
    with http_process(argv, port):
        res = run_cli("lint", f"http://127.0.0.1:{port}/mcp", "--json")
        assert res.returncode == 0, res.stderr[-2000:]
        data = json.loads(res.stdout)
        assert "execute_query" in {t["name"] for t in data["tools"]}


def test_lint_tethers_own_server_over_stdio(demo_dir: Path, tmp_path: Path) -> None:
    import sys

    from conftest import copy_project

    d = copy_project(demo_dir, tmp_path / "own")
    assert run_cli("build", "--project", str(d)).returncode == 0
    tether = Path(sys.executable).parent / "tether"
    res = run_cli("lint", f"stdio:{tether} serve --project {d} --as-user fin.ana",
                  "--min-score", "10", "--json")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    data = json.loads(res.stdout)
    assert data["tool_count"] == 12 and data["average_score"] == 10


def test_a_paged_listing_that_cannot_be_narrowed_to_its_grain_loses_item_8() -> None:
    """One row per widget, paged, and only a colour to filter by: a question about one widget
    pages every row. A parameter on the widget (its id, a key said so, an integer key part) or
    a period keeps the point; a list without a cursor is not asked."""
    def tool(extra: dict[str, Any], cursor: bool = True) -> dict[str, Any]:
        props: dict[str, Any] = {"colour": {"type": "string", "enum": ["red", "blue"]},
                                 "limit": {"type": "integer", "maximum": 50}, **extra}
        if cursor:
            props["cursor"] = {"type": "string"}
        return {"name": "widgets_by_colour", "annotations": {"readOnlyHint": True},
                "description": "Which widgets match: one row per widget. No amounts; read-only, "
                               "at most 50 rows a page, cursor paging.",
                "inputSchema": {"type": "object", "properties": props}}

    def lost8(t: dict[str, Any]) -> bool:
        return any(f.item == 8 for f in review_tools([t], "x").tools[0].lost)

    assert lost8(tool({}))
    assert lost8(tool({"order_by": {"type": "string"}, "count_by": {"enum": ["colour"]}}))
    for narrowing in ({"widget_id": {"type": "string"}}, {"period": {"type": "string"}},
                      {"label": {"type": "string", "description": "The key: at most one row."}},
                      {"batch": {"type": "integer"}},
                      {"made": {"type": "string", "format": "date"}}):
        assert not lost8(tool(narrowing)), narrowing
    assert not lost8(tool({}, cursor=False))
