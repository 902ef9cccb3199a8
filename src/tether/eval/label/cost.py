"""Effort and cost: clarifications, tool calls, turns, tokens (summed over the model turns) and
USD from the price table for ``trace.model``."""

from __future__ import annotations

from tether.eval.label.work import Finding, Work, rule


@rule(writes={"clarifications", "tool_calls", "turns", "input_tokens", "output_tokens",
             "usd"})
def cost(work: Work) -> Finding:
    t = work.trace
    tokens_in = sum(turn.usage.input_tokens for turn in t.turns)
    tokens_out = sum(turn.usage.output_tokens for turn in t.turns)
    asked = len(t.clarifications) or sum(1 for turn in t.turns if turn.kind == "clarification")
    return Finding(values={
        "clarifications": asked,
        "tool_calls": len(t.tool_calls),
        "turns": len(t.turns),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "usd": round(work.ctx.prices.usd(t.model, tokens_in, tokens_out), 8),
    })
