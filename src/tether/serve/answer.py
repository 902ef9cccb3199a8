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

from tether.context.names import ref_column
from tether.serve.runners import runner
from tether.toolgen.model import QueryPlan

SHOWN = 8
"""Groups or metric rows a sentence names before it says how many more the rows hold."""


def sentence(plan: QueryPlan, result: dict[str, Any]) -> str:
    """The answer sentence of ``result`` (a tool's structured result): its kind's opening
    (serve/kinds.py), then how identifiers and interpreted arguments were read, the window,
    the definition applied, why it is empty and as_of."""
    kind = runner(plan.kind)
    if kind is not None and kind.whole:
        assert kind.opening is not None
        return kind.opening(plan, result)
    if kind is not None and kind.opening is not None:
        parts = [kind.opening(plan, result)]
    else:
        n = result.get("row_count")
        parts = [f"{n} row{'' if n == 1 else 's'}" if isinstance(n, int) else "Done"]
        if result.get("truncated"):
            parts.append("more follow (next_cursor)")
    for param, how in (result.get("identifiers") or {}).items():
        if how.get("resolved_through"):
            parts.append(f"{param} {how['given']} read as a {how['scheme']}, resolved through "
                         f"{how['resolved_through']}")
    for given, param in (result.get("interpreted") or {}).items():
        parts.append(f"argument {given} read as {param}")
    for value, param in (result.get("moved_values") or {}).items():
        parts.append(f"{value} read as a value of {param}")
    window = _window(result.get("window"), plan)
    if window:
        parts.append(window)
    if plan.definition:  # a governed metric's
        parts.append(f"definition applied: {plan.definition}")
    if result.get("empty_reason"):
        parts.append(str(result["empty_reason"]))
    basis = f" ({result['as_of_basis']})" if result.get("as_of_basis") else ""
    parts.append(f"as of {result['as_of']}{basis}" if result.get("as_of") else "as of: not known")
    return _capital("; ".join(p for p in parts if p)) + "."


def _window(window: Any, plan: QueryPlan) -> str | None:
    """The window in words, naming the column it bounds: "window 2026-07 on batch_day: ..."."""
    if not isinstance(window, dict):
        return None
    if not window.get("start"):
        return "no time window (every row)"
    label = window.get("label") or window.get("resolved_from")
    cal = window.get("calendar")
    cal = {"fiscal": "fiscal calendar", "calendar": "calendar"}.get(str(cal), cal)
    column = plan.window.column if plan.window else None
    on = f" on {ref_column(column)[1]}" if column else ""
    moved = str(window.get("resolved_from") or "")
    why = f" ({moved.removeprefix('default: ')})" if moved.startswith("default: ") else ""
    return (f"window {label}{why}{on}: {window['start']} to {window['end']} (end exclusive"
            + (f", {cal}" if cal else "") + f", {window.get('timezone') or 'UTC'})")


FIRST_KEYS = ("overall", "total_rows")
"""What a result says first: the metric over every row a cut splits, and how many rows match in
all (a model asked "how many" copies the first count it reads; ``row_count`` is the page's)."""


def rows_last(result: dict[str, Any]) -> dict[str, Any]:
    """The result with :data:`FIRST_KEYS` first and its rows after everything that says what
    they are (counts, window, as_of): a client that shows the start of a long result, as many
    do, shows the answer to "how many" and not only the first rows of a page."""
    head = {k: result[k] for k in FIRST_KEYS if k in result}
    tail = {"rows": result["rows"]} if "rows" in result else {}
    return head | {k: v for k, v in result.items() if k not in head and k not in tail} | tail


_CENTS = re.compile(r"([A-Z]{3})_cents")


def valued(value: Any, unit: str | None, row: dict[str, Any]) -> str:
    """A value with its unit; an amount in cents in its currency's units first, then as stored
    (the division a question in dollars would otherwise leave to the model, and the number read
    first is the one a reader takes)."""
    said = _unit(unit, row)
    m = _CENTS.fullmatch(said.strip())
    if m and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value / 100:.2f} {m.group(1)} (= {_number(value)}{said})"
    return f"{_number(value)}{said}"


def measure_words(key: str) -> str:
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
