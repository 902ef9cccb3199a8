"""Time held as a number or as text: the format a column writes it in, read and bounded.

A time column is usually a timestamp or a date. Many real tables hold time otherwise: a season
as an integer year (``2010``), a month as ``201005``, a day as ``20100501``, seconds since 1970,
or a date as text (``2010-05-01``, ``05/01/2010``, a year as ``'1995'``). tether.yaml says so
with a format in place of the time zone (``time_columns: {season: "%Y"}``); this module knows
what each format holds (its grain), turns a window into the values a statement compares the
column with, and reads one value back as a time. Pure: the standard library only.

Formats: ``%Y``, ``%Y%m``, ``%Y%m%d`` and ``%s`` on integer columns; on text, any strftime
format made of ``%Y %m %d %H %M %S`` (and ``%b``/``%B`` month names) with separators. A text
format whose fields run from the year down, zero-padded, sorts as time does (``%Y-%m-%d``,
``%Y%m%d``, ``%Y``): it is compared as text, so an index on it still serves. Any other (``%m/%d/%Y``)
is parsed in the engine before it is compared.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

INTEGER_FORMATS = ("%Y", "%Y%m", "%Y%m%d", "%s")
"""Formats an integer column may hold time in: years, year-months, dates, seconds since 1970."""

_FIELDS = re.compile(r"%[YmdHMSbB]")
_ORDERED = ("%Y", "%m", "%d", "%H", "%M", "%S")
GRAIN_DAYS = {"year": 365, "month": 28, "day": 1, "second": 0}
"""The shortest stretch of time one step of each grain spans, in days."""


class TimeFormatError(ValueError):
    """A window that the column's grain cannot hold (a quarter of a column of years)."""


def is_format(value: str) -> bool:
    """Whether a time_columns value is a format (it has a ``%``), not a time zone name."""
    return "%" in value


def problem(fmt: str, kind: str | None) -> str | None:
    """Why ``fmt`` cannot be a time format of a column of ``kind`` (None when it can; a kind
    of None: of any column that may hold one)."""
    if kind is None and fmt in INTEGER_FORMATS:
        return None
    if kind == "integer":
        return None if fmt in INTEGER_FORMATS else (
            f"{fmt!r} is not a format an integer column holds time in: use "
            + ", ".join(INTEGER_FORMATS))
    if kind not in (None, "string"):
        return (f"a {kind} column holds time itself: give its time zone (e.g. UTC), "
                "not a format")
    if fmt == "%s":
        return "'%s' (seconds since 1970) is a format of integer columns"
    fields = _FIELDS.findall(fmt)
    if "%Y" not in fields or len(fields) != len(set(fields)):
        return f"{fmt!r} needs %Y once (and each of %m %d %H %M %S at most once)"
    rest = _FIELDS.sub("", fmt)
    if "%" in rest:
        return f"{fmt!r} has a field other than %Y %m %d %H %M %S %b %B"
    try:
        dt.datetime(2001, 2, 3, 4, 5, 6).strftime(fmt)
    except ValueError as e:
        return f"{fmt!r}: {e}"
    return None


def grain(fmt: str) -> str:
    """The finest time ``fmt`` tells: year, month, day or second."""
    if fmt == "%s" or any(f in fmt for f in ("%H", "%M", "%S")):
        return "second"
    if "%d" in fmt:
        return "day"
    if any(f in fmt for f in ("%m", "%b", "%B")):
        return "month"
    return "year"


def lexical(fmt: str) -> bool:
    """Whether text in ``fmt`` sorts as the times it holds do: fields from the year down, each
    zero-padded (``%Y-%m-%d``, ``%Y%m%d %H:%M``), and nothing after the last one."""
    fields = _FIELDS.findall(fmt)
    return (fields == list(_ORDERED[:len(fields)]) and not re.search(r"%[bB]", fmt)
            and fmt.endswith(fields[-1]))


def integer(fmt: str) -> bool:
    return fmt in INTEGER_FORMATS


