"""Time through a calendar table, on DuckDB and PostgreSQL: in a star schema a fact's time is an
integer key into a date table (one row per date), one key per role (sold, shipped). `tether init`
writes the first role as the fact's `metric_time_via` (the others said beside it), and the
fact's listing then takes `period`, bounding the date of the row that key points to: a month
of sales is one call, answered as SQL over the join answers it; the date table's attributes
(year, weekday) count and filter through the same path, and the date table's rows years
ahead never make its as_of. A schema of its own (a kiosk's sales), in no test warehouse's
domain."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from conftest import call_tools, run_cli
from tether.config import load_project
from tether.drift.publish import build

# surrogate keys (a number per day, as a warehouse's date table keys them), not yyyymmdd
DAYS = ("SELECT CAST(7000 + date_diff('day', DATE '2025-01-01', d) AS INTEGER) AS day_key, "
        "CAST(d AS DATE) AS cal_date, year(d) AS cal_year, month(d) AS cal_month, "
        "dayname(d) AS weekday "
        "FROM range(DATE '2025-01-01', DATE '2031-01-01', INTERVAL 1 DAY) t(d)")
SALES = ("SELECT i AS sale_id, CAST(7365 + i % 240 AS INTEGER) AS sold_day_key, "
         "CAST(7367 + i % 240 AS INTEGER) AS shipped_day_key, 5 + i % 17 AS amount "
         "FROM range(1, 2001) t(i)")


def _load(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE kiosk_days AS {DAYS}")
    con.execute(f"CREATE TABLE kiosk_sales AS {SALES}")


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    db = tmp_path / "kiosk.duckdb"
    with duckdb.connect(str(db)) as con:
        _load(con)
        tables = {t: con.execute(f"SELECT * FROM {t}").fetchall()
                  for t in ("kiosk_days", "kiosk_sales")}
    if request.param == "duckdb":
        yield ["--source", f"duckdb:///{db}"]
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    schema = f"kiosk_{uuid.uuid4().hex[:8]}"
    ddl = {"kiosk_days": "day_key integer, cal_date date, cal_year integer, cal_month integer, "
                         "weekday text",
           "kiosk_sales": "sale_id integer, sold_day_key integer, shipped_day_key integer, "
                          "amount integer"}
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'CREATE SCHEMA "{schema}"')
        for t, rows in tables.items():
            pg.execute(f'CREATE TABLE "{schema}".{t} ({ddl[t]})')
            with pg.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".{t} VALUES '
                                f"({', '.join(['%s'] * len(rows[0]))})", rows)
    try:
        yield ["--source", url, "--schema", schema]
    finally:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _gold(where: str) -> int:
    with duckdb.connect() as con:
        _load(con)
        got = con.execute("SELECT count(*) FROM kiosk_sales s JOIN kiosk_days d ON d.day_key = "
                          f"s.sold_day_key WHERE {where}").fetchone()
        return int(got[0]) if got else -1


def test_a_fact_takes_its_period_through_the_date_table(source: list[str], tmp_path: Path
                                                        ) -> None:
    r = run_cli("init", "p", *source, cwd=tmp_path, env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "tether.yaml").read_text()
    cfg = yaml.safe_load(text)
    sales = cfg["products"]["kiosk_sales"]
    assert sales["metric_time_via"] == "sold_day_key" and "metric_time" not in sales
    assert "also shipped_day_key" in text
    assert cfg["products"]["kiosk_days"]["freshness"]["where"] == "cal_date <= {{ clock }}"
    build(load_project(tmp_path / "p"))
    project = load_project(tmp_path / "p")
    march, by_month, fridays, days = call_tools(project, "x", [
        ("kiosk_sales_by_attributes", {"period": "2026-03", "limit": 1}),
        ("kiosk_sales_by_attributes", {"period": "2026-03", "count_by": "sold_day_key.weekday",
                                       "limit": 7}),
        ("kiosk_sales_by_attributes", {"sold_day_key_weekday": ["Friday"], "limit": 1}),
        ("kiosk_days_by_attributes", {"limit": 1})])
    for got in (march, by_month, fridays, days):
        assert not got.is_error, got.content[0].text
    assert march.structured_content["total_rows"] == _gold(
        "d.cal_date >= DATE '2026-03-01' AND d.cal_date < DATE '2026-04-01'") > 0
    assert march.structured_content["window"]["start"].startswith("2026-03-01")
    days_of = {r["sold_day_key.weekday"]: r["rows"] for r in by_month.structured_content["rows"]}
    assert days_of == {w: _gold(f"d.weekday = '{w}' AND d.cal_date >= DATE '2026-03-01' "
                                "AND d.cal_date < DATE '2026-04-01'") for w in days_of}
    assert len(days_of) == 7 and sum(days_of.values()) == march.structured_content["total_rows"]
    assert fridays.structured_content["total_rows"] == _gold("d.weekday = 'Friday'")
    assert days.structured_content["as_of"] < "2031"  # the newest past day, not 2030-12-31
