"""Periods as people say them, resolved at a fixed day, on both warehouses' fiscal calendars
(the demo's starts in February, the second warehouse's in July), including the first days of a
new quarter and of a new year."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from conftest import copy_project
from tether.config import load_project
from tether.context.periods import EARLIEST, FORMS, FiscalCalendar, PeriodError, resolve
from tether.drift.publish import build
from tether.serve.server import TetherServer
from tether.toolgen.plan import fiscal_calendar, words_calendar

ROOT = Path(__file__).resolve().parents[1]
D = dt.date


def _fiscal(path: Path) -> FiscalCalendar:
    """The warehouse's fiscal calendar, read from its tether.yaml (a template elsewhere)."""
    section = "calendars:" + path.read_text().split("\ncalendars:", 1)[1].split("\n\n", 1)[0]
    cal = yaml.safe_load(section)["calendars"]["fiscal"]
    return FiscalCalendar(cal["start_month"], cal.get("year_named_by", "end"))


DEMO = _fiscal(ROOT / "src" / "tether" / "demo" / "tether.yaml")  # February, named by the end
SECOND = _fiscal(ROOT / "tests" / "warehouse2" / "tether.yaml")  # July, named by the end


def w(period: str | None, today: D, fiscal: FiscalCalendar | None = None,
      **kw: object) -> tuple[D, D, str | None]:
    found = resolve(period, today, fiscal, **kw)  # type: ignore[arg-type]
    assert found is not None
    return found.start, found.end, found.label


def test_the_calendars_are_the_warehouses() -> None:
    assert (DEMO.start_month, SECOND.start_month) == (2, 7)


@pytest.mark.parametrize(("period", "today", "want"), [
    ("today", D(2026, 8, 20), (D(2026, 8, 20), D(2026, 8, 21), "2026-08-20")),
    ("yesterday", D(2026, 8, 1), (D(2026, 7, 31), D(2026, 8, 1), "2026-07-31")),
    ("this_week", D(2026, 8, 20), (D(2026, 8, 17), D(2026, 8, 24), "week of 2026-08-17")),
    ("last week", D(2026, 8, 17), (D(2026, 8, 10), D(2026, 8, 17), "week of 2026-08-10")),
    ("this_month", D(2026, 8, 20), (D(2026, 8, 1), D(2026, 9, 1), "2026-08")),
    ("last_month", D(2026, 1, 5), (D(2025, 12, 1), D(2026, 1, 1), "2025-12")),
    ("last_30_days", D(2026, 8, 20), (D(2026, 7, 22), D(2026, 8, 21), "last 30 days")),
    ("Last 7 Days", D(2026, 8, 20), (D(2026, 8, 14), D(2026, 8, 21), "last 7 days")),
    ("2026-Q3", D(2026, 8, 20), (D(2026, 7, 1), D(2026, 10, 1), "2026-Q3")),
    ("2025", D(2026, 8, 20), (D(2025, 1, 1), D(2026, 1, 1), "2025")),
    ("2026-07", D(2026, 8, 20), (D(2026, 7, 1), D(2026, 8, 1), "2026-07")),
    ("2026-02-29".replace("29", "28"), D(2026, 8, 20), (D(2026, 2, 28), D(2026, 3, 1),
                                                        "2026-02-28")),
    ("2026-01-01..2026-03-31", D(2026, 8, 20),
     (D(2026, 1, 1), D(2026, 4, 1), "2026-01-01..2026-03-31")),
    # calendar quarters and years without a fiscal calendar, on the first day of a new one
    ("this_quarter", D(2026, 10, 1), (D(2026, 10, 1), D(2027, 1, 1), "2026-Q4")),
    ("last_quarter", D(2026, 10, 1), (D(2026, 7, 1), D(2026, 10, 1), "2026-Q3")),
    ("last_year", D(2026, 1, 1), (D(2025, 1, 1), D(2026, 1, 1), "2025")),
])
def test_calendar_forms(period: str, today: D, want: tuple[D, D, str]) -> None:
    assert w(period, today) == want


