"""Paths into the data that do not look like policy: a metric's SQL naming a table that is no
product (in a CTE, a subquery, a table function), and a classification that a mask selector
reads. The first is never run; the second is a policy change, reviewed before any server serves
it. On a small warehouse of its own (a clinic's appointments), with nothing of the demo's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
import yaml
from mcp import Client

from conftest import run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.registry import open_registry
from tether.serve.server import TetherServer


def _project(d: Path, **extra: Any) -> Path:
    d.mkdir()
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("CREATE TABLE appointments AS SELECT range + 1 AS appointment_id, "
                    "['NORTH', 'SOUTH'][range % 2 + 1] AS site, "
                    "['BOOKED', 'SEEN', 'MISSED'][range % 3 + 1] AS outcome, "
                    "'patient' || range || '@example.org' AS contact "
                    "FROM range(60)")
        con.execute("CREATE TABLE payroll AS SELECT 'dr ' || range AS name, 250000 + range AS pay "
                    "FROM range(3)")  # no product reads it
    config: dict[str, Any] = {
        "clock": "2026-04-01T00:00:00Z",
        "sources": {"main": {"url": "duckdb:///warehouse.duckdb"}},
        "products": {"appointments": {
            "table": "appointments", "primary_key": ["appointment_id"],
            "columns": {"contact": {"classification": "pii"}}}},
        "policies": {
            "roles": {"desk": {"tools": ["*"], "row_filters": {"appointments":
                                                               "site = {{ user.site }}"},
                               "masks": {"pii": "hash"}}},
            "users": {"kim": {"role": "desk", "site": "NORTH"}}},
    }
    config.update(extra)
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return d


def _call(d: Path, tool: str, args: dict[str, Any]) -> Any:
    server = TetherServer(load_project(d), stdio_user="kim")

    async def go() -> Any:
        async with Client(server.server) as c:
            return await c.call_tool(tool, args)

    try:
        return anyio.run(go)
    finally:
        server.close()


@pytest.mark.parametrize("measure", [
    "(WITH appointments AS (SELECT pay FROM payroll) SELECT max(pay) FROM appointments)",
    "(SELECT max(pay) FROM payroll)",
    "count(*) + (SELECT count(*) FROM main.appointments)",  # the product's table, unfiltered
])
def test_a_metric_reading_a_table_past_the_policy_is_not_run(tmp_path: Path,
                                                            measure: str) -> None:
    d = _project(tmp_path / "clinic", metrics={"slots": {
        "measure": f"{measure}", "dimensions": ["appointments.outcome"], "window": "current",
        "unit": "rows", "description": "Slots."}})
    build(load_project(d))
    result = _call(d, "slots", {})
    assert result.is_error
    text = result.content[0].text
    assert "not a data product read through your policy" in text
    assert "250002" not in text and "60" not in text  # nothing of what it would have read


def test_a_metric_over_its_product_still_runs_filtered(tmp_path: Path) -> None:
    d = _project(tmp_path / "clinic", metrics={"slots": {
        "measure": "count(*)", "dimensions": ["appointments.outcome"], "window": "current",
        "unit": "rows", "description": "Slots."}})
    build(load_project(d))
    result = _call(d, "slots", {})
    assert not result.is_error, result.content
    assert result.structured_content["overall"]["slots"] == 30  # the caller's site only


def test_declassifying_a_column_a_mask_selects_is_a_policy_change(tmp_path: Path) -> None:
    d = _project(tmp_path / "clinic")
    build(load_project(d))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    del config["products"]["appointments"]["columns"]  # contact is no longer pii
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = run_cli("check", "--project", str(d), "--json")
    assert r.returncode == 11, r.stdout + r.stderr  # waits for a person
    registry = open_registry(load_project(d))
    try:
        events = [e for e in registry.events() if e["kind"] == "policy_changed"]
        pending = [x for x in registry.reviews() if x["status"] == "pending"]
    finally:
        registry.close()
    assert events and "appointments" in events[0]["subject"]
    assert pending
    # a server starts, and enforces the approved policy: contact is still hashed for kim
    result = _call(d, "appointments_by_attributes", {"limit": 5})
    assert not result.is_error, result.content
    contacts = {r["contact"] for r in result.structured_content["rows"]}
    assert contacts and all(len(c) == 64 and "@" not in c for c in contacts)


@pytest.mark.parametrize("warehouse, metric, old, new", [
    ("demo", "active_customers", "'ACTIVE', 'PAUSED_BILLING'", "'ACTIVE'"),
    ("second", "attended_visits", "'ARRIVED', 'DISCHARGED', 'TRANSFERRED'", "'DISCHARGED'"),
])
def test_a_predicate_edited_without_a_word_of_its_definition_is_a_reviewed_version(
        warehouse: str, metric: str, old: str, new: str, demo_dir: Path, second_dir: Path,
        tmp_path: Path) -> None:
    """The values of a governed predicate change what a metric counts, though its definition's
    words (and so its wire form) stay the same: a new version a person approves, whose plan
    runs the new predicate; never the old version kept running the old one."""
    from conftest import copy_project
    from tether.drift.check import decide
    from tether.toolgen.model import QueryPlan

    d = copy_project(demo_dir if warehouse == "demo" else second_dir, tmp_path / warehouse)
    build(load_project(d))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    predicate = config["metrics"][metric]["predicate"]
    assert old in predicate
    config["metrics"][metric]["predicate"] = predicate.replace(old, new)
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = run_cli("check", "--project", str(d), "--json")
    assert r.returncode == 11, r.stdout[-2000:] + r.stderr
    registry = open_registry(load_project(d))
    try:
        review = next(x for x in registry.reviews() if x["status"] == "pending")
        reviewer = next(u for u, cfg in load_project(d).config.policies.users.items()
                        if load_project(d).config.policies.roles[cfg.role].reviewer)
    finally:
        registry.close()
    decide(load_project(d), review["id"], True, reviewer)
    registry = open_registry(load_project(d))
    try:
        tool = next(v for v in registry.current().values()
                    if QueryPlan.model_validate(v.plan).kind == "metric"
                    and metric in str(v.definition.get("_meta")))
    finally:
        registry.close()
    assert tool.version.startswith("2.")  # semantic: major
    assert new in str(QueryPlan.model_validate(tool.plan).select)
    assert old not in str(QueryPlan.model_validate(tool.plan).select)


@pytest.mark.parametrize("warehouse", ["demo", "second"])
def test_a_mask_whose_mode_changes_is_a_policy_change(warehouse: str, demo_dir: Path,
                                                      second_dir: Path, tmp_path: Path) -> None:
    """Every role's first mask switched to another mode (a hash that becomes a redaction
    changes no column's type): what a caller reads changed, so a person decides before any
    server enforces it, and the tool's column says the new mode."""
    from conftest import copy_project

    d = copy_project(demo_dir if warehouse == "demo" else second_dir, tmp_path / warehouse)
    build(load_project(d))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    role, rules = next((n, r["masks"]) for n, r in config["policies"]["roles"].items()
                       if r.get("masks"))
    column, mode = next(iter(rules.items()))
    other = {"redact": "hash", "hash": "redact", "null": "redact"}[mode]
    rules[column] = other
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = run_cli("check", "--project", str(d), "--json")
    assert r.returncode == 11, r.stdout[-2000:] + r.stderr
    data = json.loads(r.stdout)
    assert {e["subject"] for e in data["events"] if e["kind"] == "policy_changed"} == {
        f"{role}:{column.split('.')[0]}"}
    pending = [t for t in data["tools"] if t["outcome"] == "pending"]
    assert pending and {t["change_kind"] for t in pending} == {"policy"}
    # a server started now enforces the approved mode, not the edit waiting for review
    user = next(u for u, c in config["policies"]["users"].items() if c["role"] == role)
    server = TetherServer(load_project(d), stdio_user=user)
    try:
        from tether.policy.entitle import column_masks

        product, leaf_column = column.split(".", 1)
        assert column_masks(server.project.config, user, product)[leaf_column] == mode
    finally:
        server.close()
    # the exported tools are still the approved ones; once a reviewer approves, the new mode
    from tether.drift.check import decide

    project = load_project(d)
    reviewer = next(u for u, cfg in project.config.policies.users.items()
                    if project.config.policies.roles[cfg.role].reviewer)
    registry = open_registry(project)
    try:
        review = next(x for x in registry.reviews() if x["status"] == "pending")
    finally:
        registry.close()
    said = {"hash": "keyed hash", "redact": "redacted", "null": "null"}
    leaf = column.split(".", 1)[1]

    def described() -> list[str]:
        wires = [json.loads(p.read_text()) for p in (d / "tools").glob("*.json")]
        return [str(w["outputSchema"]["properties"]["rows"]["items"]["properties"][leaf].get(
            "description")) for w in wires if leaf in str(w.get("outputSchema"))]

    assert described() and not any(said[other] in s for s in described())
    decide(project, review["id"], True, reviewer)
    assert any(said[other] in s for s in described()), described()
