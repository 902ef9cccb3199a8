"""The proposal rules, registered: each reads what was observed (the call log, labelled runs)
and proposes sentences, declaring what it reads and writes. A third party registers its own
the same way (``@rule(reads=..., writes=...)``); learn/rules/ holds the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tether.learn.model import Input, Output, Proposal
from tether.learn.observe import Observed


@dataclass(frozen=True)
class Rule:
    """A registered proposal rule: what it reads (the call log, labelled runs) and what it
    writes (a product's notes, a column's notes)."""

    name: str
    run: Callable[[Observed], list[Proposal]]
    reads: frozenset[Input]
    writes: frozenset[Output]

    def __call__(self, seen: Observed) -> list[Proposal]:
        out = self.run(seen)
        for p in out:
            kind: Output = "column_notes" if p.change.column else "product_notes"
            if kind not in self.writes or p.rule != self.name:
                raise RuntimeError(f"learn rule {self.name} proposed {kind} for rule {p.rule}, "
                                   f"but declares it writes {sorted(self.writes)}")
        return out


RULES: dict[str, Rule] = {}
"""Every registered rule by name (a third party registers its own the same way)."""


def rule(*, reads: Iterable[Input], writes: Iterable[Output]
         ) -> Callable[[Callable[[Observed], list[Proposal]]], Rule]:
    """Register a proposal rule."""
    def wrap(fn: Callable[[Observed], list[Proposal]]) -> Rule:
        r = Rule(fn.__name__, fn, frozenset(reads), frozenset(writes))
        RULES[r.name] = r
        return r

    return wrap
