"""The policy boundary on both warehouses (the demo and the clinic network in another domain):
the probe, listings and refusals as a filtered user, keyed hash masks, denied tables, result
caps, the call log's bound on arguments, private files, typed cursors and `limit`.

Everything that names a product, column, user or value reads it from the warehouse's own
tether.yaml (a role whose row filter is `column = {{ user.attr }}`, a masked column, ...), so
nothing here is shaped to either warehouse."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project, piped, run_cli, with_serve
from tether.config import Project, load_project
from tether.context.meta import enum_of
from tether.drift.check import check
from tether.drift.publish import build
from tether.keyfile import load_secret
from tether.policy import MaskKey
from tether.registry import open_registry
from tether.serve.executor import Executor
from tether.serve.kinds import Call, ToolError
from tether.serve.pagination import load_key
from tether.serve.server import TetherServer
from tether.sources import open_source

SIMPLE = re.compile(r"^\s*(\w+)\s*=\s*\{\{\s*user\.(\w+)\s*\}\}\s*$")


@dataclass
class Scoped:
    """A user whose row filter on ``product`` pins ``column`` to their attribute ``value``."""

    user: str
    product: str
    column: str
    value: str


def scoped(project: Project) -> Scoped:
    c = project.config
    for name, u in sorted(c.policies.users.items()):
        role = c.policies.roles[u.role]
        for product, template in sorted(role.row_filters.items()):
            m = SIMPLE.match(template)
            if m and c.products[product].table and m.group(2) in u.attributes():
                return Scoped(name, product, m.group(1), str(u.attributes()[m.group(2)]))
    raise AssertionError("no user with a simple row filter")


def masked(project: Project) -> tuple[str, str, str, str]:
    """(user, product, column, mask) of a mask the warehouse declares."""
    c = project.config
    found = [(mask != "hash", name, target, mask) for name, u in sorted(c.policies.users.items())
             for target, mask in sorted(c.policies.roles[u.role].masks.items()) if "." in target]
    assert found, "no mask"
    _, name, target, mask = min(found)  # a hash mask where there is one
    product, column = target.split(".", 1)
    return name, product, column, mask


def sql(project: Project, query: str, params: dict[str, Any] | None = None) -> list[Any]:
    name, cfg = next(iter(project.config.sources.items()))
    with open_source(name, cfg, project.root) as src:
        return src.run(query, params)


@pytest.fixture(params=["demo", "second"])
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    src = request.getfixturevalue("demo_dir" if request.param == "demo" else "second_dir")
    d = copy_project(src, tmp_path / request.param)
    if request.param == "second":  # copy_project rewrites the demo's URL: the clinic's too
        text = (src / "tether.yaml").read_text()
        (d / "tether.yaml").write_text(text.replace(
            "duckdb:///warehouse.duckdb", f"duckdb:///{src / 'warehouse.duckdb'}"))
    assert build(load_project(d)).exit_code == 0
    return d


def executor(d: Path) -> Executor:
    return Executor(load_project(d), load_key(d / ".tether" / "cursor.key"))


def tool_for(d: Path, kind: str, product: str | None = None) -> Any:
    registry = open_registry(load_project(d))
    try:
        for v in registry.current().values():
            if v.plan["kind"] == kind and (product is None or v.plan.get("product") == product):
                from tether.toolgen import QueryPlan

                return v.name, v.definition, QueryPlan.model_validate(v.plan)
    finally:
        registry.close()
    raise AssertionError(f"no {kind} tool for {product}")


def run(ex: Executor, user: str, tool: tuple[str, dict[str, Any], Any],
        args: dict[str, Any]) -> dict[str, Any]:
    name, definition, plan = tool
    return piped(ex).run(Call(user, name, "1.0.0", definition, plan, args))


def test_the_probe_shows_a_filtered_user_only_their_rows(warehouse: Path) -> None:
    project = load_project(warehouse)
    s = scoped(project)
    table = project.config.products[s.product].table
    mine = sql(project, f'SELECT count(*) FROM {table} WHERE "{s.column}" = $v', {"v": s.value})
    everyone = sql(project, f"SELECT count(*) FROM {table}")
    assert mine[0][0] < everyone[0][0]
    ex = executor(warehouse)
    try:
        out = run(ex, s.user, tool_for(warehouse, "probe"), {"product": s.product})
    finally:
        ex.close()
    assert out["row_count"] == mine[0][0]
    column = next(c for c in out["columns"] if c["name"] == s.column)
    assert column["values"] == [s.value]


def test_another_scope_is_refused_not_answered_empty(warehouse: Path) -> None:
    project = load_project(warehouse)
    s = scoped(project)
    table = project.config.products[s.product].table
    other = sql(project, f'SELECT DISTINCT "{s.column}" FROM {table} WHERE "{s.column}" <> $v '
                f'ORDER BY 1 LIMIT 1', {"v": s.value})[0][0]
    listing = tool_for(warehouse, "list", s.product)
    param = next(f.param for f in listing[2].filters if f.column == f"{s.product}.{s.column}")
    ex = executor(warehouse)
    try:
        with pytest.raises(ToolError) as e:
            run(ex, s.user, listing, {param: other})
        assert e.value.refusal == {"reason": "outside_entitlement", "detail": e.value.refusal[
            "detail"]}
        assert str(e.value).startswith("Not permitted:")
        rows = run(ex, s.user, listing, {param: s.value, "limit": 5})["rows"]
        assert rows and {r[s.column] for r in rows} == {s.value}
    finally:
        ex.close()


def test_a_hash_mask_is_keyed_and_the_key_never_shows(warehouse: Path) -> None:
    project = load_project(warehouse)
    user, product, column, _ = masked(project)
    text = (warehouse / "tether.yaml").read_text()
    role = project.config.policies.users[user].role
    # make the role hash the column (whatever mask the warehouse gives it)
    text = re.sub(rf"({re.escape(product)}\.{re.escape(column)}): \"?(redact|null|hash)\"?",
                  r"\1: hash", text)
    (warehouse / "tether.yaml").write_text(text)
    project = load_project(warehouse)
    assert project.config.policies.roles[role].masks[f"{product}.{column}"] == "hash"
    listing = tool_for(warehouse, "list", product)
    key_file = warehouse / ".tether" / "mask.key"
    ex = executor(warehouse)
    try:
        got = run(ex, user, listing, {"limit": 20})["rows"]
        texts = " ".join(t for entry in ex.caches.sql_texts.values() for t in entry[:2])
    finally:
        ex.close()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = MaskKey.from_secret(load_secret(key_file))
    pk = project.config.products[product].primary_key
    table = project.config.products[product].table
    real = {tuple(str(x) for x in r[:-1]): r[-1] for r in sql(
        project, f'SELECT {", ".join(chr(34) + k + chr(34) for k in pk)}, "{column}" FROM {table}')}
    checked = 0
    for row in got:
        raw = real[tuple(str(row[k]) for k in pk)]
        if raw is None:
            assert row[column] is None
            continue
        assert row[column] == key.digest(str(raw))
        assert row[column] != hashlib.md5(str(raw).encode()).hexdigest()  # not guessable
        checked += 1
    assert checked
    secret = key_file.read_text().strip()
    assert secret not in texts and key.inner not in texts and key.outer not in texts


def test_a_denied_product_is_absent_on_every_path(warehouse: Path) -> None:
    project = load_project(warehouse)
    s = scoped(project)
    role = project.config.policies.users[s.user].role
    text = (warehouse / "tether.yaml").read_text()
    text = text.replace(f"    {role}:\n", f"    {role}:\n      tables: {{deny: [{s.product}]}}\n",
                        1)
    (warehouse / "tether.yaml").write_text(text)
    project = load_project(warehouse)
    # a new deny only narrows: tether check publishes it at once, and servers enforce it
    assert check(project).exit_code in (0, 10)
    server = TetherServer(project, stdio_user=s.user)
    generic = TetherServer(project, mode="generic", stdio_user=s.user)
    table = project.config.products[s.product].table

    async def go() -> tuple[list[Any], Any, Any, Any, Any]:
        async with Client(server.server) as c:
            tools = (await c.list_tools()).tools
            probe = await c.call_tool("explain_data_product", {"product": s.product})
        async with Client(generic.server) as c:
            listed = await c.call_tool("list_tables", {})
            ran = await c.call_tool("run_sql", {"sql": f"SELECT count(*) FROM {table}"})
            described = await c.call_tool("describe_table", {"table": table})
        return tools, probe, listed, ran, described

    try:
        tools, probe, listed, ran, described = anyio.run(go)
    finally:
        server.close()
        generic.close()
    for t in tools:
        ctx = (t.meta or {}).get("tether/context", {})
        if t.name == "explain_data_product":
            assert s.product not in t.input_schema["properties"]["product"]["enum"]
        else:
            assert s.product not in ctx.get("products", []), t.name
    assert probe.is_error
    assert table not in json.dumps(listed.structured_content)
    assert ran.is_error and ran.meta["tether/refusal"]["reason"] == "denied_table"
    assert described.is_error


def test_results_stop_at_the_row_and_byte_caps(warehouse: Path) -> None:
    p = warehouse / "tether.yaml"
    p.write_text(with_serve(p.read_text(), max_result_rows=7, max_result_bytes=2048))
    project = load_project(warehouse)
    auditor = next(n for n, u in project.config.policies.users.items()
                   if not project.config.policies.roles[u.role].row_filters
                   and not project.config.policies.roles[u.role].masks)
    from tether.toolgen import generate

    run_sql = next(t for t in generate(project, {}, "generic") if t.name == "run_sql")
    biggest = max(project.config.products.items(),
                  key=lambda kv: sql(project, f"SELECT count(*) FROM {kv[1].table}")[0][0]
                  if kv[1].table else 0)[0]
    table = project.config.products[biggest].table
    ex = executor(warehouse)
    try:
        out = piped(ex).run(Call(auditor, "run_sql", "1", run_sql.wire(), run_sql.plan,
                          {"sql": f"SELECT * FROM {table}"}))
        assert out["truncated"] and 0 < out["row_count"] <= 7
        assert len(json.dumps(out["rows"])) < 2048 + 1024
        wide = piped(ex).run(Call(auditor, "run_sql", "1", run_sql.wire(), run_sql.plan,
                           {"sql": f"SELECT a.*, b.* FROM {table} a, {table} b"}))
        assert wide["truncated"] and wide["row_count"] <= 7
        with pytest.raises(ToolError) as e:
            piped(ex).run(Call(auditor, "run_sql", "1", run_sql.wire(), run_sql.plan,
                        {"sql": "SELECT repeat('x', 200000000)"}))
        assert e.value.refusal and e.value.refusal["reason"] == "function_not_allowed"
    finally:
        ex.close()
    assert "at most 7 rows or 2 KiB" in run_sql.description


def test_limit_zero_is_an_error_and_the_schema_says_so(warehouse: Path) -> None:
    project = load_project(warehouse)
    s = scoped(project)
    listing = tool_for(warehouse, "list", s.product)
    assert listing[1]["inputSchema"]["properties"]["limit"]["minimum"] == 1
    ex = executor(warehouse)
    try:
        with pytest.raises(ToolError, match="limit"):
            run(ex, s.user, listing, {"limit": 0})
    finally:
        ex.close()


def test_every_page_of_every_listing_follows_its_cursor(warehouse: Path) -> None:
    """Page 2 works whatever the key's type (a DATE key once came back as text)."""
    project = load_project(warehouse)
    user = next(n for n, u in project.config.policies.users.items()
                if not project.config.policies.roles[u.role].row_filters)
    registry = open_registry(project)
    try:
        listings = [v for v in registry.current().values() if v.plan["kind"] == "list"]
    finally:
        registry.close()
    from tether.toolgen import QueryPlan

    ex = executor(warehouse)
    try:
        for v in listings:
            plan = QueryPlan.model_validate(v.plan)
            if not plan.order_by:
                continue
            first = piped(ex).run(Call(user, v.name, v.version, v.definition, plan, {"limit": 3}))
            if not first["next_cursor"]:
                continue
            second = piped(ex).run(Call(user, v.name, v.version, v.definition, plan,
                                 {"limit": 3, "cursor": first["next_cursor"]}))
            assert second["rows"] and second["rows"] != first["rows"], v.name
    finally:
        ex.close()


