"""Running a metric: its measure and governed predicate over the period asked, cut by its
dimensions, under the caller's policy; cut into several rows, also its overall value computed
from the same statement without the cut."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tether.serve.answer import SHOWN, valued
from tether.serve.arguments import definition_products, known
from tether.serve.executor import Executor, jsonable, why_empty
from tether.serve.kinds import Answered, Call
from tether.serve.runners import Runner, register
from tether.toolgen.model import QueryPlan
from tether.toolgen.plan import compile_plan, resolve_window


def run(ex: Executor, call: Call) -> Answered:
    config, plan = ex.project.config, call.plan
    src = ex.source(plan.source)
    now = ex.now(call)
    query, params = compile_plan(plan, call.args, config, now, listing=False)
    assert isinstance(query, exp.Select)
    products = definition_products(call.definition)
    read = ex.reads(query)
    secured, policy_params = ex.secure(query, call.user)
    params.update(policy_params)
    text = src.render(secured)
    got = ex.fetch(src, text, params, plan.max_rows, known(call))
    rows = [dict(zip(got.names, map(jsonable, r), strict=True)) for r in got.rows]
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
    why_empty(out, call, config)
    evidence = ex.evidence(call, src, src.display(secured), params, read, as_of=products)
    if overall_sql:
        evidence = evidence.model_copy(update={"overall_sql": overall_sql})
    return Answered(out, evidence)


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
