"""structural: an aggregate over a table's column after a join to a table that repeats its rows
(the join keys do not cover a unique key of the other side); a next_cursor never followed by a
call with that cursor; a USD_cents column compared or added to a USD one; an answer off from gold
by a factor of 100."""

from __future__ import annotations

from tether.eval.label.answer import is_number
from tether.eval.label.work import Finding, Work, rule


@rule(reads={"correct", "answer_number"}, writes={"symptoms"})
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
    n, g = work.facts.answer_number, work.gold.answer
    if work.values.get("correct") is False and n is not None and is_number(g) and g:
        slack = max(work.gold.tolerance, 0.005 * abs(float(g)))
        if abs(n * 100 - g) <= slack or abs(n / 100 - g) <= slack:
            f.symptom("structural", f"the answer {n:g} is off from {g!r} by a factor of 100: "
                      "cents compared to dollars")
    return f


