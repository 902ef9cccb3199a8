"""The first line of every result: one plain sentence that states the answer.

A small model reads the first text item of a result before anything else. So it says, in words,
what the JSON beside it says: how many rows of how many matching (never a page reported as the
count), the value with its unit, the window used (its end exclusive, and said so), the governed
definition applied, why a result is empty, and how fresh the data is. It is made from the result
the server already built (nothing is queried again) and from the plan, so bare and grounded
tools say the same thing.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tether.toolgen.model import QueryPlan

SHOWN = 8
"""Groups or metric rows a sentence names before it says how many more the rows hold."""


def sentence(plan: QueryPlan, result: dict[str, Any]) -> str:
    """The answer sentence of ``result`` (a tool's structured result) for a plan's kind."""
    if plan.kind == "search":
        return _search(result)
    if plan.kind == "metric":
        parts = [_metric(plan, result)]
    elif plan.kind == "list" and result.get("aggregate"):
        parts = [_aggregate(result)]
    elif plan.kind == "list":
        parts = [_listing(result)]
    else:
        n = result.get("row_count")
        parts = [f"{n} row{'' if n == 1 else 's'}" if isinstance(n, int) else "Done"]
        if result.get("truncated"):
            parts.append("more follow (next_cursor)")
    for param, how in (result.get("identifiers") or {}).items():
        if how.get("resolved_through"):
            parts.append(f"{param} {how['given']} read as a {how['scheme']}, resolved through "
                         f"{how['resolved_through']}")
    window = _window(result.get("window"))
    if window:
        parts.append(window)
    if plan.kind == "metric" and plan.definition:
        parts.append(f"definition applied: {plan.definition}")
    if result.get("empty_reason"):
        parts.append(str(result["empty_reason"]))
    parts.append(f"as of {result['as_of']}" if result.get("as_of") else "as of: not known")
    return _capital("; ".join(p for p in parts if p)) + "."


def _search(result: dict[str, Any]) -> str:
    matches = result.get("matches") or []
    if not matches:
        return ("Nothing you may read matches these words; try other words (what a column "
                "means, a value, a glossary term).")
    named = []
    for m in matches:
        how = m.get("call", "")
        if m.get("with"):
            how += " with " + ", ".join(f"{k}={v}" for k, v in m["with"].items())
        named.append(f"{m.get('name')} ({m.get('kind')}; call {how})")
    best = matches[0]
    why = "; ".join(best.get("matched") or [])[:300]
    takes = ""
    if best.get("arguments") is not None:
        takes = (f" Its rows take the arguments {', '.join(best['arguments']) or 'none'} "
                 "(schemas under matches[0].arguments), inside `arguments`.")
    return (f"{len(matches)} match{'es' if len(matches) != 1 else ''}, best first: "
            f"{'; '.join(named)}. The best matched on {why}.{takes}")


def _listing(result: dict[str, Any]) -> str:
    shown, total = result.get("row_count", 0), result.get("total_rows")
    if not isinstance(total, int):
        return f"{shown} rows shown"
    if total == 0:
        return "0 matching rows"
    # the total first: a small model answers "how many" with the first number it reads, and a
    # page's count read as the total was the failure this sentence exists to prevent
    out = f"{total} matching rows in all; {shown} of {total} shown"
    if result.get("next_cursor"):
        out += " (the rest: next_cursor)"
    return out


def _aggregate(result: dict[str, Any]) -> str:
    agg, rows, units = result["aggregate"], result.get("rows") or [], result.get("units") or {}
    total = result.get("total_rows", 0)
    by = agg.get("count_by")
    measures = [k for k in rows[0] if k.startswith(("sum_", "average_"))] if rows else []
    if not by:  # one row: the totals over every matching row
        said = [f"{_measure_words(k)} {_valued(rows[0].get(k), units.get(k), rows[0])}"
                for k in measures] if rows else []
        return f"{total} matching rows" + (": " + ", ".join(said) if said else "")
    named = []
    for r in rows[:SHOWN]:
        values = ", ".join(f"{_measure_words(k)} {_valued(r.get(k), units.get(k), r)}"
                           for k in measures)
        named.append(f"{r.get(by)} {r.get('rows')}" + (f" ({values})" if values else ""))
    more = f", and {len(rows) - SHOWN} more values in rows" if len(rows) > SHOWN else ""
    return (f"{total} matching rows counted by {by}: " + ", ".join(named) + more)


def _metric(plan: QueryPlan, result: dict[str, Any]) -> str:
    rows, units = result.get("rows") or [], result.get("units") or {}
    measures = [k for k in (rows[0] if rows else {}) if k not in plan.group_by and k != "period"]
    if not rows:
        return "No value"

    def values(r: dict[str, Any]) -> str:
        return ", ".join(f"{k} = {_valued(r.get(k), units.get(k), r)}" for k in measures)

    if not plan.group_by:
        return values(rows[0])
    dims = ", ".join(plan.group_by)
    if len(rows) == 1:  # the values lead: no count of rows is read as the answer
        r = rows[0]
        return f"{dims} {', '.join(str(r.get(d)) for d in plan.group_by)}: {values(r)}"
    named = [f"{', '.join(str(r.get(d)) for d in plan.group_by)}: {values(r)}"
             for r in rows[:SHOWN]]
    more = f"; and {len(rows) - SHOWN} more rows" if len(rows) > SHOWN else ""
    overall = result.get("overall")
    head = (f"In all ({len(rows)} values of {dims}): {values(overall)}; " if isinstance(
        overall, dict) else "")
    return head + f"by {dims}: " + "; ".join(named) + more


def _window(window: Any) -> str | None:
    if not isinstance(window, dict):
        return None
    if not window.get("start"):
        return "no time window (every row)"
    label = window.get("label") or window.get("resolved_from")
    cal = window.get("calendar")
    cal = {"fiscal": "fiscal calendar", "calendar": "calendar"}.get(str(cal), cal)
    return (f"window {label}: {window['start']} to {window['end']} (end exclusive"
            + (f", {cal}" if cal else "") + f", {window.get('timezone') or 'UTC'})")


_CENTS = re.compile(r"([A-Z]{3})_cents")


def _valued(value: Any, unit: str | None, row: dict[str, Any]) -> str:
    """A value with its unit; an amount in cents also in its currency's units (the division a
    question in dollars would otherwise leave to the model)."""
    said = _unit(unit, row)
    text = f"{_number(value)}{said}"
    m = _CENTS.fullmatch(said.strip())
    if m and isinstance(value, (int, float)) and not isinstance(value, bool):
        text += f" (= {value / 100:.2f} {m.group(1)})"
    return text


def _measure_words(key: str) -> str:
    how, _, column = key.partition("_")
    return f"{'total' if how == 'sum' else 'average'} {column}"


def _unit(unit: str | None, row: dict[str, Any]) -> str:
    if not unit:
        return ""
    if "{" in unit:
        column = unit[unit.index("{") + 1:unit.index("}")]
        value = row.get(column)
        if value is None:
            return f" (unit from each row's {column})"
        unit = unit.replace("{" + column + "}", str(value))
    return f" {unit}"


def _number(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    return "null" if value is None else str(value)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
