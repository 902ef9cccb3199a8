"""HTTP APIs as sources: grounded read tools from an OpenAPI description, against a real local
API (tests/apiserver.py: Starlette on a free port) with cursor and page-number pages, an enum, a
rate limit, a per-user bearer credential and operations that change state.

Generation (only the safe operations, the spec's constraints, the sample's observations with
their sources, 10/10 on the lint), serving through `tether serve` over stdio and HTTP (each
caller's own credential passed through, a caller without one refused, pages followed with
tether's cursor, as_of and evidence with the requests made and no secret), the policy on the
rows, bad specs and a misbehaving API, and a changed spec detected and gated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import yaml
from mcp import Client, StdioServerParameters

from apiserver import (
    Catalog,
    HelpDesk,
    catalog_spec,
    running,
    serving,
    spec,
    tickets,
    write_project,
)
from conftest import free_port, http_process, run_cli
from tether.config import load_project
from tether.drift.check import check
from tether.errors import ConfigError
from tether.registry import open_registry
from tether.sources.apiclient import ApiClient, ApiError, Credential
from tether.sources.apisource import rows_table
from tether.sources.openapi import item_columns, parse_spec

TETHER = str(Path(sys.executable).parent / "tether")
MUTATING = ("createTicket", "deleteTicket", "closeTicket", "create_ticket", "delete_ticket",
            "close_ticket")


@pytest.fixture(scope="module")
def desk_port() -> Iterator[tuple[HelpDesk, int]]:
    port = free_port()
    with running(port) as desk:
        yield desk, port


def built(root: Path, port: int, **change: Any) -> Path:
    write_project(root, port, **change)
    for user, token in (("ann", "tok-ann"), ("ben", "tok-ben")):
        res = run_cli("token", "credential", user, "--source", "desk", "--project", str(root),
                      input=token + "\n")
        assert res.returncode == 0, res.stderr
    res = run_cli("build", "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    return root


@pytest.fixture(scope="module")
def project(desk_port: tuple[HelpDesk, int], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory.mktemp("api"), desk_port[1])


def tools_of(root: Path) -> dict[str, dict[str, Any]]:
    return {json.loads(p.read_text())["name"]: json.loads(p.read_text())
            for p in (root / "tools").glob("*.json")}


def stdio_calls(root: Path, user: str, calls: list[tuple[str, dict[str, Any]]],
                meta: dict[str, Any] | None = None) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(command=TETHER, args=["serve", "--project", str(root),
                                                         "--as-user", user],
                                   env={k: v for k, v in os.environ.items()
                                        if k in ("PATH", "PYTHONPATH")})

    async def go() -> tuple[list[str], list[Any]]:
        async with Client(params) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            return names, [await c.call_tool(n, a, meta=meta) for n, a in calls]

    return anyio.run(go)


# --- the spec --------------------------------------------------------------------------------------


def test_only_safe_operations_are_read_and_their_pages_are_recognised() -> None:
    s = parse_spec(json.dumps(spec()), "helpdesk.json")
    assert set(s.operations) == {"listTickets", "getTicket", "listAgents"}
    assert sorted(s.left_out) == ["DELETE /tickets/{ticket_id}", "POST /tickets",
                                  "POST /tickets/{ticket_id}/close"]
    tickets_op = s.operations["listTickets"]
    assert (tickets_op.paging.kind, tickets_op.paging.param, tickets_op.paging.field,
            tickets_op.paging.size) == ("cursor", "cursor", ("next_cursor",), "limit")
    assert tickets_op.items == ("data",) and tickets_op.retry_statuses == (429,)
    agents = s.operations["listAgents"]
    assert (agents.paging.kind, agents.paging.param, agents.paging.size) == (
        "page", "page", "per_page")
    assert s.operations["getTicket"].items is None  # one object: one row, no pages


@pytest.mark.parametrize("doc, said", [
    ({"swagger": "2.0", "paths": {}}, "Swagger 2.0 is not a version tether reads"),
    ({"openapi": "4.0.0", "paths": {}}, "openapi: '4.0.0' is not a version"),
    ({**spec(), "paths": {"/x": {"get": {"responses": {"200": {"content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Nope"}}}}}}}}},
     "$ref '#/components/schemas/Nope' at #/paths/~1x/get/responses/200/content/"
     "application~1json/schema points at nothing"),
    ({**spec(), "paths": {"/x": {"get": {"responses": {"200": {"content": {
        "application/json": {"schema": {"$ref": "other.yaml#/Thing"}}}}}}}}},
     "points into another document"),
])
def test_a_spec_tether_cannot_read_is_named_with_the_place_and_what_to_do(
        doc: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_spec(json.dumps(doc), "api.json")
    assert said in e.value.paragraph()
    assert e.value.paragraph().startswith("api.json")


def test_a_broken_spec_stops_build_with_a_clear_error_and_keeps_what_was_published(
        tmp_path: Path, desk_port: tuple[HelpDesk, int]) -> None:
    root = built(tmp_path / "p", desk_port[1])
    before = tools_of(root)
    (root / "helpdesk.yaml").write_text("openapi: 3.1.0\npaths: [\n")
    res = run_cli("check", "--project", str(root))
    assert res.returncode == 2
    assert "helpdesk.yaml is neither JSON nor YAML" in res.stderr and "Traceback" not in res.stderr
    assert tools_of(root) == before


# --- generation ------------------------------------------------------------------------------------


def test_generated_tools_carry_the_spec_and_the_sample_with_their_sources(project: Path) -> None:
    tools = tools_of(project)
    api = {n: t for n, t in tools.items() if t["_meta"]["tether/context"]["kind"] == "api"}
    assert set(api) == {"tickets_by_status", "ticket_by_id", "agents_by_since"}
    assert not any(m in json.dumps(tools) for m in MUTATING)
    t = api["tickets_by_status"]
    props = t["inputSchema"]["properties"]
    assert props["status"]["enum"] == ["open", "pending", "closed", "void"]
    assert props["opened_since"]["format"] == "date-time"
    assert "cursor" in props and props["limit"]["maximum"] == 200
    # the API's own cursor and page size (limit, at most 20) are the server's, not arguments
    assert set(props) == {"status", "opened_since", "limit", "cursor"}
    rows = t["outputSchema"]["properties"]["rows"]["items"]["properties"]
    assert rows["amount_cents"]["description"] == "Amount claimed, in cents; unit: USD cents."
    sources = t["_meta"]["tether/context"]["sources"]
    # the spec's words are quoted as the spec's, never tether's own voice
    said = "The API's summary says: “List the caller's tickets”."
    assert t["description"].startswith(said) and sources[said] == "openapi"
    # each caller's own credential: the sample is ann's rows, and tells no one anything
    assert "samples" not in sources.values()
    assert any(v == "policy" and "own API credential" in s for s, v in sources.items())
    assert t["annotations"]["readOnlyHint"] is True
    one = api["ticket_by_id"]
    assert one["inputSchema"]["required"] == ["ticket_id"]
    assert one["inputSchema"]["properties"]["ticket_id"]["pattern"] == "^TK-[0-9]+$"
    assert "cursor" not in one["inputSchema"]["properties"]
    # an API's sampled rows are the sampling user's: no probe of them for everyone
    probe = tools["explain_data_product"]
    assert probe["inputSchema"]["properties"]["product"].get("enum", []) == []


def test_a_shared_credentials_sample_is_told_with_its_source(
        desk_port: tuple[HelpDesk, int], tmp_path: Path) -> None:
    """With one credential for every caller (`env:`), what the sample held is what anyone
    reads: a documented value no sampled response held is said, from `samples`."""
    root = tmp_path / "p"
    write_project(root, desk_port[1])
    text = (root / "tether.yaml").read_text()
    (root / "tether.yaml").write_text(text.replace(
        "credential: token_store, sample_as: ann", 'credential: "env:DESK_TOKEN"'))
    res = run_cli("build", "--project", str(root), env={"DESK_TOKEN": "tok-ann"})
    assert res.returncode == 0, res.stdout + res.stderr
    sources = tools_of(root)["tickets_by_status"]["_meta"]["tether/context"]["sources"]
    void = next(s for s in sources if "'void'" in s)
    assert void == "Status 'void' is documented, but no sampled response held it."
    assert sources[void] == "samples"
    assert any(v == "policy" and "shared API credential" in s for s, v in sources.items())


def test_the_lint_scores_every_generated_tool_ten(project: Path) -> None:
    res = run_cli("lint", "--project", str(project), "--min-score", "10")
    assert res.returncode == 0, res.stdout + res.stderr


# --- serving ---------------------------------------------------------------------------------------


def test_each_caller_reads_with_their_own_credential_over_stdio(
        project: Path, desk_port: tuple[HelpDesk, int]) -> None:
    desk, _ = desk_port
    desk.seen.clear()
    names, (ann, ben_one) = stdio_calls(project, "ann", [
        ("tickets_by_status", {"status": "closed", "limit": 50}),
        ("ticket_by_id", {"ticket_id": "TK-1002"})])  # ben's ticket
    assert "tickets_by_status" in names
    assert not ann.is_error, ann.content
    mine = [t for t in tickets() if t["owner"] == "ann" and t["status"] == "closed"]
    got = ann.structured_content["rows"]
    assert [r["id"] for r in got] == [t["id"] for t in mine]
    assert ann.structured_content["as_of_basis"] == "the API response's Date header"
    evidence = ann.meta["tether/evidence"]
    # the page size the spec allows at most (20), not the 50 asked
    assert evidence["requests"][0].endswith("/api/tickets?status=closed&limit=20 -> 200")
    assert "tok-ann" not in json.dumps(ann.meta) + json.dumps(ann.structured_content)
    # the statement reads the product's own table, as a labeller maps any product's
    assert 'FROM "listTickets" AS "tickets"' in evidence["sql"]
    assert ben_one.is_error and "404" in ben_one.content[0].text
    assert {s["headers"]["authorization"] for s in desk.seen} == {"Bearer tok-ann"}
    _, (cyd,) = stdio_calls(project, "cyd", [("tickets_by_status", {})])
    assert cyd.is_error and "cyd holds no credential for source 'desk'" in cyd.content[0].text
    assert cyd.meta["tether/refusal"]["reason"] == "no_credential"
    names, _ = stdio_calls(project, "oz", [])  # a role denied the product sees no tool of it
    assert "tickets_by_status" not in names and "agents_by_since" in names


def test_pages_are_followed_with_a_cursor_bound_to_the_caller(project: Path) -> None:
    config = load_project(project)
    from conftest import call_tools

    first, = call_tools(config, "ben", [("tickets_by_status", {"limit": 4})])
    assert first.structured_content["truncated"] is True
    seen = [r["id"] for r in first.structured_content["rows"]]
    cursor = first.structured_content["next_cursor"]
    while cursor:
        nxt, = call_tools(config, "ben", [("tickets_by_status", {"limit": 4, "cursor": cursor})])
        seen += [r["id"] for r in nxt.structured_content["rows"]]
        cursor = nxt.structured_content["next_cursor"]
    assert seen == [t["id"] for t in tickets() if t["owner"] == "ben"]
    stolen, = call_tools(config, "ann", [("tickets_by_status", {
        "limit": 4, "cursor": first.structured_content["next_cursor"]})])
    assert stolen.is_error and "another user" in stolen.content[0].text
    agents, = call_tools(config, "ann", [("agents_by_since", {"since": 2, "limit": 4})])
    assert [r["number"] for r in agents.structured_content["rows"]] == [3, 4, 5, 6]


def test_http_transport_passes_the_callers_credential(project: Path,
                                                       desk_port: tuple[HelpDesk, int]) -> None:
    desk, _ = desk_port
    token = run_cli("token", "add", "ben", "--project", str(project)).stdout.strip()
    port = free_port()
    argv = [TETHER, "serve", "--project", str(project), "--transport", "http", "--port",
            str(port)]

    async def go() -> Any:
        from mcp.client.streamable_http import streamable_http_client

        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                              http_client=http)) as c:
            return await c.call_tool("tickets_by_status", {"status": "open"})

    desk.seen.clear()
    with http_process(argv, port, timeout=30):
        r = anyio.run(go)
    assert not r.is_error, r.content
    assert {x["owner"] for x in r.structured_content["rows"]} == {"ben"}
    assert {s["headers"]["authorization"] for s in desk.seen} == {"Bearer tok-ben"}


def test_rate_limits_are_waited_out_and_said(project: Path,
                                            desk_port: tuple[HelpDesk, int]) -> None:
    desk, _ = desk_port
    from conftest import call_tools

    config = load_project(project)
    desk.rate, desk.counts = 1, {}
    try:
        r, = call_tools(config, "ann", [("tickets_by_status", {"limit": 25})])
    finally:
        desk.rate = 1000
    assert not r.is_error, r.content
    assert r.structured_content["retried"] >= 1
    assert any("-> 429" in x for x in r.meta["tether/evidence"]["requests"])


def test_a_path_argument_cannot_reach_another_path(project: Path,
                                                  desk_port: tuple[HelpDesk, int]) -> None:
    desk, _ = desk_port
    from conftest import call_tools

    desk.seen.clear()
    config = load_project(project)
    out = call_tools(config, "ann", [("ticket_by_id", {"ticket_id": "../agents"}),
                                     ("ticket_by_id", {"ticket_id": "TK-1?x=1"})])
    assert all(r.is_error for r in out)  # refused by the pattern, before any request
    assert desk.seen == []


def test_the_policy_applies_to_the_rows_an_api_returns(
        desk_port: tuple[HelpDesk, int], tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, desk_port[1])
    data = yaml.safe_load((root / "tether.yaml").read_text())
    data["policies"]["restricted"] = ["tickets.subject"]
    data["policies"]["roles"]["staff"]["masks"] = {"tickets.owner": "redact"}
    data["policies"]["roles"]["staff"]["row_filters"] = {"tickets": "amount_cents >= 1000"}
    (root / "tether.yaml").write_text(yaml.safe_dump(data))
    res = run_cli("token", "credential", "ann", "--source", "desk", "--project", str(root),
                  input="tok-ann\n")
    assert res.returncode == 0, res.stderr
    res = run_cli("build", "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    from conftest import call_tools

    r, = call_tools(load_project(root), "ann", [("tickets_by_status", {"limit": 50})])
    rows = r.structured_content["rows"]
    assert rows and all("subject" not in x for x in rows)
    assert {x["owner"] for x in rows} != {"ann"}  # redacted
    assert all(x["amount_cents"] >= 1000 for x in rows)
    assert r.meta["tether/evidence"]["policy_predicates"]
    assert "subject" not in json.dumps(tools_of(root)["tickets_by_status"]["outputSchema"])


# --- drift -----------------------------------------------------------------------------------------


def test_a_changed_spec_goes_through_the_gate(desk_port: tuple[HelpDesk, int],
                                              tmp_path: Path) -> None:
    port = desk_port[1]
    root = built(tmp_path / "p", port)
    assert check(load_project(root)).exit_code == 0  # nothing moved
    (root / "helpdesk.yaml").write_text(yaml.safe_dump(spec(add_status="escalated"),
                                                       sort_keys=False))
    added = check(load_project(root))
    assert added.exit_code == 10
    out = {o.tool: (o.outcome, o.version, o.change_level, o.change_kind)
           for o in added.outcomes}
    assert out["tickets_by_status"] == ("published", "1.1.0", "minor", "additive")
    (root / "helpdesk.yaml").write_text(yaml.safe_dump(
        spec(add_status="escalated", drop_field="owner"), sort_keys=False))
    removed = check(load_project(root))
    assert removed.exit_code == 11
    out = {o.tool: (o.outcome, o.version, o.change_level, o.change_kind)
           for o in removed.outcomes}
    assert out["tickets_by_status"] == ("pending", "2.0.0", "major", "breaking")
    registry = open_registry(load_project(root))
    try:
        assert registry.current()["tickets_by_status"].version == "1.1.0"
    finally:
        registry.close()


def test_a_moved_server_waits_for_a_person_and_the_published_one_is_called(
        desk_port: tuple[HelpDesk, int], tmp_path: Path) -> None:
    """tether.yaml names no base_url, so requests go to the spec's server. The spec moves it:
    `tether check` holds a review (exit 11) though no word of any tool changed, and callers'
    credentials keep going to the published server until a reviewer approves."""
    desk, port = desk_port
    root = tmp_path / "p"
    write_project(root, port)
    data = yaml.safe_load((root / "tether.yaml").read_text())
    del data["sources"]["desk"]["base_url"]
    data["policies"]["roles"]["lead"] = {"tools": ["*"], "reviewer": True}
    data["policies"]["users"]["lea"] = {"role": "lead"}
    (root / "tether.yaml").write_text(yaml.safe_dump(data))

    def served_at(p: int) -> None:
        (root / "helpdesk.yaml").write_text(yaml.safe_dump(
            spec() | {"servers": [{"url": f"http://127.0.0.1:{p}/api"}]}, sort_keys=False))

    served_at(port)
    res = run_cli("token", "credential", "ann", "--source", "desk", "--project", str(root),
                  input="tok-ann\n")
    assert res.returncode == 0, res.stderr
    res = run_cli("build", "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    assert check(load_project(root)).exit_code == 0
    new_port = free_port()
    with running(new_port) as moved:
        served_at(new_port)
        result = check(load_project(root))
        assert result.exit_code == 11
        out = {o.tool: o for o in result.outcomes}
        held = out["tickets_by_status"]
        assert (held.outcome, held.change_kind) == ("pending", "semantic")
        held_from = "1.0.0"  # what the build published
        assert (f"server moved from http://127.0.0.1:{port}/api to "
                f"http://127.0.0.1:{new_port}/api") in (held.change_note or "")
        desk.seen.clear()
        moved.seen.clear()
        _, (r,) = stdio_calls(root, "ann", [("tickets_by_status", {"status": "open"})])
        assert not r.is_error, r.content
        assert desk.seen and not moved.seen  # the published server, still
        res = run_cli("review", "approve", str(held.review), "--as", "lea", "--project",
                      str(root))
        assert res.returncode == 0, res.stdout + res.stderr
        _, (r,) = stdio_calls(root, "ann", [("tickets_by_status", {"status": "open"})])
        assert not r.is_error, r.content
        assert moved.seen
        # a call pinned to the version before keeps its shape, never its server: the
        # credential goes where the current version sends it
        desk.seen.clear()
        moved.seen.clear()
        _, (r,) = stdio_calls(root, "ann", [("tickets_by_status", {"status": "open"})],
                              meta={"tether/pin": held_from})
        assert not r.is_error, r.content
        assert r.structured_content["deprecation"].startswith(f"version {held_from} is")
        assert moved.seen and not desk.seen


def test_a_renamed_parameter_is_breaking(desk_port: tuple[HelpDesk, int],
                                         tmp_path: Path) -> None:
    root = built(tmp_path / "p", desk_port[1])
    (root / "helpdesk.yaml").write_text(yaml.safe_dump(spec(rename_param="state"),
                                                       sort_keys=False))
    renamed = check(load_project(root))
    assert renamed.exit_code == 11
    out = {o.tool: (o.outcome, o.change_kind) for o in renamed.outcomes}
    # the name follows the first filter: the old tool is retired, the new one waits with it
    assert ("pending", "breaking") in out.values(), out


def test_the_credential_command_reads_stdin_and_refuses_what_it_cannot_keep(
        project: Path) -> None:
    res = run_cli("token", "credential", "ann", "--source", "nope", "--project", str(project),
                  input="x\n")
    assert res.returncode == 2 and "'nope' is not an `openapi` source" in res.stderr
    res = run_cli("token", "credential", "ann", "--source", "desk", "--project", str(project),
                  input="\n")
    assert res.returncode == 2 and "no credential was given" in res.stderr
    mode = (project / ".tether" / "credentials.json").stat().st_mode & 0o777
    assert mode == 0o600
    assert "tok-ann" not in subprocess.run([TETHER, "token", "list", "--project", str(project)],
                                           capture_output=True, text=True).stdout


def test_discovery_reaches_an_api_tool(project: Path) -> None:
    """With no dedicated tools (a large API), search finds the operation and the generic
    listing runs it with the caller's own credential."""
    config = load_project(project)
    from conftest import call_tools

    found, rows = call_tools(config, "ben", [
        ("find_data_for_question", {"question": "which tickets are closed"}),
        ("rows_from_data_product", {"product": "tickets", "arguments": {"status": "closed"}})],
        dedicated_tools="none")
    assert not found.is_error and "tickets" in found.content[0].text
    assert not rows.is_error, rows.content
    assert {r["owner"] for r in rows.structured_content["rows"]} == {"ben"}
    assert {r["status"] for r in rows.structured_content["rows"]} == {"closed"}