def test_the_call_log_keeps_at_most_4_kib_of_arguments_and_files_are_private(
        warehouse: Path) -> None:
    project = load_project(warehouse)
    s = scoped(project)
    assert run_cli("token", "add", s.user, "--project", str(warehouse)).returncode == 0
    listing = tool_for(warehouse, "list", s.product)
    huge = "x" * 2_000_000
    server = TetherServer(project, stdio_user=s.user)

    async def go() -> Any:
        async with Client(server.server) as c:
            return await c.call_tool(listing[0], {"cursor": huge})

    try:
        result = anyio.run(go)
    finally:
        server.close()
    assert result.is_error
    registry = open_registry(project)
    try:
        logged = registry.calls()[-1]["arguments"]
    finally:
        registry.close()
    assert len(logged.encode()) <= 4200
    entry = json.loads(logged)
    assert entry["sha256"] == hashlib.sha256(json.dumps({"cursor": huge}, sort_keys=True)
                                             .encode()).hexdigest()
    for name in ("registry.db", "tokens.json", "cursor.key", "mask.key"):
        path = warehouse / ".tether" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name


def test_a_filtered_users_tool_list_holds_only_their_values(warehouse: Path) -> None:
    """Enums observed over every row are narrowed, in the caller's tools/list and in the
    errors of their calls, to the values their rows hold; ids are never given as examples."""
    project = load_project(warehouse)
    s = scoped(project)
    listing = tool_for(warehouse, "list", s.product)
    param = next(f.param for f in listing[2].filters if f.column == f"{s.product}.{s.column}")
    assert len(enum_of(listing[1]["inputSchema"]["properties"][param]) or []) > 1  # as published
    server = TetherServer(project, stdio_user=s.user)

    async def go() -> tuple[list[Any], Any]:
        async with Client(server.server) as c:
            tools = (await c.list_tools()).tools
            bad = await c.call_tool(listing[0], {param: "not-a-value"})
            return tools, bad

    try:
        tools, bad = anyio.run(go)
    finally:
        server.close()
    mine = next(t for t in tools if t.name == listing[0])
    assert enum_of(mine.input_schema["properties"][param]) == [s.value]
    others = set(enum_of(listing[1]["inputSchema"]["properties"][param]) or []) - {s.value}
    assert bad.is_error and s.value in bad.content[0].text
    assert not [v for v in others if str(v) in bad.content[0].text]
    filtered = project.config.policies.roles[project.config.policies.users[s.user].role
                                             ].row_filters
    scoped_tools = [t for t in tools if set((t.meta or {}).get("tether/context", {}).get(
        "products", [])) & set(filtered) and t.name != "explain_data_product"]
    assert scoped_tools and " like " not in json.dumps([t.input_schema for t in scoped_tools])
