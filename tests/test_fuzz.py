"""Fuzzing (hypothesis): what users and machines send tether, made at random.

- Tool arguments: random JSON for every tool a user sees (its own parameter names with values of
  any type, unknown names, nesting), through the MCP server in-process. Each answer is a result
  or a clean tool error; none names a Python exception or carries a traceback; a user with a row
  filter never receives a row outside it (checked by the policy oracle).
- Raw JSON-RPC over HTTP, to a running `tether serve --transport http`: random JSON values and
  random messages with a real method and random params. Never a 5xx; the server answers a good
  call afterwards.
- tether.yaml: the demo's file with random keys replaced, removed or given values of another
  type; `load_project` loads it or raises a TetherError naming the file.
- cases.jsonl lines, dbt manifests and OpenLineage events, made of random JSON near their real
  shapes: read, or refused with a TetherError; a refused OpenLineage import leaves the layer on
  disk as it was.
- Policy: a role with a random row filter and a user with random attributes; every listing
  result is a subset of what the oracle allows (exactly it, when not capped).

The example counts (FUZZED) are what docs/reliability.md reports.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from conftest import copy_project, free_port, http_process, piped, run_cli
from test_bad_files import GOOD_CASES
from test_bad_input import MANIFEST_V12, run_event
from tether.config import load_project
from tether.drift.publish import build
from tether.errors import TetherError
from tether.eval.cases import load_cases
from tether.imports.dbt_files import read_manifest
from tether.imports.openlineage import KIND
from tether.layers.model import layer_path
from tether.policy.oracle import check_rows, entitled_keys
from tether.profiling.layers import fold_openlineage
from tether.serve.server import TetherServer
from tether.sources import open_source

TETHER = str(Path(sys.executable).parent / "tether")
FUZZED = {"tool arguments": 300, "JSON-RPC messages": 200, "tether.yaml": 150,
          "cases.jsonl": 200, "dbt manifests": 100, "OpenLineage events": 150,
          "random policies": 60}
SETTINGS = {"deadline": None, "derandomize": True,
            "suppress_health_check": [HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow, HealthCheck.data_too_large]}
PYTHON_ERRORS = ("Traceback", "KeyError", "TypeError", "AttributeError", "IndexError",
                 "ValueError", "RecursionError", "AssertionError", "NoneType", "object has no")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
                    st.sampled_from(["", "last quarter", "2026-13-45", "' OR 1=1 --", "*",
                                     "-1", "1e309", "null", "\x00", "🙂" * 5]))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)


@pytest.fixture(scope="module")
def built(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("fuzz"))
    assert build(load_project(d)).exit_code == 0
    return d


def _clean(text: str, given: Any = None) -> bool:
    """No Python error's words in ``text`` but where the caller wrote them (an argument named
    "NoneType" is quoted back by its refusal)."""
    for said in sorted(_written(given), key=len, reverse=True):
        text = text.replace(said, "")
    return not any(e in text for e in PYTHON_ERRORS)


def _written(value: Any) -> set[str]:
    """Every name and text a caller's arguments hold."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {x for v in value.values() for x in _written(v)}
    if isinstance(value, list):
        return {x for v in value for x in _written(v)}
    return {value} if isinstance(value, str) and value else set()


def test_tool_arguments(built: Path) -> None:
    project = load_project(built)
    pol = project.config.policies
    user = next(u for u, c in pol.users.items() if pol.roles[c.role].row_filters)
    server = TetherServer(project, stdio_user=user)
    src = open_source("main", project.config.sources["main"], project.root)
    tools = [(v.name, v.definition["inputSchema"], v.plan) for v in server.visible(user)]
    names = st.sampled_from([t[0] for t in tools])
    keys: dict[tuple[str, str], set[Any]] = {}

    def arguments(name: str) -> st.SearchStrategy[dict[str, Any]]:
        schema = next(t[1] for t in tools if t[0] == name)
        params = list(schema.get("properties", {})) or ["x"]
        return st.dictionaries(st.one_of(st.sampled_from(params), st.text(max_size=12)),
                               json_values, max_size=5)

    seen = {"results": 0, "errors": 0}

    @settings(max_examples=FUZZED["tool arguments"], **SETTINGS)
    @given(call=names.flatmap(lambda n: st.tuples(st.just(n), arguments(n))))
    def one(call: tuple[str, dict[str, Any]]) -> None:
        name, args = call

        async def go() -> Any:
            async with Client(server.server) as c:
                return await c.call_tool(name, args)

        r = anyio.run(go)
        text = " ".join(getattr(x, "text", "") for x in r.content)
        assert _clean(text, args), (name, args, text[:500])
        if r.is_error:
            seen["errors"] += 1
            return
        seen["results"] += 1
        plan = next(t[2] for t in tools if t[0] == name)
        rows = (r.structured_content or {}).get("rows")
        if plan.kind == "list" and rows and isinstance(rows[0], dict):
            product = plan.product
            if (user, product) not in keys:
                keys[(user, product)] = entitled_keys(project.config, src.run, src.dialect,
                                                      user, product)
            pk = project.config.products[product].primary_key
            if pk and all(k in rows[0] for k in pk):
                found = check_rows(project.config, user, product, rows, keys[(user, product)])
                assert not found, (name, args, found)

    try:
        one()
    finally:
        server.close()
        src.close()
    assert seen["results"] > 10 and seen["errors"] > 10, seen  # both sides were reached


