"""A two-hop group-by through relationships: tether's listing call against the same question
written by hand in SQL, on the same DuckDB file, interleaved in one run.

    order lines counted by their order's customer's market segment
    tether:  lineitem_by_attributes {"count_by": "orders.customer.c_mktsegment"}
             (an MCP call in process, the official SDK client over memory streams, as a user
             with no row filter: policy, validation, statement building, the result and its
             evidence included)
    by hand: SELECT c.c_mktsegment, count(*) FROM lineitem l LEFT JOIN orders o ...
             LEFT JOIN customer c ... GROUP BY 1 (DuckDB in process, its own connection)

The data is TPC-H from the generator the tpchgen-cli wheel carries (tests/zoo.py's dataset,
at the scale given: 1 is 6,001,215 order lines). The demo has no two-hop path (its orders
refer to customers through a CRM id that is no table's key), so the order lines and orders
of this question are TPC-H's. The answers must be equal; then N rounds, alternating which
goes first, after 3 warm-up rounds. Target: tether's p50 within 1.5x of the SQL's.

    python bench/paths.py [--scale 1] [--calls 30] [--dir bench/out/paths]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import duckdb
import yaml
from mcp import Client

from tether.config import load_project
from tether.drift.publish import build
from tether.serve.server import TetherServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import zoo  # the dataset's generator, as the tests fetch it

WARMUP = 3
TOOL = "lineitem_by_attributes"
ARGS = {"count_by": "orders.customer.c_mktsegment", "limit": 10}
SQL = ("SELECT c.c_mktsegment, count(*) AS n FROM lineitem l "
       "LEFT JOIN orders o ON o.o_orderkey = l.l_orderkey "
       "LEFT JOIN customer c ON c.c_custkey = o.o_custkey GROUP BY 1 ORDER BY 1")


def prepare(d: Path, scale: float) -> Path:
    """The warehouse (three tables of TPC-H at ``scale``) and a project over it, built."""
    d.mkdir(parents=True, exist_ok=True)
    db = d / "warehouse.duckdb"
    if not db.exists():
        ds = zoo.DATASETS["tpch"]
        program, *rest = ds.generator
        args = [*rest[:-1], str(scale)]  # the same program, another scale
        zoo.DATASETS["tpch"] = type(ds)(**{**ds.__dict__, "generator": (program, *args),
                                           "tables": {t: 0 for t in ds.tables}})
        tmp = db.with_suffix(".tmp")
        with duckdb.connect(str(tmp)) as con:
            for table, base, raw in zoo._read_members("tpch"):
                if table not in ("lineitem", "orders", "customer"):
                    continue
                f = d / base
                f.write_bytes(raw)
                con.execute(f"CREATE TABLE {table} AS {zoo.read_csv_sql('tpch', table, f)}")
                f.unlink()
        tmp.rename(db)
    project = d / "proj"
    project.mkdir(exist_ok=True)
    (project / "tether.yaml").write_text(yaml.safe_dump({
        "sources": {"main": {"url": f"duckdb:///{db.resolve()}"}},
        "products": {
            "lineitem": {"table": "lineitem", "primary_key": ["l_orderkey", "l_linenumber"]},
            "orders": {"table": "orders", "primary_key": ["o_orderkey"]},
            "customer": {"table": "customer", "primary_key": ["c_custkey"],
                         "label": "c_name"}},
        "relationships": [
            {"from": "lineitem.l_orderkey", "to": "orders.o_orderkey", "kind": "many_to_one"},
            {"from": "orders.o_custkey", "to": "customer.c_custkey", "kind": "many_to_one"}],
        "policies": {"roles": {"analyst": {"tools": ["*"]}},
                     "users": {"bench.analyst": {"role": "analyst"}}},
    }, sort_keys=False))
    build(load_project(project))  # profiles what it has not read yet
    return project


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


async def run(project: Path, db: Path, rounds: int) -> dict[str, list[float]]:
    server = TetherServer(load_project(project), stdio_user="bench.analyst")
    con = duckdb.connect(str(db), read_only=True)
    times: dict[str, list[float]] = {"tether": [], "sql": []}
    try:
        async with Client(server.server) as client:
            got = await client.call_tool(TOOL, ARGS)
            if got.is_error:
                raise RuntimeError(str(got.content[0]))
            mine = sorted((r["orders.customer.c_mktsegment"], r["rows"])
                          for r in got.structured_content["rows"])
            theirs = sorted(tuple(r) for r in con.execute(SQL).fetchall())
            if mine != theirs:
                raise RuntimeError(f"the answers differ: {mine} != {theirs}")
            for i in range(rounds + WARMUP):
                for name in (["tether", "sql"] if i % 2 == 0 else ["sql", "tether"]):
                    start = time.perf_counter()
                    if name == "tether":
                        r: Any = await client.call_tool(TOOL, ARGS)
                        assert not r.is_error
                    else:
                        con.execute(SQL).fetchall()
                    if i >= WARMUP:
                        times[name].append((time.perf_counter() - start) * 1000)
    finally:
        con.close()
        server.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    ap.add_argument("--calls", type=int, default=30, help="rounds (each: both, alternating)")
    ap.add_argument("--dir", default="bench/out/paths")
    args = ap.parse_args()
    d = Path(args.dir) / f"sf{args.scale:g}"
    t0 = time.monotonic()
    project = prepare(d, args.scale)
    rows = duckdb.connect(str(d / "warehouse.duckdb"), read_only=True).execute(
        "SELECT count(*) FROM lineitem").fetchone()
    print(f"TPC-H scale {args.scale:g}: {rows[0] if rows else 0:,} order lines; prepared in "
          f"{time.monotonic() - t0:.0f} s")
    times = anyio.run(run, project, d / "warehouse.duckdb", args.calls)
    print(f"{args.calls} rounds, alternating, after {WARMUP} warm-up rounds")
    print(f"{'':<44}{'p50 ms':>9}{'p90 ms':>9}{'mean ms':>9}")
    for label, xs in (("tether: count_by orders.customer.c_mktsegment", times["tether"]),
                      ("the same question in SQL, DuckDB in process", times["sql"])):
        print(f"{label:<44}{pct(xs, 50):>9.1f}{pct(xs, 90):>9.1f}{statistics.mean(xs):>9.1f}")
    ratio = pct(times["tether"], 50) / pct(times["sql"], 50)
    print(f"tether p50 / SQL p50: {ratio:.2f}x (target <= 1.5x: "
          f"{'met' if ratio <= 1.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
