"""Run the ten checks over a tool list: a score out of ten per tool, each lost point explained
(a finding beyond the ten, such as text that speaks to the model, costs a point too)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tether.lint.checks import DEFAULT_CHECKS, Check, Finding
from tether.lint.tokens import ENCODING, tool_tokens, wire_bytes


@dataclass
class ToolReview:
    name: str
    score: int
    lost: list[Finding]
    tokens: int
    wire_bytes: int
    calls: int | None = None


@dataclass
class Review:
    target: str
    encoding: str
    tools: list[ToolReview] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(t.tokens for t in self.tools)

    @property
    def average_score(self) -> float:
        return sum(t.score for t in self.tools) / len(self.tools) if self.tools else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "encoding": self.encoding,
            "tool_count": len(self.tools),
            "total_tokens": self.total_tokens,
            "average_tokens": round(self.total_tokens / len(self.tools), 1) if self.tools else 0,
            "average_score": round(self.average_score, 2),
            "tools": [asdict(t) for t in self.tools],
        }


def review_tools(
    tools: list[dict[str, Any]],
    target: str,
    calls: Counter[str] | None = None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
) -> Review:
    """Score every tool; sorted by call volume when a call log is given, else by name."""
    out = Review(target=target, encoding=ENCODING)
    for tool in tools:
        lost = [f for f in (c(tool) for c in checks) if f is not None]
        points = sum(1 for c in checks if not c.penalty)
        out.tools.append(ToolReview(
            name=str(tool.get("name")), score=max(points - len(lost), 0), lost=lost,
            tokens=tool_tokens(tool), wire_bytes=wire_bytes(tool),
            calls=(calls or Counter()).get(str(tool.get("name")), 0) if calls is not None else None,
        ))
    if calls is not None:
        out.tools.sort(key=lambda t: (-(t.calls or 0), t.name))
    else:
        out.tools.sort(key=lambda t: t.name)
    return out
