"""A bounded soak on loopback: several `tether serve --transport http` replicas on one registry,
many MCP clients over HTTP calling a mix of tools as different users, every result checked.

    python bench/soak.py [--seconds 60] [--replicas 3] [--clients 16] [--pg-url URL]
                         [--dir bench/out/soak] [--json]

The demo project (scale 0.2) is built once under --dir; the registry is PostgreSQL when --pg-url
(or TETHER_TEST_PG_URL) is given, in a schema of its own, else the project's SQLite file shared
by the replicas. Each client is one user (every user of the policy in turn) on one replica, in
one MCP session, calling the tools that user sees in turn: listings (a page of 50), metrics,
the probe. A listing's rows are checked against the policy oracle (tether/policy/oracle.py: the
rows the user is entitled to read with the row filter as written, masks applied); any tool error
and any violation is counted. Each replica's resident memory is read after a warm-up and at the
end. Prints calls, errors, violations, p50/p99 latency and memory; exits 1 on any error or
violation, or memory grown by more than half.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from mcp import Client

from tether.config import load_project
from tether.demo import init_demo
from tether.drift.publish import build
from tether.keyfile import load_secret
from tether.policy.entitle import MaskKey
from tether.policy.oracle import check_rows, entitled_rows
from tether.sources import open_source

TETHER = str(Path(sys.executable).parent / "tether")
WARMUP = 3.0  # seconds of calls before the first memory reading
GROWTH = 1.5  # the most a replica's memory may grow from warm-up to the end


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    checked: int = 0


def prepare(d: Path, pg_url: str | None) -> tuple[Path, str | None]:
    """The demo, built, with its registry on PostgreSQL (a schema of its own) when given."""
    if d.exists():
        shutil.rmtree(d)
    init_demo(d, scale=0.2)
    schema = None
    if pg_url:
        import psycopg

        schema = f"tether_soak_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        with (d / "tether.yaml").open("a") as f:
            f.write(f'registry: {{url: "{pg_url}?options=-csearch_path%3D{schema}"}}\n')
    assert build(load_project(d)).exit_code == 0
    return d, schema


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def replicas(d: Path, n: int) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    import socket

    out = []
    try:
        for _ in range(n):
            port = _free_port()
            proc = subprocess.Popen([TETHER, "serve", "--project", str(d), "--transport", "http",
                                     "--port", str(port)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            out.append((f"http://127.0.0.1:{port}/mcp", proc))
        for url, proc in out:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if proc.poll() is not None:
                    raise SystemExit(f"a replica exited at start (code {proc.returncode})")
                time.sleep(0.1)
        yield out
    finally:
        for _, proc in out:
            proc.terminate()
        for _, proc in out:
            proc.wait(timeout=20)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _tokens(d: Path, users: list[str]) -> dict[str, str]:
    out = {}
    for u in users:
        res = subprocess.run([TETHER, "token", "add", u, "--project", str(d)], check=True,
                             capture_output=True, text=True)
        out[u] = res.stdout.strip()
    return out


def _call_args(tool: Any, products: list[str]) -> dict[str, Any] | None:
    kind = (tool.meta or {}).get("tether/context", {}).get("kind")
    props = tool.input_schema.get("properties", {})
    if tool.name == "explain_data_product":
        return {"product": products[0]}
    if tool.name in ("find_data_for_question", "rows_from_data_product", "run_sql"):
        return None
    if "limit" in props:
        return {"limit": 50}
    required = tool.input_schema.get("required", [])
    return {} if not required or kind == "metric" else None


async def _client(url: str, token: str, user: str, project_dir: Path, entitled: Any,
                  until: float, tally: Tally, digest: Any) -> None:
    from mcp.client.streamable_http import streamable_http_client

    config = load_project(project_dir).config
    products = sorted(config.products)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                 timeout=60) as http, Client(
            streamable_http_client(url, http_client=http)) as c:  # type: ignore[arg-type]
        tools = [(t, a) for t in (await c.list_tools()).tools
                 if (a := _call_args(t, products)) is not None]
        i = 0
        while time.monotonic() < until:
            tool, args = tools[i % len(tools)]
            i += 1
            t0 = time.perf_counter()
            r = await c.call_tool(tool.name, args)
            tally.latencies.append((time.perf_counter() - t0) * 1000)
            if r.is_error:
                tally.errors.append(f"{user} {tool.name}: {r.content[0].text[:200]}")
                continue
            data = r.structured_content or {}
            read = (tool.meta or {}).get("tether/context", {}).get("products") or []
            product = read[0] if len(read) == 1 else None
            if "rows" in data and product in config.products and data["rows"] and isinstance(
                    data["rows"][0], dict) and config.products[product].primary_key and all(
                    k in data["rows"][0] for k in config.products[product].primary_key):
                found = check_rows(config, user, product, data["rows"],
                                   entitled(user, product), digest)
                tally.checked += 1
                if found:
                    tally.violations.append(f"{user} {tool.name}: {found}")


def soak(d: Path, seconds: float, n_replicas: int, n_clients: int) -> dict[str, Any]:
    project = load_project(d)
    config = project.config
    users = sorted(config.policies.users)
    tokens = _tokens(d, users)
    src = open_source("main", config.sources["main"], project.root)
    cache: dict[tuple[str, str], Any] = {}

    def entitled(user: str, product: str) -> Any:
        if (user, product) not in cache:
            cache[(user, product)] = entitled_rows(config, src.run, src.dialect, user, product)
        return cache[(user, product)]

    for u in users:  # read once, before the clock starts
        for p in config.products:
            entitled(u, p)
    src.close()
    mask = MaskKey.from_secret(load_secret(project.root / config.serve.mask_key_file))
    tally = Tally()
    with replicas(d, n_replicas) as running:
        def clients(until: float, into: Tally) -> None:
            """Every client calling until ``until``, client i on replica i mod n, as user
            i mod users."""
            async def go() -> None:
                async with anyio.create_task_group() as tg:
                    for i in range(n_clients):
                        user = users[i % len(users)]
                        tg.start_soon(_client, running[i % n_replicas][0], tokens[user], user,
                                      d, entitled, until, into, mask.digest)

            anyio.run(go)

        clients(time.monotonic() + WARMUP, Tally())  # the warm-up: not counted
        before = [rss_mb(p.pid) for _, p in running]
        t0 = time.monotonic()
        clients(t0 + seconds, tally)
        wall = time.monotonic() - t0
        after = [rss_mb(p.pid) for _, p in running]
        alive = all(p.poll() is None for _, p in running)
    lat = sorted(tally.latencies)
    return {
        "replicas": n_replicas, "clients": n_clients, "users": len(users),
        "seconds": round(wall, 1), "calls": len(lat),
        "calls_per_second": round(len(lat) / wall, 1) if wall else 0,
        "errors": len(tally.errors), "violations": len(tally.violations),
        "results_checked_by_oracle": tally.checked,
        "p50_ms": round(statistics.median(lat), 1) if lat else None,
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1) if lat else None,
        "rss_mb_after_warmup": [round(x) for x in before], "rss_mb_end": [round(x) for x in after],
        "replicas_alive": alive,
        "first_errors": tally.errors[:5], "first_violations": tally.violations[:5],
    }


def passed(result: dict[str, Any]) -> bool:
    grown = any(b and a > b * GROWTH for b, a in zip(result["rss_mb_after_warmup"],
                                                      result["rss_mb_end"], strict=True))
    return (result["errors"] == 0 and result["violations"] == 0 and result["calls"] > 0
            and result["results_checked_by_oracle"] > 0 and result["replicas_alive"]
            and not grown)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--pg-url", default=os.environ.get("TETHER_TEST_PG_URL"))
    ap.add_argument("--dir", type=Path, default=Path("bench/out/soak"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    d, schema = prepare(a.dir.resolve(), a.pg_url)
    try:
        result = soak(d, a.seconds, a.replicas, a.clients)
    finally:
        if schema and a.pg_url:
            import psycopg

            with psycopg.connect(a.pg_url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]
    result["registry"] = "postgresql" if schema else "sqlite"
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:28} {v}")
    sys.exit(0 if passed(result) else 1)


if __name__ == "__main__":
    main()
