"""Several `tether serve --transport http` processes on one PostgreSQL registry.

Three replicas run on loopback, each with a modern and a legacy-era MCP session open. A
publication (`tether build` after an edit), a rollback and a policy decision (a widening
approved by a second reviewer) each reach every replica and every session within a second of
the registry holding them (announced on the channel `tether_publications`); the widening is not
served before its approval; a replica started late serves the current versions; the calls of
every replica land in the one call log. Nothing here names a product or a user: each is found in
the warehouse's own tether.yaml.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
import yaml
from mcp import Client

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.drift.check import check, decide
from tether.drift.publish import build
from tether.drift.retiring import rollback_tool
from tether.policy.model import reviewers
from tether.registry import open_registry

TETHER = str(Path(sys.executable).parent / "tether")
SECOND_REVIEWER = "second.reviewer"
WITHIN = 1.0  # seconds from the registry holding a publication to every session hearing of it


@dataclass
class Cluster:
    dir: Path
    token: str          # a runner token: acts as the user named in X-Tether-As-User
    urls: list[str]
    reviewer: str
    narrow_user: str    # a user whose role sees some tools only
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def start(self) -> str:
        port = free_port()
        self.stack.enter_context(http_process(
            [TETHER, "serve", "--project", str(self.dir), "--transport", "http", "--port",
             str(port)], port, timeout=60))
        url = f"http://127.0.0.1:{port}/mcp"
        self.urls.append(url)
        return url

    def publications(self) -> int:
        registry = open_registry(load_project(self.dir))
        try:
            return registry.latest_publication()
        finally:
            registry.close()


@pytest.fixture(scope="module")
def cluster(demo_dir: Path, pg_url: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    import psycopg

    schema = f"tether_replicas_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    d = copy_project(demo_dir, tmp_path_factory.mktemp("replicas"))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    pol = config["policies"]
    first = next(u for u, cfg in pol["users"].items() if pol["roles"][cfg["role"]].get("reviewer"))
    pol["users"][SECOND_REVIEWER] = {"role": pol["users"][first]["role"]}
    config["registry"] = {"url": f"{pg_url}?options=-csearch_path%3D{schema}"}
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert build(load_project(d)).exit_code == 0
    reviewer = next(u for u in reviewers(load_project(d).config) if u != SECOND_REVIEWER)
    narrow_role = next(r for r, cfg in pol["roles"].items() if cfg.get("tools", ["*"]) != ["*"])
    narrow_user = next(u for u, cfg in pol["users"].items() if cfg["role"] == narrow_role)
    token = run_cli("token", "add", reviewer, "--runner", "--project", str(d))
    assert token.returncode == 0, token.stderr
    c = Cluster(d, token.stdout.strip(), [], reviewer, narrow_user)
    try:
        with c.stack:
            for _ in range(3):
                c.start()
            yield c
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


def _client(url: str, token: str, user: str, mode: str = "auto",
            handler: Callable[[Any], Any] | None = None) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}",
                                      "X-Tether-As-User": user})
    client = Client(streamable_http_client(url, http_client=http),  # type: ignore[arg-type]
                    mode=mode, message_handler=handler)
    return http, client


class Heard:
    """When each session last heard tools/list_changed."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def note(self, key: str) -> None:
        self.at[key] = time.monotonic()

    def since(self, t0: float) -> dict[str, float]:
        return {k: v - t0 for k, v in self.at.items() if v >= t0}