def bounds(start: dt.datetime, end: dt.datetime, fmt: str, held_as: str, column: str,
           today: dt.date) -> tuple[object, object]:
    """The values a column in ``fmt`` (``held_as`` integer or text) is compared with for the
    window [start, end): years for ``%Y`` (2010, 2011), text for a text format, dates where
    the engine parses the text first, seconds for ``%s``. A window must start where the
    column's grain starts (1 January for years, the 1st for months) and end where one ends,
    unless it reaches past today (``since 2010``, ``YTD``: the unit under way counts).
    TimeFormatError otherwise, naming the column and what it takes."""
    g = grain(fmt)
    if g in ("year", "month"):
        start_ok = start.day == 1 and (g == "month" or start.month == 1)
        reaches = end.date() > today
        end_ok = reaches or (end.day == 1 and (g == "month" or end.month == 1))
        if not (start_ok and end_ok and start.time() == end.time() == dt.time()):
            took = ("whole years: yyyy, yyyy..yyyy, since yyyy, this_year, last_year, YTD"
                    if g == "year" else
                    "whole months: yyyy-mm, yyyy-mm..yyyy-mm, yyyy, this_month, last_month, "
                    "this_quarter, last_quarter, since yyyy-mm")
            raise TimeFormatError(
                f"{column} holds {g}s ({fmt}), so a period must be {took}; "
                f"{start.date().isoformat()}..{(end - dt.timedelta(days=1)).date().isoformat()} "
                f"starts or ends inside a {g}")
        if reaches and not (end.day == 1 and (g == "month" or end.month == 1)):
            end = _next(end, g)  # the unit under way counts
    if fmt == "%s":
        return int(start.timestamp()), int(end.timestamp())
    if held_as == "integer":
        return int(start.strftime(fmt)), int(end.strftime(fmt))
    if lexical(fmt):
        return start.strftime(fmt), end.strftime(fmt)
    if g == "second":  # parsed in the engine: compared as timestamps
        return start.replace(tzinfo=None), end.replace(tzinfo=None)
    return start.date(), end.date()


def _next(t: dt.datetime, g: str) -> dt.datetime:
    if g == "year":
        return t.replace(year=t.year + 1, month=1, day=1, hour=0, minute=0, second=0,
                         microsecond=0)
    month = t.month % 12 + 1
    return t.replace(year=t.year + (t.month == 12), month=month, day=1, hour=0, minute=0,
                     second=0, microsecond=0)


