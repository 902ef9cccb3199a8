"""unsupported: an answer whose value no successful tool result holds.

An agent that hits its turn limit after every call failed may still "answer" 100 or $1,234,567.
Such an answer is read from nothing the servers returned: the symptom ``unsupported`` and a
review reason say so, whatever the gold. A number is supported when some successful result
holds it as a value, as its row count, or as the sum of one of its columns (within half a
percent, and as cents or dollars of it); a text answer when some result's text contains it.
A refusal and a clarification carry no value and are never unsupported.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tether.eval.label.answer import DECLINE, is_number, numbers_in
from tether.eval.label.work import Finding, Work, rule

SLACK = 0.005


def _numbers(payload: Any, out: list[float]) -> None:
    if isinstance(payload, bool) or payload is None:
        return
    if is_number(payload):
        out.append(float(payload))
    elif isinstance(payload, str):
        out += [n.value for n in numbers_in(payload)]
    elif isinstance(payload, dict):
        for v in payload.values():
            _numbers(v, out)
    elif isinstance(payload, list):
        for v in payload:
            _numbers(v, out)


def _column_sums(rows: list[dict[str, Any]]) -> list[float]:
    sums: dict[str, float] = {}
    for r in rows:
        for k, v in r.items():
            if is_number(v) and not isinstance(v, bool):
                sums[k] = sums.get(k, 0.0) + float(v)
    return list(sums.values())


def held(work: Work) -> list[float]:
    """Every number the successful results hold, count or sum."""
    out: list[float] = []
    for c in work.ok_calls():
        _numbers(c.payload if c.payload is not None else c.call.text, out)
        rows = c.rows()
        if rows is not None:
            out.append(float(len(rows)))
            out += _column_sums(rows)
    return out


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SLACK, abs_tol=1e-9)


def supported(work: Work, value: float) -> bool:
    return any(_close(value, h) or _close(value * 100, h) or _close(value, h * 100)
               or _close(value, h / 100) for h in held(work))


@rule(writes={"symptoms"})
def support(work: Work) -> Finding:
    f = Finding()
    t = work.trace
    text = t.final_answer or ""
    ended_asking = bool(t.turns) and t.turns[-1].kind == "clarification"
    if ended_asking or (t.answer is None and not text.strip()):
        return f
    if DECLINE.search(text if not isinstance(t.answer, str) else t.answer):
        return f
    values: list[float] = []
    if is_number(t.answer):
        values = [float(t.answer)]
    else:
        source = t.answer if isinstance(t.answer, str) else text
        asked = {n.value for n in numbers_in(t.question)}
        values = [n.value for n in numbers_in(source) if n.value not in asked]
    if values:
        missing = [v for v in values if not supported(work, v)]
        if len(missing) == len(values):
            what = ", ".join(f"{v:g}" for v in missing[:3])
            f.symptom("unsupported", f"the answer's value {what} is in no successful result")
            f.review.append(f"unsupported answer: {what} appears in no successful tool result")
        return f
    blob = " ".join(json.dumps(c.payload, default=str) if c.payload is not None
                    else (c.call.text or "") for c in work.ok_calls()).lower()
    answer = (t.answer if isinstance(t.answer, str) else text).strip().lower()
    if answer and len(answer) <= 80 and answer not in blob and not work.ok_calls():
        f.symptom("unsupported", "the answer holds no value any successful result returned")
        f.review.append("unsupported answer: no tool call succeeded")
    return f
