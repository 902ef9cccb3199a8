"""grounded and the primary failure class.

grounded (correct for the right reason) is True when the answer is correct and every reason
holds: grounding recall is 1 (or the case names no required field), no forbidden field was
used, definition_match is not False, the time was right (some call filtered on the metric's
time column if any call filtered time at all, and some call's window was the question's if any
window could be read) and no call leaked (policy violations 0). Freshness stands apart: it has
its own rate and temporal symptoms, and report.json counts ``correct_grounded_and_fresh``.
Any reason failing makes it False whatever the answer; all reasons holding with correct unknown
leave it null.

A case that is not correct or not grounded gets one primary class: the first class in
``PRECEDENCE`` with a symptom in the trace. Policy comes first (a leak blocks a release whatever
else went wrong), then a move of a status no action allows (a write case's), then the classes
in the order their fixes live: entity and semantic (the tool definition), structural (the data
product), temporal (the result contract). Every symptom is
listed in ``symptoms``, primary or not.
"""

from __future__ import annotations

from tether.eval.label.work import Finding, Work, rule

PRECEDENCE: tuple[str, ...] = ("policy", "transition", "entity", "semantic", "structural",
                               "temporal")


def reasons_failing(work: Work) -> list[str]:
    v = work.values
    out = []
    recall = v.get("grounding_recall")
    if recall is not None and recall < 1:
        out.append("recall")
    if work.facts.forbidden_used:
        out.append("forbidden")
    if v.get("definition_match") is False:
        out.append("definition")
    if work.facts.time_wrong:
        out.append("time")
    if v.get("policy_violations", 0):
        out.append("policy")
    return out


@rule(reads={"correct", "grounding_recall", "forbidden_used", "definition_match", "time_wrong",
             "policy_violations", "symptoms"}, writes={"grounded", "failure_class"})
def verdict(work: Work, precedence: tuple[str, ...] = PRECEDENCE) -> Finding:
    f = Finding()
    correct = work.values.get("correct")
    failing = reasons_failing(work)
    grounded: bool | None = False if failing or correct is False else correct
    f.values["grounded"] = grounded
    failed = correct is False or grounded is False
    cls = None
    if failed:
        present = {c for c, _ in work.symptoms}
        cls = next((c for c in precedence if c in present), None)
        if cls is None:
            f.review.append("not correct and no recognised symptom: classify by hand")
    f.values["failure_class"] = cls
    return f
