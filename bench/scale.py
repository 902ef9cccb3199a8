"""A warehouse of many tables: tool-list tokens, build and check against the engine's floor, and
the serve path against a bare MCP SDK server, per size.

For each size (default 10, 200 and 3,000 tables) a DuckDB warehouse is generated in several
domains with realistic names (sales_invoices, logistics_shipments_emea_2024, ...), each table
with a key, a creation time, a status, often a sales region, an amount in cents and an owner's
email (pii), and a tether.yaml: every table a product, two governed metrics, and three users: an
analyst (everything), a regional manager (a row filter on every table with a region) and a
masked manager (the same filter and a keyed hash of every pii column). Reported per size:

- tools/list tokens per user as served (serve.dedicated_tools unset: every tool while the list
  fits the 8,000-token budget, else the metrics and the discovery tools), and what the whole
  list would be;
- `tether build` and a `tether check` with nothing changed (wall, CLI), against the engine's
  floor: DuckDB's catalog query plus one GROUP BY per enum column of every table, in process;
- the filtered and the masked manager's call (a status filter on a regional table, through the
  dedicated tool or rows_from_data_product, whichever the list holds) over stdio, interleaved
  with a bare SDK server (bench/bare_server.py) that runs exactly the statements in each call's
  evidence with the same parameters: p50, p99 and the ratio;
- HTTP throughput of the masked call at 1, 4 and 16 clients, tether and the bare server over
  streamable HTTP, one after the other at each client count, and the ratio;
- tether's server memory (VmRSS) after the HTTP runs.

    python bench/scale.py [--sizes 10,200,3000] [--rows 200] [--rounds 200] [--dir bench/out/scale]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import duckdb
import httpx2
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from serve import canon, pct, statement  # bench/serve.py: the same statements, the same way
from tether.config import load_project
from tether.context.meta import EVIDENCE_KEY
from tether.keyfile import load_secret
from tether.policy import MaskKey
from tether.serve.identity import TokenStore
from tether.serve.server import TetherServer
from tether.toolgen.discovery import ROWS
from tether.toolgen.tokens import tool_tokens

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
WARMUP = 10
DOMAINS = {
    "sales": (["accounts", "opportunities", "quotes", "contracts", "invoices"],
              ["DRAFT", "SENT", "WON", "LOST"]),
    "support": (["tickets", "escalations", "surveys", "sla_breaches"],
                ["OPEN", "PENDING", "SOLVED", "CLOSED"]),
    "logistics": (["shipments", "carriers", "pick_lists", "returns", "stock_moves"],
                  ["PLANNED", "IN_TRANSIT", "DELIVERED", "FAILED"]),
    "people": (["employees", "positions", "timesheets", "leave_requests"],
               ["ACTIVE", "ON_LEAVE", "TERMINATED", "PROPOSED"]),
    "finance": (["ledger_entries", "payments", "refunds", "budgets"],
                ["POSTED", "PENDING", "REVERSED", "VOID"]),
    "marketing": (["campaigns", "leads", "email_sends", "web_sessions"],
                  ["NEW", "QUALIFIED", "NURTURE", "DISQUALIFIED"]),
    "product": (["releases", "usage_events", "experiments", "feature_flags"],
                ["PLANNED", "RUNNING", "SHIPPED", "ROLLED_BACK"]),
    "clinical": (["encounters", "referrals", "lab_results", "prescriptions"],
                 ["SCHEDULED", "COMPLETED", "CANCELLED", "NO_SHOW"]),
}
VARIANTS = ["", "emea", "amer", "apac", "daily", "monthly", "archive", "snapshot", "staging",
            "v2", "legacy", "partner"]
YEARS = ["", "2019", "2020", "2021", "2022", "2023", "2024", "2025", "2026"]
REGIONS = ["EMEA", "AMER", "APAC"]


def table_names(n: int) -> list[str]:
    """``n`` distinct realistic table names, several domains, deterministic."""
    out: list[str] = []
    for year in YEARS:
        for variant in VARIANTS:
            for domain, (entities, _) in DOMAINS.items():
                for entity in entities:
                    name = "_".join(x for x in (domain, entity, variant, year) if x)
                    out.append(name)
                    if len(out) == n:
                        return out
    raise SystemExit(f"at most {len(out)} generated names")


def traits(name: str) -> dict[str, bool]:
    h = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    return {"region": h % 3 != 0, "amount": h % 2 == 0, "email": h % 5 < 2}


def generate(d: Path, n: int, rows: int) -> list[str]:
    """The warehouse and its tether.yaml (skipped when already there)."""
    names = table_names(n)
    if (d / "tether.yaml").exists():
        return names
    d.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(d / "warehouse.duckdb"))
    products: dict[str, Any] = {}
    regional: dict[str, str] = {}
    for name in names:
        domain = name.split("_", 1)[0]
        statuses = DOMAINS[domain][1]
        t = traits(name)
        key = f"{name}_id"
        cols = [f"range + 1 AS {key}",
                "TIMESTAMP '2026-01-01' + INTERVAL (range * 7) MINUTE AS created_at",
                f"{statuses}[range % 4 + 1] AS status"]
        if t["region"]:
            cols.append(f"{REGIONS}[range % 3 + 1] AS sales_region")
            regional[name] = "sales_region = {{ user.region }}"
        if t["amount"]:
            cols.append("(range * 137) % 100000 AS amount_cents")
        if t["email"]:
            cols.append("'person' || range || '@example.com' AS owner_email")
        con.execute(f"CREATE TABLE {name} AS SELECT {', '.join(cols)} FROM range({rows})")
        columns: dict[str, Any] = {}
        if t["amount"]:
            columns["amount_cents"] = {"unit": "USD_cents"}
        if t["email"]:
            columns["owner_email"] = {"classification": "pii"}
        products[name] = {"table": name, "primary_key": [key],
                          "time_columns": {"created_at": "UTC"}, "metric_time": "created_at",
                          "freshness": {"column": "created_at"},
                          **({"columns": columns} if columns else {})}
    con.close()
    governed = [x for x in names if x in regional][:2]
    metrics = {f"{x}_count": {"measure": "count(*)", "time": f"{x}.created_at",
                              "dimensions": [f"{x}.sales_region"], "unit": "rows",
                              "description": f"How many {x.replace('_', ' ')} by sales region."}
               for x in governed}
    config = {
        "clock": "2026-08-20T09:00:00Z",
        "sources": {"main": {"url": "duckdb:///warehouse.duckdb"}},
        "products": products,
        "metrics": metrics,
        "policies": {
            "roles": {
                "analyst": {"tools": ["*"]},
                "regional": {"tools": ["*"], "row_filters": regional},
                "masked": {"tools": ["*"], "row_filters": regional, "masks": {"pii": "hash"}},
            },
            "users": {"ana": {"role": "analyst"}, "mgr": {"role": "regional", "region": "EMEA"},
                      "msk": {"role": "masked", "region": "EMEA"}},
        },
        "lineage": [{"from": f"raw.{x}", "to": x, "via": "transform:load"} for x in names],
    }
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return names


def timed_cli(*args: str) -> float:
    t = time.perf_counter()
    r = subprocess.run([str(BIN / "tether"), *args], capture_output=True, text=True)
    if r.returncode not in (0, 10):
        raise SystemExit(f"tether {' '.join(args)} failed ({r.returncode}): {r.stdout[-800:]}"
                         f"{r.stderr[-800:]}")
    return time.perf_counter() - t


def engine_floor(db: Path, names: list[str], stats: bool = False) -> float:
    """The catalog query plus one GROUP BY per enum column of every table, in process; with
    ``stats``, also one scan a table for what a tool definition states of every column (count,
    approximate distinct count, min, max): the floor of learning the columns, not only the
    enums."""
    con = duckdb.connect(str(db), read_only=True)
    t = time.perf_counter()
    columns = con.execute("SELECT table_name, list(column_name) FROM information_schema.columns "
                          "WHERE table_schema = 'main' GROUP BY 1").fetchall()
    by_table = dict(columns)
    for name in names:
        if stats:
            con.execute("SELECT count(*), " + ", ".join(
                f'count("{c}"), approx_count_distinct("{c}"), min("{c}"), max("{c}")'
                for c in by_table[name]) + f" FROM {name}").fetchall()
        con.execute(f"SELECT status, count(*) FROM {name} GROUP BY 1").fetchall()
        if traits(name)["region"]:
            con.execute(f"SELECT sales_region, count(*) FROM {name} GROUP BY 1").fetchall()
    took = time.perf_counter() - t
    con.close()
    return took


def tokens(d: Path) -> tuple[dict[str, tuple[int, int]], int, str]:
    """{user: (tools listed, their tokens)}, the whole list's tokens, and the route."""
    project = load_project(d)
    out = {}
    server = TetherServer(project, stdio_user="ana")
    try:
        whole = sum(tool_tokens(v.definition) for v in server.current.values()
                    if v.plan.kind not in ("search", "rows"))
        for user in project.config.policies.users:
            shown = server.visible(user)
            out[user] = (len(shown), sum(tool_tokens(v.definition) for v in shown))
        return out, whole, server.listed.route
    finally:
        server.close()