# --- an API that misbehaves ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Iterator[tuple[Catalog, int]]:
    port = free_port()
    cat = Catalog()
    with serving(cat.app(), port):
        yield cat, port


def _client_rows(port: int, table: str, want: int = 10, state: Any = None) -> Any:
    s = parse_spec(json.dumps(catalog_spec()), "catalog.json")
    op = s.operations[table]
    cred = Credential(Catalog.KEY, s.schemes["key"])
    client = ApiClient(f"http://127.0.0.1:{port}", 5.0)
    try:
        return client.rows(op.plan(), {}, cred, want, state)
    finally:
        client.close()


def test_link_pages_that_copy_the_key_are_followed_without_keeping_it(
        catalog: tuple[Catalog, int]) -> None:
    cat, port = catalog
    cat.seen.clear()
    first = _client_rows(port, "listItems", want=3)
    assert [r["sku"] for r in first.rows] == ["S10", "S11", "S20"]  # page 2, not page 1 again
    assert [q["query"].get("page") for q in cat.seen] == [None, "2"]
    assert Catalog.KEY not in json.dumps(first.next_state)
    assert Catalog.KEY not in json.dumps(first.requests)
    assert all("api_key=%3Ccredential%3E" in r for r in first.requests), first.requests
    rest = _client_rows(port, "listItems", want=10, state=first.next_state)
    assert [r["sku"] for r in rest.rows] == ["S21", "S30", "S31"] and rest.next_state is None


