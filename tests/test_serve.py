"""The MCP server, driven by the official SDK client: in memory for the policy matrix, over
stdio and streamable HTTP as a user's client would, with identity, pinning and errors."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client, StdioServerParameters

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.demo.warehouse import CLOCK, GOVERNED_ACTIVE_SQL
from tether.drift.publish import build
from tether.policy.oracle import check_rows, entitled_keys
from tether.registry import open_registry
from tether.serve.server import TetherServer
from tether.sources import open_source

USERS = ["fin.ana", "mgr.emea", "mgr.amer", "mgr.apac", "sup.sam"]
TETHER = str(Path(sys.executable).parent / "tether")


@pytest.fixture(scope="module")
def project_dir(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("serve"))
    build(load_project(d))
    return d


def call_all(server: TetherServer, calls: list[tuple[str, dict[str, Any]]],
             meta: dict[str, Any] | None = None) -> tuple[list[str], list[Any]]:
    async def go() -> tuple[list[str], list[Any]]:
        async with Client(server.server) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            out = [await c.call_tool(n, a, meta=meta) for n, a in calls]
            return names, out

    return anyio.run(go)


def listing_args(name: str) -> dict[str, Any]:
    return {"limit": 200}


@pytest.mark.parametrize("user", USERS)
def test_every_user_every_tool_matches_the_policy_oracle(project_dir: Path, user: str) -> None:
    project = load_project(project_dir)
    server = TetherServer(project, stdio_user=user)
    try:
        # every reading tool (the write tools change rows: tests/test_write.py calls them)
        visible = [v for v in server.visible(user) if v.plan.kind != "write"]
        calls = [(v.name, {"limit": 200} if v.plan.kind == "list" else
                  {"product": "customers"} if v.plan.kind == "probe" else {}) for v in visible]
        names, results = call_all(server, calls)
    finally:
        server.close()
    writers = [v.name for v in server.visible(user) if v.plan.kind == "write"]
    assert names == sorted(names) == sorted([v.name for v in visible] + writers)
    src = open_source("main", project.config.sources["main"], project.root)
    checked = 0
    try:
        for v, r in zip(visible, results, strict=True):
            assert not r.is_error, (v.name, r.content)
            data = r.structured_content
            assert "tax_id" not in json.dumps(data), v.name
            if v.plan.kind == "list":
                product = v.plan.product
                keys = entitled_keys(project.config, src.run, src.dialect, user, product)
                violations = check_rows(project.config, user, product, data["rows"], keys)
                assert not violations, (user, v.name, violations)
                assert data["row_count"] == len(data["rows"]) > 0
                checked += 1
            if v.plan.kind in ("list", "metric"):
                # every data result says how fresh it is: a freshness column's newest value, or
                # (load_time: true, like resolve_customer_ids) the DuckDB file's last write,
                # never later than the demo's fixed clock
                assert data["as_of"] and "2026-01-01" < data["as_of"] <= "2026-08-20T09:00:00+00:00", v.name
            if v.plan.kind == "probe":
                email = next(c for c in data["columns"] if c["name"] == "email")
                assert email["values"] == [] or user != "sup.sam"
    finally:
        src.close()
    assert checked >= 4


def test_regional_manager_metrics_hold_only_their_region(project_dir: Path) -> None:
    project = load_project(project_dir)
    results = {}
    for user in ("mgr.emea", "fin.ana"):
        server = TetherServer(project, stdio_user=user)
        try:
            _, out = call_all(server, [("active_customers_by_region_and_fiscal_quarter",
                                        {"period": "FY2027-Q1"}),
                                       ("win_loss_summary_trailing_window",
                                        {"period": "last_365_days"})])
        finally:
            server.close()
        results[user] = [r.structured_content for r in out]
    emea_active, emea_wins = results["mgr.emea"]
    assert [r["sales_region"] for r in emea_active["rows"]] == ["EMEA"]
    all_active, all_wins = results["fin.ana"]
    assert sorted(r["sales_region"] for r in all_active["rows"]) == ["AMER", "APAC", "EMEA"]
    with open_source("main", project.config.sources["main"], project.root) as src:
        governed = src.run(GOVERNED_ACTIVE_SQL, {"q_start": dt.date(2026, 2, 1),
                                                  "q_end": dt.date(2026, 5, 1), "region": "EMEA"})
    assert emea_active["rows"][0]["active_customers"] == governed[0][0]
    assert emea_active["rows"][0]["period"] == "FY2027-Q1"
    assert emea_active["window"] == {
        "start": "2026-02-01", "end": "2026-05-01", "end_exclusive": True, "calendar": "fiscal",
        "timezone": "UTC", "resolved_from": "FY2027-Q1", "label": "FY2027-Q1"}
    assert emea_wins["window"]["start"] == "2025-08-21" and emea_wins["window"]["label"] == (
        "last 365 days")
    assert sum(r["closed_deals"] for r in emea_wins["rows"]) < sum(
        r["closed_deals"] for r in all_wins["rows"])


def test_pagination_cursor_is_signed_and_scoped(project_dir: Path) -> None:
    project = load_project(project_dir)
    server = TetherServer(project, stdio_user="mgr.emea")
    try:
        tool = "orders_by_status_and_customer"
        _, (first,) = call_all(server, [(tool, {"limit": 7, "status": "SHIPPED"})])
        page = first.structured_content
        assert page["truncated"] and page["row_count"] == 7 and page["next_cursor"]
        cursor = page["next_cursor"]
        _, (second, forged, other_args) = call_all(server, [
            (tool, {"limit": 7, "status": "SHIPPED", "cursor": cursor}),
            (tool, {"limit": 7, "status": "SHIPPED", "cursor": cursor[:-2] + "AA"}),
            (tool, {"limit": 7, "status": "PAID", "cursor": cursor}),
        ])
        ids1 = [r["order_id"] for r in page["rows"]]
        ids2 = [r["order_id"] for r in second.structured_content["rows"]]
        assert ids2[0] > ids1[-1] and not set(ids1) & set(ids2)
        assert forged.is_error and "cursor" in forged.content[0].text
        assert other_args.is_error and "another" in other_args.content[0].text
        # a placeholder a model writes for "no cursor" is the first page, not a forgery
        _, placeholders = call_all(server, [
            (tool, {"limit": 7, "status": "SHIPPED", "cursor": c}) for c in ("null", "", None)])
        for r in placeholders:
            assert not r.is_error, r.content[0].text
            assert [x["order_id"] for x in r.structured_content["rows"]] == ids1
    finally:
        server.close()
    other = TetherServer(project, stdio_user="mgr.amer")
    try:
        _, (stolen,) = call_all(other, [(tool, {"limit": 7, "status": "SHIPPED",
                                                "cursor": cursor})])
        assert stolen.is_error and "another user" in stolen.content[0].text
    finally:
        other.close()


@pytest.mark.parametrize(("tool", "args", "says"), [
    ("deals_by_stage_and_pipeline", {"stage": "WON"}, "allowed values: CLOSED_LOST"),
    # a value that is none of a filter's: how to ask for all of them
    ("orders_by_status_and_customer", {"sales_region": ["ALL_REGIONS"]},
     "leave sales_region out for every value. Not answered: fix the arguments and call "
     "orders_by_status_and_customer again."),
    ("orders_by_status_and_customer", {"crm_account_id": "12345"}, "is none of the ids it takes"),
    ("orders_by_status_and_customer", {"period": "the day before"}, "is not recognised"),
    # an id of no declared scheme: refused with the schemes and the tool that maps them, not
    # an empty "no tickets"
    ("support_tickets_for_customer", {"canonical_customer_id": "CUST-42"},
     "(canonical_customer_id, crm_account_id, billing_account_no); resolve_customer_ids"),
    ("active_customers_by_region_and_fiscal_quarter", {"period": "Q5 of 2027"},
     "is not recognised"),
    # the characters fit; the server knows the forms and lists them
    ("active_customers_by_region_and_fiscal_quarter", {"period": "last_fortnight"},
     "last_quarter"),
    ("active_customers_by_region_and_fiscal_quarter", {"fiscal_quarter": "FY2027-Q1"},
     "unknown argument"),
    ("orders_by_status_and_customer", {"colour": "red"}, "unknown argument"),
    ("orders_by_status_and_customer", {"limit": 5000}, "maximum"),
    ("no_such_tool", {}, "unknown tool"),
])
def test_bad_arguments_are_tool_errors_and_the_server_stays_up(
        project_dir: Path, tool: str, args: dict[str, Any], says: str) -> None:
    server = TetherServer(load_project(project_dir), stdio_user="fin.ana")
    try:
        _, (bad, good) = call_all(server, [(tool, args), ("order_backlog_by_status", {})])
    finally:
        server.close()
    assert bad.is_error and says in bad.content[0].text, bad.content[0].text
    # a tool that exists is called again with the arguments fixed; one that does not is not
    assert ("Not answered: fix the arguments" in bad.content[0].text) == (tool != "no_such_tool")
    assert not good.is_error


def _republish_with_new_description(project_dir: Path) -> None:
    p = project_dir / "tether.yaml"
    p.write_text(p.read_text().replace("Orders placed and waiting to ship",
                                       "Orders placed, paid or not, and waiting to ship"))
    build(load_project(project_dir))


def test_pinned_deprecated_version_window(demo_dir: Path, tmp_path: Path) -> None:
    d = copy_project(demo_dir, tmp_path / "pin")
    build(load_project(d))
    _republish_with_new_description(d)
    project = load_project(d)
    registry = open_registry(project)
    versions = [v.version for v in registry.versions("order_backlog_by_status")]
    registry.close()
    assert versions == ["1.0.0", "1.0.1"]
    inside = TetherServer(project, stdio_user="fin.ana",
                          clock=lambda: CLOCK + dt.timedelta(days=29))
    try:
        _, (pinned,) = call_all(inside, [("order_backlog_by_status", {})],
                                meta={"tether/pin": "1.0.0"})
        _, (current,) = call_all(inside, [("order_backlog_by_status", {})])
    finally:
        inside.close()
    assert not pinned.is_error
    assert "deprecated" in pinned.structured_content["deprecation"]
    assert not current.is_error and "deprecation" not in current.structured_content
    after = TetherServer(project, stdio_user="fin.ana",
                         clock=lambda: CLOCK + dt.timedelta(days=31))
    try:
        _, (retired,) = call_all(after, [("order_backlog_by_status", {})],
                                 meta={"tether/pin": "1.0.0"})
    finally:
        after.close()
    assert retired.is_error and "retired" in retired.content[0].text
    assert "1.0.1" in retired.content[0].text
    registry = open_registry(project)
    calls = registry.calls()
    registry.close()
    assert sum(c["deprecated"] for c in calls) == 1
    assert {c["username"] for c in calls} == {"fin.ana"}


def test_call_log_records_every_call(project_dir: Path) -> None:
    project = load_project(project_dir)
    registry = open_registry(project)
    before = len(registry.calls())
    server = TetherServer(project, stdio_user="mgr.apac")
    try:
        call_all(server, [("order_backlog_by_status", {}),
                          ("deals_by_stage_and_pipeline", {"stage": "nope"})])
    finally:
        server.close()
    calls = registry.calls()[before:]
    registry.close()
    assert [(c["tool"], c["username"], c["role"]) for c in calls] == [
        ("order_backlog_by_status", "mgr.apac", "regional_manager"),
        ("deals_by_stage_and_pipeline", "mgr.apac", "regional_manager")]
    assert calls[0]["error"] is None and calls[0]["row_count"] >= 1 and calls[0]["as_of"]
    assert "allowed values" in calls[1]["error"] and calls[1]["version"] == "1.0.0"


# --- real transports -----------------------------------------------------------------------------


def test_stdio_transport_with_the_sdk_client(project_dir: Path) -> None:
    async def go() -> tuple[list[str], Any, str]:
        params = StdioServerParameters(command=TETHER, args=["serve", "--project",
                                                             str(project_dir)],
                                       env={"TETHER_USER": "sup.sam", "PATH": os.environ["PATH"]})
        async with Client(params) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            r = await c.call_tool("customers_by_region_and_segment", {"limit": 3})
            async with Client(StdioServerParameters(
                    command=TETHER, args=["serve", "--project", str(project_dir),
                                          "--as-user", "mgr.emea"]), mode="legacy") as legacy:
                proto = legacy.protocol_version if hasattr(legacy, "protocol_version") else ""
            return names, r, str(proto)

    names, r, _ = anyio.run(go)
    assert len(names) == 5 and "deals_by_stage_and_pipeline" not in names
    assert not r.is_error and {row["email"] for row in r.structured_content["rows"]} == {
        "[redacted]"}
    # the answer first, in one sentence; the JSON second, equal to structuredContent
    total = r.structured_content["total_rows"]
    assert r.content[0].text.startswith(f"{total} matching rows in all; one page of them shown"), (
        r.content[0].text)
    assert "as of 20" in r.content[0].text and "\n" not in r.content[0].text
    assert json.loads(r.content[1].text) == r.structured_content


@pytest.fixture(scope="module")
def http_server(project_dir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    tokens = {}
    for key, args in (("mgr.emea", ["mgr.emea"]), ("mgr.amer", ["mgr.amer"]),
                      ("runner", ["fin.ana", "--runner"])):  # a runner token is fin.ana's
        res = run_cli("token", "add", *args, "--project", str(project_dir))
        assert res.returncode == 0, res.stderr
        tokens[key] = res.stdout.strip()
    port = free_port()
    argv = [TETHER, "serve", "--project", str(project_dir), "--transport", "http",
            "--port", str(port)]
    with http_process(argv, port, timeout=30):
        yield f"http://127.0.0.1:{port}/mcp", tokens


def http_call(url: str, token: str | None, tool: str, args: dict[str, Any],
              headers: dict[str, str] | None = None, mode: str = "auto") -> tuple[list[str], Any]:
    async def go() -> tuple[list[str], Any]:
        h = {"Authorization": f"Bearer {token}"} if token else {}
        h.update(headers or {})
        from mcp.client.streamable_http import streamable_http_client

        async with httpx.AsyncClient(headers=h) as http, Client(
                streamable_http_client(url, http_client=http), mode=mode) as c:  # type: ignore[arg-type]
            names = [t.name for t in (await c.list_tools()).tools]
            return names, await c.call_tool(tool, args)

    return anyio.run(go)


def test_http_requires_a_valid_token(http_server: tuple[str, dict[str, str]]) -> None:
    url, _ = http_server
    for token in (None, "tt_not-a-token"):
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"Authorization": f"Bearer {token}"} if token else {})
        assert r.status_code == 401


def test_a_token_revoked_while_the_server_runs_is_refused_at_once(
        http_server: tuple[str, dict[str, str]], project_dir: Path) -> None:
    """The server keeps the token file read between requests, and reads it again when another
    process changes it: a revocation holds at the next request, a new token works at once."""
    url, _ = http_server
    token = run_cli("token", "add", "sup.sam", "--project", str(project_dir)).stdout.strip()

    def status(t: str) -> int:
        return httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={"Authorization": f"Bearer {t}",
                                   "Accept": "application/json, text/event-stream"}).status_code

    assert status(token) != 401
    assert run_cli("token", "revoke", "sup.sam", "--project", str(project_dir)).returncode == 0
    assert status(token) == 401


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_identity_both_protocol_versions(http_server: tuple[str, dict[str, str]], mode: str
                                              ) -> None:
    url, tokens = http_server
    names, r = http_call(url, tokens["mgr.emea"], "deals_by_stage_and_pipeline", {"limit": 50},
                         mode=mode)
    assert len(names) == 15 and not r.is_error  # 12 reading tools and the 3 write tools
    assert {row["sales_region"] for row in r.structured_content["rows"]} == {"EMEA"}


def test_runner_token_acts_as_a_user_and_plain_tokens_cannot(
        http_server: tuple[str, dict[str, str]]) -> None:
    url, tokens = http_server
    names, r = http_call(url, tokens["runner"], "customers_by_region_and_segment", {"limit": 5},
                         headers={"X-Tether-As-User": "sup.sam"})
    assert len(names) == 5 and {x["email"] for x in r.structured_content["rows"]} == {"[redacted]"}
    _, r = http_call(url, tokens["mgr.amer"], "customers_by_region_and_segment", {"limit": 5},
                     headers={"X-Tether-As-User": "fin.ana"})
    assert r.is_error and "runner" in r.content[0].text


def test_list_changed_reaches_both_protocol_versions(demo_dir: Path, tmp_path: Path) -> None:
    import mcp_types as types

    d = copy_project(demo_dir, tmp_path / "lc")
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user="fin.ana")
    got: dict[str, bool] = {"modern": False, "legacy": False}

    async def legacy_handler(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            got["legacy"] = True

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.watch, 0.1)
            async with Client(server.server) as modern, Client(
                    server.server, mode="legacy", message_handler=legacy_handler) as legacy:
                await legacy.list_tools()
                async with modern.listen(tools_list_changed=True) as sub:
                    # another process publishes: a rebuild after tether.yaml changed
                    await anyio.to_thread.run_sync(_republish_with_new_description, d)
                    with anyio.fail_after(10):
                        async for _event in sub:
                            got["modern"] = True
                            break
                with anyio.fail_after(10):
                    while not got["legacy"]:
                        await anyio.sleep(0.05)
                tools = await modern.list_tools(cache_mode="refresh")
                backlog = next(t for t in tools.tools if t.name == "order_backlog_by_status")
                assert backlog.meta["tether/context"]["version"] == "1.0.1"
            tg.cancel_scope.cancel()

    try:
        anyio.run(go)
    finally:
        server.close()
    assert got == {"modern": True, "legacy": True}


def test_sigterm_on_stdio_flushes_the_call_log(project_dir: Path, tmp_path: Path) -> None:
    """An MCP client that gives up waiting for a server to exit sends SIGTERM (the SDK does
    after 2 s): the calls made so far must still reach the call log."""
    import signal
    import subprocess

    def calls() -> int:
        registry = open_registry(load_project(project_dir))
        try:
            return len(registry.calls())
        finally:
            registry.close()

    before = calls()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "tether"), "serve", "--project",
                             str(project_dir), "--as-user", "fin.ana"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "order_backlog_by_status", "arguments": {}}},
    ]
    for m in messages:
        proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert answers[1]["id"] == 2 and not answers[1]["result"].get("isError")
    proc.send_signal(signal.SIGTERM)  # stdin still open: no EOF, a signal
    assert proc.wait(timeout=20) == 0
    assert calls() == before + 1


def test_a_freshness_condition_keeps_future_rows_out_of_as_of(demo_dir: Path,
                                                              tmp_path: Path) -> None:
    """A booking dated after the clock is not news of the data: with `where`, as_of is the
    newest past event, and the evidence names the statement and the bound clock."""
    import duckdb

    d = tmp_path / "fresh"
    d.mkdir()
    shutil.copy(demo_dir / "warehouse.duckdb", d / "warehouse.duckdb")
    shutil.copy(demo_dir / "tether.yaml", d / "tether.yaml")
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("UPDATE orders SET placed_at = TIMESTAMPTZ '2027-03-01 00:00:00+00' "
                    "WHERE order_id = (SELECT min(order_id) FROM orders)")
    p = d / "tether.yaml"
    text = p.read_text()
    marker = "    table: orders\n"
    start = text.index(marker)
    end = text.index("freshness: {column: loaded_at}", start)
    p.write_text(text[:end] + 'freshness: {column: placed_at, where: "placed_at <= {{ clock }}"}'
                 + text[end + len("freshness: {column: loaded_at}"):])
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user="fin.ana")
    try:
        _, (r,) = call_all(server, [("orders_by_status_and_customer", {"limit": 1})])
    finally:
        server.close()
    as_of = dt.datetime.fromisoformat(r.structured_content["as_of"])
    assert as_of <= CLOCK and as_of > CLOCK - dt.timedelta(days=2)
    evidence = r.meta["tether/evidence"]
    assert "<=" in evidence["as_of_sql"]
