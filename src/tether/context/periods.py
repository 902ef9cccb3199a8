"""Periods as people say them, resolved to a window: one grammar, pure date arithmetic, no I/O.

One argument, ``period``, names a window in words a person or a model writes: any case, with
spaces, underscores, hyphens or none between the words ("last_quarter", "Last Quarter",
"previous fiscal quarter", "yesterday", "now" (every row to date), "past 30 days", "last 3
months", "last 24 hours" (the whole days they touch), "YTD", "Q1 2026", "FY27 Q1", "FY2027-Q1",
"May 2026", "2026-07", "since 2026-05-01", "2026-05-01 to 2026-05-31", "2008..2010"). :func:`resolve`
turns it into a :class:`Window` with a start, an exclusive end, the calendar it was read in and
the words it came from, at a given day (the project's clock).
Quarters and years follow the calendar given (fiscal where the tool has one), weeks start on
Monday, and a fiscal form (``FY``, "fiscal") needs a fiscal calendar. Anything else is a
:class:`PeriodError` that lists the canonical forms. This module is the only reader of a
period: the tool schema takes any string (toolgen/shared.py), so it never refuses what this
grammar accepts.
"""

from __future__ import annotations

import calendar as calendar_module
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from tether.context.calendar import fiscal_year_start, quarter, quarter_of

FORMS = ("today", "yesterday", "this_week", "last_week", "this_month", "last_month",
         "this_quarter", "last_quarter", "this_year", "last_year", "last_N_days", "last_N_months",
         "FYyyyy-Qn", "FYyyyy", "yyyy-Qn", "yyyy", "yyyy-mm", "yyyy-mm-dd", "START..END")
FORMS_SENTENCE = ("period: " + ", ".join(FORMS[:-1]) + " or START..END (dates, months or years, "
                  "END included); also written as 'last quarter', 'previous fiscal year', "
                  "'past 7 days', 'last 3 months', 'last 24 hours' (as whole days), 'now' (to date), "
                  "'YTD', 'QTD', 'MTD', 'last calendar quarter', 'calendar YTD', 'Q1 2026', "
                  "'FY27 Q1', 'May 2026', 'since 2026-05-01', '2026-05-01 to 2026-05-31'")
"""The canonical forms and the other spellings, in one line: for the error that refuses one."""
SCHEMA_FORMS = ("today, yesterday, this_|last_ week|month|quarter|year, last_N_days, YTD, "
                "FYyyyy[-Qn], yyyy[-Qn], yyyy-mm[-dd], START..END (END included)")
"""The forms a tool's ``period`` description names (short: every tool carries it; the grammar
reads more, and a refusal lists them all)."""


EARLIEST = dt.date(1000, 1, 1)
"""Where a window with no start of its own ("now", "to date") starts: before any date a
warehouse holds, and far enough from year 1 that no time zone moves it out of range."""


class PeriodError(ValueError):
    """A period that is not one of the accepted forms (the message lists them)."""


@dataclass(frozen=True)
class FiscalCalendar:
    """A fiscal year that starts on the 1st of ``start_month``, labelled by the calendar year
    it ends in (``end``) or starts in (``start``)."""

    start_month: int = 1
    year_named_by: str = "end"


@dataclass(frozen=True)
class Window:
    start: dt.date
    end: dt.date  # exclusive
    calendar: str  # fiscal | calendar
    resolved_from: str  # the words given, or "default"
    label: str | None = None  # FY2027-Q1, 2026-Q3, 2026-07, ...
    timezone: str = "UTC"

    def to_json(self) -> dict[str, Any]:
        """As a result states it: the end is exclusive, and said so."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(),
                "end_exclusive": True, "calendar": self.calendar, "timezone": self.timezone,
                "resolved_from": self.resolved_from, "label": self.label}

    def bounds(self) -> tuple[dt.datetime, dt.datetime]:
        """[start, end) as aware datetimes at midnight in the window's time zone."""
        from zoneinfo import ZoneInfo

        tz = dt.UTC if self.timezone.upper() == "UTC" else ZoneInfo(self.timezone)
        return (dt.datetime.combine(self.start, dt.time(), tz),
                dt.datetime.combine(self.end, dt.time(), tz))