def target_call(d: Path, names: list[str]) -> tuple[str, dict[str, Any]]:
    """The benchmarked call: a status filter on a regional table with pii, by whichever tool
    the list holds for it."""
    product = next(x for x in names if traits(x)["region"] and traits(x)["email"])
    project = load_project(d)
    server = TetherServer(project, stdio_user="mgr")
    try:
        listing = next(v for v in server.current.values()
                       if v.plan.kind == "list" and v.plan.product == product)
        status = DOMAINS[product.split("_", 1)[0]][1][2]
        args = {"status": [status], "limit": 20}
        if listing.name in server.listed:
            return listing.name, args
        return ROWS, {"product": product, "arguments": args}
    finally:
        server.close()


async def stdio_rounds(d: Path, tool: str, args: dict[str, Any], key: dict[str, str],
                       rounds: int) -> dict[str, list[float]]:
    env = {"PATH": os.environ["PATH"]}
    times: dict[str, list[float]] = {}
    statements: dict[str, dict[str, Any]] = {}
    clients = {}
    async with Client(StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
            "serve", "--project", str(d), "--as-user", "mgr"])) as mgr, \
            Client(StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
                "serve", "--project", str(d), "--as-user", "msk"])) as msk:
        clients = {"filtered": mgr, "masked": msk}
        for path, c in clients.items():
            r = await c.call_tool(tool, args)
            if r.is_error or not r.meta:
                raise SystemExit(f"{path}: {r.content}")
            stmt = statement(r.meta[EVIDENCE_KEY], key)
            stmt["keep"] = r.structured_content["row_count"]
            statements[path] = {canon(args): stmt}
            times[f"tether {path}"], times[f"bare {path}"] = [], []
            times[f"plain {path}"] = []
        schema = next(t.output_schema for t in (await mgr.list_tools()).tools if t.name == tool)
        (d / "statements.json").write_text(json.dumps(
            {**statements, "_schemas": {path: schema for path in statements}}))
        async with Client(StdioServerParameters(command=sys.executable, env=env, args=[
                str(HERE / "bare_server.py"), str(d / "warehouse.duckdb"),
                str(d / "statements.json")])) as bare:
            for path in clients:
                b = await bare.call_tool(path, args)
                if b.is_error or b.structured_content["rows"] != (
                        await clients[path].call_tool(tool, args)).structured_content["rows"]:
                    raise SystemExit(f"{path}: the bare server's rows differ from tether's")
            for i in range(rounds + WARMUP):
                for path, c in clients.items():
                    order = [("tether", c, tool), ("bare", bare, path),
                             ("plain", bare, f"{path}_plain")]
                    for name, client, called in order if i % 2 == 0 else order[::-1]:
                        t = time.perf_counter()
                        r = await client.call_tool(called, args)
                        took = (time.perf_counter() - t) * 1000
                        if r.is_error:
                            raise SystemExit(f"{name} {path}: {r.content}")
                        if i >= WARMUP:
                            times[f"{name} {path}"].append(took)
    return times


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    for _ in range(600):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


