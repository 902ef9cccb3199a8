"""Clarifications that follow one tool (from labelled runs): the agent called the tool, then
asked the user instead of answering, in cases that went wrong. Proposes a note on the tool: its result
states the window, scope and definition it used, so answer from them unless the question leaves
something open."""

from __future__ import annotations

from collections import defaultdict

from tether.learn.model import MIN_CASES, Proposal, Seen
from tether.learn.observe import Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal


@rule(reads={"runs"}, writes={"product_notes"})
def clarification_after(seen: Observed) -> list[Proposal]:
    groups: dict[str, dict[str, Seen]] = defaultdict(dict)
    for case in seen.cases:
        trace = case.trace
        if trace is None or not case.failed:
            continue
        for q in trace.clarifications:
            before = [c for c in trace.tool_calls if c.turn < q.turn and not c.is_error]
            la = seen.listing_for(before[-1].name, before[-1].arguments)[0] if before else None
            if la is not None:
                groups[la.tool][case.label.case_id] = case.seen(
                    f"asked: {q.question[:200]}", la.tool)
                break
    out = []
    for tool, cases in sorted(groups.items()):
        if len(cases) < MIN_CASES:
            continue
        la = seen.listings[tool]
        out.append(proposal(
            "clarification_after", "clarification", la, None,
            "Its result states the window, scope and definition it used: answer from them, and "
            "ask the user only what the question leaves open",
            f"{len(cases)} cases asked the user to clarify after this tool", cases.values()))
    return out
