"""Serving latency: tether vs a bare MCP SDK server vs the raw query, in one run.

1,000 sequential calls of items_in_an_order (order_id = 1..1000) through `tether serve` over
stdio and over HTTP, the same number through a bare SDK server whose tool runs the same query
(bench/bare_server.py), and the query run directly on DuckDB; then 8 concurrent HTTP clients x
200 calls, counting errors. Target: tether's stdio p50 within 1.5x of the bare server's.

    python bench/serve.py [--calls 1000] [--dir bench/out/serve]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import duckdb
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tether.config import load_project
from tether.demo import init_demo
from tether.drift.publish import build
from tether.serve.identity import TokenStore

BIN = Path(sys.executable).parent
TOOL = "items_in_an_order"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


async def timed(call: Callable[[int], Awaitable[Any]], n: int) -> list[float]:
    for i in range(20):  # warm-up
        await call(i + 1)
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = await call(i % 1000 + 1)
        out.append((time.perf_counter() - t) * 1000)
        if getattr(r, "is_error", False):
            raise RuntimeError(f"call failed: {r.content}")
    return out


async def over_stdio(params: StdioServerParameters, n: int) -> list[float]:
    async with Client(params) as c:
        return await timed(lambda i: c.call_tool(TOOL, {"order_id": i}), n)


async def over_http(url: str, token: str, n: int) -> list[float]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, Client(
            streamable_http_client(url, http_client=http)) as c:
        return await timed(lambda i: c.call_tool(TOOL, {"order_id": i}), n)


async def concurrent(url: str, token: str, clients: int, calls: int) -> tuple[int, int, float]:
    errors = ok = 0

    async def one(k: int) -> None:
        nonlocal errors, ok
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(url, http_client=http)) as c:
            for i in range(calls):
                try:
                    r = await c.call_tool(TOOL, {"order_id": (k * calls + i) % 1000 + 1})
                    errors += int(bool(r.is_error))
                    ok += int(not r.is_error)
                except Exception:
                    errors += 1

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(clients):
            tg.start_soon(one, k)
    return ok, errors, time.perf_counter() - t


def raw(db: Path, n: int) -> list[float]:
    con = duckdb.connect(str(db), read_only=True)
    sql = ("SELECT order_id, line_no, sku, quantity, unit_price_cents, line_amount_cents "
           "FROM order_lines WHERE order_id = $o ORDER BY order_id, line_no LIMIT 51")
    out = []
    for i in range(n + 20):
        t = time.perf_counter()
        con.execute(sql, {"o": i % 1000 + 1}).fetchall()
        if i >= 20:
            out.append((time.perf_counter() - t) * 1000)
    con.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/serve"))
    args = ap.parse_args()
    d: Path = args.dir.resolve()
    if not (d / "tether.yaml").exists():
        init_demo(d, scale=1, force=True)
    project = load_project(d)
    build(project)
    token = TokenStore(d / project.config.serve.tokens_file).add("fin.ana")
    env = {"PATH": os.environ["PATH"]}
    results: dict[str, list[float]] = {}
    results["DuckDB query, in process"] = raw(d / "warehouse.duckdb", args.calls)
    results["bare SDK server, stdio"] = anyio.run(over_stdio, StdioServerParameters(
        command=sys.executable, args=[str(Path(__file__).parent / "bare_server.py"),
                                      str(d / "warehouse.duckdb")], env=env), args.calls)
    results["tether serve, stdio"] = anyio.run(over_stdio, StdioServerParameters(
        command=str(BIN / "tether"), args=["serve", "--project", str(d), "--as-user", "fin.ana"],
        env=env), args.calls)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(BIN / "tether"), "serve", "--project", str(d), "--transport",
                             "http", "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        results["tether serve, HTTP"] = anyio.run(over_http, url, token, args.calls)
        ok, errors, secs = anyio.run(concurrent, url, token, 8, 200)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"{args.calls} sequential calls of {TOOL}, after 20 warm-up calls")
    print(f"{'path':<28}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for name, xs in results.items():
        print(f"{name:<28}{pct(xs, 50):>9.2f}{pct(xs, 99):>9.2f}{statistics.mean(xs):>9.2f}")
    ratio = pct(results["tether serve, stdio"], 50) / pct(results["bare SDK server, stdio"], 50)
    print(f"tether stdio p50 / bare SDK server p50: {ratio:.2f}x (target <= 1.5x: "
          f"{'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"8 concurrent HTTP clients x 200 calls: {ok} ok, {errors} errors, {secs:.1f}s "
          f"({ok / secs:.0f} calls/s)")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