@pytest.mark.parametrize(("fiscal", "period", "today", "want"), [
    # the demo: FY2027 runs 2026-02-01 .. 2027-01-31; Q3 starts on 1 August
    (DEMO, "this_quarter", D(2026, 8, 20), (D(2026, 8, 1), D(2026, 11, 1), "FY2027-Q3")),
    (DEMO, "this_quarter", D(2026, 8, 1), (D(2026, 8, 1), D(2026, 11, 1), "FY2027-Q3")),
    (DEMO, "last_quarter", D(2026, 8, 1), (D(2026, 5, 1), D(2026, 8, 1), "FY2027-Q2")),
    (DEMO, "last_quarter", D(2026, 2, 1), (D(2025, 11, 1), D(2026, 2, 1), "FY2026-Q4")),
    (DEMO, "this_year", D(2026, 1, 31), (D(2025, 2, 1), D(2026, 2, 1), "FY2026")),
    (DEMO, "this_year", D(2026, 2, 1), (D(2026, 2, 1), D(2027, 2, 1), "FY2027")),
    (DEMO, "last_year", D(2026, 8, 20), (D(2025, 2, 1), D(2026, 2, 1), "FY2026")),
    (DEMO, "FY2027-Q1", D(2026, 8, 20), (D(2026, 2, 1), D(2026, 5, 1), "FY2027-Q1")),
    (DEMO, "FY2027", D(2026, 8, 20), (D(2026, 2, 1), D(2027, 2, 1), "FY2027")),
    # the second warehouse: FY2026 runs 2025-07-01 .. 2026-06-30
    (SECOND, "this_quarter", D(2026, 3, 15), (D(2026, 1, 1), D(2026, 4, 1), "FY2026-Q3")),
    (SECOND, "last_quarter", D(2026, 3, 15), (D(2025, 10, 1), D(2026, 1, 1), "FY2026-Q2")),
    (SECOND, "last_quarter", D(2026, 7, 1), (D(2026, 4, 1), D(2026, 7, 1), "FY2026-Q4")),
    (SECOND, "this_year", D(2026, 7, 1), (D(2026, 7, 1), D(2027, 7, 1), "FY2027")),
    (SECOND, "last_year", D(2026, 3, 15), (D(2024, 7, 1), D(2025, 7, 1), "FY2025")),
    (SECOND, "FY2026-Q1", D(2026, 3, 15), (D(2025, 7, 1), D(2025, 10, 1), "FY2026-Q1")),
    # calendar forms stay calendar forms with a fiscal calendar
    (SECOND, "2026-Q1", D(2026, 3, 15), (D(2026, 1, 1), D(2026, 4, 1), "2026-Q1")),
])
def test_fiscal_forms(fiscal: FiscalCalendar, period: str, today: D,
                      want: tuple[D, D, str]) -> None:
    assert w(period, today, fiscal) == want


def test_defaults_and_what_a_result_states() -> None:
    found = resolve(None, D(2026, 8, 20), DEMO)
    assert found is not None and found.to_json() == {
        "start": "2026-08-01", "end": "2026-11-01", "end_exclusive": True,
        "calendar": "fiscal", "timezone": "UTC", "resolved_from": "default",
        "label": "FY2027-Q3"}
    assert resolve("", D(2026, 8, 20), default=None) is None  # a listing: no bound
    assert resolve("last_quarter", D(2026, 8, 20), DEMO).resolved_from == "last_quarter"  # type: ignore[union-attr]
    start, end = resolve("2026-07", D(2026, 8, 20), timezone="Europe/Berlin").bounds()  # type: ignore[union-attr]
    assert start.isoformat() == "2026-07-01T00:00:00+02:00" and end.month == 8


@pytest.mark.parametrize(("period", "fiscal", "says"), [
    ("FY2027-Q1", None, "no fiscal calendar"),
    ("FY2027", None, "no fiscal calendar"),
    ("last fortnight", DEMO, "not recognised"),
    ("2026-13", DEMO, "not recognised"),
    ("2026-03-31..2026-01-01", DEMO, "END is before START"),
    ("2026-01-01..soon", DEMO, "two dates"),
    ("last_0_days", DEMO, "between 1 and 3660"),
])
def test_bad_periods_name_the_forms(period: str, fiscal: FiscalCalendar | None,
                                    says: str) -> None:
    with pytest.raises(PeriodError, match=says) as e:
        resolve(period, D(2026, 8, 20), fiscal)
    if "not recognised" in says:
        assert all(form in str(e.value) for form in FORMS)


# --- the spellings people and models write: each reads as its canonical form -----------------------