def test_a_cursor_that_repeats_ends_the_pages(catalog: tuple[Catalog, int]) -> None:
    cat, port = catalog
    cat.seen.clear()
    got = _client_rows(port, "listLoop", want=10)
    assert len(cat.seen) == 2 and got.next_state is None


def test_a_rate_limit_asking_no_wait_is_retried_a_few_times_then_said(
        catalog: tuple[Catalog, int]) -> None:
    cat, port = catalog
    cat.seen.clear()
    with pytest.raises(ApiError) as e:
        _client_rows(port, "listBusy")
    assert len(cat.seen) == 4  # the request and three retries, half a second apart at least
    assert "answered 429 (rate limited; retried 3 times)" in e.value.message


def test_an_api_that_does_not_answer_in_time_is_a_clear_error(
        catalog: tuple[Catalog, int]) -> None:
    _, port = catalog
    s = parse_spec(json.dumps(catalog_spec()), "catalog.json")
    client = ApiClient(f"http://127.0.0.1:{port}", 1.0)
    try:
        with pytest.raises(ApiError) as e:
            client.rows(s.operations["listSlow"].plan(), {},
                        Credential(Catalog.KEY, s.schemes["key"]), 10)
    finally:
        client.close()
    assert "did not answer within the call's time" in e.value.message
    assert Catalog.KEY not in e.value.paragraph()


