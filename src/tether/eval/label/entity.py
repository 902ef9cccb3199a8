"""entity: an equality on an identifier column, in what a call ran (its evidence's statement or
its SQL), whose value fits another identifier scheme's pattern than the one the column carries;
an empty result followed by a negative answer the gold contradicts."""

from __future__ import annotations

import re
from typing import Any

from tether.eval.label.answer import is_number
from tether.eval.label.calls import is_metadata
from tether.eval.label.work import Finding, Work, rule

_NEGATIVE = re.compile(r"\b(?:no|none|zero|nothing|not any|0|did not find|couldn't find|"
                       r"could not find|there are no|there were no)\b", re.I)


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


@rule(reads={"correct"}, writes={"symptoms"})
def entity(work: Work) -> Finding:
    f = Finding()
    ctx = work.ctx
    for c in work.calls:
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
            if c.row_count() == 0 and not is_metadata(ctx, c):
                f.symptom("entity", f"{c.label} returned no rows and the answer took that as a "
                          "true negative")
    return f