def to_time(value: object, fmt: str) -> dt.datetime | None:
    """One value of a column in ``fmt`` as the time it names (UTC; the first moment of its year
    or month); None when it is none."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if fmt == "%s":
            return dt.datetime.fromtimestamp(float(str(value)), dt.UTC)
        text = str(int(value)) if isinstance(value, int | float) and integer(fmt) else str(value)
        return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None


def label(when: dt.datetime, fmt: str) -> str:
    """A time as the column's grain says it: ``2020`` for years, ``2020-05`` for months, the
    date for days, ISO 8601 for finer."""
    return {"year": f"{when:%Y}", "month": f"{when:%Y-%m}",
            "day": when.date().isoformat()}.get(grain(fmt), when.isoformat())


def says(column: str, fmt: str) -> str:
    """What a column in ``fmt`` holds, for a description: "season holds years as %Y"."""
    if fmt == "%s":
        return f"{column} holds seconds since 1970, UTC"
    word = {"year": "years", "month": "months", "day": "dates", "second": "times"}[grain(fmt)]
    return f"{column} holds {word} as {fmt}"


# --- reading a format from the shape of a value ----------------------------------------------------

_ABBR = [calendar.month_abbr[i] for i in range(1, 13)]
_FULL = [calendar.month_name[i] for i in range(1, 13)]
_FIELD_RE = {
    "%Y": r"\d{4}",
    "%m": r"(0[1-9]|1[0-2])", "%d": r"(0[1-9]|[12]\d|3[01])",  # zero-padded
    "%H": r"([01]\d|2[0-3])", "%M": r"[0-5]\d", "%S": r"[0-5]\d",
    "%b": "(" + "|".join(_ABBR) + ")", "%B": "(" + "|".join(_FULL) + ")",
}
_SEPARATORS = frozenset({"-", "/", ".", " ", ", ", "_"})
_LOOSE = {"%m": r"(0?[1-9]|1[0-2])", "%d": r"(0?[1-9]|[12]\d|3[01])"}
"""Where a day or a month may be written without its zero (3/4/2011, Mar 3 2011): formats the
engine parses, so the width does not matter to the order."""


def guesses(value: str) -> list[str]:
    """The formats text like ``value`` could be written in, read from its shape: digit runs,
    month names and separators, a time of day after a space or ``T``. ``2011/03/03 04:05`` ->
    ``%Y/%m/%d %H:%M``; ``05/01/2010`` -> ``%m/%d/%Y`` and ``%d/%m/%Y`` (the values decide);
    ``Mar 3 2011`` -> ``%b %d %Y``; ``201005`` -> ``%Y%m``. None for a shape no date has."""
    m = re.fullmatch(r"(.+?)(?:([ T])(\d{1,2}:\d{2}(?::\d{2})?))?", value.strip())
    if m is None:
        return []
    day, joint, clock = m.group(1), m.group(2), m.group(3)
    tail = (joint + ("%H:%M:%S" if clock.count(":") == 2 else "%H:%M")) if clock else ""
    parts = re.findall(r"\d+|[A-Za-z]+|[^\dA-Za-z]+", day)
    fields, seps = parts[0::2], parts[1::2]
    named = any(f.isalpha() for f in fields)  # Apr 1, 2000: spaces and a comma may mix
    if any(x not in _SEPARATORS for x in seps) or (len(set(seps)) > 1 and not named):
        return []
    shapes = ["Y" if f.isdigit() and len(f) == 4 else "n" if f.isdigit() and len(f) <= 2
              else "b" if f[:3].title() in _ABBR and f.isalpha() else "?" for f in fields]
    if len(fields) == 1 and fields[0].isdigit():
        one = {4: ["%Y"], 6: ["%Y%m"], 8: ["%Y%m%d"]}.get(len(fields[0]), [])
        return [f + tail for f in one]
    name = next((("%B" if f.title() in _FULL and len(f) > 3 else "%b") for f, s in
                 zip(fields, shapes, strict=True) if s == "b"), "%b")
    orders: dict[str, list[tuple[str, ...]]] = {"Ynn": [("%Y", "%m", "%d")], "Yn": [("%Y", "%m")],
              "nnY": [("%m", "%d", "%Y"), ("%d", "%m", "%Y")], "nY": [("%m", "%Y")],
              "bnY": [(name, "%d", "%Y")], "nbY": [("%d", name, "%Y")],
              "Ybn": [("%Y", name, "%d")], "bY": [(name, "%Y")]}
    out = []
    for order in orders.get("".join(shapes), []):
        text = order[0] + "".join(s + f for s, f in zip(seps, order[1:], strict=True))
        out.append(text + tail)
    return out


def pattern(fmt: str) -> str:
    """The anchored regular expression every value written in ``fmt`` matches, strict on each
    field (months 01-12, days 01-31, hours 00-23), zero-padded where the text is compared as
    text (it must sort as time), the zero optional where the engine parses it."""
    fields = _LOOSE if not lexical(fmt) else {}
    out, i = "^", 0
    while i < len(fmt):
        if fmt[i] == "%" and fmt[i:i + 2] in _FIELD_RE:
            out += fields.get(fmt[i:i + 2], _FIELD_RE[fmt[i:i + 2]])
            i += 2
        else:  # a literal: escaped where it means something in a pattern (RE2 and POSIX
            out += "\\" + fmt[i] if fmt[i] in ".^$*+?()[]{}|\\" else fmt[i]  # alike)
            i += 1
    return out + "$"
