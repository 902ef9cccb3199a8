"""Profiling benchmark: tether's full profile of the largest demo table vs DuckDB's SUMMARIZE.

Both run in this one process against the same file, on the order_lines table of
`tether demo init --scale 50` (about 10.5M rows). tether computes more than SUMMARIZE (exact
distincts and value counts for low-cardinality columns, last-seen per value, formats, units);
the target is to stay within 2x of it.

    python bench/profile.py [--scale 50] [--repeat 3] [--dir bench/out/scale50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

from tether.config import load_project
from tether.demo import init_demo
from tether.profiling import profile_product
from tether.sources.duckdb import READ_ONLY_CONFIG

TABLES = ("order_lines", "orders", "deals")
"""order_lines is the benchmark of record (>= 10M rows); the others show wider tables."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=float, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/scale50"))
    args = ap.parse_args()

    if not (args.dir / "tether.yaml").exists():
        t0 = time.perf_counter()
        init_demo(args.dir, scale=args.scale, force=True)
        print(f"built demo at scale {args.scale} in {time.perf_counter() - t0:.1f}s")
    project = load_project(args.dir)
    db = args.dir / "warehouse.duckdb"
    # the configuration tether's own read-only connection uses: DuckDB refuses a second
    # connection to one file in one process with another
    con = duckdb.connect(str(db), read_only=True, config=dict(READ_ONLY_CONFIG))
    threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
    print(f"DuckDB {duckdb.__version__}, {threads} threads, median of {args.repeat} interleaved runs")
    print(f"{'table':<14}{'rows':>12}{'SUMMARIZE s':>14}{'tether s':>11}{'ratio':>8}")
    for table in TABLES:
        rows = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]

        def summarize(table: str = table) -> float:
            t = time.perf_counter()
            con.execute(f"SUMMARIZE {table}").fetchall()
            return time.perf_counter() - t

        def tether_profile(table: str = table) -> float:
            t = time.perf_counter()
            profile_product(project, table)
            return time.perf_counter() - t

        summarize(), tether_profile()  # warm the file cache for both
        ours, theirs = [], []
        for _ in range(args.repeat):  # interleaved so both see the same machine state
            theirs.append(summarize())
            ours.append(tether_profile())
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        ratio = t_ours / t_theirs
        verdict = "" if table != TABLES[0] else ("  target <= 2.00x: " + ("met" if ratio <= 2 else "NOT met"))
        print(f"{table:<14}{rows:>12,}{t_theirs:>14.3f}{t_ours:>11.3f}{ratio:>7.2f}x{verdict}")
    con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
