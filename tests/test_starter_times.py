"""`tether init` chooses times that say when something happened: a birth date is never the event
time or as_of (a staff table's freshness said its data was 53 years old), and a column with
times after today (a calendar table that runs to 2100, bookings) gives as_of as the newest time
not after the clock, never a date decades ahead."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import yaml

from conftest import call_tools, run_cli
from tether.config import load_project
from tether.drift.publish import build


def test_a_birth_date_is_no_event_and_a_calendar_is_no_future(tmp_path: Path) -> None:
    db = tmp_path / "crew.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE crew AS SELECT i AS crew_id, 'Crew ' || i AS crew_name, "
                    "DATE '1960-01-01' + CAST(i * 400 AS INTEGER) AS birth_date, "
                    "DATE '2015-01-01' + CAST(i * 30 AS INTEGER) AS hired_on "
                    "FROM range(1, 41) t(i)")
        con.execute("CREATE TABLE almanac AS SELECT CAST(d AS DATE) AS day_date, "
                    "year(d) AS yr FROM range(DATE '2000-01-01', DATE '2100-01-01', "
                    "INTERVAL 1 DAY) t(d)")
    r = run_cli("init", "p", "--source", f"duckdb:///{db}", cwd=tmp_path,
                env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "tether.yaml").read_text()
    cfg = yaml.safe_load(text)
    crew, almanac = cfg["products"]["crew"], cfg["products"]["almanac"]
    assert crew["metric_time"] == "hired_on" and crew["freshness"] == {"column": "hired_on"}
    assert almanac["freshness"] == {"column": "day_date", "where": "day_date <= {{ clock }}"}
    assert "some rows lie after today" in text
    project = load_project(tmp_path / "p")
    build(project)
    got, = call_tools(load_project(tmp_path / "p"), "x", [("almanac_by_attributes",
                                                            {"limit": 1})])
    as_of = dt.datetime.fromisoformat(got.structured_content["as_of"])
    assert as_of <= dt.datetime.now(dt.UTC) and as_of.year >= 2026
