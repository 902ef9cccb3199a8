"""A trace as a conversation people can read: the question, each model turn, each tool call
with its arguments, an excerpt of its result and the evidence of what ran, the answer, and the
label with its reasons. The report and the console both show traces this way (never raw JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tether.context.meta import Evidence, evidence_of
from tether.eval.trace import LabelLine, ToolCall, Trace

EXCERPT = 600
"""Characters of a tool result shown; the rest is counted, not shown."""


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def excerpt(text: str | None, limit: int = EXCERPT) -> tuple[str, int]:
    """(the first ``limit`` characters, how many were left out)."""
    s = text or ""
    return (s, 0) if len(s) <= limit else (s[:limit], len(s) - limit)


@dataclass
class Call:
    index: int
    name: str
    arguments: str
    result: str
    left_out: int
    is_error: bool
    latency_ms: float
    version: str | None
    evidence: Evidence | None  # what the result says ran (servers that send it), as labelled
    bound: str | None = None  # its bound values, as text to show

    @classmethod
    def of(cls, c: ToolCall) -> Call:
        text, left = excerpt(c.text if c.text is not None else (
            _json(c.structured) if c.structured is not None else ""))
        ev = evidence_of(c.meta)
        return cls(c.index, c.name, _json(c.arguments) if c.arguments else "{}", text, left,
                   c.is_error, c.latency_ms, c.tool_version, ev,
                   _json(ev.params) if ev is not None and ev.params else None)


@dataclass
class Turn:
    index: int
    kind: str
    content: str | None
    reasoning: str | None
    calls: list[Call] = field(default_factory=list)
    clarification: tuple[str, str] | None = None  # (question, the simulated user's answer)
    tokens: tuple[int, int] = (0, 0)


@dataclass
class Conversation:
    case_id: str
    server: str
    as_user: str
    role: str
    question: str
    turns: list[Turn]
    answer: str | None
    answer_value: str | None
    error: str | None
    gold: str
    label: LabelLine | None
    reasons: list[str]
    unrequested: list[Call] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return [c for t in self.turns for c in t.calls] + self.unrequested


def reasons(label: LabelLine | None) -> list[str]:
    """Why the label is what it is, in the labeller's words."""
    if label is None:
        return ["not labelled: run `tether eval label RUN_DIR`"]
    out = list(label.symptoms)
    if label.review_reason:
        out.append(f"needs a person: {label.review_reason}")
    if label.fields_used:
        out.append("fields used: " + ", ".join(label.fields_used))
    if label.definition_match is not None:
        out.append("definition " + ("matches" if label.definition_match else "does not match")
                   + " the gold definition")
    if label.freshness_pass is False:
        out.append("the data was older than the case allows")
    if label.policy_violations:
        out.append(f"{label.policy_violations} call(s) returned what the user may not see")
    return out


def conversation(trace: Trace, label: LabelLine | None = None) -> Conversation:
    """The trace in reading order: each turn with the calls it asked for, in call order."""
    by_turn: dict[int, list[Call]] = {}
    for c in sorted(trace.tool_calls, key=lambda c: c.index):
        by_turn.setdefault(c.turn, []).append(Call.of(c))
    clar = {c.turn: (c.question, c.answer) for c in trace.clarifications}
    turns = [Turn(t.index, t.kind, t.content, t.reasoning, by_turn.pop(t.index, []),
                  clar.get(t.index), (t.usage.input_tokens, t.usage.output_tokens))
             for t in sorted(trace.turns, key=lambda t: t.index)]
    gold = trace.case.gold
    gold_text = _json(gold.answer) if not isinstance(gold.answer, str) else gold.answer
    if gold.definition:
        gold_text += f" (definition: {gold.definition})"
    return Conversation(
        case_id=trace.case_id, server=trace.server, as_user=trace.as_user,
        role=trace.user_role, question=trace.question, turns=turns,
        answer=trace.final_answer,
        answer_value=None if trace.answer is None else _json(trace.answer),
        error=trace.error, gold=gold_text, label=label, reasons=reasons(label),
        unrequested=[c for calls in by_turn.values() for c in calls])
