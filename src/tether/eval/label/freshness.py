"""freshness_pass: every data result's as_of within gold.freshness_bound_hours of the run.

The run's time is the project's fixed clock when tether.yaml sets one (the data, the server and
the case all live at that "now"), else ``trace.started_at``. as_of is read from the structured
result, the result's ``_meta`` (or its ``tether/context``), or a JSON text result. A data result
with no as_of fails: an agent that cannot say how old its data is has failed the user. Results
the server refused carry no data and are skipped, as are catalog tools (list_tables,
describe_table; see ``LabelContext.metadata_tools``). Null when the case has no bound.
"""

from __future__ import annotations

import datetime as dt

from tether.eval.label.calls import is_metadata_tool
from tether.eval.label.work import Finding, Work

FUTURE_SLACK = dt.timedelta(minutes=5)


def run_time(work: Work) -> dt.datetime:
    config = work.ctx.config
    if config is not None and config.clock is not None:
        return config.clock
    t = work.trace.started_at
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def freshness(work: Work) -> Finding:
    f = Finding()
    bound = work.gold.freshness_bound_hours
    if bound is None:
        f.values["freshness_pass"] = None
        return f
    now = run_time(work)
    limit = dt.timedelta(hours=bound)
    checked, passed = 0, True
    for c in work.ok_calls():
        if is_metadata_tool(work.ctx, c.tool):
            continue
        checked += 1
        as_of, why = c.as_of()
        if as_of is None:
            passed = False
            f.symptom("temporal", f"{c.label}: {why} (no freshness metadata)")
            continue
        age = now - as_of
        if age > limit:
            passed = False
            f.symptom("temporal", f"{c.label}: stale data, as_of {as_of.isoformat()} is "
                      f"{age.total_seconds() / 3600:.1f} h old (bound {bound:g} h)")
        elif age < -FUTURE_SLACK:
            f.review.append(f"{c.label}: as_of {as_of.isoformat()} is after the run time "
                            f"{now.isoformat()}")
    if checked == 0:
        f.values["freshness_pass"] = None
        f.review.append("the case has a freshness bound but no data result to check")
        return f
    f.values["freshness_pass"] = passed
    return f
