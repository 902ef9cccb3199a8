"""freshness_pass: every data result's as_of within gold.freshness_bound_hours of the run, and
no as_of the source contradicts.

The run's time is the project's fixed clock when tether.yaml sets one (the data, the server and
the case all live at that "now"), else ``trace.started_at``. as_of is read from the structured
result, the result's ``_meta`` (or its ``tether/context``), or a JSON text result. A data result
with no as_of fails: an agent that cannot say how old its data is has failed the user. Results
the server refused carry no data and are skipped, as are catalog calls (evidence with no
statement; without evidence, list_tables, describe_table and the like: see
``LabelContext.metadata_tools``). Null when the case has no bound.

as_of is a server's claim; where the result's evidence names the statement that produced it
(``as_of_sql``), the labeller runs that statement on the source: an as_of later than the
source's newest row, or later than the run, is a temporal symptom and fails freshness, with or
without a bound. freshness does not decide ``grounded``; report.json counts the cases that are
correct, grounded and fresh apart.
"""

from __future__ import annotations

import datetime as dt

from tether.eval.label.calls import CallView, is_metadata, parse_time
from tether.eval.label.sql.sourcerun import run_evidence
from tether.eval.label.work import Finding, Work, rule

FUTURE_SLACK = dt.timedelta(minutes=5)


def run_time(work: Work) -> dt.datetime:
    config = work.ctx.config
    if config is not None and config.clock is not None:
        return config.clock
    t = work.trace.started_at
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def checked_as_of(work: Work, c: CallView, now: dt.datetime, f: Finding) -> str | None:
    """What is wrong with the call's as_of claim: later than the run, or (where its evidence
    names the statement behind it) than the source's newest row; None when it holds or cannot
    be checked (a reason for a human goes to ``f``)."""
    as_of, _ = c.as_of()
    if as_of is not None and as_of > now + FUTURE_SLACK:
        return f"{c.label}: as_of {as_of.isoformat()} is later than the run ({now.isoformat()})"
    ev = c.evidence
    if as_of is None or ev is None or not ev.as_of_sql:
        return None
    got = run_evidence(work, ev, ev.as_of_sql)
    if isinstance(got, str):
        f.review.append(f"{c.label}: as_of could not be checked: {got}")
        return None
    newest = parse_time(got[0][0]) if got and got[0] else None
    if newest is None:
        return None
    if as_of > newest + dt.timedelta(seconds=1):
        return (f"{c.label}: as_of {as_of.isoformat()} is later than the source's newest row "
                f"({newest.isoformat()})")
    return None


@rule(writes={"freshness_pass", "symptoms"})
def freshness(work: Work) -> Finding:
    f = Finding()
    bound = work.gold.freshness_bound_hours
    now = run_time(work)
    untrue = [problem for c in work.ok_calls() if not is_metadata(work.ctx, c)
              for problem in [checked_as_of(work, c, now, f)] if problem]
    for problem in untrue:
        f.symptom("temporal", problem)
    if bound is None:
        f.values["freshness_pass"] = False if untrue else None
        return f
    limit = dt.timedelta(hours=bound)
    checked, passed = 0, not untrue
    for c in work.ok_calls():
        if is_metadata(work.ctx, c):
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

    if checked == 0:
        f.values["freshness_pass"] = None
        f.review.append("the case has a freshness bound but no data result to check")
        return f
    f.values["freshness_pass"] = passed
    return f
