"""Which columns are enums: the rules are a tuple of small predicates a caller may override."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tether.config import ProductConfig, ProfilingConfig
from tether.context.profile import ColumnProfile
from tether.context.schema import Column

Rule = Callable[[ProductConfig, Column, ColumnProfile, ProfilingConfig], bool]


def _enum_kind(p: ProductConfig, c: Column, prof: ColumnProfile, cfg: ProfilingConfig) -> bool:
    return c.kind in ("string", "boolean")


def _few_values(p: ProductConfig, c: Column, prof: ColumnProfile, cfg: ProfilingConfig) -> bool:
    return prof.distinct_exact and 0 < (prof.distinct_count or 0) <= cfg.enum_max_values


def _values_repeat(p: ProductConfig, c: Column, prof: ColumnProfile, cfg: ProfilingConfig) -> bool:
    # a column of unique names in a 20-row table is not an enum: values must recur
    return (prof.distinct_count or 0) * 2 <= prof.non_null_count or c.kind == "boolean"


def _not_a_key(p: ProductConfig, c: Column, prof: ColumnProfile, cfg: ProfilingConfig) -> bool:
    # a single-column key is unique; a column of a composite key (a snapshot's stage) may be an enum
    keyish = set(p.identifiers) | set(p.time_columns)
    if len(p.primary_key) == 1:
        keyish |= set(p.primary_key)
    return c.name not in keyish and not {"uuid", "email"} & set(prof.formats)


DEFAULT_RULES: tuple[Rule, ...] = (_enum_kind, _few_values, _values_repeat, _not_a_key)


def enum_candidates(
    product: ProductConfig,
    leaves: list[Column],
    profiles: list[ColumnProfile],
    cfg: ProfilingConfig,
    rules: Sequence[Rule] = DEFAULT_RULES,
) -> list[int]:
    """Indexes of enum columns, in column order, at most ``cfg.enum_max_columns``."""
    hits = [
        i for i, (c, prof) in enumerate(zip(leaves, profiles, strict=True))
        if all(rule(product, c, prof, cfg) for rule in rules)
    ]
    return hits[: cfg.enum_max_columns]
