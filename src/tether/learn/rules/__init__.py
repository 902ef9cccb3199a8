"""The proposal rules, one per module, each registered with what it reads and writes
(learn/model.py). :data:`DEFAULT_RULES` is the order they run in; a caller may pass its own."""

from __future__ import annotations

from tether.learn.rulebook import RULES, Rule
from tether.learn.rules import (  # noqa: F401  (each module registers its rule)
    clarifications,
    empty,
    failures,
    interpreted,
    schemes,
    slow,
    unasked,
    unnamed,
)

DEFAULT_RULES: tuple[Rule, ...] = tuple(RULES[n] for n in (
    "scheme_confusion", "interpreted_arguments", "always_empty", "slow_combination",
    "values_never_asked", "parameters_not_named", "repeated_failure",
    "clarification_after"))