_TOKEN = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?!\d)|\d{4}-\d{1,2}(?![\d-])|q[1-4](?!\d)|\d+|[a-z]+")
"""The words of a period as people and models write it, in any case, with spaces, underscores,
hyphens or none between them: a date (``2026-05-01``) and a month (``2026-05``) are one word
each, ``Q1`` is one, ``FY2027`` is two (``fy``, ``2027``)."""

_THIS = frozenset({"this", "current"})
_LAST = frozenset({"last", "previous", "prior"})
_TRAILING = frozenset({"last", "past", "trailing", "previous"})
_UNITS = ("week", "month", "quarter", "year")
_SPANS = ("hour", "day", *_UNITS)
_TO = frozenset({"to", "through", "until", "thru"})
_MONTH_NAMES = {name: i for i, month in enumerate(calendar_module.month_name) if month
                for name in {month.lower(), month.lower()[:3], month.lower()[:4]}}
"""january, jan, janu, ..., september, sep, sept: the month each names."""


def words(period: str) -> list[str]:
    """The words :func:`resolve` reads in ``period`` (".." reads as "to")."""
    return _TOKEN.findall(period.strip().lower().replace("..", " to "))


def _add_months(d: dt.date, months: int) -> dt.date:
    m = d.month - 1 + months
    return dt.date(d.year + m // 12, m % 12 + 1, 1)


def resolve(period: str | None, today: dt.date, fiscal: FiscalCalendar | None = None, *,
            default: str | None = "this_quarter", timezone: str = "UTC") -> Window | None:
    """The window ``period`` names on ``today``. Quarters and years are fiscal when ``fiscal``
    is given, calendar otherwise. ``None`` (or empty) gives ``default`` (None: no window)."""
    given = (period or "").strip()
    if not given:
        if default is None:
            return None
        dflt = resolve(default, today, fiscal, default=None, timezone=timezone)
        assert dflt is not None
        return Window(dflt.start, dflt.end, dflt.calendar, "default", dflt.label, timezone)
    if len(given) > 60:
        raise PeriodError(f"period {given[:60]!r}...: too long; {FORMS_SENTENCE}")
    try:
        found = _read(given, words(given), today, fiscal)
        if found is None:
            raise PeriodError(f"period {given!r} is not recognised")
        start, end, label, kind = found
        if end <= start:
            raise PeriodError(f"period {given!r}: END is before START")
    except PeriodError as e:  # every refusal names the forms that would have been read
        raise PeriodError(f"{e}; {FORMS_SENTENCE}") from None
    return Window(start, end, kind, given, label, timezone)


_Found = tuple[dt.date, dt.date, str | None, str]  # start, end (exclusive), label, calendar


def _read(given: str, w: list[str], today: dt.date, fiscal: FiscalCalendar | None
          ) -> _Found | None:
    """The window the words ``w`` name, or None when they are none of the grammar's forms."""
    tomorrow = today + dt.timedelta(days=1)
    if w in (["now"], ["right", "now"], ["to", "date"], ["all", "time"]):
        # a state asked of now ("still open right now") is every row up to today, not
        # today's events alone
        return EARLIEST, tomorrow, "to date (every row up to today)", "calendar"
    if w == ["today"]:
        return today, tomorrow, today.isoformat(), "calendar"
    if w == ["yesterday"]:
        return today - dt.timedelta(days=1), today, (today - dt.timedelta(days=1)).isoformat(), \
            "calendar"
    if len(w) in (2, 3) and (w[0] in _THIS or w[0] in _LAST) and w[-1] in _UNITS and (
            len(w) == 2 or w[1] in ("fiscal", "calendar")):
        # "calendar" said: calendar quarters and years whatever the tool's calendar
        plain = len(w) == 3 and w[1] == "calendar"
        return _relative(given, w[-1], 0 if w[0] in _THIS else -1, len(w) == 3 and not plain,
                         today, None if plain else fiscal)
    if len(w) == 3 and w[0] in _TRAILING and w[1].isdigit() and w[2].rstrip("s") in _SPANS:
        return _trailing(given, int(w[1]), w[2].rstrip("s"), today)
    to_date = {"ytd": "year", "qtd": "quarter", "mtd": "month"}
    if len(w) == 2 and w[0] in ("calendar", "fiscal") and w[1] in to_date:  # "calendar YTD"
        start, _, label, kind = _relative(given, to_date[w[1]], 0, w[0] == "fiscal", today,
                                          None if w[0] == "calendar" else fiscal)
        return start, tomorrow, f"{label} to date", kind
    if (len(w) == 1 and w[0] in to_date) or (len(w) == 3 and w[0] in _UNITS[1:]
                                             and w[1:] == ["to", "date"]):
        unit = to_date.get(w[0], w[0])
        start, _, label, kind = _relative(given, unit, 0, False, today, fiscal)
        return start, tomorrow, f"{label} to date", kind
    if w and w[0] == "since" and (point := _point(w[1:], fiscal)) is not None:
        return point[0], tomorrow, f"since {point[0].isoformat()}", "calendar"
    if w and w[0] in ("from", "between"):
        w = w[1:]
    for i, word in enumerate(w):
        if word in _TO or word == "and":
            first, last = _point(w[:i], fiscal), _point(w[i + 1:], fiscal)
            if first is None or last is None:
                raise PeriodError(f"period {given!r}: START to END takes two dates (YYYY-MM-DD), "
                                  "months (YYYY-MM) or years (YYYY), END included")
            kind = "fiscal" if "fiscal" in (first[3], last[3]) else "calendar"
            return first[0], last[1], f"{first[2]}..{last[2]}", kind
    return _point(w, fiscal, given)


def _point(w: list[str], fiscal: FiscalCalendar | None, given: str | None = None
           ) -> _Found | None:
    """A named stretch of the calendar: a day, a month, a quarter or a year (fiscal or not).
    ``given`` (the whole period) makes a fiscal form without a fiscal calendar an error."""
    if len(w) == 1 and re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", w[0]):
        try:
            day = dt.date.fromisoformat("-".join(p.zfill(2) for p in w[0].split("-")))
        except ValueError:
            return None
        return day, day + dt.timedelta(days=1), day.isoformat(), "calendar"
    month = _month(w)
    if month is not None:
        return month, _add_months(month, 1), f"{month:%Y-%m}", "calendar"
    fy = "fy" in w or "fiscal" in w
    rest = [x for x in w if x not in ("fy", "fiscal", "year", "quarter", "of")]
    quarters = [x for x in rest if re.fullmatch(r"q[1-4]", x)]
    years = [x for x in rest if x.isdigit() and len(x) in ((2, 4) if fy else (4,))]
    if len(quarters) + len(years) != len(rest) or len(years) != 1 or len(quarters) > 1:
        return None
    year = int(years[0]) + (2000 if len(years[0]) == 2 else 0)
    q = int(quarters[0][1]) if quarters else None
    if fy:
        if fiscal is None:
            if given is None:
                return None
            raise PeriodError(f"period {given!r} is fiscal, but this tool has no fiscal "
                              f"calendar: use {'yyyy-Qn' if q else 'yyyy'} for a calendar "
                              f"{'quarter' if q else 'year'}")
        if q:
            p = quarter(f"FY{year}-Q{q}", fiscal.start_month, fiscal.year_named_by)
            return p.start, p.end, p.label, "fiscal"
        start = fiscal_year_start(year, fiscal.start_month, fiscal.year_named_by)
        return start, _add_months(start, 12), f"FY{year}", "fiscal"
    if q:
        start = dt.date(year, 3 * (q - 1) + 1, 1)
        return start, _add_months(start, 3), f"{year}-Q{q}", "calendar"
    start = dt.date(year, 1, 1)
    return start, _add_months(start, 12), str(year), "calendar"


def _month(w: list[str]) -> dt.date | None:
    """``2026-05``, ``May 2026``, ``2026 May`` -> 2026-05-01."""
    if len(w) == 1 and re.fullmatch(r"\d{4}-\d{1,2}", w[0]):
        year, month = (int(p) for p in w[0].split("-"))
    elif len(w) == 2 and (names := [x for x in w if x in _MONTH_NAMES]) and (
            years := [x for x in w if x.isdigit() and len(x) == 4]):
        year, month = int(years[0]), _MONTH_NAMES[names[0]]
    else:
        return None
    return dt.date(year, month, 1) if 1 <= month <= 12 else None


def _relative(given: str, unit: str, step: int, said_fiscal: bool, today: dt.date,
              fiscal: FiscalCalendar | None) -> _Found:
    """this (step 0) or last (step -1) week, month, quarter or year; "fiscal" said needs a
    fiscal calendar (quarters and years follow it whenever the tool has one)."""
    if said_fiscal and (fiscal is None or unit in ("week", "month")):
        raise PeriodError(f"period {given!r} is fiscal, but this tool has no fiscal calendar"
                          f"{' for ' + unit + 's' if fiscal else ''}: use "
                          f"{'this' if step == 0 else 'last'}_{unit}")
    kind = "fiscal" if fiscal and unit in ("quarter", "year") else "calendar"
    if unit == "week":
        monday = today - dt.timedelta(days=today.weekday() - 7 * step)
        return monday, monday + dt.timedelta(days=7), f"week of {monday.isoformat()}", kind
    if unit == "month":
        first = _add_months(today.replace(day=1), step)
        return first, _add_months(first, 1), f"{first:%Y-%m}", kind
    if unit == "quarter":
        start, label = _quarter_of(today, fiscal)
        if step:
            start, label = _quarter_of(_add_months(start, -3), fiscal)
        return start, _add_months(start, 3), label, kind
    start, label = _year_of(today, fiscal)
    if step:
        start, label = _year_of(_add_months(start, -12), fiscal)
    return start, _add_months(start, 12), label, kind


def _trailing(given: str, n: int, unit: str, today: dt.date) -> _Found:
    """The ``n`` days, weeks, months, quarters or years that end today (today included): "past
    30 days" is the 30 days to today, "last 3 months" starts the day after the same day three
    months back. Hours are read as the whole days they touch (the grammar's windows are days,
    and the result's label says so): "last 24 hours" is yesterday and today."""
    days = {"day": 1, "week": 7}.get(unit)
    if unit == "hour":
        if not 1 <= n <= 3660 * 24:
            raise PeriodError(f"period {given!r}: N must be between 1 and {3660 * 24} hours")
        start = today - dt.timedelta(days=-(-n // 24))
        return start, today + dt.timedelta(days=1), f"last {n} hours, as the whole days " \
            f"{start.isoformat()} to {today.isoformat()}", "calendar"
    tomorrow = today + dt.timedelta(days=1)
    if days is not None:
        n *= days
        if not 1 <= n <= 3660:
            raise PeriodError(f"period {given!r}: N must be between 1 and 3660 days")
        return tomorrow - dt.timedelta(days=n), tomorrow, f"last {n} days", "calendar"
    months = n * {"month": 1, "quarter": 3, "year": 12}[unit]
    if not 1 <= months <= 120:
        raise PeriodError(f"period {given!r}: N must be between 1 and 120 months")
    back = _add_months(tomorrow.replace(day=1), -months)
    start = back.replace(day=min(tomorrow.day, calendar_module.monthrange(back.year,
                                                                          back.month)[1]))
    return start, tomorrow, f"last {n} {unit}{'s' if n > 1 else ''}", "calendar"


def _quarter_of(day: dt.date, fiscal: FiscalCalendar | None) -> tuple[dt.date, str]:
    if fiscal is not None:
        p = quarter_of(day, fiscal.start_month, fiscal.year_named_by)
        return p.start, p.label
    q = (day.month - 1) // 3 + 1
    return dt.date(day.year, 3 * (q - 1) + 1, 1), f"{day.year}-Q{q}"


def _year_of(day: dt.date, fiscal: FiscalCalendar | None) -> tuple[dt.date, str]:
    if fiscal is None:
        return dt.date(day.year, 1, 1), str(day.year)
    label = quarter_of(day, fiscal.start_month, fiscal.year_named_by).label  # FY2027-Q1
    fy = int(label[2:6])
    return fiscal_year_start(fy, fiscal.start_month, fiscal.year_named_by), f"FY{fy}"
