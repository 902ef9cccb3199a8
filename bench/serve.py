"""Serving latency: tether vs a bare MCP SDK server running exactly the statements tether ran,
interleaved in one run, for three kinds of call.

    unfiltered  fin.ana (no row filter, no mask), items_in_an_order on order_lines (no policy)
    filtered    mgr.emea (row filter: one sales region), customers_by_region_and_segment
    masked      bench.emea (the same row filter and a keyed hash of customers.email),
                customers_by_region_and_segment with the same arguments as `filtered`
    through     mgr.emea, support_tickets_for_customer filtered by its customer's segment (a
                path through a relationship: both products under the row filter)

The demo (scale 1) gets a benchmark role and user for `masked`. Each path's argument sets are
first called once on tether (`tether serve --project D --as-user U`, stdio); each result's
evidence (`_meta["tether/evidence"]`: sql, params, as_of_sql) is written, with the mask key
filled in from the project's key file, to D/statements.json for bench/bare_server.py, and the
bare server's rows and as_of are checked equal to tether's. Then N rounds, each calling every
path once on tether and once on the bare server (over stdio, official SDK client), alternating
which server goes first, after 10 warm-up rounds. The SDK client checks a result's structured
content against the tool's outputSchema (tether's tools declare one, the bare server's do not);
that check is timed per call and also reported subtracted. Also: each path's statement run on
DuckDB directly in process, and 8 concurrent HTTP clients on tether's `masked` call, counting
errors.
Target: tether's stdio p50 within 1.3x of the bare server's for `filtered`, `masked` and
`through`, the client's outputSchema check included. Each ratio is also given for a server that
would add nothing but tether's output schema (the bare server's p50 plus the client's check's
p50): no server work can take tether below that.

    python bench/serve.py [--calls 500] [--dir bench/out/serve]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tether.config import load_project
from tether.context.meta import EVIDENCE_KEY, MASK_KEY_SHOWN
from tether.demo import init_demo
from tether.drift.publish import build
from tether.keyfile import load_secret
from tether.policy import MaskKey
from tether.serve.identity import TokenStore

BIN = Path(sys.executable).parent
WARMUP = 10
SEGMENTS = ["ENTERPRISE", "MID_MARKET", "SMB"]
CUSTOMERS = "customers_by_region_and_segment"
TICKETS = "support_tickets_for_customer"
PATHS: dict[str, tuple[str, str, list[dict[str, Any]]]] = {  # path: user, tool, argument sets
    "unfiltered": ("fin.ana", "items_in_an_order", [{"order_id": i} for i in range(1, 51)]),
    "filtered": ("mgr.emea", CUSTOMERS, [{"segment": s} for s in SEGMENTS]),
    "masked": ("bench.emea", CUSTOMERS, [{"segment": s} for s in SEGMENTS]),
    # a listing filtered through a relationship: tickets by their customer's segment, both
    # products read under the manager's row filter
    "through": ("mgr.emea", TICKETS, [{"customers_segment": [s]} for s in SEGMENTS]),
}
ROLE = """
    bench_manager:
      description: Benchmark role, one region and a hashed email.
      tools: ["*"]
      row_filters:
        customers: "sales_region = {{ user.region }}"
        orders: "sales_region = {{ user.region }}"
      masks: {customers.email: hash}