async def throughput(url: str, token: str | None, tool: str, args: dict[str, Any],
                     clients: int, calls: int) -> tuple[float, int, float]:
    errors = 0

    async def one() -> None:
        nonlocal errors
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                Client(streamable_http_client(url, http_client=http)) as c:
            for _ in range(calls):
                r = await c.call_tool(tool, args)
                errors += int(bool(r.is_error))

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {},
                                  timeout=600) as http, \
            Client(streamable_http_client(url, http_client=http)) as c:
        t = time.perf_counter()
        await c.call_tool(tool, args)  # warm: the caller's list is built once, not timed
        first = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(one)
    return clients * calls / (time.perf_counter() - t), errors, first


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def over_http(d: Path, tool: str, args: dict[str, Any], calls: int, reps: int = 3
              ) -> tuple[dict[int, tuple[float, float]], float, int]:
    """{clients: (tether calls/s, bare calls/s)} (medians of ``reps`` interleaved runs),
    tether's RSS in MB after, and errors."""
    project = load_project(d)
    token = TokenStore(d / project.config.serve.tokens_file).add("msk")
    tp, bp = free_port(), free_port()
    tether = subprocess.Popen([str(BIN / "tether"), "serve", "--project", str(d), "--transport",
                               "http", "--port", str(tp)], stderr=subprocess.DEVNULL)
    bare = subprocess.Popen([sys.executable, str(HERE / "bare_server.py"),
                             str(d / "warehouse.duckdb"), str(d / "statements.json"),
                             "--http", str(bp)], stderr=subprocess.DEVNULL)
    out, errors = {}, 0
    try:
        wait_port(tp)
        wait_port(bp)
        for clients in (1, 4, 16):
            # interleaved repetitions (which server goes first alternates), medians reported: one
            # pass of each was at the mercy of whatever else ran in that second
            ts, bs = [], []
            for rep in range(reps):
                runs = [("tether", tp, token, tool), ("bare", bp, None, "masked")]
                for name, port, tok, called in runs if rep % 2 == 0 else runs[::-1]:
                    rate, e, first = anyio.run(throughput, f"http://127.0.0.1:{port}/mcp", tok,
                                               called, args, clients, calls)
                    (ts if name == "tether" else bs).append(rate)
                    errors += e
                    if name == "tether" and clients == 1 and rep == 0:
                        print(f"  tether's first call over HTTP (a new server: the caller's "
                              f"list is built): {first:.0f} ms")
            out[clients] = (statistics.median(ts), statistics.median(bs))
        return out, rss_mb(tether.pid), errors
    finally:
        for p in (tether, bare):
            p.terminate()
            p.wait(timeout=10)


