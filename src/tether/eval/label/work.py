"""The state a trace is labelled in, the rules that label it, and what each returns.

A rule is a function registered with :func:`rule`, declaring the keys it reads and the keys it
writes: label values (``correct``, ``fields_used``, ...) and the typed facts one rule hands to
another (:class:`Facts`). The pipeline checks the order once: a rule comes after every rule that
writes a key it reads, so the order of rules cannot silently change a label. Symptoms and review
reasons are collected from every rule; the verdict reads them all (it reads ``symptoms``, which
every rule that may report one declares it writes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tether.eval.cases import Gold
from tether.eval.label.calls import CallView, call_views
from tether.eval.label.context import LabelContext
from tether.eval.trace import Trace


@dataclass
class Facts:
    """What a rule hands to later rules, beside the label values (each declared by name)."""

    answer_number: float | None = None
    """the number the correctness rule read as the answer"""
    forbidden_used: list[str] = field(default_factory=list)
    """forbidden fields the calls used (grounding)"""
    time_wrong: bool = False
    """no call used the governed time column or the question's window (timing)"""


FACT_KEYS = frozenset(f.name for f in fields(Facts))


@dataclass
class Finding:
    """A rule's result: label values, facts, symptoms (class, text) and reasons for a human."""

    values: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
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
    facts: Facts = field(default_factory=Facts)
    symptoms: list[tuple[str, str]] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=dict)
    """derivations of the case alone (the governed definition it names), computed once"""

    @classmethod
    def start(cls, trace: Trace, ctx: LabelContext) -> Work:
        return cls(trace=trace, ctx=ctx, calls=call_views(ctx, trace))

    @property
    def gold(self) -> Gold:
        return self.trace.case.gold

    def ok_calls(self) -> list[CallView]:
        """Calls the server answered without an error (a refused call read nothing)."""
        return [c for c in self.calls if c.ok]

    def merge(self, r: Rule, f: Finding) -> None:
        undeclared = sorted((set(f.values) | set(f.facts)) - r.writes)
        if undeclared or (f.symptoms and "symptoms" not in r.writes):
            raise RuntimeError(f"rule {r.name} wrote {', '.join(undeclared) or 'symptoms'} "
                               "without declaring it")
        self.values.update(f.values)
        for k, v in f.facts.items():
            setattr(self.facts, k, v)
        for s in f.symptoms:
            if s not in self.symptoms:
                self.symptoms.append(s)
        for reason in f.review:
            if reason not in self.review:
                self.review.append(reason)


@dataclass(frozen=True)
class Rule:
    """A registered labelling rule."""

    name: str
    run: Callable[[Work], Finding]
    reads: frozenset[str]
    writes: frozenset[str]

    def __call__(self, work: Work) -> Finding:
        return self.run(work)


RULES: dict[str, Rule] = {}
"""Every registered rule by name (a third party registers its own the same way)."""


def rule(*, reads: Iterable[str] = (), writes: Iterable[str] = ()
         ) -> Callable[[Callable[[Work], Finding]], Rule]:
    """Register a rule that reads and writes the named label values and facts."""
    def wrap(fn: Callable[[Work], Finding]) -> Rule:
        r = Rule(fn.__name__, fn, frozenset(reads), frozenset(writes))
        RULES[r.name] = r
        return r

    return wrap


def check_order(rules: Sequence[Rule]) -> None:
    """Each rule after every rule that writes a key it reads; else a clear error."""
    for i, r in enumerate(rules):
        for later in rules[i + 1:]:
            clash = sorted(r.reads & later.writes)
            if clash:
                raise ValueError(f"rule {r.name} reads {', '.join(clash)}, which {later.name} "
                                 "writes after it: put it later in the pipeline")


Scorer = Rule
"""The name earlier versions used for a rule."""