"""


checks: list[float] = []
_validate = ClientSession.validate_tool_result


async def timed_validate(self: ClientSession, name: str, result: Any) -> None:
    """The SDK client's check of structured content against the tool's outputSchema (tether's
    tools declare one, the bare server's do not), timed: it runs on the client, per call."""
    start = time.perf_counter()
    try:
        await _validate(self, name, result)
    finally:
        checks.append((time.perf_counter() - start) * 1000)


ClientSession.validate_tool_result = timed_validate  # type: ignore[method-assign]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def canon(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True)


def prepare(d: Path) -> None:
    """The scale-1 demo with the benchmark role and user, built."""
    if not (d / "warehouse.duckdb").exists():
        init_demo(d, scale=1, force=True)
    p = d / "tether.yaml"
    text = p.read_text()
    if "bench_manager" not in text:
        user = PATHS["masked"][0]
        text = text.replace("  roles:\n", "  roles:" + ROLE, 1)
        text = text.replace("  users:\n", f"  users:\n    {user}: {{role: bench_manager, "
                                          "region: EMEA}\n", 1)
        p.write_text(text)
    build(load_project(d))


def statement(evidence: dict[str, Any], key: dict[str, str]) -> dict[str, Any]:
    """What the bare server runs for one call: the evidence's statements, each with the bound
    values it names (the mask key filled in)."""
    values = {k: key[k] if v == MASK_KEY_SHOWN else v for k, v in evidence["params"].items()}

    def bound(sql: str | None) -> dict[str, Any]:
        names = set(re.findall(r"\$(\w+)", sql or ""))
        return {k: v for k, v in values.items() if k in names}

    as_of_params = bound(evidence["as_of_sql"])
    return {"sql": evidence["sql"], "params": bound(evidence["sql"]),
            "as_of_sql": evidence["as_of_sql"], "as_of_params": as_of_params,
            "as_of_key": f"{evidence['as_of_sql']} {canon(as_of_params)}"}


def check(path: str, args: dict[str, Any], tether: Any, bare: Any, stmt: dict[str, Any]
          ) -> None:
    """The same rows, and the same as_of where it came from a statement (not a file's time)."""
    for name, r in (("tether", tether), ("bare", bare)):
        if r.is_error:
            raise RuntimeError(f"{path} {args}: {name} failed: {r.content}")
    t, b = tether.structured_content, bare.structured_content
    if t["rows"] != b["rows"] or (stmt["as_of_sql"] and t["as_of"] != b["as_of"]):
        diff = next((f"row {i}: {x} != {y}" for i, (x, y) in enumerate(
            zip(t["rows"], b["rows"], strict=False)) if x != y),
            f"{t['row_count']} != {b['row_count']} rows; as_of {t['as_of']} != {b['as_of']}")
        raise RuntimeError(f"{path} {args}: the bare server's answer differs from tether's: "
                           + diff[:500])


async def interleaved(d: Path, rounds: int, key: dict[str, str]
                      ) -> tuple[dict[str, list[float]], dict[str, Any], dict[str, float]]:
    """Times per 'server path', the statements, and the mean rows per call of each path."""
    env = {"PATH": os.environ["PATH"]}
    statements: dict[str, dict[str, Any]] = {p: {} for p in PATHS}
    first: dict[tuple[str, str], Any] = {}
    times: dict[str, list[float]] = {f"{s} {p}": [] for p in PATHS
                                     for s in ("tether", "bare", "tether-check", "check")}
    rows: dict[str, list[int]] = {p: [] for p in PATHS}
    async with Client(StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
            "serve", "--project", str(d), "--as-user", PATHS["unfiltered"][0]])) as t_a, \
            Client(StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
                "serve", "--project", str(d), "--as-user", PATHS["filtered"][0]])) as t_b, \
            Client(StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
                "serve", "--project", str(d), "--as-user", PATHS["masked"][0]])) as t_c:
        tether = {"unfiltered": t_a, "filtered": t_b, "masked": t_c, "through": t_b}
        for path, (_, tool, arg_sets) in PATHS.items():  # one real call per argument set
            for args in arg_sets:
                r = await tether[path].call_tool(tool, args)
                if r.is_error or not r.meta or EVIDENCE_KEY not in r.meta:
                    raise RuntimeError(f"{path} {args}: no evidence: {r.content}")
                stmt = statement(r.meta[EVIDENCE_KEY], key)
                stmt["keep"] = r.structured_content["row_count"]  # of the statement's rows
                statements[path][canon(args)] = stmt
                first[path, canon(args)] = r
        file = d / "statements.json"
        file.write_text(json.dumps(statements, indent=1))
        async with Client(StdioServerParameters(command=sys.executable, env=env, args=[
                str(Path(__file__).parent / "bare_server.py"), str(d / "warehouse.duckdb"),
                str(file)])) as bare:
            for path, (_, _, arg_sets) in PATHS.items():
                for args in arg_sets:
                    check(path, args, first[path, canon(args)], await bare.call_tool(path, args),
                          statements[path][canon(args)])
            for i in range(rounds + WARMUP):
                order = ["tether", "bare"] if i % 2 == 0 else ["bare", "tether"]
                for path, (_, tool, arg_sets) in PATHS.items():
                    args = arg_sets[i % len(arg_sets)]
                    for name in order:
                        client, called = (tether[path], tool) if name == "tether" else (bare, path)
                        checks.clear()
                        start = time.perf_counter()
                        r = await client.call_tool(called, args)
                        took = (time.perf_counter() - start) * 1000
                        if r.is_error:
                            raise RuntimeError(f"{name} {path}: {r.content}")
                        if i >= WARMUP:
                            times[f"{name} {path}"].append(took)
                            if name == "tether":
                                times[f"tether-check {path}"].append(took - sum(checks))
                                times[f"check {path}"].append(sum(checks))
                    rows[path].append(r.structured_content["row_count"])
    return times, statements, {p: statistics.mean(n) for p, n in rows.items()}


