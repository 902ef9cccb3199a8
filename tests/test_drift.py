"""Drift scenarios on the demo warehouse: each step of the demo's story, checked end to end."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import run_cli, with_serve, without_named_restrictions
from tether.config import load_project
from tether.context.meta import enum_of
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.demo.warehouse import CLOCK
from tether.drift.check import check, decide
from tether.drift.publish import build
from tether.errors import ConfigError
from tether.registry import open_registry
from tether.serve.server import TetherServer


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    d = tmp_path / "drift"
    init_demo(d, scale=0.05)
    build(load_project(d))
    return d


def outcomes(result: object) -> dict[str, tuple[str, str | None, str | None]]:
    return {o.tool: (o.outcome, o.version, o.change_kind)  # type: ignore[attr-defined]
            for o in result.outcomes if o.outcome != "unchanged"}  # type: ignore[attr-defined]


def test_no_drift_means_exit_zero(demo: Path) -> None:
    assert check(load_project(demo)).exit_code == 0


def test_on_hold_is_additive_auto_published_with_a_note(demo: Path) -> None:
    apply(demo, "on-hold")
    result = check(load_project(demo))
    assert result.exit_code == 10
    event = next(e for e in result.events if e["kind"] == "enum_value_added")
    assert event["subject"] == "orders.status" and event["details"]["value"] == "ON_HOLD"
    assert event["details"]["rows"] == 12 and event["first_observed_at"].startswith("2026-")
    got = outcomes(result)
    assert got["orders_by_status_and_customer"] == ("published", "1.1.0", "additive")
    assert got["order_backlog_by_status"] == ("published", "1.1.0", "additive")
    tool = json.loads((demo / "tools" / "orders_by_status_and_customer.json").read_text())
    ctx = tool["_meta"]["tether/context"]
    assert "ON_HOLD" in (enum_of(tool["inputSchema"]["properties"]["status"]) or [])
    assert ctx["supersedes"] == "1.0.0" and ctx["change_level"] == "minor"
    assert "ON_HOLD" in ctx["change_note"] and "12 rows" in ctx["change_note"]
    assert "counts as stuck" in ctx["change_note"]  # what the glossary says it means
    assert "Changed in 1.1.0: new value ON_HOLD" in tool["description"]
    assert ctx["deprecation"]["1.0.0"]["served_until"] == (CLOCK + dt.timedelta(days=30)
                                                           ).date().isoformat()
    assert ctx["review"]["rule"] == "auto-additive"
    # detected by the first check after the rows landed, and only once
    again = check(load_project(demo))
    assert again.exit_code == 0 and not again.events


def test_pinned_old_version_served_in_window_then_refused(demo: Path) -> None:
    apply(demo, "on-hold")
    check(load_project(demo))

    told: dict[int, str] = {}

    def call(days: int) -> object:
        server = TetherServer(load_project(demo), stdio_user="fin.ana",
                              clock=lambda: CLOCK + dt.timedelta(days=days))

        async def go() -> object:
            async with Client(server.server) as c:
                listed = await c.list_tools()
                told[days] = next(t.description for t in listed.tools
                                  if t.name == "order_backlog_by_status") or ""
                return await c.call_tool("order_backlog_by_status", {},
                                         meta={"tether/pin": "1.0.0"})
        try:
            return anyio.run(go)
        finally:
            server.close()

    inside, after = call(10), call(31)
    # the change is said to the model while the old version is still served, then it is history
    assert "Changed in 1.1.0: new value ON_HOLD" in told[10]
    assert "Changed in" not in told[31] and "ON_HOLD" in told[31]
    assert not inside.is_error  # type: ignore[attr-defined]
    versions = json.loads(run_cli("versions", "order_backlog_by_status", "--project", str(demo),
                                  "--json").stdout)
    assert [(v["version"], v["status"]) for v in versions] == [("1.0.0", "deprecated"),
                                                               ("1.1.0", "current")]
    assert versions[0]["served_until"] == "2026-09-19"
    server = TetherServer(load_project(demo), stdio_user="fin.ana")
    try:
        old = server.history[("order_backlog_by_status", "1.0.0")].definition
        assert old["description"].endswith("Deprecated: served until 2026-09-19; use version 1.1.0.")
    finally:
        server.close()
    assert after.is_error and "1.1.0" in after.content[0].text  # type: ignore[attr-defined]


def test_rename_is_breaking_and_waits_for_a_named_human(demo: Path) -> None:
    apply(demo, "rename")
    result = check(load_project(demo))
    assert result.exit_code == 11
    assert outcomes(result)["orders_by_status_and_customer"] == ("pending", "2.0.0", "breaking")
    schema_event = next(e for e in result.events if e["kind"] == "schema")
    assert schema_event["details"]["removed"] == ["currency"]
    assert schema_event["details"]["added"] == ["currency_code"]
    registry = open_registry(load_project(demo))
    review = registry.reviews("pending")[0]
    assert registry.current()["orders_by_status_and_customer"].version == "1.0.0"
    registry.close()
    diffs = review["body"]["diffs"]
    assert set(diffs) == {"schema", "description", "policy"}
    schema = diffs["schema"]["orders_by_status_and_customer"]
    assert any("currency_code" in path for path in schema)
    assert "Changed in 2.0.0" in diffs["description"]["orders_by_status_and_customer"]
    res = run_cli("review", "approve", str(review["id"]), "--as", "fin.ana",
                  "--project", str(demo))
    assert res.returncode == 0, res.stderr
    registry = open_registry(load_project(demo))
    current = registry.current()["orders_by_status_and_customer"]
    decided = registry.reviews()[0]
    registry.close()
    assert current.version == "2.0.0"
    assert current.definition["_meta"]["tether/context"]["review"]["by"] == "fin.ana"
    assert decided["status"] == "approved" and decided["decided_by"] == "fin.ana"
    assert check(load_project(demo)).exit_code in (0, 10)


def test_redefining_active_is_semantic(demo: Path) -> None:
    apply(demo, "redefine-active")
    result = check(load_project(demo))
    assert result.exit_code == 11
    assert outcomes(result)["active_customers_by_region_and_fiscal_quarter"] == (
        "pending", "2.0.0", "semantic")
    assert {e["kind"] for e in result.events} == {"definition_changed"}
    registry = open_registry(load_project(demo))
    review = registry.reviews("pending")[0]
    registry.close()
    text = review["body"]["diffs"]["description"]["active_customers_by_region_and_fiscal_quarter"]
    assert "paused subscriptions no longer count" in text
    res = run_cli("review", "reject", str(review["id"]), "--as", "fin.ana", "--project",
                  str(demo))
    assert res.returncode == 0


def test_unmasking_the_tax_id_is_blocked_and_paged(demo: Path, tmp_path: Path) -> None:
    paged = tmp_path / "paged.txt"
    p = demo / "tether.yaml"
    p.write_text(p.read_text() + f"drift: {{page: {{command: 'echo $TETHER_REVIEW_ID > {paged}'}}}}\n")
    apply(demo, "unmask-tax-id")
    res = run_cli("check", "--project", str(demo), "--json")
    assert res.returncode == 12, res.stderr
    data = json.loads(res.stdout)
    blocked = [t for t in data["tools"] if t["outcome"] == "blocked"]
    assert [t["tool"] for t in blocked] == ["customers_by_region_and_segment"]
    assert paged.read_text().strip() == str(blocked[0]["review"])
    tool = json.loads((demo / "tools" / "customers_by_region_and_segment.json").read_text())
    assert "tax_id" not in json.dumps(tool)  # never published
    with pytest.raises(ConfigError, match="blocked"):
        decide(load_project(demo), blocked[0]["review"], True, "fin.ana")


def test_new_restricted_column_is_excluded(demo: Path) -> None:
    apply(demo, "new-restricted-column")
    result = check(load_project(demo))
    assert result.exit_code in (0, 10)
    assert [e["kind"] for e in result.events] == ["schema"]
    assert all(o.change_kind in (None, "wording", "additive") for o in result.outcomes)
    # named only in the probe's one policy sentence ("not available to anyone ...")
    exported = "".join(json.dumps(without_named_restrictions(json.loads(f.read_text())))
                       for f in (demo / "tools").glob("*.json"))
    assert "ssn_last4" not in exported
    assert "customers.ssn_last4" in (demo / "tools" / "explain_data_product.json").read_text()


def test_a_vanished_value_is_an_event_after_n_checks(demo: Path) -> None:
    import duckdb

    with duckdb.connect(str(demo / "warehouse.duckdb")) as con:
        con.execute("UPDATE support_tickets SET channel = 'EMAIL' WHERE channel = 'PHONE'")
    kinds = []
    for _ in range(4):
        result = check(load_project(demo))
        kinds.append([e["kind"] for e in result.events if e["subject"].endswith("channel")])
    assert kinds == [[], [], ["enum_value_vanished"], []]  # vanish_after_checks: 3


@pytest.fixture
def pg_demo(pg_url: str, tmp_path: Path) -> object:
    """A fresh demo in its own PostgreSQL schema, with the registry in PostgreSQL too."""
    import uuid

    import psycopg

    schema = f"tether_drift_{uuid.uuid4().hex[:8]}"
    d = tmp_path / "pgdrift"
    init_demo(d, scale=0.05, source_url=pg_url, schema=schema)
    p = d / "tether.yaml"
    p.write_text(p.read_text() + f'registry: {{url: "{pg_url}?options=-csearch_path%3D{schema}"}}\n')
    build(load_project(d))
    yield d
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


def test_postgres_source_and_registry_on_hold_then_rename(pg_demo: Path) -> None:
    project = load_project(pg_demo)
    registry = open_registry(project)
    assert registry.url.startswith("postgresql+psycopg://")
    registry.close()
    apply(pg_demo, "on-hold")
    result = check(load_project(pg_demo))
    assert result.exit_code == 10
    assert outcomes(result)["orders_by_status_and_customer"] == ("published", "1.1.0", "additive")
    apply(pg_demo, "rename")
    result = check(load_project(pg_demo))
    assert result.exit_code == 11
    assert outcomes(result)["orders_by_status_and_customer"] == ("pending", "2.0.0", "breaking")
    registry = open_registry(load_project(pg_demo))
    try:
        assert [v.version for v in registry.versions("orders_by_status_and_customer")] == [
            "1.0.0", "1.1.0"]
        assert registry.reviews("pending")[0]["body"]["diffs"]["schema"]
    finally:
        registry.close()


def test_watch_diff_and_drift_report(demo: Path) -> None:
    apply(demo, "on-hold")
    res = run_cli("watch", "--project", str(demo), "--count", "2", "--interval", "0")
    assert res.returncode == 0 and "check 1: exit 10" in res.stdout and "check 2: exit 0" in res.stdout
    res = run_cli("diff", "orders_by_status_and_customer", "1.0.0", "1.1.0", "--project",
                  str(demo), "--json")
    diff = json.loads(res.stdout)
    assert diff["schema"]["inputSchema/properties/status/items/enum"]["after"][2] == "ON_HOLD"
    assert any(line.startswith("+Changed in 1.1.0") for line in diff["description"])
    report = json.loads(run_cli("drift", "report", "--project", str(demo), "--json").stdout)
    assert report["events_by_kind"] == {"enum_value_added": 1}
    # the rows landed 2 minutes before the check: time to detect is one check, minutes
    assert report["time_to_detect"]["max_hours"] < 0.1
    assert report["auto_approve_rate"] == 1.0


def test_lineage_change_upstream_is_an_event_for_the_product_below(demo: Path) -> None:
    p = demo / "tether.yaml"
    p.write_text(p.read_text().replace('via: "transform:nightly_pipeline_snapshot"',
                                       'via: "transform:nightly_pipeline_snapshot_v2"'))
    result = check(load_project(demo))
    lineage = [e for e in result.events if e["kind"] == "lineage_changed"]
    assert [e["subject"] for e in lineage] == ["pipeline_snapshot"]
    assert lineage[0]["details"]["edges_added"] == [
        ["deals", "pipeline_snapshot", "transform:nightly_pipeline_snapshot_v2"]]
    # an upstream product's schema change reaches the product below it too
    apply(demo, "rename")  # orders: not upstream of pipeline_snapshot, so no lineage event
    assert not [e for e in check(load_project(demo)).events if e["kind"] == "lineage_changed"]


def test_ci_checklist_against_the_project(demo: Path) -> None:
    apply(demo, "on-hold")
    check(load_project(demo))
    res = run_cli("ci", "--project", str(demo), "--json")
    items = json.loads(res.stdout)
    assert res.returncode == 0 and len(items) == 14
    assert [i["status"] for i in items][:11] == ["holds"] * 11
    assert items[11]["status"] == "not configured"
    assert items[12]["status"] == "holds"  # policy coverage (tests/test_policy_coverage.py)
    assert items[13]["status"] == "holds"  # the policy served is tether.yaml's, approved
    # a policy edit not yet checked: servers enforce the approved version, and item 14 says so
    p = demo / "tether.yaml"
    text = p.read_text()
    p.write_text(text.replace('sales_region = {{ user.region }}"',
                              'sales_region = {{ user.region }} OR 1 = 1"', 1))
    item = json.loads(run_cli("ci", "--project", str(demo), "--json").stdout)[13]
    assert item["status"] == "fails" and "OR 1 = 1" in item["why"], item
    p.write_text(text)
    # a hand edit of an exported tool and an unchecked glossary edit are caught
    f = demo / "tools" / "items_in_an_order.json"
    f.write_text(f.read_text().replace("Line items", "Line items (edited by hand)", 1)
                 .replace('"description": "', '"description": "Edited. ', 1))
    p = demo / "tether.yaml"
    p.write_text(p.read_text().replace("Deals closed won divided by deals closed",
                                       "Won deals divided by all closed deals"))
    res = run_cli("ci", "--project", str(demo), "--json")
    items = json.loads(res.stdout)
    assert res.returncode == 1
    assert items[5]["status"] == "fails" and "items_in_an_order.json" in items[5]["why"]
    assert items[4]["status"] == "fails" and "win rate" in items[4]["why"]
    # a row filter edited since the last publication to name a column that does not exist is
    # an error naming its line, not a pass and not a failure on a server's first call
    text = p.read_text()
    p.write_text(text.replace('orders: "sales_region = {{ user.region }}"',
                              'orders: "sales_regoin = {{ user.region }}"'))
    res = run_cli("ci", "--project", str(demo), "--json")
    line = next(i for i, x in enumerate(p.read_text().splitlines(), 1) if "sales_regoin" in x)
    assert res.returncode == 2 and f"tether.yaml:{line}" in res.stderr, res.stderr
    assert "does not compile" in res.stderr and "Traceback" not in res.stderr


def test_every_publication_is_committed_to_the_audit_repo(tmp_path: Path) -> None:
    import subprocess

    audit_repo = tmp_path / "audit"
    d2 = tmp_path / "fresh"
    init_demo(d2, scale=0.05)
    (d2 / "tether.yaml").write_text((d2 / "tether.yaml").read_text()
                                    + f"drift: {{audit_repo: {audit_repo}}}\n")
    build(load_project(d2))  # the initial publication: commit 1
    apply(d2, "on-hold")
    check(load_project(d2))  # the ON_HOLD publication: commit 2
    log = subprocess.run(["git", "-C", str(audit_repo), "log", "--format=%B%x00"],
                         capture_output=True, text=True, check=True).stdout.split("\0")
    messages = [m.strip() for m in log if m.strip()]
    assert len(messages) == 2
    # the listing and the metric (additive), and hold_order (wording: a state no move leaves)
    assert messages[0].startswith("publish 3 tool version(s) (auto: additive+wording)")
    assert "new value ON_HOLD" in messages[0]
    assert messages[1].startswith("publish 17 tool version(s) and the access policy (initial)")
    files = sorted(x.name for x in (audit_repo / "tools").glob("*.json"))
    assert len(files) == 17
    policy = json.loads((audit_repo / "policy.json").read_text())
    assert policy["name"] == "policy" and policy["_meta"]["tether/context"]["version"] == "1.0.0"


def test_postgres_semantic_blocked_and_excluded(pg_demo: Path) -> None:
    apply(pg_demo, "redefine-active")
    result = check(load_project(pg_demo))
    assert result.exit_code == 11
    assert outcomes(result)["active_customers_by_region_and_fiscal_quarter"][2] == "semantic"
    apply(pg_demo, "new-restricted-column")
    result = check(load_project(pg_demo))
    assert [e["kind"] for e in result.events] == ["schema"]
    assert "ssn_last4" not in "".join(json.dumps(without_named_restrictions(json.loads(
        f.read_text()))) for f in (pg_demo / "tools").glob("*.json"))
    apply(pg_demo, "unmask-tax-id")
    result = check(load_project(pg_demo))
    assert result.exit_code == 12
    assert outcomes(result)["customers_by_region_and_segment"][0] == "blocked"
    assert "tax_id" not in (pg_demo / "tools" / "customers_by_region_and_segment.json").read_text()


def test_a_blocked_policy_change_is_never_served(demo: Path) -> None:
    """Servers keep the approved policy while a change the gate blocked stands in tether.yaml,
    say so at start, and never serve the column it would expose."""
    apply(demo, "unmask-tax-id")
    assert check(load_project(demo)).exit_code == 12
    server = TetherServer(load_project(demo), mode="generic", stdio_user="fin.ana")
    try:
        held = server.held_reviews()
        assert any("policy change waiting for a reviewer: serving the approved policy 1.0.0"
                   in h for h in held)
        assert any("was blocked" in h for h in held)

        async def go() -> Any:
            async with Client(server.server) as c:
                return await c.call_tool("run_sql",
                                         {"sql": "SELECT tax_id FROM customers LIMIT 1"})
        ran = anyio.run(go)
        assert ran.is_error and "tax_id" in str(ran.content[0].text)
    finally:
        server.close()
    res = run_cli("serve", "--project", str(demo), "--as-user", "fin.ana", input="")
    assert "was blocked (it would expose a restricted column)" in res.stderr
    assert "Traceback" not in res.stderr


def test_fingerprint_on_call_flags_a_schema_that_moved_under_a_tool(demo: Path) -> None:
    """serve.fingerprint_ttl_seconds: a call notices the rename before any tether check ran."""
    import time

    p = demo / "tether.yaml"
    p.write_text(with_serve(p.read_text(), fingerprint_ttl_seconds=0.2))
    calls = [("items_in_an_order", {"order_id": 1}),
             ("orders_by_status_and_customer", {"status": "PAID", "limit": 1}),
             ("customers_by_region_and_segment", {"limit": 1})]

    def ask() -> list[Any]:
        server = TetherServer(load_project(demo), stdio_user="fin.ana")
        try:
            async def go() -> list[Any]:
                async with Client(server.server) as c:
                    return [await c.call_tool(n, a) for n, a in calls]
            return anyio.run(go)
        finally:
            server.close()

    items, orders, customers = ask()
    assert not orders.is_error and "schema_drift" not in orders.structured_content
    apply(demo, "rename")  # orders.currency -> currency_code, no tether check yet
    apply(demo, "new-restricted-column")  # customers gains a column: the query still works
    time.sleep(0.3)
    items, orders, customers = ask()
    assert not customers.is_error
    assert "the schema of customers changed" in customers.structured_content["schema_drift"]
    assert not items.is_error and "schema_drift" not in items.structured_content  # not below it
    assert orders.is_error  # the published query still selects currency
    text = orders.content[0].text
    assert "the schema of orders changed since orders_by_status_and_customer 1.0.0" in text
    assert "run tether check" in text


def test_an_enum_that_takes_several_values_is_an_additive_change() -> None:
    """A parameter that took one value of an enum and now takes one or several (a bare value
    still works) is a minor change; losing a value stays breaking, whatever the shape."""
    from tether.drift.classify import classify

    def tool(prop: dict[str, Any]) -> dict[str, Any]:
        return {"inputSchema": {"type": "object", "properties": {"status": prop}}}

    one = tool({"type": "string", "enum": ["NEW", "PAID"]})
    several = tool({"type": "array", "items": {"enum": ["NEW", "PAID"]}})
    fewer = tool({"type": "array", "items": {"enum": ["NEW"]}})
    assert classify(one, several) == ("minor", "additive")
    assert classify(one, fewer)[1] == "breaking"
    assert classify(several, one)[1] == "breaking"


def test_a_note_that_says_nothing_stays_out_of_the_description() -> None:
    """A change with no words of its own ("breaking change.") is kept in the context, never
    told to the model as if it said something."""
    from tether.drift.check import _stamp
    for note, told in (("breaking change.", False), ("orders schema changed: added x.", True)):
        wire: dict[str, Any] = {"name": "t", "description": "Lists things.",
                                "_meta": {"tether/context": {"sources": {}}}}
        _stamp(wire, "2.0.0", "1.0.0", "major", "breaking", note, "2026-01-01T00:00:00Z",
               CLOCK, "human")
        assert ("Changed in 2.0.0" in wire["description"]) is told
        assert wire["_meta"]["tether/context"]["change_note"] == note
