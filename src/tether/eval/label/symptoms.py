"""Trace symptoms of the entity, structural and temporal classes (semantic ones come from the
fields and definition scorers, policy ones from the policy scorer, stale data from freshness).

entity: an identifier argument (or a SQL equality on an identifier column) whose value fits
another identifier scheme's pattern than the one the argument or column carries; an empty
result followed by a negative answer the gold contradicts.
structural: an aggregate over a table's column after a join to a table that repeats its rows
(the join keys do not cover a unique key of the other side); a next_cursor never followed by a
call with that cursor; a USD_cents column compared or added to a USD one; an answer off from
gold by a factor of 100.
temporal: a date filter on a time column other than the metric's; a window that is not the
question's (a fiscal window computed on calendar quarters said so); a fiscal period argument
for another period.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from tether.context.calendar import quarter
from tether.eval.label.answer import is_number
from tether.eval.label.calls import CallView, is_metadata_tool
from tether.eval.label.sqlshape import NOT_CONSTANT
from tether.eval.label.work import Finding, Work

_NEGATIVE = re.compile(r"\b(?:no|none|zero|nothing|not any|0|did not find|couldn't find|"
                       r"could not find|there are no|there were no)\b", re.I)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_PERIOD = re.compile(r"^FY\d{4}-Q[1-4]$")


# --- entity --------------------------------------------------------------------------------------


def _schemes_fitting(work: Work, value: str) -> list[str]:
    return sorted(n for n, p in work.ctx.schemes.items() if p.search(value))


def _id_mismatch(work: Work, declared: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    fits = _schemes_fitting(work, value)
    if fits and declared not in fits:
        return fits[0]
    return None


def _negative_answer(work: Work) -> bool:
    t = work.trace
    if t.answer is not None:
        return t.answer in (0, [], "") or (is_number(t.answer) and float(t.answer) == 0)
    return bool(_NEGATIVE.search(t.final_answer or ""))


def entity(work: Work) -> Finding:
    f = Finding()
    ctx = work.ctx
    for c in work.calls:
        for arg, value in c.call.arguments.items():
            if arg in c.sql_arguments:
                continue
            mapped = (c.tool.arguments or {}).get(arg, ())
            declared = c.tool.canonical_ids.get(arg) or (
                ctx.identifiers.get(mapped[0]) if len(mapped) == 1 else None)
            other = _id_mismatch(work, declared, value) if declared else None
            if other:
                f.symptom("entity", f"{c.label}: {arg}={value!r} is a {other} value, but the "
                          f"argument takes {declared}")
        for a in c.sql:
            for cmp in a.shape.comparisons:
                declared = ctx.identifiers.get(cmp.field)
                if not declared or cmp.op not in ("eq", "in", "neq", "like"):
                    continue
                for o in cmp.operands:
                    value = a.constant(o)
                    other = _id_mismatch(work, declared, value)
                    if other:
                        f.symptom("entity", f"{c.label}: {cmp.field} ({declared}) compared with "
                                  f"{value!r}, a {other} value")
    gold = work.gold.answer
    gold_empty = gold in ([], "", None) or (is_number(gold) and float(gold) == 0)
    if work.values.get("correct") is False and not gold_empty and _negative_answer(work):
        for c in work.ok_calls():
            if c.row_count() == 0 and not is_metadata_tool(ctx, c.tool):
                f.symptom("entity", f"{c.label} returned no rows and the answer took that as a "
                          "true negative")
    return f


# --- structural ----------------------------------------------------------------------------------


def structure(work: Work) -> Finding:
    f = Finding()
    calls = work.calls
    for c in work.ok_calls():
        for a in c.sql:
            for text in a.shape.fanout:
                f.symptom("structural", f"{c.label}: {text}")
            for text in a.shape.unit_mix:
                f.symptom("structural", f"{c.label}: cents compared to dollars: {text}")
    for i, c in enumerate(calls):
        cursor = c.next_cursor() if c.ok else None
        if cursor and not any(later.call.name == c.call.name
                              and later.call.arguments.get("cursor") == cursor
                              for later in calls[i + 1:]):
            f.symptom("structural", f"{c.label} returned next_cursor and no later call followed "
                      "it")
    n, g = work.scratch.get("answer_number"), work.gold.answer
    if work.values.get("correct") is False and n is not None and is_number(g) and g:
        slack = max(work.gold.tolerance, 0.005 * abs(float(g)))
        if abs(n * 100 - g) <= slack or abs(n / 100 - g) <= slack:
            f.symptom("structural", f"the answer {n:g} is off from {g!r} by a factor of 100: "
                      "cents compared to dollars")
    return f


# --- temporal ------------------------------------------------------------------------------------


def expected_time_fields(work: Work) -> set[str]:
    """The time columns the governed metric is defined on (else the required time fields)."""
    ctx, config = work.ctx, work.ctx.config
    term = work.scratch.get("gold_term")
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
    for arg, mapped in (c.tool.arguments or {}).items():
        if not mapped or not set(mapped) <= times:
            continue
        value = c.call.arguments.get(arg)
        if value is None:
            # left out, the tool used its default: the result says which period that was
            shown = {str(r[arg]) for r in c.rows() or [] if r.get(arg) is not None}
            if len(shown) != 1 or not _PERIOD.match(next(iter(shown))):
                continue
            value = next(iter(shown))
        op = "gte" if arg.endswith("_from") else "lt" if arg.endswith("_to") else \
            "period" if len(mapped) > 1 or _PERIOD.match(str(value)) else "eq"
        out += [(m, op, value) for m in mapped]
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


def _period(work: Work, c: CallView, label: str) -> tuple[dt.date, dt.date] | None:
    config = work.ctx.config
    if config is None:
        return None
    cal_name = next((config.metrics[m].calendar for m in c.tool.metrics if m in config.metrics),
                    None)
    cal = config.calendars.get(cal_name or "")
    if cal is None:
        return None
    try:
        p = quarter(label, cal.start_month, cal.year_named_by)
    except ValueError:
        return None
    return p.start, p.end - dt.timedelta(days=1)


def timing(work: Work) -> Finding:
    f = Finding()
    expected = expected_time_fields(work)
    window = work.gold.window
    seen_window, offs = False, []
    wrong_column, right_column = False, False
    for c in work.ok_calls():
        filters = _filters(work, c)
        if expected:
            right_column = right_column or any(x in expected for x, _, _ in filters)
            for fld in sorted({x for x, _, _ in filters if x not in expected}):
                wrong_column = True
                f.symptom("temporal", f"{c.label}: date filter on {fld}, not the metric's time "
                          f"column {', '.join(sorted(expected))}")
        if window is None:
            continue
        for _, op, value in filters:
            if op == "period":
                span = _period(work, c, str(value))
                if span is not None:
                    seen_window = seen_window or span == (window.start, window.end)
                    if span != (window.start, window.end):
                        offs.append(f"{c.label}: period {value} is {span[0]}..{span[1]}")
        lo, hi = _bounds(filters, expected, _end_fields(work))
        if lo is not None and hi is not None:
            if (lo, hi) == (window.start, window.end):
                seen_window = True
            elif window.calendar == "fiscal" and _calendar_quarter(lo, hi):
                offs.append(f"{c.label}: fiscal window computed as calendar ({lo}..{hi})")
            else:
                offs.append(f"{c.label}: window {lo}..{hi}")
    # what makes the case ungrounded: no call used the governed time column or the window
    work.scratch["time_wrong"] = (wrong_column and not right_column) or bool(offs and not
                                                                          seen_window)
    if window is not None and offs and not seen_window:
        for text in dict.fromkeys(offs):
            f.symptom("temporal", f"{text}; the question's {window.calendar} window is "
                      f"{window.start}..{window.end}")
    return f
