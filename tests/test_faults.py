"""Faults: PostgreSQL (registry and warehouse both) stopped and started again under two running
replicas, and a source that is down at `tether check`.

On a server of the test's own (tests/pgcluster.py; the shared one serves other tests meanwhile).
While it is down a call fails with a tool error that says the source cannot be reached (never a
traceback), no replica exits, a publication attempted meanwhile fails whole; once it is back
every replica answers again by itself, the calls made meanwhile reach the one call log, and a
publication made after it reaches both replicas. A check with its source down exits 2 and
records no drift.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import psycopg
import pytest
import yaml
from mcp import Client

from conftest import free_port, run_cli
from pgcluster import PrivatePostgres, private_postgres
from tether.config import load_project
from tether.demo import init_demo
from tether.drift.publish import build
from tether.registry import open_registry

TETHER = str(Path(sys.executable).parent / "tether")


@pytest.fixture(scope="module")
def pg() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


@contextlib.contextmanager
def replica(d: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen([TETHER, "serve", "--project", str(d), "--transport", "http",
                                 "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err)
    try:
        assert _until(lambda: _up(port), 60), log.read_text()
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _up(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _call(url: str, token: str, tool: str, args: dict[str, Any]) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> Any:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(url, http_client=http)) as c:  # type: ignore[arg-type]
            tools = await c.list_tools()
            return tools, await c.call_tool(tool, args)

    return anyio.run(go)


def _until(what: Callable[[], bool], seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.2)
    return what()


def _project(pg: PrivatePostgres, d: Path, registry: bool) -> Path:
    schema = f"wh_{d.name.replace('-', '_')}"[:40]
    init_demo(d, scale=0.05, source_url=pg.url, schema=schema)
    if registry:
        with psycopg.connect(pg.url, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "reg_{schema}"')  # type: ignore[arg-type]
        config = yaml.safe_load((d / "tether.yaml").read_text())
        config["registry"] = {"url": f"{pg.url}?options=-csearch_path%3Dreg_{schema}"}
        (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert build(load_project(d)).exit_code == 0
    return d


def _a_tool_and_user(d: Path) -> tuple[str, str]:
    """A listing tool every role may call, and a user of an unfiltered role."""
    config = load_project(d).config
    pol = config.policies
    user = next(u for u, cfg in pol.users.items()
                if pol.roles[cfg.role].tools == ["*"] and not pol.roles[cfg.role].row_filters)
    tool = next(p.tool.name for p in config.products.values() if p.tool and p.tool.name)
    return tool, user


def _registry_calls(d: Path) -> int:
    registry = open_registry(load_project(d))
    try:
        return len(registry.calls())
    finally:
        registry.close()


def test_replicas_ride_out_a_postgres_restart(pg: PrivatePostgres, tmp_path: Path) -> None:
    d = _project(pg, tmp_path / "restart", registry=True)
    tool, user = _a_tool_and_user(d)
    token = run_cli("token", "add", user, "--project", str(d)).stdout.strip()
    with replica(d, tmp_path / "a.log") as (a, proc_a), replica(d, tmp_path / "b.log") as (
            b, proc_b):
        for url in (a, b):
            _, r = _call(url, token, tool, {"limit": 3})
            assert not r.is_error, r.content[0].text
        assert _until(lambda: _registry_calls(d) >= 2, 10)
        publications = open_registry(load_project(d)).publications()

        pg.stop()
        for url in (a, b):
            _, r = _call(url, token, tool, {"limit": 3})
            assert r.is_error
            text = r.content[0].text
            assert "cannot be reached" in text and "make the call again" in text, text
            assert "Traceback" not in text and "psycopg" not in text, text
        # a publication attempted meanwhile fails whole, with a clear error
        p = d / "tether.yaml"
        config = yaml.safe_load(p.read_text())
        product = next(n for n, cfg in config["products"].items()
                       if cfg.get("tool", {}).get("name") == tool)
        config["products"][product]["description"] += " Said again after a restart."
        p.write_text(yaml.safe_dump(config, sort_keys=False))
        res = run_cli("build", "--project", str(d))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        time.sleep(1.5)  # several of the replicas' ticks with the registry gone
        assert proc_a.poll() is None and proc_b.poll() is None

        pg.start()
        for url in (a, b):
            assert _until(lambda url=url: not _call(url, token, tool, {"limit": 3})[1].is_error)
        # every call reached the one call log: the two before, the two refused, the two after
        assert _until(lambda: _registry_calls(d) >= 4 + 2 * 1, 15)
        assert open_registry(load_project(d)).publications() == publications

        assert run_cli("build", "--project", str(d)).returncode in (0, 10)
        after = open_registry(load_project(d)).publications()
        assert len(after) == len(publications) + 1

        def described(url: str) -> bool:
            tools, _ = _call(url, token, tool, {"limit": 1})
            t = next(t for t in tools.tools if t.name == tool)
            return "Said again after a restart." in (t.description or "")

        for url in (a, b):
            assert _until(lambda url=url: described(url), 10)
        assert proc_a.poll() is None and proc_b.poll() is None
    logs = (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()
    assert "the registry cannot be reached" in logs and "the registry is back" in logs
    assert "Traceback" not in logs, logs


def test_check_with_its_source_down_invents_no_drift(pg: PrivatePostgres, tmp_path: Path
                                                     ) -> None:
    d = _project(pg, tmp_path / "down", registry=False)
    registry = open_registry(load_project(d))
    events, pubs = len(registry.events()), len(registry.publications())
    registry.close()
    pg.stop()
    try:
        res = run_cli("check", "--project", str(d))
        assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "cannot connect" in res.stderr, res.stderr
    finally:
        pg.start()
    registry = open_registry(load_project(d))
    assert (len(registry.events()), len(registry.publications())) == (events, pubs)
    registry.close()
    res = run_cli("check", "--project", str(d), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    registry = open_registry(load_project(d))
    assert len(registry.events()) == events
    registry.close()