def raw(db: Path, statements: dict[str, dict[str, Any]], n: int) -> dict[str, list[float]]:
    """Each path's statement (not as_of) run directly on DuckDB in process, interleaved."""
    con = duckdb.connect(str(db), read_only=True)
    out: dict[str, list[float]] = {p: [] for p in statements}
    for i in range(n + WARMUP):
        for path, by_args in statements.items():
            stmts = list(by_args.values())
            s = stmts[i % len(stmts)]
            t = time.perf_counter()
            con.execute(s["sql"], s["params"] or None).fetchall()
            if i >= WARMUP:
                out[path].append((time.perf_counter() - t) * 1000)
    con.close()
    return out


async def concurrent(url: str, token: str, clients: int, calls: int) -> tuple[int, int, float]:
    errors = ok = 0
    _, tool, arg_sets = PATHS["masked"]

    async def one(k: int) -> None:
        nonlocal errors, ok
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(url, http_client=http)) as c:
            for i in range(calls):
                try:
                    r = await c.call_tool(tool, arg_sets[(k + i) % len(arg_sets)])
                    errors += int(bool(r.is_error))
                    ok += int(not r.is_error)
                except Exception:
                    errors += 1

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(clients):
            tg.start_soon(one, k)
    return ok, errors, time.perf_counter() - t


def over_http(d: Path, clients: int, calls: int) -> tuple[int, int, float]:
    project = load_project(d)
    token = TokenStore(d / project.config.serve.tokens_file).add(PATHS["masked"][0])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(BIN / "tether"), "serve", "--project", str(d), "--transport",
                             "http", "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        return anyio.run(concurrent, f"http://127.0.0.1:{port}/mcp", token, clients, calls)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=500, help="rounds (each: every path, both)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (0: skip)")
    ap.add_argument("--client-calls", type=int, default=200, help="calls per HTTP client")
    ap.add_argument("--dir", type=Path, default=Path("bench/out/serve"))
    args = ap.parse_args()
    d: Path = args.dir.resolve()
    prepare(d)
    project = load_project(d)
    key = MaskKey.from_secret(load_secret(project.root / project.config.serve.mask_key_file))
    times, statements, rows = anyio.run(interleaved, d, args.calls, key.params())
    direct = raw(d / "warehouse.duckdb", statements, args.calls)
    print(f"{args.calls} rounds, each calling every path once on tether and once on the bare "
          f"server (order alternating), after {WARMUP} warm-up rounds; stdio")
    print(f"{'path':<46}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for path, (user, tool, _) in PATHS.items():
        print(f"{path}: {user}, {tool}, {rows[path]:.1f} rows/call")
        for label, xs in (("  DuckDB, same statement, in process", direct[path]),
                          ("  bare SDK server, same statements, stdio", times[f"bare {path}"]),
                          ("  tether serve, stdio", times[f"tether {path}"]),
                          ("  tether, less the client's outputSchema check",
                           times[f"tether-check {path}"])):
            print(f"{label:<46}{pct(xs, 50):>9.2f}{pct(xs, 99):>9.2f}{statistics.mean(xs):>9.2f}")
    for path in PATHS:
        t, b = times[f"tether {path}"], times[f"bare {path}"]
        ratio = pct(t, 50) / pct(b, 50)
        target = "" if path == "unfiltered" else \
            f" (target <= 1.3x: {'met' if ratio <= 1.3 else 'NOT met'})"
        print(f"tether p50 / bare p50, {path}: {ratio:.2f}x{target}; "
              f"{pct(t, 50) - pct(b, 50):.2f} ms more; without the client's outputSchema "
              f"check {pct(times[f'tether-check {path}'], 50) / pct(b, 50):.2f}x; a server "
              "adding nothing but tether's output schema (bare + the client's check) "
              f"{(pct(b, 50) + pct(times[f'check {path}'], 50)) / pct(b, 50):.2f}x")
    errors = 0
    if args.clients:
        ok, errors, secs = over_http(d, args.clients, args.client_calls)
        print(f"{args.clients} concurrent HTTP clients x {args.client_calls} 'masked' calls: "
              f"{ok} ok, {errors} errors, {secs:.1f}s ({ok / secs:.0f} calls/s)")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
