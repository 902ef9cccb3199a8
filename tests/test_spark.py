"""Apache Spark SQL live, through Spark Connect, on both test warehouses (`make test-slow`, CI).

A local Spark Connect server (tests/sparkserver.py) holds each warehouse as Parquet-backed Spark
tables. The same tether.yaml, pointed at Spark, is profiled and built; every tool each user sees
is then called on Spark and on DuckDB with the same arguments (none, then each enum's first
value with a period and an ordering, and the next page): the same tools, the same answers
(rows, counts, as_of, windows), the same refusals, and evidence naming the same window. Then
drift through Spark (a column added is found by `tether check`), a statement that is not a query
refused before it is sent, a statement past its timeout interrupted, and the Spark server killed
while a statement runs: a clear error, no hang, and the next call after a server answers again
works.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project
from sparkserver import load_into_spark, local_spark, spark_connect_server
from test_dialects import _arguments
from tether.config import load_project
from tether.context.meta import ToolContext
from tether.drift.check import check
from tether.drift.publish import build
from tether.errors import QueryError, SourceError, TetherError
from tether.keyfile import load_secret
from tether.registry import open_registry
from tether.serve.server import TetherServer
from tether.sources import open_source

pytestmark = pytest.mark.skipif(not os.environ.get("TETHER_SPARK") and not os.environ.get(
    "TETHER_SLOW"), reason="Spark runs in `make test-slow` and CI (TETHER_SPARK=1)")


@pytest.fixture(scope="module")
def spark_port() -> Any:
    with spark_connect_server() as port:
        yield port


def _plain(v: Any) -> Any:
    """A value as JSON would carry it, engine quirks aside (numbers compared as numbers)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float | decimal.Decimal):
        return round(float(v), 6)
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    return str(v)


def _answer(r: Any) -> dict[str, Any]:
    if r.is_error:
        return {"refused": r.content[0].text}
    sc = dict(r.structured_content or {})
    sc.pop("next_cursor", None)  # signed over the engine's own statement: compared by use
    if isinstance(sc.get("columns"), list):  # the probe names each engine's own type
        sc["columns"] = [{k: v for k, v in c.items() if k != "type"} if isinstance(c, dict)
                         else c for c in sc["columns"]]
    evidence = (r.meta or {}).get("tether/evidence") or {}
    return {"result": _plain(sc), "window": _plain(evidence.get("window"))}


