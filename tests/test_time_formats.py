"""Time held as a number or as text, on DuckDB and PostgreSQL: `tether init` finds the columns
whose every value is a year, a year-month, a date or seconds since 1970 (integers) or a date in
one text format, by their shape (checked in the engine), and writes each with its format; a
listing on any of them takes `period`, bounds it with values of the column's own type (a year
column compared with years, ISO text with text, other text parsed in the engine), refuses a
window its grain cannot hold, and says when the data ends before the window. The data is made
here in shapes no dataset of the project has; every count is checked against the rows made."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from conftest import call_tools, run_cli, scratch_schema
from tether.context import timeformat
from tether.context.timeformat import TimeFormatError

DAY0 = dt.date(2015, 1, 3)
N = 420  # one row a week: 2015-01-03 .. 2023-01-21

COLUMNS = [("reading_no", "VARCHAR"), ("season", "INTEGER"), ("ym", "INTEGER"),
           ("dayNum", "INTEGER"), ("logged_on", "VARCHAR"), ("shipDate", "VARCHAR"),
           ("eu_date", "VARCHAR"), ("both_ways", "VARCHAR"), ("stamp_ts", "BIGINT"),
           ("amount", "INTEGER"), ("batch_code", "INTEGER")]


def _day(i: int) -> dt.date:
    return DAY0 + dt.timedelta(days=7 * i)


def _rows() -> list[tuple[Any, ...]]:
    out = []
    for i in range(N):
        d = _day(i)
        noon = dt.datetime.combine(d, dt.time(12), dt.UTC)
        out.append((f"R-{i:05d}", d.year, d.year * 100 + d.month, int(f"{d:%Y%m%d}"),
                    d.isoformat(), f"{d:%m/%d/%Y}", f"{d:%d/%m/%Y}",
                    f"{i % 12 + 1:02d}/{(i * 5) % 12 + 1:02d}/2020",  # day or month first?
                    int(noon.timestamp()),
                    1000 + (i * 37) % 1999,  # numbers in 1000..2998 named as no time
                    200100 + i))  # six digits whose last two are no month
    return out


WANT = {"season": "%Y", "ym": "%Y%m", "dayNum": "%Y%m%d", "logged_on": "%Y-%m-%d",
        "shipDate": "%m/%d/%Y", "eu_date": "%d/%m/%Y", "stamp_ts": "%s"}


DDL = "(" + ", ".join(f'"{c}" {t}' for c, t in COLUMNS) + ")"


@pytest.fixture(params=["duckdb", "postgres"])
def started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Path]:
    """A project written by `tether init` over the table, on each engine."""
    tmp = tmp_path_factory.mktemp(f"times-{request.param}")
    with contextlib.ExitStack() as stack:
        if request.param == "duckdb":
            path = tmp / "times.duckdb"
            with duckdb.connect(str(path)) as con:
                con.execute(f'CREATE TABLE "readings" {DDL}')
                con.executemany(f'INSERT INTO "readings" VALUES ({", ".join("?" * len(COLUMNS))})',
                                _rows())
            init = ["--source", f"duckdb:///{path}"]
        else:
            url = request.getfixturevalue("pg_url")
            schema = stack.enter_context(scratch_schema(url, "times", DDL, _rows(), "readings"))
            init = ["--source", url, "--schema", schema]
        r = run_cli("init", "proj", *init, "--user", "ana", cwd=tmp)
        assert r.returncode == 0, r.stderr
        yield tmp / "proj"


def test_init_finds_time_in_every_shape_and_only_there(started: Path) -> None:
    text = (started / "tether.yaml").read_text()
    product = yaml.safe_load(text)["products"]["readings"]
    assert product["time_columns"] == WANT
    # the finest is the event time, and as_of its newest value (no load-time column)
    assert product["metric_time"] == "stamp_ts"
    assert product["freshness"] == {"column": "stamp_ts"}
    assert '  season: "%Y"  # inferred: confirm (years as %Y, every value)' in text


def _serve(project: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from tether.config import load_project

    return call_tools(load_project(project), "ana", calls)


def _in(d: dt.date, first: dt.date, end: dt.date) -> bool:
    return first <= d < end


PERIODS = [  # (period, first day, end exclusive) for day-grain and finer columns
    ("2018", dt.date(2018, 1, 1), dt.date(2019, 1, 1)),
    ("Q2 2019", dt.date(2019, 4, 1), dt.date(2019, 7, 1)),
    ("2018-03-01 to 2018-03-15", dt.date(2018, 3, 1), dt.date(2018, 3, 16)),
    ("March 2020", dt.date(2020, 3, 1), dt.date(2020, 4, 1)),
    ("since 2022-06-01", dt.date(2022, 6, 1), dt.date(2100, 1, 1)),
]
COARSE = {  # a year column takes whole years; a month column whole months
    "season": [("2018", 2018, 2019), ("2016..2018", 2016, 2019), ("since 2021", 2021, 9999)],
    "ym": [("2018", 201801, 201901), ("Q2 2019", 201904, 201907), ("March 2020", 202003, 202004)],
}


def test_a_period_on_every_format_counts_the_rows_it_names(started: Path) -> None:
    """For each time column in turn as the product's event time: build, then a listing with
    each period answers exactly the rows made in it (total_rows), the window stated and the
    bound values of the column's own type; a window finer than the column's grain is refused
    with what it takes; a window after the data says the data ends there."""
    cfg_path = started / "tether.yaml"
    base = cfg_path.read_text()
    rows = _rows()
    for column in WANT:
        text = base.replace("metric_time: stamp_ts", f"metric_time: {column}")
        cfg_path.write_text(text)
        r = run_cli("build", "--project", str(started), "--json", cwd=started)
        assert r.returncode == 0, (column, r.stderr)
        tools = json.loads(run_cli("tools", "--project", str(started), "--as-user", "ana",
                                   "--json", cwd=started).stdout)
        listing = next(t for t in tools if t["name"].startswith("readings"))
        period = listing["inputSchema"]["properties"]["period"]
        assert "pattern" not in period and period["description"].startswith(f"Bounds {column}")
        cases = COARSE.get(column) or [(p, a, b) for p, a, b in PERIODS]
        calls = [(listing["name"], {"period": p, "limit": 1}) for p, _, _ in cases]
        calls += [(listing["name"], {"period": "2031"})]  # after the data
        calls += [(listing["name"], {"period": "last 30 days"})] if column in COARSE else []
        results = _serve(started, calls)
        for (p, a, b), res in zip(cases, results, strict=False):
            assert not res.is_error, (column, p, res.content[0].text)
            data = res.structured_content
            if column == "season":
                want = sum(1 for i in range(N) if a <= _day(i).year < b)
            elif column == "ym":
                want = sum(1 for row in rows if a <= row[2] < b)
            else:
                want = sum(1 for i in range(N) if _in(_day(i), a, b))
            assert data["total_rows"] == want > 0, (column, p)
            bound = res.meta["tether/evidence"]["params"]
            if column in COARSE:  # compared with the column's own integers
                assert (bound["window_start"], bound["window_end"]) == (
                    a, b if b < 9999 else bound["window_end"]), (column, p)
            if column == "logged_on":  # ISO text is compared as text
                assert bound["window_start"] == a.isoformat()
        after = results[len(cases)].structured_content
        assert after["rows"] == [] and "the data ends at" in after["empty_reason"], column
        if column == "season":
            assert "the data ends at 2023 " in after["empty_reason"]
        if column in COARSE:
            refused = results[-1]
            assert refused.is_error and f"{column} holds" in refused.content[0].text


def test_bounds_of_each_format() -> None:
    def b(start: dt.date, end: dt.date, fmt: str, held: str = "integer",
          today: dt.date = dt.date(2026, 12, 4)) -> tuple[object, object]:
        s = dt.datetime.combine(start, dt.time(), dt.UTC)
        e = dt.datetime.combine(end, dt.time(), dt.UTC)
        return timeformat.bounds(s, e, fmt, held, "c", today)

    assert b(dt.date(2010, 1, 1), dt.date(2011, 1, 1), "%Y") == (2010, 2011)
    assert b(dt.date(2010, 1, 1), dt.date(2011, 1, 1), "%Y", "text") == ("2010", "2011")
    assert b(dt.date(2010, 4, 1), dt.date(2010, 7, 1), "%Y%m") == (201004, 201007)
    assert b(dt.date(2010, 4, 5), dt.date(2010, 4, 6), "%Y%m%d") == (20100405, 20100406)
    assert b(dt.date(2010, 4, 5), dt.date(2010, 4, 6), "%Y-%m-%d", "text") == (
        "2010-04-05", "2010-04-06")
    assert b(dt.date(2010, 4, 5), dt.date(2010, 4, 6), "%m/%d/%Y", "text") == (
        dt.date(2010, 4, 5), dt.date(2010, 4, 6))
    assert b(dt.date(1970, 1, 2), dt.date(1970, 1, 3), "%s") == (86400, 2 * 86400)
    # the year under way counts when the window reaches past today (since 2010, YTD)
    assert b(dt.date(2010, 1, 1), dt.date(2026, 12, 5), "%Y") == (2010, 2027)
    for start, end, fmt in ((dt.date(2010, 7, 1), dt.date(2010, 10, 1), "%Y"),
                            (dt.date(2010, 1, 1), dt.date(2010, 4, 1), "%Y"),
                            (dt.date(2010, 4, 5), dt.date(2010, 5, 1), "%Y%m")):
        with pytest.raises(TimeFormatError, match="c holds"):
            b(start, end, fmt)


def test_formats_are_checked() -> None:
    assert timeformat.problem("%Y", "integer") is None
    assert timeformat.problem("%d.%m.%Y", "string") is None
    assert timeformat.problem("%Y-%m-%d", "integer") is not None
    assert timeformat.problem("%m/%d", "string") is not None  # no year
    assert timeformat.problem("%Y-%q", "string") is not None
    assert timeformat.problem("%Y", "timestamp") is not None
    assert timeformat.lexical("%Y-%m-%d %H:%M:%S") and timeformat.lexical("%Y%m%d")
    assert not timeformat.lexical("%m/%d/%Y") and not timeformat.lexical("%d %b %Y")
    assert timeformat.to_time(2010, "%Y") == dt.datetime(2010, 1, 1, tzinfo=dt.UTC)
    assert timeformat.to_time("05/01/2010", "%m/%d/%Y") == dt.datetime(2010, 5, 1,
                                                                       tzinfo=dt.UTC)
    assert timeformat.to_time("unknown", "%Y") is None


def test_a_bad_format_in_tether_yaml_names_the_column(tmp_path: Path) -> None:
    path = tmp_path / "times.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (season INTEGER)")
    con.close()
    (tmp_path / "tether.yaml").write_text(
        f"sources:\n  main: {{url: 'duckdb:///{path}'}}\nproducts:\n  t:\n    table: t\n"
        "    time_columns: {season: '%Y-%Q'}\n")
    r = run_cli("profile", "--project", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "tether.yaml:6: time_columns 'season'" in r.stderr and "%Y-%Q" in r.stderr, r.stderr
    # a number declared with a time zone, and a text format on a number: the type says no
    for value, says in (("UTC", "is an integer: say the format"),
                        ("'%Y-%m-%d'", "is not a format an integer column holds time in")):
        (tmp_path / "tether.yaml").write_text(
            f"sources:\n  main: {{url: 'duckdb:///{path}'}}\nproducts:\n  t:\n    table: t\n"
            f"    time_columns: {{season: {value}}}\n")
        r = run_cli("profile", "--project", str(tmp_path), cwd=tmp_path)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert "tether.yaml:6" in r.stderr and says in r.stderr, r.stderr
