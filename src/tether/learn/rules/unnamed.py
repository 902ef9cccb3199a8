"""Parameters set that the questions never named (from labelled runs): the labeller's symptom
"filtered on F, which the question does not ask for", on one parameter of one tool, in cases
that went wrong (F a field of the tool's own product). Proposes a note on that parameter: set
it only when the question names it."""

from __future__ import annotations

import re
from collections import defaultdict

from tether.context.names import ref_column
from tether.learn.model import MIN_CASES, Proposal, Seen
from tether.learn.observe import Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal
from tether.learn.rules.runs import listing_of_call, symptoms

_FIELD = re.compile(r"filtered on (\S+), which the question does not")


@rule(reads={"runs"}, writes={"column_notes"})
def parameters_not_named(seen: Observed) -> list[Proposal]:
    groups: dict[tuple[str, str], dict[str, Seen]] = defaultdict(dict)
    for case in seen.cases:
        if not case.failed:
            continue
        for index, text in symptoms(case, "which the question does not"):
            la = listing_of_call(seen, case, index)
            m = _FIELD.search(text)
            if la is None or m is None:
                continue
            product, column = ref_column(m.group(1))
            if product != la.product:  # a field the tool reached through another product
                continue
            param = next((p for p, c in la.params.items() if c == column), None)
            if param is not None:
                groups[(la.tool, param)][case.label.case_id] = case.seen(text, la.tool)
    out = []
    for (tool, param), cases in sorted(groups.items()):
        if len(cases) < MIN_CASES:
            continue
        la = seen.listings[tool]
        out.append(proposal(
            "parameters_not_named", param, la, la.params[param],
            "Set it only when the question names it; left out, every value counts",
            f"{len(cases)} cases set {param} though the question did not name it",
            cases.values()))
    return out