def test_an_error_that_quotes_the_request_never_shows_the_key(
        catalog: tuple[Catalog, int]) -> None:
    _, port = catalog
    with pytest.raises(ApiError) as e:
        _client_rows(port, "listBroken")
    assert "answered 400" in e.value.message and Catalog.KEY not in e.value.paragraph()


def test_values_of_no_declared_type_are_kept_as_json_and_names_alike_are_one_column(
        catalog: tuple[Catalog, int]) -> None:
    s = parse_spec(json.dumps(catalog_spec()), "catalog.json")
    op = s.operations["listItems"]
    columns = item_columns(op)
    assert [c.name for c in columns] == ["sku", "attrs", "ID"]
    con = rows_table(columns, [{"sku": "a", "attrs": "plain text", "ID": 1},
                               {"sku": "b", "attrs": {"k": 1}, "ID": 2}])
    try:
        got = con.execute('SELECT attrs FROM api_rows ORDER BY sku').fetchall()
    finally:
        con.close()
    assert [json.loads(v) for (v,) in got] == ["plain text", {"k": 1}]


@pytest.mark.parametrize("name, schema, kind", [
    ("max_price", {"type": "integer"}, "none"), ("min_count", {"type": "integer"}, "none"),
    ("start_year", {"type": "integer"}, "none"), ("updated_after", {"type": "string"}, "none"),
    ("from", {"type": "string"}, "none"), ("key", {"type": "string"}, "none"),
    ("page_token", {"type": "string"}, "cursor"), ("starting_after", {"type": "string"},
                                                   "cursor"),
    ("offset", {"type": "integer"}, "offset"), ("pageNumber", {"type": "integer"}, "page"),
])
def test_a_filter_is_never_taken_for_a_paging_parameter(name: str, schema: dict[str, Any],
                                                        kind: str) -> None:
    doc = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {
        "operationId": "listX",
        "parameters": [{"name": name, "in": "query", "schema": schema},
                       {"name": "limit", "in": "query", "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "type": "object", "properties": {
                "data": {"type": "array", "items": {"type": "object", "properties": {
                    "a": {"type": "string"}}}},
                "next_page_token": {"type": "string"}}}}}}}}}}}
    paging = parse_spec(json.dumps(doc), "x.json").operations["listX"].paging
    assert paging.kind == kind
    assert paging.size == "limit"
    assert (paging.param == name) == (kind != "none")