def _committed_at(cluster: Cluster, before: int, action: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``action`` while watching the registry: the moment it holds a publication after
    ``before`` (what a replica could first hear of), and what ``action`` returned."""
    seen: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if cluster.publications() > before:
                seen.append(time.monotonic())
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch)
    t.start()
    try:
        out = action()
    finally:
        time.sleep(0.05)
        stop.set()
        t.join()
    assert seen, "no publication was made"
    return out, seen[0]


async def _sessions(cluster: Cluster, heard: Heard, stack: contextlib.AsyncExitStack
                    ) -> tuple[list[Any], list[Callable[[], Any]]]:
    """A modern and a legacy session on each replica, as the narrowed user; and for each
    modern one, a task that notes what its subscription hears."""
    modern: list[Any] = []
    drains: list[Callable[[], Any]] = []
    for i, url in enumerate(cluster.urls):
        def legacy_handler(message: Any, key: str = f"legacy-{i}") -> None:
            if isinstance(message, types.ToolListChangedNotification):
                heard.note(key)

        async def on_message(message: Any, key: str = f"legacy-{i}") -> None:
            legacy_handler(message, key)

        for mode in ("auto", "legacy"):
            http, client = _client(url, cluster.token, cluster.narrow_user, mode,
                                   on_message if mode == "legacy" else None)
            await stack.enter_async_context(http)
            c = await stack.enter_async_context(client)
            await c.list_tools()
            if mode == "auto":
                modern.append(c)
                sub = await stack.enter_async_context(c.listen(tools_list_changed=True))

                async def drain(sub: Any = sub, key: str = f"modern-{i}") -> None:
                    async for _event in sub:
                        heard.note(key)

                drains.append(drain)
    return modern, drains


async def _all_heard(heard: Heard, t0: float, n: int) -> dict[str, float]:
    with anyio.move_on_after(10):
        while len(heard.since(t0)) < n:
            await anyio.sleep(0.02)
    return heard.since(t0)


def _versions(tools: Any) -> dict[str, str]:
    return {t.name: t.meta["tether/context"]["version"] for t in tools.tools}


def _description(tools: Any, name: str) -> str:
    return str(next(t.description for t in tools.tools if t.name == name))


def test_publication_rollback_and_policy_decision_reach_every_replica(cluster: Cluster) -> None:
    d = cluster.dir
    sessions = 2 * len(cluster.urls)
    original = (d / "tether.yaml").read_text()
    config = yaml.safe_load(original)
    product = next(p for p, cfg in config["products"].items()
                   if cfg.get("description") and cfg.get("tool", {}).get("name"))
    tool = config["products"][product]["tool"]["name"]
    delays: dict[str, dict[str, float]] = {}

    def edited_build() -> Any:
        c = yaml.safe_load(original)
        c["products"][product]["description"] += " Edited while three replicas serve."
        (d / "tether.yaml").write_text(yaml.safe_dump(c, sort_keys=False))
        return build(load_project(d))

    def widened_check() -> Any:
        c = yaml.safe_load((d / "tether.yaml").read_text())
        role = c["policies"]["users"][cluster.narrow_user]["role"]
        c["policies"]["roles"][role]["tools"] = ["*"]
        (d / "tether.yaml").write_text(yaml.safe_dump(c, sort_keys=False))
        return check(load_project(d), author=cluster.reviewer)

    async def go() -> None:
        heard = Heard()
        async with contextlib.AsyncExitStack() as stack:
            modern, drains = await _sessions(cluster, heard, stack)
            async with anyio.create_task_group() as tg:
                for drain in drains:
                    tg.start_soon(drain)
                await _steps(modern, heard)
                tg.cancel_scope.cancel()

    async def _steps(modern: list[Any], heard: Heard) -> None:
        listed = [await c.list_tools(cache_mode="refresh") for c in modern]
        before = [_versions(x) for x in listed]
        first, described = before[0][tool], _description(listed[0], tool)
        assert all(b == before[0] for b in before)

        # a publication
        n = cluster.publications()
        result, t0 = await anyio.to_thread.run_sync(
            lambda: _committed_at(cluster, n, edited_build))
        assert result.exit_code in (0, 10), result.to_json()
        delays["publication"] = await _all_heard(heard, t0, sessions)
        now = [_versions(await c.list_tools(cache_mode="refresh"))[tool] for c in modern]
        assert len(set(now)) == 1 and now[0] != first

        # a rollback to the first version: its description again, as a newer version
        n = cluster.publications()
        _, t0 = await anyio.to_thread.run_sync(lambda: _committed_at(
            cluster, n, lambda: rollback_tool(load_project(d), tool, first)))
        delays["rollback"] = await _all_heard(heard, t0, sessions)
        rolled = [await c.list_tools(cache_mode="refresh") for c in modern]
        assert len({_versions(r)[tool] for r in rolled}) == 1
        assert {_description(r, tool).split(" Changed in ")[0] for r in rolled} == {described}
        assert _versions(rolled[0])[tool] not in (first, now[0])

        # a policy decision: a widening waits for its review, then reaches everyone
        narrow = [len(r.tools) for r in rolled]
        n = cluster.publications()
        result = await anyio.to_thread.run_sync(widened_check)
        assert result.exit_code == 11, result.to_json()
        await anyio.sleep(0.7)
        assert [len((await c.list_tools(cache_mode="refresh")).tools)
                for c in modern] == narrow
        review = next(r for r in open_registry(load_project(d)).reviews()
                      if r["status"] == "pending")
        _, t0 = await anyio.to_thread.run_sync(lambda: _committed_at(
            cluster, n, lambda: decide(load_project(d), review["id"], True,
                                       SECOND_REVIEWER)))
        delays["policy decision"] = await _all_heard(heard, t0, sessions)
        wide = [len((await c.list_tools(cache_mode="refresh")).tools) for c in modern]
        assert all(w > x for w, x in zip(wide, narrow, strict=True)), (wide, narrow)

    anyio.run(go)
    print("seconds from commit to each session:", delays)
    for what, got in delays.items():
        assert len(got) == sessions, (what, got)
        assert max(got.values()) <= WITHIN, (what, got)


def test_a_late_replica_serves_the_current_versions_and_every_call_is_logged_once(
        cluster: Cluster) -> None:
    """Runs after the first test's publications: a replica started now lists what the running
    ones list; one call through each of the four reaches the one call log, once each."""
    late = cluster.start()
    registry = open_registry(load_project(cluster.dir))
    try:
        before = len(registry.calls())
    finally:
        registry.close()

    async def go() -> list[tuple[dict[str, str], int]]:
        out = []
        for url in cluster.urls:
            http, client = _client(url, cluster.token, cluster.narrow_user)
            async with http, client as c:
                tools = await c.list_tools()
                probe = next(t for t in tools.tools if t.name == "explain_data_product")
                products = probe.input_schema["properties"]["product"].get("enum") or []
                r = await c.call_tool("explain_data_product", {"product": products[0]})
                assert not r.is_error, r.content[0].text
                out.append((_versions(tools), len(tools.tools)))
        return out

    seen = anyio.run(go)
    assert cluster.urls[-1] == late and all(s == seen[0] for s in seen), seen

    def logged() -> int:
        registry = open_registry(load_project(cluster.dir))
        try:
            return len(registry.calls()) - before
        finally:
            registry.close()

    deadline = time.monotonic() + 10
    while logged() < len(cluster.urls) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # a tick more: nothing is written twice
    assert logged() == len(cluster.urls)
