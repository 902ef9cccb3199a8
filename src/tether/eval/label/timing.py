"""temporal: a date filter on a time column other than the metric's; a window that is not the
question's (a fiscal window computed on calendar quarters said so), read from the window the
call's evidence states (``window``: the one the server resolved and bound, whatever the column
holds time as: a year, text), else from the bounds the call's statement compared its time
columns with (a server that states none)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from tether.eval.label.calls import CallView
from tether.eval.label.definition import gold_term
from tether.eval.label.sql.shape import NOT_CONSTANT
from tether.eval.label.work import Finding, Work, rule

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


def expected_time_fields(work: Work) -> set[str]:
    """The time columns the governed metric is defined on (else the required time fields)."""
    ctx, config = work.ctx, work.ctx.config
    term = gold_term(work)
    out: set[str] = set()
    if config is not None and term:
        for m in config.metrics.values():
            if m.term == term:
                out |= {ctx.field(x) for x in (m.time, m.time_end) if x}
    if not out:
        out = {ctx.field(r) for r in work.gold.required_fields} & ctx.time_fields()
    return out


def _date(value: Any) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    m = _DATE.match(value) if isinstance(value, str) else None
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _filters(work: Work, c: CallView) -> list[tuple[str, str, Any]]:
    """(time field, op, value) for each date filter the call applied."""
    times = work.ctx.time_fields()
    out: list[tuple[str, str, Any]] = []
    for a in c.sql:
        for cmp in a.shape.comparisons:
            if cmp.field in times and cmp.other is None and cmp.clause in ("where", "join"):
                value = a.constant(cmp.operands[0]) if cmp.operands else NOT_CONSTANT
                out.append((cmp.field, cmp.op, value))
    return out


def _end_fields(work: Work) -> set[str]:
    """Exclusive validity ends (a metric's time_end): ``end > d`` overlaps a window from d."""
    config = work.ctx.config
    if config is None:
        return set()
    return {work.ctx.field(m.time_end) for m in config.metrics.values() if m.time_end}


def _bounds(filters: list[tuple[str, str, Any]], fields: set[str], ends: set[str]
            ) -> tuple[dt.date | None, dt.date | None]:
    lows, highs = [], []
    for fld, op, value in filters:
        d = _date(value)
        if d is None or (fields and fld not in fields):
            continue
        date_only = isinstance(value, str) and len(value.strip()) == 10
        if op == "gte" or (op == "gt" and fld in ends):
            lows.append(d)
        elif op == "gt":
            lows.append(d + dt.timedelta(days=1) if date_only else d)
        elif op == "lt":
            highs.append(d - dt.timedelta(days=1))
        elif op == "lte":
            highs.append(d)
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _calendar_quarter(lo: dt.date, hi: dt.date) -> bool:
    if lo.day != 1 or lo.month not in (1, 4, 7, 10):
        return False
    nxt = dt.date(lo.year + (lo.month + 3 > 12), (lo.month + 2) % 12 + 1, 1)
    return hi == nxt - dt.timedelta(days=1)


@rule(writes={"time_wrong", "symptoms"})
def timing(work: Work) -> Finding:
    f = Finding()
    expected = expected_time_fields(work)
    window = work.gold.window
    seen_window, offs = False, []
    wrong_column, right_column = False, False
    for c in work.ok_calls():
        stated = c.evidence.window if c.evidence is not None else None
        if stated and stated.get("start") and stated.get("end"):
            # the server said which window it bound: read it, not the statement's literals
            fields = {work.ctx.field(x) for x in stated.get("columns") or []}
            first = dt.date.fromisoformat(str(stated["start"])[:10])
            last = dt.date.fromisoformat(str(stated["end"])[:10]) - dt.timedelta(days=1)
            filters = [(x, "gte", first.isoformat()) for x in sorted(fields)]
            filters += [(x, "lte", last.isoformat()) for x in sorted(fields)
                        if x not in _end_fields(work)]
        else:
            filters = _filters(work, c)
        if expected:
            right_column = right_column or any(x in expected for x, _, _ in filters)
            for fld in sorted({x for x, _, _ in filters if x not in expected}):
                wrong_column = True
                f.symptom("temporal", f"{c.label}: date filter on {fld}, not the metric's time "
                          f"column {', '.join(sorted(expected))}")
        if window is None:
            continue
        lo, hi = _bounds(filters, expected, _end_fields(work))
        if lo is not None and hi is not None:
            if (lo, hi) == (window.start, window.end):
                seen_window = True
            elif window.calendar == "fiscal" and _calendar_quarter(lo, hi):
                offs.append(f"{c.label}: fiscal window computed as calendar ({lo}..{hi})")
            else:
                offs.append(f"{c.label}: window {lo}..{hi}")
    # what makes the case ungrounded: no call used the governed time column or the window
    f.facts["time_wrong"] = (wrong_column and not right_column) or bool(offs and not seen_window)
    if window is not None and offs and not seen_window:
        for text in dict.fromkeys(offs):
            f.symptom("temporal", f"{text}; the question's {window.calendar} window is "
                      f"{window.start}..{window.end}")
    return f
