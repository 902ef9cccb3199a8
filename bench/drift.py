"""Drift check cost: `tether check` over 200 generated tables, with no drift and with drift in 5,
against floors run on the same engine in the same process.

Floors: (a) one SELECT count(*) per table (the issue's target: a no-drift check within 3x);
(b) the real floor of what a check must read: the catalog query plus one
GROUP BY per enum column. Both ratios are reported.

    python bench/drift.py [--tables 200] [--rows 20000] [--dir bench/out/drift]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import duckdb

from tether.config import load_project
from tether.drift.check import check
from tether.drift.publish import build

STATUSES = "['NEW', 'PAID', 'SHIPPED', 'CANCELLED']"


def make(d: Path, tables: int, rows: int) -> None:
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    db = d / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        for i in range(tables):
            con.execute(f"""CREATE TABLE t{i:03d} AS SELECT r AS id,
                {STATUSES}[1 + r % 4] AS status, ['EMEA', 'AMER', 'APAC'][1 + r % 3] AS region,
                (r * 7919) % 100000 AS amount_cents,
                TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(r * 60) AS created_at
                FROM range({rows}) t(r)""")
            con.execute(f"ALTER TABLE t{i:03d} ADD PRIMARY KEY (id)")
    products = "\n".join(
        f"  t{i:03d}: {{table: t{i:03d}, primary_key: [id], time_columns: {{created_at: UTC}}, "
        f"metric_time: created_at}}" for i in range(tables))
    (d / "tether.yaml").write_text(
        f'clock: 2026-08-20T09:00:00Z\nsources:\n  main: {{url: "duckdb:///w.duckdb"}}\n'
        f"products:\n{products}\n")


def floors(db: Path, tables: int) -> tuple[float, float]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        t = time.perf_counter()
        for i in range(tables):
            con.execute(f"SELECT count(*) FROM t{i:03d}").fetchall()
        counts = time.perf_counter() - t
        t = time.perf_counter()
        con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns()").fetchall()
        for i in range(tables):
            for col in ("status", "region"):
                con.execute(f"SELECT {col}, count(*) FROM t{i:03d} GROUP BY 1").fetchall()
        real = time.perf_counter() - t
    finally:
        con.close()
    return counts, real


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/drift"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = args.dir
    make(d, args.tables, args.rows)
    build(load_project(d))
    check(load_project(d))  # warm: baseline state and caches
    runs, count_floor, real_floor = [], [], []
    for _ in range(args.repeat):
        c, r = floors(d / "w.duckdb", args.tables)
        count_floor.append(c)
        real_floor.append(r)
        t = time.perf_counter()
        result = check(load_project(d))
        runs.append(time.perf_counter() - t)
        assert result.exit_code == 0, result.to_json()
    with duckdb.connect(str(d / "w.duckdb")) as con:
        for i in range(5):
            con.execute(f"UPDATE t{i:03d} SET status = 'ON_HOLD' WHERE id % 97 = 0")
    t = time.perf_counter()
    drifted = check(load_project(d))
    drift_time = time.perf_counter() - t
    events = [e for e in drifted.events if e["kind"] == "enum_value_added"]
    nodrift = statistics.median(runs)
    cf, rf = statistics.median(count_floor), statistics.median(real_floor)
    print(f"{args.tables} tables x {args.rows:,} rows, DuckDB {duckdb.__version__}, "
          f"median of {args.repeat}")
    print(f"  floor: one count(*) per table            {cf:8.3f} s")
    print(f"  floor: catalog + GROUP BY per enum column {rf:8.3f} s")
    print(f"  tether check, no drift                   {nodrift:8.3f} s  "
          f"({nodrift / cf:.1f}x count floor, {nodrift / rf:.1f}x real floor)")
    print(f"  tether check, drift in 5 tables          {drift_time:8.3f} s  "
          f"({len(events)} new-value events, exit {drifted.exit_code})")
    print(f"target: no-drift check within 3x of the count(*) floor: "
          f"{'met' if nodrift <= 3 * cf else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