@pytest.fixture(scope="module")
def http_url(built: Path) -> Iterator[tuple[str, str]]:
    user = next(iter(load_project(built).config.policies.users))
    token = run_cli("token", "add", user, "--project", str(built)).stdout.strip()
    port = free_port()
    with http_process([TETHER, "serve", "--project", str(built), "--transport", "http",
                       "--port", str(port)], port, timeout=60):
        yield f"http://127.0.0.1:{port}/mcp", token


METHODS = ["initialize", "tools/list", "tools/call", "ping", "notifications/initialized",
           "resources/list", "prompts/list", "subscriptions/listen", "nonsense/method"]


def test_raw_json_rpc(http_url: tuple[str, str]) -> None:
    url, token = http_url
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    messages = st.one_of(
        json_values,
        st.fixed_dictionaries({"jsonrpc": st.one_of(st.just("2.0"), scalars),
                               "id": st.one_of(st.integers(), st.text(max_size=8), st.none()),
                               "method": st.sampled_from(METHODS),
                               "params": json_values}),
        st.binary(max_size=200))
    statuses: list[int] = []
    with httpx.Client(timeout=30) as http:
        @settings(max_examples=FUZZED["JSON-RPC messages"], **SETTINGS)
        @given(body=messages)
        def one(body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            r = http.post(url, content=data, headers=headers)
            statuses.append(r.status_code)
            assert r.status_code < 500, (body, r.status_code, r.text[:300])
            # the SDK's transport answers malformed messages itself (a JSON-RPC error that may
            # quote its validator); what must never come back is a traceback
            assert "Traceback" not in r.text, (body, r.text[:300])

        one()

    async def still_answers() -> Any:
        from mcp.client.streamable_http import streamable_http_client

        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as h, Client(
                streamable_http_client(url, http_client=h)) as c:  # type: ignore[arg-type]
            return await c.list_tools()

    assert anyio.run(still_answers).tools
    assert len(set(statuses)) > 1, statuses[:20]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _mutated(base: Any, paths: list[tuple[Any, ...]]) -> st.SearchStrategy[Any]:
    """``base`` with a few of its keys replaced by random values or removed."""
    def apply(edits: list[tuple[tuple[Any, ...], Any, bool]]) -> Any:
        doc = copy.deepcopy(base)
        for path, value, remove in edits:
            parent = doc
            try:
                for k in path[:-1]:
                    parent = parent[k]
                if remove and isinstance(parent, dict):
                    parent.pop(path[-1], None)
                else:
                    parent[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue  # an earlier edit changed the shape
        return doc

    return st.lists(st.tuples(st.sampled_from(paths), json_values, st.booleans()),
                    min_size=1, max_size=3).map(apply)


def test_tether_yaml(demo_dir: Path, tmp_path: Path) -> None:
    base = yaml.safe_load((demo_dir / "tether.yaml").read_text())
    d = tmp_path / "p"
    d.mkdir()

    @settings(max_examples=FUZZED["tether.yaml"], **SETTINGS)
    @given(doc=_mutated(base, _paths(base)))
    def one(doc: Any) -> None:
        (d / "tether.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        try:
            load_project(d)
        except TetherError as e:
            assert "tether.yaml" in e.paragraph(), e.paragraph()

    one()


def test_cases_jsonl(tmp_path: Path) -> None:
    good = list(GOOD_CASES)
    path = tmp_path / "cases.jsonl"

    @settings(max_examples=FUZZED["cases.jsonl"], **SETTINGS)
    @given(case=_mutated(good[0], _paths(good[0])), raw=st.one_of(st.none(), st.text(max_size=60)))
    def one(case: Any, raw: str | None) -> None:
        lines = [json.dumps(c) for c in good[1:]] + [json.dumps(case)]
        if raw is not None:
            lines.append(raw)
        path.write_text("\n".join(lines) + "\n")
        try:
            load_cases(path)
        except TetherError as e:
            assert "cases.jsonl" in e.paragraph(), e.paragraph()

    one()


def test_dbt_manifests(tmp_path: Path) -> None:
    base = {"metadata": {"dbt_schema_version": MANIFEST_V12, "project_name": "lake"},
            "nodes": {"model.lake.a": {
                "unique_id": "model.lake.a", "resource_type": "model", "name": "a",
                "package_name": "lake", "schema": "main", "alias": "a", "description": "An a.",
                "columns": {"x": {"name": "x", "description": "An x.", "data_type": "int"}},
                "depends_on": {"nodes": []}, "config": {"meta": {}}, "meta": {}, "tags": []}},
            "sources": {}, "metrics": {}, "semantic_models": {}, "parent_map": {}}
    path = tmp_path / "manifest.json"

    @settings(max_examples=FUZZED["dbt manifests"], **SETTINGS)
    @given(doc=_mutated(base, _paths(base)))
    def one(doc: Any) -> None:
        path.write_text(json.dumps(doc))
        try:
            read_manifest(path)
        except TetherError as e:
            assert "manifest" in e.paragraph(), e.paragraph()

    one()


def test_openlineage_events(built: Path) -> None:
    table = next(iter(load_project(built).config.products.values())).table
    first = run_event("load", "2026-01-01T00:00:00Z", ["lake.raw"], [table])
    fold_openlineage(built, json.dumps(first), "first.jsonl")
    layer = layer_path(built, KIND)
    kept = layer.read_bytes()

    @settings(max_examples=FUZZED["OpenLineage events"], **SETTINGS)
    @given(event=_mutated(first, _paths(first)))
    def one(event: Any) -> None:
        nonlocal kept
        try:
            fold_openlineage(built, json.dumps(event), "fuzz.jsonl")
        except TetherError as e:
            assert "fuzz.jsonl" in e.paragraph(), e.paragraph()
            assert layer.read_bytes() == kept  # nothing stored is lost or half-written
        else:
            kept = layer.read_bytes()
        json.loads(kept)

    one()


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def test_random_users_attributes_and_row_filters(built: Path) -> None:
    """A role made at random (a row filter over a product's enum-like columns: a column equal
    to a user attribute, IN a list, NOT equal, joined by AND or OR), a user of it with random
    attribute values (values of the column, or one no row has): every listing result is a
    subset of what the oracle allows, read with the filter as written."""
    from tether.context.config_model import RoleConfig, UserConfig
    from tether.profiling import profile_product
    from tether.serve.executor import Executor
    from tether.serve.kinds import Call
    from tether.serve.pagination import load_key
    from tether.toolgen import generate

    project = load_project(built)
    config = project.config
    profiles = {n: profile_product(project, n) for n in config.products}
    listings = {t.plan.product: t for t in generate(project, profiles, "grounded")
                if t.plan.kind == "list" and t.plan.product in config.products
                and config.products[t.plan.product].primary_key}
    choices = {p: {c.column.name: [str(getattr(v, "value", v)) for v in c.enum][:6]
                   for c in profiles[p].columns if c.enum and c.column.kind == "string"}
               for p in listings}
    choices = {p: cols for p, cols in choices.items() if cols}
    src = open_source("main", config.sources["main"], project.root)
    key = load_key(built / ".tether" / "cursor.key")
    checked = {"rows": 0, "examples": 0}

    @st.composite
    def policies(draw: Any) -> tuple[str, str, dict[str, str]]:
        product = draw(st.sampled_from(sorted(choices)))
        cols = choices[product]
        attrs: dict[str, str] = {}
        parts = []
        for i in range(draw(st.integers(1, 3))):
            col = draw(st.sampled_from(sorted(cols)))
            values = cols[col]
            shape = draw(st.sampled_from(["attr", "in", "not"]))
            if shape == "attr":
                attrs[f"a{i}"] = draw(st.one_of(st.sampled_from(values), st.just("no-such-value")))
                parts.append(f"{col} = {{{{ user.a{i} }}}}")
            elif shape == "in":
                picked = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
                parts.append(f"{col} IN ({', '.join(_literal(v) for v in picked)})")
            else:
                parts.append(f"NOT {col} = {_literal(draw(st.sampled_from(values)))}")
        joiner = draw(st.sampled_from([" AND ", " OR "]))
        return product, joiner.join(parts), attrs

    @settings(max_examples=FUZZED["random policies"], **SETTINGS)
    @given(drawn=policies())
    def one(drawn: tuple[str, str, dict[str, str]]) -> None:
        product, predicate, attrs = drawn
        fuzzed = config.model_copy(deep=True)
        fuzzed.policies.roles["fuzz_role"] = RoleConfig(row_filters={product: predicate})
        fuzzed.policies.users["fuzz.user"] = UserConfig(role="fuzz_role", **attrs)
        project.config = fuzzed
        ex = Executor(project, key)
        tool = listings[product]
        try:
            result = piped(ex).run(Call("fuzz.user", tool.name, "1.0.0", tool.wire(), tool.plan,
                                 {"limit": 200}))
        finally:
            ex.close()
        allowed = entitled_keys(fuzzed, src.run, src.dialect, "fuzz.user", product)
        found = check_rows(fuzzed, "fuzz.user", product, result["rows"], allowed)
        assert not found, (predicate, attrs, found)
        if not result.get("truncated"):
            assert result["row_count"] == len(allowed), (predicate, attrs)
        checked["rows"] += result["row_count"]
        checked["examples"] += 1

    try:
        one()
    finally:
        project.config = config
        src.close()
    assert checked["examples"] >= FUZZED["random policies"] // 2 and checked["rows"] > 0, checked