def one_size(root: Path, n: int, rows: int, rounds: int, http_calls: int,
             http_reps: int = 3) -> int:
    d = (root / f"t{n}").resolve()
    names = generate(d, n, rows)
    fresh = not (d / ".tether").exists()
    build_s = timed_cli("build", "--project", str(d)) if fresh else float("nan")
    check_s = timed_cli("check", "--project", str(d))
    floor_s = engine_floor(d / "warehouse.duckdb", names)
    stats_s = engine_floor(d / "warehouse.duckdb", names, stats=True)
    per_user, whole, route = tokens(d)
    print(f"\n## {n} tables ({rows} rows each)")
    print(f"tools/list as served ({route}); the whole list would be {whole:,} tokens")
    for user, (count, toks) in per_user.items():
        print(f"  {user}: {count} tools, {toks:,} tokens")
    start_s = timed_cli("--version")  # the CLI's own start, in every wall time above
    print(f"tether build {build_s:.1f} s ({build_s / floor_s:.1f}x the floor, "
          f"{build_s / stats_s:.1f}x the floor with column statistics), tether check "
          f"(nothing changed) {check_s:.1f} s ({check_s / floor_s:.1f}x); engine floor "
          f"{floor_s:.2f} s (catalog + a GROUP BY per enum column, in process), "
          f"{stats_s:.2f} s with one statistics scan a table; the CLI's start alone "
          f"{start_s:.2f} s")
    project = load_project(d)
    key = MaskKey.from_secret(load_secret(project.root / project.config.serve.mask_key_file))
    tool, args = target_call(d, names)
    times = anyio.run(stdio_rounds, d, tool, args, key.params(), rounds)
    print(f"stdio, {rounds} interleaved rounds after {WARMUP} warm-up, tool {tool}:")
    for path in ("filtered", "masked"):
        t, b, n = times[f"tether {path}"], times[f"bare {path}"], times[f"plain {path}"]
        print(f"  {path}: tether p50 {pct(t, 50):.2f} ms p99 {pct(t, 99):.2f}; bare p50 "
              f"{pct(b, 50):.2f} ms p99 {pct(b, 99):.2f}; ratio {pct(t, 50) / pct(b, 50):.2f}x "
              f"(mean {statistics.mean(t) / statistics.mean(b):.2f}x; target <= 1.3x); bare "
              f"without the output schema p50 {pct(n, 50):.2f} ms, ratio "
              f"{pct(t, 50) / pct(n, 50):.2f}x")
    errors = 0
    if http_calls:
        rates, rss, errors = over_http(d, tool, args, http_calls, http_reps)
        print(f"HTTP, masked call, {http_calls} calls per client, median of {http_reps} "
              "interleaved runs:")
        for clients, (t, b) in rates.items():
            print(f"  {clients:>2} clients: tether {t:.0f} calls/s, bare {b:.0f} calls/s, "
                  f"{t / b:.2f}x of its throughput (target >= 0.67x)")
        print(f"tether serve memory after: {rss:.0f} MB RSS; {errors} errors")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10,200,3000")
    ap.add_argument("--rows", type=int, default=200, help="rows per table")
    ap.add_argument("--rounds", type=int, default=200, help="stdio rounds (0: skip)")
    ap.add_argument("--http-calls", type=int, default=100, help="per client (0: skip HTTP)")
    ap.add_argument("--http-reps", type=int, default=3, help="interleaved HTTP runs per count")
    ap.add_argument("--dir", type=Path, default=Path("bench/out/scale"))
    a = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"bench/scale.py at {commit}, {os.cpu_count()} cores")
    errors = sum(one_size(a.dir, int(n), a.rows, a.rounds, a.http_calls, a.http_reps)
                 for n in a.sizes.split(","))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