@pytest.mark.parametrize("doc, said", [
    ({"openapi": "3.0.0", "info": "x", "paths": {},
      "components": {"securitySchemes": ["x"]}}, None),
    ({"openapi": "3.0.0", "paths": {"/x": {"get": {"responses": {"200": {"content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}}}}},
      "components": {"schemas": {f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"}
                                 for i in range(5000)} | {"S5000": {"type": "object"}}}},
     "nests its schemas deeper than tether follows"),
])
def test_odd_specs_are_read_or_refused_without_a_traceback(doc: dict[str, Any],
                                                           said: str | None) -> None:
    if said is None:
        assert parse_spec(json.dumps(doc), "odd.json").operations == {}
        return
    with pytest.raises(ConfigError) as e:
        parse_spec(json.dumps(doc), "odd.json")
    assert said in e.value.message


def test_a_diamond_of_refs_resolves_once() -> None:
    schemas = {f"S{i}": {"type": "object", "properties": {
        "a": {"$ref": f"#/components/schemas/S{i + 1}"},
        "b": {"$ref": f"#/components/schemas/S{i + 1}"}}} for i in range(24)}
    schemas["S24"] = {"type": "object", "properties": {"x": {"type": "string"}}}
    doc = {"openapi": "3.0.0", "components": {"schemas": schemas}, "paths": {"/x": {"get": {
        "responses": {"200": {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/S0"}}}}}}}}}
    import time

    t0 = time.perf_counter()
    assert parse_spec(json.dumps(doc), "d.json").operations
    assert time.perf_counter() - t0 < 2.0


def test_a_shared_key_in_the_query_never_reaches_a_caller(
        catalog: tuple[Catalog, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared credential (`env:`) travels in the query and the API copies it into its Link
    header: the cursor, the result, the evidence and the call log never hold it."""
    import base64

    _, port = catalog
    root = tmp_path / "cat"
    root.mkdir()
    (root / "catalog.json").write_text(json.dumps(catalog_spec()))
    (root / "tether.yaml").write_text(f"""\
sources:
  cat:
    kind: openapi
    spec: catalog.json
    base_url: http://127.0.0.1:{port}
    auth: {{scheme: key, credential: "env:CAT_KEY"}}
    sample_calls: 1
products:
  items: {{table: listItems}}
policies:
  roles: {{all: {{tools: ["*"]}}}}
  users: {{amy: {{role: all}}}}
""")
    monkeypatch.setenv("CAT_KEY", Catalog.KEY)
    res = run_cli("build", "--project", str(root), env={"CAT_KEY": Catalog.KEY})
    assert res.returncode == 0, res.stdout + res.stderr
    from conftest import call_tools

    config = load_project(root)
    # one word (listItems, no filter) takes its source's name: never the spec's title
    first, = call_tools(config, "amy", [("cat_items", {"limit": 3})])
    assert not first.is_error, first.content
    cursor = first.structured_content["next_cursor"]
    body = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))[16:].decode()
    second, = call_tools(config, "amy", [("cat_items", {"limit": 3, "cursor": cursor})])
    assert [r["sku"] for r in second.structured_content["rows"]] == ["S21", "S30", "S31"]
    registry = open_registry(config)
    try:
        logged = json.dumps([dict(r) for r in registry.calls(None)], default=str)
    finally:
        registry.close()
    said = body + json.dumps(first.structured_content) + json.dumps(first.meta) + \
        json.dumps(second.meta) + logged + json.dumps(tools_of(root))
    assert Catalog.KEY not in said


def test_the_bytes_cap_cuts_a_page_and_the_cursor_goes_on_from_there(
        desk_port: tuple[HelpDesk, int], tmp_path: Path) -> None:
    root = built(tmp_path / "p", desk_port[1])
    data = yaml.safe_load((root / "tether.yaml").read_text())
    data["serve"] = {"max_result_bytes": 1024}  # serving only: the tools stay as built
    (root / "tether.yaml").write_text(yaml.safe_dump(data))
    from conftest import call_tools

    config = load_project(root)
    seen: list[str] = []
    cursor = None
    for _ in range(30):
        args: dict[str, Any] = {"limit": 20} | ({"cursor": cursor} if cursor else {})
        r, = call_tools(config, "ann", [("tickets_by_status", args)])
        assert not r.is_error, r.content
        assert len(json.dumps(r.structured_content["rows"])) <= 1024
        seen += [x["id"] for x in r.structured_content["rows"]]
        cursor = r.structured_content["next_cursor"]
        if not cursor:
            break
    assert seen == [t["id"] for t in tickets() if t["owner"] == "ann"]


def test_init_writes_a_project_from_a_spec_that_builds_and_serves(
        desk_port: tuple[HelpDesk, int], tmp_path: Path) -> None:
    _, port = desk_port
    (tmp_path / "helpdesk.yaml").write_text(yaml.safe_dump(spec(), sort_keys=False))
    root = tmp_path / "proj"
    res = run_cli("init", str(root), "--openapi", "helpdesk.yaml", "--base-url",
                  f"http://127.0.0.1:{port}/api", "--user", "ann", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "3 products, one per read operation; 3 operations that change state left out" in \
        res.stdout
    text = (root / "tether.yaml").read_text()
    assert "spec: \"../helpdesk.yaml\"" in text or str(tmp_path / "helpdesk.yaml") in text
    assert "auth: {scheme: bearerAuth, credential: token_store, sample_as: ann}" in text
    assert "  list_tickets:  # GET /tickets: List the caller's tickets." in text
    assert "createTicket" not in text
    res = run_cli("token", "credential", "ann", "--source", "api", "--project", str(root),
                  input="tok-ann\n")
    assert res.returncode == 0, res.stderr
    res = run_cli("build", "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    _, (r,) = stdio_calls(root, "ann", [("tickets_by_status", {"status": "open"})])
    assert not r.is_error, r.content
    assert {x["owner"] for x in r.structured_content["rows"]} == {"ann"}
    again = run_cli("init", str(root), "--openapi", "helpdesk.yaml", cwd=tmp_path)
    assert again.returncode != 0 and "already exists" in again.stderr
    bad = run_cli("init", str(tmp_path / "other"), "--openapi", "helpdesk.yaml", "--source",
                  "x.duckdb", cwd=tmp_path)
    assert bad.returncode == 2 and "takes no --source" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_a_credential_set_or_revoked_by_another_process_holds_at_the_next_call(
        tmp_path: Path) -> None:
    from tether.sources.credentials import CredentialStore

    path = tmp_path / "credentials.json"
    server, admin = CredentialStore(path), CredentialStore(path)
    assert server.get("desk", "ann") is None
    admin.set("desk", "ann", "tok-1")
    assert server.get("desk", "ann") == "tok-1"
    admin.set("desk", "ann", "tok-2")
    assert server.get("desk", "ann") == "tok-2"
    assert admin.remove("desk", "ann") and server.get("desk", "ann") is None