SPELLINGS: dict[str, list[str]] = {
    "today": ["Today", "TODAY", " today "],
    "yesterday": ["Yesterday", "YESTERDAY"],
    "this_week": ["this week", "This-Week", "current week", "THIS_WEEK"],
    "last_week": ["last week", "previous week", "prior week", "Last-Week"],
    "this_month": ["this month", "current month", "This Month"],
    "last_month": ["last month", "previous month", "prior_month", "LAST MONTH"],
    "this_quarter": ["this quarter", "current quarter", "This-Quarter"],
    "last_quarter": ["last quarter", "previous quarter", "prior quarter", "Last_Quarter",
                     "LAST QUARTER"],
    "this_year": ["this year", "current year", "This Year"],
    "last_year": ["last year", "previous year", "prior-year"],
    "last_30_days": ["last 30 days", "past 30 days", "trailing 30 days", "Past_30_Days",
                     "last-30-days", "previous 30 days", "PAST 30 DAYS"],
    "last_7_days": ["last 7 days", "last 1 week", "past 1 week"],
    "last_14_days": ["past 2 weeks", "trailing 2 weeks"],
    "last_3_months": ["last 3 months", "past 3 months", "Trailing_3_Months", "last 1 quarter"],
    "last_12_months": ["last 12 months", "past 12 months", "last 4 quarters", "past 1 year"],
    "last_2_days": ["last 24 hours", "last_24_hours", "past 1 hour"],
    "last_3_days": ["last 48 hours", "past 36 hours"],
    "2026-Q1": ["Q1 2026", "q1 2026", "2026 Q1", "2026q1", "2026-q1", "Q1-2026", "2026_Q1",
                "2026-01 to 2026-03"],
    "2025": [" 2025", "year 2025", "2025-01-01..2025-12-31"],
    "2026-05": ["May 2026", "may 2026", "2026 May", "MAY-2026", "2026-5", "May_2026",
                "2026-05-01 to 2026-05-31"],
    "2026-09": ["Sept 2026", "September 2026", "sep 2026"],
    "2026-05-01": ["2026-5-1", "2026-05-01..2026-05-01"],
    "2026-01-01..2026-03-31": ["2026-01-01 to 2026-03-31", "from 2026-01-01 to 2026-03-31",
                               "between 2026-01-01 and 2026-03-31", "2026-01-01 .. 2026-03-31",
                               "2026-01-01 through 2026-03-31", "Jan 2026 to Mar 2026"],
    "2024-01-01..2025-12-31": ["2024..2025", "2024 to 2025", "from 2024 to 2025"],
}
FISCAL_SPELLINGS: dict[str, list[str]] = {
    "FY2027-Q1": ["FY27 Q1", "fy27-q1", "FY2027 Q1", "Q1 FY2027", "q1 fy27", "fiscal 2027 q1",
                  "FY2027Q1", "fy 2027 q1", "FY2027_Q1", "Q1 of FY2027"],
    "FY2027": ["FY27", "fy 2027", "fiscal year 2027", "FY-2027", "fy2027"],
    "this_quarter": ["this fiscal quarter", "current fiscal quarter"],
    "last_quarter": ["last fiscal quarter", "previous fiscal quarter"],
    "this_year": ["this fiscal year"],
    "last_year": ["last fiscal year", "previous fiscal year"],
}
REFUSED = ["last fortnight", "next quarter", "Q5 2026", "2026-13", "sometime soon", "2026 2027",
           "the last 30 days of data", "last 0 days", "2026-03-31 to 2026-01-01", "Q1",
           "since then", "2026-02-30", "x" * 70, "last 121 months", "last 0 hours",
           "next 3 months", "last few months"]
FISCAL_ONLY = ["FY27 Q1", "this fiscal year", "last fiscal quarter", "fiscal year 2027"]


def _pairs(fiscal: bool) -> list[tuple[str, str]]:
    groups = {**SPELLINGS, **(FISCAL_SPELLINGS if fiscal else {})}
    if fiscal:  # both maps name this_quarter ...: keep every spelling of each
        groups = {k: SPELLINGS.get(k, []) + FISCAL_SPELLINGS.get(k, [])
                  for k in {**SPELLINGS, **FISCAL_SPELLINGS}}
    return [(canonical, spelled) for canonical, spelt in groups.items() for spelled in spelt]


def test_the_spelling_table_is_large() -> None:
    assert len(_pairs(fiscal=True)) >= 80 and len(REFUSED) + len(FISCAL_ONLY) >= 15


