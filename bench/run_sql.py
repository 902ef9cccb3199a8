"""run_sql latency for a filtered, masked user: tether vs a bare SDK server running exactly the
statement tether sends to the engine, interleaved in one run.

The demo (scale 1) gets a benchmark role whose row filter keeps one sales region of customers
and orders and whose mask hashes customers.email (keyed), and a user bench.emea in it. For each
query, the statement tether sends to the engine (the caller's entitled relations in place of the
tables, the row cap, the bound parameters: region and mask key) is computed with tether's own
code and handed to bench/bare_sql_server.py, which runs only that. Then N rounds, each calling
tether's run_sql and the bare server once per query (alternating which goes first), over stdio
with the official SDK client, twice: with the query's text as it was last time (tether resolves
a user's SQL text once and keeps the statement) and with a text never seen before (a comment
naming the round: tether parses, resolves and checks it in full). What the ratio prices:
parsing and resolving the SQL, the policy checks, the caps while fetching, serialisation, and the
call log.

    python bench/run_sql.py [--calls 300] [--dir bench/out/run_sql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from tether.config import load_project
from tether.demo import init_demo
from tether.drift.publish import build
from tether.serve import generic, sqlguard
from tether.serve.executor import Executor
from tether.serve.pagination import load_key

BIN = Path(sys.executable).parent
USER = "bench.emea"
QUERIES = [
    "SELECT customer_id, email, segment FROM customers ORDER BY customer_id LIMIT 50",
    "SELECT c.segment, count(*) AS orders, sum(o.amount_cents) AS cents FROM orders o "
    "JOIN customer_crosswalk x ON x.crm_account_id = o.customer_ref "
    "JOIN customers c ON c.customer_id = x.customer_id GROUP BY c.segment ORDER BY 1",
]
ROLE = """
    bench_manager:
      description: Benchmark role, one region and a hashed email.
      tools: ["*"]
      row_filters:
        customers: "sales_region = {{ user.region }}"
        orders: "sales_region = {{ user.region }}"
      masks: {customers.email: hash}
"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def prepare(d: Path) -> Path:
    """The demo with the benchmark role and user; the statements tether sends, as JSON."""
    if not (d / "warehouse.duckdb").exists():
        init_demo(d, scale=1, force=True)
    p = d / "tether.yaml"
    text = p.read_text()
    if "bench_manager" not in text:
        text = text.replace("  roles:\n", "  roles:" + ROLE, 1)
        text = text.replace("  users:\n", f"  users:\n    {USER}: {{role: bench_manager, "
                                          "region: EMEA}\n", 1)
        p.write_text(text)
    project = load_project(d)
    build(project)
    ex = Executor(project, load_key(d / project.config.serve.cursor_key_file))
    try:
        statements = {}
        for q in QUERIES:
            src = ex.source(None)
            secured = sqlguard.secure(q, generic.sql_catalog(ex, USER, None), 200)
            statements[q] = {"sql": src.render(secured.query), "params": secured.params}
    finally:
        ex.close()
    out = d / "statements.json"
    out.write_text(json.dumps(statements, indent=2))
    return out


async def interleaved(d: Path, statements: Path, rounds: int) -> dict[str, list[float]]:
    env = {"PATH": os.environ["PATH"]}
    tether = StdioServerParameters(command=str(BIN / "tether"), env=env, args=[
        "serve", "--project", str(d), "--mode", "generic", "--as-user", USER])
    bare = StdioServerParameters(command=sys.executable, env=env, args=[
        str(Path(__file__).parent / "bare_sql_server.py"), str(d / "warehouse.duckdb"),
        str(statements)])
    times: dict[str, list[float]] = {f"{s} {k}": [] for s in ("tether", "bare")
                                     for k in ("repeated", "fresh")}
    async with Client(tether) as t, Client(bare) as b:
        clients = {"tether": t, "bare": b}
        for i in range(rounds + 10):
            order = ["tether", "bare"] if i % 2 == 0 else ["bare", "tether"]
            for q in QUERIES:
                for kind, text in (("repeated", q), ("fresh", f"/* round {i} */ {q}")):
                    for name in order:
                        start = time.perf_counter()
                        r = await clients[name].call_tool("run_sql", {"sql": text})
                        took = (time.perf_counter() - start) * 1000
                        if r.is_error:
                            raise RuntimeError(f"{name}: {r.content}")
                        if i >= 10:  # the first rounds warm both up
                            times[f"{name} {kind}"].append(took)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=300, help="rounds (each: every query, both)")
    ap.add_argument("--dir", type=Path, default=Path("bench/out/run_sql"))
    args = ap.parse_args()
    d: Path = args.dir.resolve()
    statements = prepare(d)
    times = anyio.run(interleaved, d, statements, args.calls)
    print(f"{args.calls} rounds x {len(QUERIES)} queries, interleaved, as {USER} "
          "(row filter + keyed hash mask), stdio")
    print(f"{'server, SQL text':<40}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for kind in ("repeated", "fresh"):
        for name, label in (("bare", "bare SDK server, same statement"),
                            ("tether", "tether run_sql")):
            xs = times[f"{name} {kind}"]
            print(f"{label + ', ' + kind:<40}{pct(xs, 50):>9.2f}{pct(xs, 99):>9.2f}"
                  f"{statistics.mean(xs):>9.2f}")
    for kind in ("repeated", "fresh"):
        ratio = pct(times[f"tether {kind}"], 50) / pct(times[f"bare {kind}"], 50)
        print(f"tether run_sql p50 / bare server p50, {kind} text: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
