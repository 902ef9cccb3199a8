"""Running a metric: its measure and governed predicate over the period asked, cut by its
dimensions, under the caller's policy; cut into several rows, also its overall value computed
from the same statement without the cut."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlglot import exp

from tether.context.periods import resolve
from tether.serve.answer import SHOWN, valued
from tether.serve.arguments import definition_products, known
from tether.serve.executor import Executor, json_rows, jsonable, why_empty
from tether.serve.kinds import Answered, Call
from tether.serve.runners import Runner, register
from tether.toolgen.model import QueryPlan
from tether.toolgen.plan import compile_plan, fiscal_calendar, qualified, resolve_window


def run(ex: Executor, call: Call) -> Answered:
    config, plan = ex.project.config, call.plan
    src = ex.source(plan.source)
    now = ex.now(call)
    moved = _latest_with_data(ex, call, src, now)
    if moved is not None:  # this quarter holds nothing yet: the latest quarter that does
        call = dataclasses.replace(call, args={**call.args, "period": moved[0]})
    query, params = compile_plan(plan, call.args, config, now, listing=False)
    assert isinstance(query, exp.Select)
    products = definition_products(call.definition)
    read = ex.reads(query)
    secured, policy_params = ex.secure(query, call.user)
    params.update(policy_params)
    text = src.render(secured)
    got = ex.fetch(src, text, params, plan.max_rows, known(call))
    rows = json_rows(got.names, got.rows)
    window = resolve_window(plan, call.args, config, now)
    if window is not None:
        for r in rows:
            r["period"] = window.label
    out = ex.result(call, rows, products, paged=False)
    overall_sql = None
    if plan.group_by and len(rows) > 1:
        # the metric over every row the cut splits (a ratio or a distinct count is never
        # added up from its parts): "our win rate" needs no arithmetic by the model
        # (the secured statement, copied: the policy is already in it, with its params)
        whole = secured.copy()
        assert isinstance(whole, exp.Select)
        whole.set("expressions", [e for e in whole.expressions
                                  if e.alias_or_name not in plan.group_by])
        for part in ("group", "order", "limit"):
            whole.set(part, None)
        got_whole = ex.fetch(src, src.render(whole), params, 1, known(call))
        if got_whole.rows:
            # first in the result too: a client that shows the start of a long result (many
            # cut it) shows the value the question most often asks for
            out = {"overall": dict(zip(got_whole.names, map(jsonable, got_whole.rows[0]),
                                       strict=True))} | out
            overall_sql = src.display(whole)
    if window is not None:
        out["window"] = window.to_json()
        if moved is not None:
            out["window"]["resolved_from"] = moved[1]
    why_empty(out, call, config)
    evidence = ex.evidence(call, src, src.display(secured), params, read, as_of=products)
    if overall_sql:
        evidence = evidence.model_copy(update={"overall_sql": overall_sql})
    return Answered(out, evidence)


def _latest_with_data(ex: Executor, call: Call, src: Any, now: dt.datetime
                      ) -> tuple[str, str] | None:
    """(period, why) when the call leaves a period metric's ``period`` to its default (this
    quarter) and the newest row the caller may read is older than this quarter: the quarter
    of that row, and the words that say the default moved. A quarter with no rows reads as a
    zero, and a zero for "this quarter" on data that stopped earlier is no answer. None
    otherwise (a period given, rows this quarter, no rows at all, time held in a format)."""
    plan, config = call.plan, ex.project.config
    w = plan.window
    if (w is None or w.kind != "period" or w.column is None or w.format is not None
            or call.args.get("period") not in (None, "")):
        return None
    default = resolve_window(plan, {}, config, now)
    if default is None:
        return None
    whole = plan.model_copy(update={"window": None})
    query, params = compile_plan(whole, {k: v for k, v in call.args.items() if k != "period"},
                                 config, now, listing=False)
    assert isinstance(query, exp.Select)
    # a spell [time, time_end) reaches as far as its end; one with no end is still open
    ends = ([exp.Max(this=qualified(w.end_column)).as_("ended"),
             exp.Sub(this=exp.Count(this=exp.Star()),
                     expression=exp.Count(this=qualified(w.end_column))).as_("open")]
            if w.end_column else [])
    query.set("expressions", [exp.Max(this=qualified(w.column)).as_("latest"), *ends])
    for part in ("group", "order", "limit"):
        query.set(part, None)
    secured, policy_params = ex.secure(query, call.user)
    got = ex.fetch(src, src.render(secured), params | policy_params, 1, known(call))
    if not got.rows or (w.end_column and got.rows[0][2]):
        return None
    days = [d for d in map(_day, got.rows[0][:2]) if d is not None]
    if w.end_column and len(days) == 2:  # the end is exclusive: the spell's last day before it
        days[1] -= dt.timedelta(days=1)
    latest = max(days, default=None)
    if latest is None or latest >= default.start:
        return None
    there = resolve("this_quarter", latest, fiscal_calendar(config, w.calendar))
    if there is None or not there.label:
        return None
    return there.label, (f"default: the latest quarter with rows you may see; this quarter, "
                         f"{default.label}, has none")


def _day(value: Any) -> dt.date | None:
    """The UTC day of a time value an engine returned (a date, a datetime, ISO text)."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo is None else value.astimezone(dt.UTC)).date()
    return value if isinstance(value, dt.date) else None


def metric_words(plan: QueryPlan, result: dict[str, Any]) -> str:
    rows, units = result.get("rows") or [], result.get("units") or {}
    measures = [k for k in (rows[0] if rows else {}) if k not in plan.group_by and k != "period"]
    if not rows:
        return "No value"

    def values(r: dict[str, Any]) -> str:
        return ", ".join(f"{k} = {valued(r.get(k), units.get(k), r)}" for k in measures)

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
    # the overall values lead and no count of groups is said: a count of groups was read as the
    # answer, first ("In all (3 values of ...): won = 33 deals") and after the values too
    # ("In all: ..., won = 33 deals; by pipeline (3 values): ..." answered "3")
    head = f"In all: {values(overall)}; " if isinstance(overall, dict) else ""
    return head + f"by {dims}, each: " + "; ".join(named) + more


RUNNER = register(Runner("metric", run, opening=metric_words))