@pytest.mark.parametrize("fiscal", [DEMO, SECOND, None], ids=["february", "july", "calendar"])
@pytest.mark.parametrize("today", [D(2026, 8, 20), D(2026, 1, 1), D(2026, 7, 1)])
def test_spellings_read_as_their_canonical_form(fiscal: FiscalCalendar | None, today: D) -> None:
    for canonical, spelled in _pairs(fiscal is not None):
        want = resolve(canonical, today, fiscal)
        got = resolve(spelled, today, fiscal)
        assert want is not None and got is not None
        assert (got.start, got.end, got.calendar) == (want.start, want.end, want.calendar), (
            spelled, canonical)
        assert got.resolved_from == spelled.strip()


@pytest.mark.parametrize(("period", "today", "fiscal", "want"), [
    ("YTD", D(2026, 8, 20), None, (D(2026, 1, 1), D(2026, 8, 21), "2026 to date")),
    ("ytd", D(2026, 8, 20), DEMO, (D(2026, 2, 1), D(2026, 8, 21), "FY2027 to date")),
    ("year to date", D(2026, 1, 1), None, (D(2026, 1, 1), D(2026, 1, 2), "2026 to date")),
    ("QTD", D(2026, 8, 20), None, (D(2026, 7, 1), D(2026, 8, 21), "2026-Q3 to date")),
    ("qtd", D(2026, 8, 20), SECOND, (D(2026, 7, 1), D(2026, 8, 21), "FY2027-Q1 to date")),
    ("MTD", D(2026, 8, 20), DEMO, (D(2026, 8, 1), D(2026, 8, 21), "2026-08 to date")),
    ("month to date", D(2026, 8, 20), None, (D(2026, 8, 1), D(2026, 8, 21), "2026-08 to date")),
    ("since 2026-05-01", D(2026, 8, 20), None, (D(2026, 5, 1), D(2026, 8, 21),
                                                "since 2026-05-01")),
    ("Since May 2026", D(2026, 8, 20), None, (D(2026, 5, 1), D(2026, 8, 21),
                                              "since 2026-05-01")),
    ("since 2025", D(2026, 8, 20), None, (D(2025, 1, 1), D(2026, 8, 21), "since 2025-01-01")),
    ("2008..2010", D(2026, 8, 20), None, (D(2008, 1, 1), D(2011, 1, 1), "2008..2010")),
    ("2026-01 to 2026-03", D(2026, 8, 20), None, (D(2026, 1, 1), D(2026, 4, 1),
                                                  "2026-01..2026-03")),
    ("FY26 to FY27", D(2026, 8, 20), DEMO, (D(2025, 2, 1), D(2027, 2, 1), "FY2026..FY2027")),
    ("past 2 weeks", D(2026, 8, 20), None, (D(2026, 8, 7), D(2026, 8, 21), "last 14 days")),
    ("last 3 months", D(2026, 8, 20), None, (D(2026, 5, 21), D(2026, 8, 21), "last 3 months")),
    ("last_2_months", D(2026, 3, 30), DEMO, (D(2026, 1, 31), D(2026, 3, 31), "last 2 months")),
    ("past 1 month", D(2026, 3, 30), None, (D(2026, 2, 28), D(2026, 3, 31), "last 1 month")),
    ("last 2 years", D(2026, 8, 20), DEMO, (D(2024, 8, 21), D(2026, 8, 21), "last 2 years")),
    ("last 24 hours", D(2026, 8, 20), None, (D(2026, 8, 19), D(2026, 8, 21),
                                             "last 24 hours, as the whole days 2026-08-19 to "
                                             "2026-08-20")),
    ("last 72 hours", D(2026, 8, 20), None, (D(2026, 8, 17), D(2026, 8, 21),
                                             "last 72 hours, as the whole days 2026-08-17 to "
                                             "2026-08-20")),
    ("now", D(2026, 8, 20), None, (EARLIEST, D(2026, 8, 21), "to date (every row up to today)")),
    ("Right Now", D(2026, 8, 20), DEMO, (EARLIEST, D(2026, 8, 21),
                                         "to date (every row up to today)")),
    ("all_time", D(2026, 1, 1), None, (EARLIEST, D(2026, 1, 2), "to date (every row up to today)")),
    ("last week", D(2026, 8, 23), None, (D(2026, 8, 10), D(2026, 8, 17), "week of 2026-08-10")),
    # "calendar" said: calendar quarters and years in a tool whose words are fiscal
    ("last calendar quarter", D(2026, 8, 20), FiscalCalendar(2, "end"),
     (D(2026, 4, 1), D(2026, 7, 1), "2026-Q2")),
    ("this_calendar_year", D(2026, 8, 20), FiscalCalendar(2, "end"),
     (D(2026, 1, 1), D(2027, 1, 1), "2026")),
    ("calendar YTD", D(2026, 8, 20), FiscalCalendar(2, "end"),
     (D(2026, 1, 1), D(2026, 8, 21), "2026 to date")),
    ("fiscal YTD", D(2026, 8, 20), FiscalCalendar(2, "end"),
     (D(2026, 2, 1), D(2026, 8, 21), "FY2027 to date")),
])
def test_the_other_spellings(period: str, today: D, fiscal: FiscalCalendar | None,
                             want: tuple[D, D, str]) -> None:
    assert w(period, today, fiscal) == want


