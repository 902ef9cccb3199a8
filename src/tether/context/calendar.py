"""Calendars and fiscal periods: pure date arithmetic, no I/O."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_PERIOD = re.compile(r"^FY(\d{4})-Q([1-4])$")
PERIOD_PATTERN = _PERIOD.pattern


@dataclass(frozen=True)
class Period:
    label: str
    start: dt.date
    end: dt.date  # exclusive


def _add_months(d: dt.date, months: int) -> dt.date:
    m = d.month - 1 + months
    return dt.date(d.year + m // 12, m % 12 + 1, 1)


def fiscal_year_start(fy: int, start_month: int, named_by: str = "end") -> dt.date:
    """First day of fiscal year ``fy`` (named by the calendar year it ends in, or starts in)."""
    if start_month == 1:
        return dt.date(fy, 1, 1)
    return dt.date(fy - 1 if named_by == "end" else fy, start_month, 1)


def quarter(label: str, start_month: int, named_by: str = "end") -> Period:
    """``FY2027-Q1`` -> its dates. Raises ValueError with what is allowed."""
    m = _PERIOD.match(label)
    if not m:
        raise ValueError(f"{label!r} is not a fiscal quarter: write FYyyyy-Qn, e.g. FY2027-Q1")
    fy, q = int(m.group(1)), int(m.group(2))
    start = _add_months(fiscal_year_start(fy, start_month, named_by), 3 * (q - 1))
    return Period(label, start, _add_months(start, 3))


def quarter_of(day: dt.date, start_month: int, named_by: str = "end") -> Period:
    """The fiscal quarter containing ``day``."""
    months_in = (day.month - start_month) % 12
    fy_start_year = day.year if day.month >= start_month else day.year - 1
    fy = fy_start_year + 1 if (named_by == "end" and start_month != 1) else fy_start_year
    q = months_in // 3 + 1
    return quarter(f"FY{fy}-Q{q}", start_month, named_by)
