"""Failure classes that repeat on one tool (from labelled runs): a page read as the count (a
next_cursor never followed, the answer wrong), an empty result taken as a true negative, a
refusal answered as a number. Each is a known misreading of the result with a known sentence
that prevents it; the note goes on the tool whose result was misread."""

from __future__ import annotations

from collections import defaultdict

from tether.eval.label.answer import is_number
from tether.learn.model import MIN_CASES, Proposal, Seen
from tether.learn.observe import CaseSeen, Listing, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal
from tether.learn.rules.runs import listing_of_call, symptoms

ADVICE: dict[str, tuple[str, str]] = {
    "page_as_count": ("returned next_cursor and no later call followed it",
                      "One call returns one page: total_rows counts every matching row and rows "
                      "holds only this page, so for how many, read total_rows (or count_by), "
                      "never the rows shown"),
    "empty_as_negative": ("returned no rows and the answer took that as a true negative",
                          "An empty result means these arguments matched nothing: check the "
                          "period and the values against the question before answering that "
                          "none exist"),
    "refusal_as_number": ("", "A result that starts \"Not permitted\" is a refusal, not a zero: "
                          "answer that the data is outside your scope"),
}


def _refused_then_numbered(seen: Observed, case: CaseSeen) -> list[tuple[Listing, str]]:
    trace = case.trace
    if trace is None or not is_number(trace.answer):
        return []
    out = []
    for c in trace.tool_calls:
        if c.is_error and (c.text or "").startswith("Not permitted"):
            la = seen.listing_for(c.name, c.arguments)[0]
            if la is not None:
                out.append((la, f"call {c.index} ({c.name}) was refused and the answer was "
                                f"{trace.answer!r}"))
    return out


@rule(reads={"runs"}, writes={"product_notes"})
def repeated_failure(seen: Observed) -> list[Proposal]:
    groups: dict[tuple[str, str], dict[str, Seen]] = defaultdict(dict)
    for case in seen.cases:
        if case.label.correct is not False:
            continue
        for kind, (text, _) in ADVICE.items():
            if not text:
                continue
            for index, said in symptoms(case, text):
                la = listing_of_call(seen, case, index)
                if la is not None:
                    groups[(la.tool, kind)][case.label.case_id] = case.seen(said, la.tool)
        for la, said in _refused_then_numbered(seen, case):
            groups[(la.tool, "refusal_as_number")][case.label.case_id] = case.seen(said, la.tool)
    out = []
    for (tool, kind), cases in sorted(groups.items()):
        if len(cases) < MIN_CASES:
            continue
        la = seen.listings[tool]
        out.append(proposal("repeated_failure", kind, la, None, ADVICE[kind][1],
                            f"{len(cases)} failed cases: {kind.replace('_', ' ')}",
                            cases.values()))
    return out
