"""Periods as people say them, resolved to a window: pure date arithmetic, no I/O.

One argument, ``period``, names a window in words a person uses ("last_quarter", "yesterday",
"last_30_days", "FY2027-Q1", "2026-07", "2026-01-01..2026-03-31"); :func:`resolve` turns it
into a :class:`Window` with a start, an exclusive end, the calendar it was read in and the words
it came from, at a given day (the project's clock). Quarters and years follow the calendar given
(fiscal where the metric has one), weeks start on Monday, and ``FYyyyy[-Qn]`` needs a fiscal
calendar. An unrecognised period is a :class:`PeriodError` that lists the accepted forms.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from tether.context.calendar import fiscal_year_start, quarter, quarter_of

FORMS = ("today", "yesterday", "this_week", "last_week", "this_month", "last_month",
         "this_quarter", "last_quarter", "this_year", "last_year", "last_N_days", "FYyyyy-Qn",
         "FYyyyy", "yyyy-Qn", "yyyy", "yyyy-mm", "yyyy-mm-dd", "START..END")
FORMS_SENTENCE = ("period: " + ", ".join(FORMS[:-1]) + " or START..END (dates, END included)")
"""The accepted forms in one line, for a tool description and for the error."""


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


_FQ = re.compile(r"^fy(\d{4})-?q([1-4])$")
_FY = re.compile(r"^fy(\d{4})$")
_CQ = re.compile(r"^(\d{4})-?q([1-4])$")
_YEAR = re.compile(r"^(\d{4})$")
_MONTH = re.compile(r"^(\d{4})-(\d{1,2})$")
_LAST_N = re.compile(r"^(?:last|past|trailing)_(\d{1,4})_days?$")


def _words(text: str) -> str:
    """'Last Quarter', 'last-quarter', 'last 30 days' -> 'last_quarter', 'last_30_days'; a
    code (FY2027-Q1, 2026-07) keeps its hyphens."""
    t = text.strip().lower()
    if re.match(r"^(fy)?\d", t):
        return re.sub(r"\s+", "", t)
    return re.sub(r"[\s\-_]+", "_", t)


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
        found = resolve(default, today, fiscal, default=None, timezone=timezone)
        assert found is not None
        return Window(found.start, found.end, found.calendar, "default", found.label, timezone)
    if ".." in given:
        return _range(given, timezone)
    word = _words(given)
    kind = "fiscal" if fiscal else "calendar"

    def win(start: dt.date, end: dt.date, label: str | None = None,
            calendar: str = "calendar") -> Window:
        return Window(start, end, calendar, given, label, timezone)

    if word == "today":
        return win(today, today + dt.timedelta(days=1), today.isoformat())
    if word == "yesterday":
        day = today - dt.timedelta(days=1)
        return win(day, today, day.isoformat())
    if word in ("this_week", "last_week"):
        monday = today - dt.timedelta(days=today.weekday())
        if word == "last_week":
            monday -= dt.timedelta(days=7)
        return win(monday, monday + dt.timedelta(days=7), f"week of {monday.isoformat()}")
    if word in ("this_month", "last_month"):
        first = _add_months(today.replace(day=1), -1 if word == "last_month" else 0)
        return win(first, _add_months(first, 1), f"{first:%Y-%m}")
    if word in ("this_quarter", "last_quarter"):
        start, label = _quarter_of(today, fiscal)
        if word == "last_quarter":
            start, label = _quarter_of(_add_months(start, -3), fiscal)
        return win(start, _add_months(start, 3), label, kind)
    if word in ("this_year", "last_year"):
        start, label = _year_of(today, fiscal)
        if word == "last_year":
            start, label = _year_of(_add_months(start, -12), fiscal)
        return win(start, _add_months(start, 12), label, kind)
    m = _LAST_N.match(word)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= 3660:
            raise PeriodError(f"period {given!r}: N must be between 1 and 3660 days")
        end = today + dt.timedelta(days=1)  # today included, as a trailing window reads
        return win(end - dt.timedelta(days=n), end, f"last {n} days")
    m = _FQ.match(word)
    if m:
        if fiscal is None:
            raise PeriodError(f"period {given!r} is fiscal, but this metric has no fiscal "
                              "calendar: use yyyy-Qn for a calendar quarter")
        p = quarter(f"FY{m.group(1)}-Q{m.group(2)}", fiscal.start_month, fiscal.year_named_by)
        return win(p.start, p.end, p.label, "fiscal")
    m = _FY.match(word)
    if m:
        if fiscal is None:
            raise PeriodError(f"period {given!r} is fiscal, but this metric has no fiscal "
                              "calendar: use yyyy for a calendar year")
        start = fiscal_year_start(int(m.group(1)), fiscal.start_month, fiscal.year_named_by)
        return win(start, _add_months(start, 12), f"FY{m.group(1)}", "fiscal")
    m = _CQ.match(word)
    if m:
        start = dt.date(int(m.group(1)), 3 * (int(m.group(2)) - 1) + 1, 1)
        return win(start, _add_months(start, 3), f"{m.group(1)}-Q{m.group(2)}")
    m = _YEAR.match(word)
    if m:
        start = dt.date(int(m.group(1)), 1, 1)
        return win(start, _add_months(start, 12), m.group(1))
    m = _MONTH.match(word)
    if m and 1 <= int(m.group(2)) <= 12:
        start = dt.date(int(m.group(1)), int(m.group(2)), 1)
        return win(start, _add_months(start, 1), f"{start:%Y-%m}")
    one = _date(word)
    if one is not None:
        return win(one, one + dt.timedelta(days=1), one.isoformat())
    raise PeriodError(f"period {given!r} is not recognised; {FORMS_SENTENCE}")


def _range(given: str, timezone: str) -> Window:
    left, _, right = given.partition("..")
    start, last = _date(left.strip()), _date(right.strip())
    if start is None or last is None:
        raise PeriodError(f"period {given!r}: START..END takes two dates YYYY-MM-DD "
                          "(END included)")
    if last < start:
        raise PeriodError(f"period {given!r}: END is before START")
    return Window(start, last + dt.timedelta(days=1), "calendar", given,
                  f"{start.isoformat()}..{last.isoformat()}", timezone)


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


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
