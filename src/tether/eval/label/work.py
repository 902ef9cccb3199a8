"""The state a trace is labelled in, and what each scorer returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.eval.cases import Gold
from tether.eval.label.calls import CallView, call_views
from tether.eval.label.context import LabelContext
from tether.eval.trace import Trace


@dataclass
class Finding:
    """A scorer's result: label values, symptoms (class, text) and reasons for a human look."""

    values: dict[str, Any] = field(default_factory=dict)
    symptoms: list[tuple[str, str]] = field(default_factory=list)
    review: list[str] = field(default_factory=list)

    def symptom(self, cls: str, text: str) -> None:
        if (cls, text) not in self.symptoms:
            self.symptoms.append((cls, text))


@dataclass
class Work:
    trace: Trace
    ctx: LabelContext
    calls: list[CallView]
    values: dict[str, Any] = field(default_factory=dict)
    symptoms: list[tuple[str, str]] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    scratch: dict[str, Any] = field(default_factory=dict)  # shared between scorers

    @classmethod
    def start(cls, trace: Trace, ctx: LabelContext) -> Work:
        return cls(trace=trace, ctx=ctx, calls=call_views(ctx, trace))

    @property
    def gold(self) -> Gold:
        return self.trace.case.gold

    def ok_calls(self) -> list[CallView]:
        """Calls the server answered without an error (a refused call read nothing)."""
        return [c for c in self.calls if c.ok]

    def merge(self, f: Finding) -> None:
        self.values.update(f.values)
        for s in f.symptoms:
            if s not in self.symptoms:
                self.symptoms.append(s)
        for r in f.review:
            if r not in self.review:
                self.review.append(r)


Scorer = Callable[[Work], Finding]
"""A scorer reads the trace and what earlier scorers found, and returns its own Finding."""
