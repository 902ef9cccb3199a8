"""Session tools: a product found by find_data_for_question (or explained by the probe) joins the
session's tools/list as its own listing tool, the client is told (notifications/tools/list_changed
in the handshake era, a ToolsListChanged event at 2026-07-28), lists again and calls it; over
stdio and HTTP, with the official SDK client. The list never exceeds
serve.tool_list_token_budget: mounted products leave least recently used first, the discovery
tools and the metrics never; a product's own tool answers by name whether or not it is listed
(a client that ignores the notification loses nothing)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
import yaml
from mcp import Client, StdioServerParameters

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.serve.server import TetherServer
from tether.toolgen.discovery import PROBE, ROWS, SEARCH
from tether.toolgen.tokens import tool_tokens

TETHER = str(Path(sys.executable).parent / "tether")
USER = "fin.ana"
WRITER = "mgr.emea"  # a caller whose list holds the write tools too
QUESTION = "which have CLOSED_LOST?"  # a stage of the deals product: it ranks first
FOUND, FOUND_TOOL = "deals", "deals_by_stage_and_pipeline"


@pytest.fixture(scope="module")
def project(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("session-tools"))
    build(load_project(d))
    return d


class Watch:
    """A connected client and what it was told."""

    def __init__(self, client: Client, legacy: bool) -> None:
        self.client, self.legacy, self.changed = client, legacy, 0

    async def names(self) -> list[str]:
        return [t.name for t in (await self.client.list_tools(cache_mode="refresh")).tools]

    async def told(self, before: int) -> None:
        with anyio.fail_after(10):
            while self.changed <= before:
                await anyio.sleep(0.02)


@asynccontextmanager
async def watched(connect: Callable[..., Any], legacy: bool) -> AsyncIterator[Watch]:
    """A client (``connect(**client options)``) that counts list-changed notifications of
    either protocol era."""
    holder: list[Watch] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            holder[0].changed += 1

    opts: dict[str, Any] = {"mode": "legacy", "message_handler": handler} if legacy else {}
    async with connect(**opts) as client:
        w = Watch(client, legacy)
        holder.append(w)
        if legacy:
            yield w
            return
        async with client.listen(tools_list_changed=True) as sub, anyio.create_task_group() as tg:
            async def count() -> None:
                async for _event in sub:
                    w.changed += 1
            tg.start_soon(count)
            yield w
            tg.cancel_scope.cancel()


async def found_then_called(w: Watch) -> None:
    """Search mounts the product, the client is told, lists it and calls it by its name."""
    base = await w.names()
    assert {SEARCH, PROBE, ROWS} <= set(base) and FOUND_TOOL not in base
    before = w.changed
    r = await w.client.call_tool(SEARCH, {"question": QUESTION})
    assert not r.is_error and r.structured_content["matches"][0]["name"] == FOUND
    await w.told(before)
    after = await w.names()
    assert after == [*base, FOUND_TOOL], after  # the base list unchanged, the tool after it
    got = await w.client.call_tool(FOUND_TOOL, {"limit": 2})
    assert not got.is_error and got.structured_content["row_count"] == 2
    again = w.changed  # found again: already there, nothing to tell
    await w.client.call_tool(SEARCH, {"question": QUESTION})
    await anyio.sleep(0.2)
    assert w.changed == again


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
def test_a_found_product_joins_the_list_in_process(project: Path, legacy: bool) -> None:
    server = TetherServer(load_project(project), stdio_user=USER, dedicated_tools="none")

    async def go() -> None:
        async with watched(lambda **o: Client(server.server, **o), legacy) as w:
            await found_then_called(w)

    try:
        anyio.run(go)
    finally:
        server.close()


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
def test_a_found_product_joins_the_list_over_stdio(project: Path, legacy: bool) -> None:
    params = StdioServerParameters(command=TETHER, args=[
        "serve", "--project", str(project), "--as-user", USER, "--dedicated-tools", "none"])

    async def go() -> None:
        async with watched(lambda **o: Client(params, **o), legacy) as w:
            await found_then_called(w)

    anyio.run(go)


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
def test_a_found_product_joins_the_list_over_http(project: Path, legacy: bool) -> None:
    from mcp.client.streamable_http import streamable_http_client

    token = run_cli("token", "add", USER, "--project", str(project))
    assert token.returncode == 0, token.stderr
    port = free_port()
    argv = [TETHER, "serve", "--project", str(project), "--transport", "http", "--port",
            str(port), "--dedicated-tools", "none"]

    async def go() -> None:
        headers = {"Authorization": f"Bearer {token.stdout.strip()}"}
        async with httpx.AsyncClient(headers=headers) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            async with watched(lambda **o: Client(streamable_http_client(  # type: ignore[arg-type]
                    url, http_client=http), **o), legacy) as w:
                await found_then_called(w)

    with http_process(argv, port, timeout=30):
        anyio.run(go)


def test_the_list_stays_within_the_budget(project: Path, tmp_path: Path) -> None:
    """With room for one product beside the base list, a second one found or explained evicts
    the first; the list is never over the budget; the evicted tool still answers by name. (As a
    regional manager: the build checks the budget on the list with every write tool, which a
    manager's list holds.)"""
    d = copy_project(project, tmp_path / "budget")
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user=WRITER, dedicated_tools="none")
    try:
        base = sum(tool_tokens(v.definition) for v in server.visible(WRITER))
        sizes = {p: tool_tokens(server.shaped(WRITER, v).definition)
                 for p, v in server.seen.index(WRITER).listings.items()}
    finally:
        server.close()
    first, second = FOUND, "orders"
    budget = base + max(sizes[first], sizes[second]) + min(sizes.values()) - 1
    cfg = yaml.safe_load((d / "tether.yaml").read_text())
    cfg.setdefault("serve", {})["tool_list_token_budget"] = budget
    (d / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user=WRITER, dedicated_tools="none")

    async def listed(c: Client) -> list[types.Tool]:
        tools = (await c.list_tools(cache_mode="refresh")).tools
        total = sum(tool_tokens(t.model_dump(by_alias=True, mode="json", exclude_none=True))
                    for t in tools)
        assert total <= budget, (total, budget, [t.name for t in tools])
        return list(tools)

    async def go() -> None:
        async with Client(server.server) as c:
            names = {t.name for t in await listed(c)}
            await c.call_tool(SEARCH, {"question": QUESTION})
            assert FOUND_TOOL in {t.name for t in await listed(c)} - names
            await c.call_tool(PROBE, {"product": second})
            now = {t.name for t in await listed(c)}
            orders_tool = next(v.name for v in server.reachable(WRITER)
                               if v.plan.product == second and v.plan.kind == "list")
            assert orders_tool in now and FOUND_TOOL not in now  # least recently used left
            assert names <= now  # the discovery tools and metrics never leave
            r = await c.call_tool(FOUND_TOOL, {"limit": 1})  # not listed, still answered
            assert not r.is_error and r.structured_content["row_count"] == 1

    try:
        anyio.run(go)
    finally:
        server.close()