@pytest.mark.parametrize("period", REFUSED + FISCAL_ONLY)
def test_every_refusal_names_the_canonical_forms(period: str) -> None:
    with pytest.raises(PeriodError) as e:
        resolve(period, D(2026, 8, 20), None)
    assert all(form in str(e.value) for form in FORMS), period


# --- through the server, on both warehouses --------------------------------------------------------

FORMS_TRIED = ("this_quarter", "last_quarter", "this_year", "last_year", "last_30_days",
               "this_month", "2026-Q1", "2026-01-05..2026-02-14", None)


@pytest.fixture(params=["demo", "second"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str, Any]]:
    """(project, a user who sees every row, a server as that user) on each warehouse."""
    source = request.getfixturevalue("demo_dir" if request.param == "demo" else "second_dir")
    d = copy_project(source, tmp_path / request.param)
    build(load_project(d))
    project = load_project(d)
    user = next(u for u, cfg in project.config.policies.users.items()
                if not project.config.policies.roles[cfg.role].row_filters)
    server = TetherServer(project, stdio_user=user)
    try:
        yield project, user, server
    finally:
        server.close()


def _call(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The results of ``calls``, in order, through the official SDK client in memory."""
    async def go() -> list[Any]:
        async with Client(server.server) as c:
            return [await c.call_tool(name, args) for name, args in calls]
    return anyio.run(go)


def test_every_windowed_metric_states_and_uses_the_window_it_resolved(
        served: tuple[Any, str, Any]) -> None:
    """Each period form, sent to every time-windowed metric of the warehouse as a user who sees
    every row: the result's window is the one the project's clock and the metric's calendar
    give, and the statement ran with exactly those bounds."""
    project, user, server = served
    metrics = [v for v in server.visible(user) if v.plan.kind == "metric" and v.plan.window
               and v.plan.window.kind in ("period", "trailing")]
    assert metrics, "the warehouse has windowed metrics"
    tried = [(v, form) for v in metrics for form in FORMS_TRIED]
    results = _call(server, [(v.name, {} if form is None else {"period": form})
                             for v, form in tried])
    for (v, form), r in zip(tried, results, strict=True):
        assert not r.is_error, (v.name, form, r.content)
        w_ = v.plan.window
        cal = project.config.calendars.get(w_.calendar or "")
        fiscal = FiscalCalendar(cal.start_month, cal.year_named_by) if cal else None
        default = "this_quarter" if w_.kind == "period" else f"last_{w_.default_days}_days"
        want = resolve(form, project.now().date(), fiscal, default=default)
        assert want is not None
        got = r.structured_content["window"]
        assert got == want.to_json(), (v.name, form)
        assert got["resolved_from"] == (form or "default")
        params = r.meta["tether/evidence"]["params"]
        start, end = want.bounds()
        assert (params["window_start"], params["window_end"]) == (
            start.isoformat(), end.isoformat()), (v.name, form)
        assert all(row["period"] == want.label for row in r.structured_content["rows"])


def test_an_empty_result_says_why(served: tuple[Any, str, Any]) -> None:
    """A window after the newest data says "the data ends at" its newest day, with as_of (or,
    where as_of is a load time, that the window starts after the last load); arguments that match
    nothing the caller may see say so; a non-empty result carries no reason."""
    _, user, server = served
    windowed = [v for v in server.visible(user) if v.plan.window is not None
                and v.plan.window.kind != "current"]
    assert any(v.plan.kind == "list" for v in windowed)
    calls = [(v.name, args) for v in windowed for args in (
        {"period": "2099-01"}, {"period": "last_year"} if v.plan.kind == "list" else {})]
    results = _call(server, calls)
    seen_yet: list[str] = []
    for v, future, now in zip(windowed, results[::2], results[1::2], strict=True):
        data = future.structured_content
        if data["rows"]:  # a metric with a row per dimension value may answer zeros
            assert "empty_reason" not in data
            continue
        if data["as_of"] is None:  # without as_of the server cannot say the data ends earlier
            assert data["empty_reason"] == "no rows you may see match period=2099-01", v.name
        else:
            assert data["empty_reason"].startswith(
                "no rows: the window starts 2099-01-01, after the "), v.name
            assert data["as_of"] in data["empty_reason"]
            assert (f"the data ends at {data['as_of'][:10]} (as of" in data["empty_reason"]
                    or "the source's last load" in data["empty_reason"]), data["empty_reason"]
            seen_yet.append(v.name)
        later = now.structured_content
        assert ("empty_reason" in later) == (not later["rows"]), v.name
    assert seen_yet


def test_every_spelling_through_the_server(served: tuple[Any, str, Any]) -> None:
    """Every spelling of the table, sent through the official client to a fiscal metric and to a
    listing of the warehouse: the schema takes it (no pattern can refuse what the grammar
    reads), the result states the window the grammar resolves at the project's clock, and the
    statement was bound with exactly its bounds. A listing reads the project's words in its
    one fiscal calendar too (the same quarter as the metric: serve.calendar); the refused
    spellings are tool errors that name the canonical forms."""
    project, user, server = served
    visible = server.visible(user)
    metric = next(v for v in visible if v.plan.kind == "metric" and v.plan.window
                  and v.plan.window.kind == "period" and v.plan.window.calendar)
    listing = next(v for v in visible if v.plan.kind == "list" and v.plan.window)
    for v in (metric, listing):
        assert "pattern" not in v.definition["inputSchema"]["properties"]["period"]
    cal = project.config.calendars[metric.plan.window.calendar]
    fiscal = FiscalCalendar(cal.start_month, cal.year_named_by)
    today = project.now().date()
    words = fiscal_calendar(project.config, words_calendar(project.config))
    assert words is not None and words.start_month == fiscal.start_month  # both warehouses
    tried = ([(metric, spelled, fiscal) for _, spelled in _pairs(fiscal=True)]
             + [(listing, spelled, words) for _, spelled in _pairs(fiscal=True)])
    refused = [(v, p) for v in (metric, listing) for p in REFUSED]
    results = _call(server, [(v.name, {"period": p}) for v, p, _ in tried]
                    + [(v.name, {"period": p}) for v, p in refused])
    for (v, spelled, cal_), r in zip(tried, results, strict=False):
        assert not r.is_error, (v.name, spelled, r.content)
        want = resolve(spelled, today, cal_, default=None)
        assert want is not None
        assert r.structured_content["window"] == want.to_json(), (v.name, spelled)
        start, end = want.bounds()
        params = r.meta["tether/evidence"]["params"]
        assert (params["window_start"], params["window_end"]) == (
            start.isoformat(), end.isoformat()), (v.name, spelled)
    for (v, spelled), r in zip(refused, results[len(tried):], strict=True):
        text = r.content[0].text
        assert r.is_error and all(form in text for form in FORMS), (v.name, spelled, text)


def test_a_call_reads_its_clock_once(served: tuple[Any, str, Any]) -> None:
    """A clock that moves a day at every reading (a call across midnight, many times over): the
    statement's bounds, the result's window and its label still agree within each call, for
    every windowed tool of the warehouse (one reading a call: Executor.now)."""
    project, user, server = served
    start = project.now()
    ticks = iter(range(1, 10_000))
    # every reading of the project's clock a day later than the one before
    server.executor.project.now = lambda: start + dt.timedelta(days=next(ticks))  # type: ignore[method-assign]
    windowed = [v for v in server.visible(user) if v.plan.window is not None
                and v.plan.window.kind != "current"]
    results = _call(server, [(v.name, {"period": "yesterday"}) for v in windowed])
    for v, r in zip(windowed, results, strict=True):
        assert not r.is_error, (v.name, r.content)
        window = r.structured_content["window"]
        params = r.meta["tether/evidence"]["params"]
        assert str(params["window_start"]).startswith(window["start"]), (v.name, params, window)
        assert str(params["window_end"]).startswith(window["end"]), (v.name, params, window)
        assert r.meta["tether/evidence"]["window"]["start"] == window["start"], v.name
