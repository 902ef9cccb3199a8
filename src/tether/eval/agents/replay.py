"""`replay`: re-issue the tool calls of a recorded trace against the server under test.

For re-checking after a context change (a regenerated tool, a policy edit) without paying for a
model: the same calls with the same arguments, in the same order, against the new server; the
recorded final answer is kept, so correctness is re-judged on the new results only through the
other labels (grounding, definition, freshness, policy). Give the recorded run with
``--replay RUN_DIR``. A case with no recorded trace is an error in its trace, not a guess.
"""

from __future__ import annotations

from typing import ClassVar

from tether.eval.agents.base import Agent, AgentContext, AgentError, Answer, register
from tether.eval.trace import ModelTurn, RequestedCall


@register
class ReplayAgent(Agent):
    name = "replay"
    needs_model: ClassVar[bool] = False

    def describe(self) -> str | None:
        return "replay"

    async def run(self, ctx: AgentContext) -> Answer:
        recorded = ctx.trace
        if not recorded:
            raise AgentError(f"case {ctx.case.case_id!r} has no recorded trace to replay.",
                             hint="Give --replay RUN_DIR holding traces/<case_id>.json.")
        by_turn: dict[int, list[dict[str, object]]] = {}
        for call in recorded.get("tool_calls", []):
            by_turn.setdefault(int(call.get("turn", 0)), []).append(call)
        for turn, calls in sorted(by_turn.items()):
            ctx.record_turn(ModelTurn(index=turn, content=None, tool_calls=[
                RequestedCall(id=str(c.get("id") or f"replay-{turn}-{i}"), name=str(c["name"]),
                              arguments=dict(c.get("arguments") or {}))  # type: ignore[call-overload]
                for i, c in enumerate(calls)]))
            for c in calls:
                await ctx.call_tool(str(c["name"]), dict(c.get("arguments") or {}), turn)  # type: ignore[call-overload]
        return Answer(text=str(recorded.get("final_answer") or ""), value=recorded.get("answer"),
                      model=recorded.get("model"))