def _calls(project_dir: Path, user: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    server = TetherServer(load_project(project_dir), stdio_user=user)
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    async def go() -> None:
        async with Client(server.server) as c:
            for tool in (await c.list_tools()).tools:
                if tool.annotations is not None and tool.annotations.read_only_hint is False:
                    continue  # a write tool: Spark is read here (load_into_spark drops actions)
                for args in _arguments(tool):
                    r = await c.call_tool(tool.name, args)
                    out.append((tool.name, args, _answer(r)))
                    cursor = (r.structured_content or {}).get("next_cursor")
                    if cursor and not r.is_error:
                        nxt = await c.call_tool(tool.name, {**args, "cursor": cursor})
                        out.append((tool.name, {**args, "page": 2}, _answer(nxt)))

    try:
        anyio.run(go)
    finally:
        server.close()
    return out


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two answers differ (paths and both values), for the failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [x for k in sorted(set(a) | set(b))
                for x in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [x for i, (p, q) in enumerate(zip(a, b, strict=True))
                for x in _diff(p, q, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: spark {json.dumps(a)[:200]} duckdb {json.dumps(b)[:200]}"]


def _reads(project_dir: Path, tool: str, args: dict[str, Any]) -> set[str]:
    """The products a call reads (the probe: the one it names)."""
    if "product" in args:
        return {str(args["product"])}
    registry = open_registry(load_project(project_dir))
    try:
        current = registry.current().get(tool)
    finally:
        registry.close()
    return set(ToolContext.of(current.definition).products) if current else set()


@pytest.mark.parametrize("which", ["demo_dir", "second_dir"])
def test_the_same_answers_on_spark_as_on_duckdb(which: str, spark_port: int,
                                                 request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    src: Path = request.getfixturevalue(which)
    duck = copy_project(src, tmp_path / "duckdb")
    spark = load_into_spark(spark_port, src, which.replace("_dir", ""), tmp_path / "spark")
    assert build(load_project(duck)).exit_code == 0
    # one mask key for both: a hashed value must be the same keyed hash on either engine
    (spark / ".tether").mkdir(mode=0o700, exist_ok=True)
    serve = load_project(duck).config.serve
    for key in (serve.mask_key_file, serve.cursor_key_file):
        load_secret(duck / key)  # made now if the first server would make it
        shutil.copy2(duck / key, spark / key)
    result = build(load_project(spark))
    assert result.exit_code == 0, result.to_json()
    config = load_project(spark).config
    users = sorted(config.policies.users)
    # Spark tables carry no load time: a product whose freshness is the load time has no as_of
    # there (the result says null rather than guess)
    load_time = {n for n, p in config.products.items() if p.freshness and p.freshness.load_time}
    compared = refused = 0
    for user in users:
        on_duck, on_spark = _calls(duck, user), _calls(spark, user)
        assert [(n, a) for n, a, _ in on_spark] == [(n, a) for n, a, _ in on_duck], user
        for (name, args, d), (_, _, s) in zip(on_duck, on_spark, strict=True):
            if "refused" in d or "refused" in s:
                assert ("refused" in d) == ("refused" in s), (user, name, args, s, d)
                refused += 1
                continue
            if _reads(spark, name, args) & load_time:
                s, d = ({**x, "result": {k: v for k, v in x["result"].items()
                                         if k not in ("as_of", "as_of_basis")}} for x in (s, d))
            assert s == d, (user, name, args, _diff(s, d))
            compared += 1
    assert compared > 30 and refused > 0, (compared, refused)


def test_drift_timeouts_and_an_outage_on_spark(spark_port: int, demo_dir: Path,
                                               tmp_path: Path) -> None:
    from pyspark.sql.connect.session import SparkSession

    d = load_into_spark(spark_port, demo_dir, "drifting", tmp_path / "spark")
    assert build(load_project(d)).exit_code == 0
    project = load_project(d)
    table = next(p.table for p in project.config.products.values() if p.table)
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{spark_port}").create()
    spark.sql(f"ALTER TABLE drifting.{table} ADD COLUMNS (added_later STRING)")
    result = check(load_project(d))
    assert result.exit_code == 10, result.to_json()
    assert any("added_later" in json.dumps(e) for e in result.to_json()["events"]), result.to_json()

    src = open_source("main", project.config.sources["main"], project.root)
    try:
        for statement in (f"DROP TABLE {table}", f"INSERT INTO {table} SELECT * FROM {table}",
                          "SELECT 1; DROP TABLE x"):
            with pytest.raises(QueryError, match="only a single query"):
                src.run(statement)
        with pytest.raises(QueryError, match="script transform"):  # a program on the cluster
            src.run(f"SELECT TRANSFORM(*) USING 'cat' AS (x STRING) FROM {table}")
        assert spark.sql(f"SELECT COUNT(*) FROM drifting.{table}").collect()[0][0] > 0
        # a statement past its timeout is interrupted, and the source answers the next one
        started = time.monotonic()
        with pytest.raises(SourceError, match="ran longer than 2s"):
            src.run("SELECT COUNT(*) FROM range(0, 200000) a CROSS JOIN range(0, 200000) b",
                    timeout=2)
        assert time.monotonic() - started < 20
        assert src.run("SELECT 1") == [(1,)]
    finally:
        src.close()
        spark.stop()


def test_the_driver_killed_mid_query(demo_dir: Path, tmp_path: Path) -> None:
    """A Spark server of the test's own killed outright while a statement runs: a clear error
    (the source cannot be reached), nothing hangs; a tool called while it is down says the same;
    once a server answers on that port again, the next call works without a restart of ours."""
    import threading

    with local_spark() as spark_server:
        d = load_into_spark(spark_server.port, demo_dir, "killed", tmp_path / "spark")
        assert build(load_project(d)).exit_code == 0
        project = load_project(d)
        pol = project.config.policies
        user = next(u for u, c in pol.users.items() if not pol.roles[c.role].row_filters)
        tool = next(p.tool.name for p in project.config.products.values()
                    if p.tool and p.tool.name and not (p.freshness and p.freshness.load_time))
        server = TetherServer(project, stdio_user=user)
        src = open_source("main", project.config.sources["main"], project.root)

        def call() -> Any:
            async def go() -> Any:
                async with Client(server.server) as c:
                    return await c.call_tool(tool, {"limit": 3})
            return anyio.run(go)

        try:
            assert not call().is_error
            failed: list[BaseException] = []

            def long_query() -> None:
                try:  # a cross join that runs for minutes
                    src.run("SELECT COUNT(*) FROM range(0, 200000) a CROSS JOIN range(0, 200000) b")
                except BaseException as e:  # what the caller sees
                    failed.append(e)

            t = threading.Thread(target=long_query)
            t.start()
            time.sleep(3)
            spark_server.kill()
            t.join(timeout=60)
            assert not t.is_alive(), "the statement hung after the driver died"
            assert failed and isinstance(failed[0], TetherError), failed
            assert "cannot be reached" in str(failed[0]), failed

            down = call()
            assert down.is_error and "cannot be reached" in down.content[0].text, down.content
            assert "Traceback" not in down.content[0].text

            spark_server.start()
            load_into_spark(spark_server.port, demo_dir, "killed", tmp_path / "again")
            again = call()
            assert not again.is_error, again.content[0].text
        finally:
            src.close()
            server.close()