def test_a_product_read_by_name_joins_the_list_too(project: Path) -> None:
    """A model that goes straight to rows_from_data_product (as the real one mostly did) gets
    the product's own tool, with its own schema, for its next turn."""
    server = TetherServer(load_project(project), stdio_user=WRITER, dedicated_tools="none")

    async def go() -> None:
        async with watched(lambda **o: Client(server.server, **o), False) as w:
            base = await w.names()
            before = w.changed
            r = await w.client.call_tool(ROWS, {"product": FOUND, "arguments": {"limit": 1}})
            assert not r.is_error, r.content
            await w.told(before)
            assert await w.names() == [*base, FOUND_TOOL]

    try:
        anyio.run(go)
    finally:
        server.close()


def test_session_tools_can_be_turned_off(project: Path, tmp_path: Path) -> None:
    d = copy_project(project, tmp_path / "off")
    cfg = yaml.safe_load((d / "tether.yaml").read_text())
    cfg.setdefault("serve", {})["session_tools"] = False
    (d / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user=WRITER, dedicated_tools="none")

    async def go() -> None:
        async with Client(server.server) as c:
            before = [t.name for t in (await c.list_tools()).tools]
            await c.call_tool(SEARCH, {"question": QUESTION})
            assert [t.name for t in (await c.list_tools(cache_mode="refresh")).tools] == before

    try:
        anyio.run(go)
    finally:
        server.close()
