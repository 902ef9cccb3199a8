"""Small helpers the rules share: grouping calls, the sample, a percentile."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from tether.learn.model import SAMPLE, Change, Proposal, Seen
from tether.learn.observe import CallSeen, Listing


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by the nearest rank (no interpolation: a value that was seen)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def proposal(rule: str, subject: str, listing: Listing, column: str | None, sentence: str,
             summary: str, seen: Iterable[Seen],
             telling: Callable[[Seen], Any] | None = None) -> Proposal:
    """A proposal for ``listing``'s product (``column``: that column's notes) from its
    evidence: support, newest and sample read off ``seen`` (the sample: the newest, or the
    last by ``telling``, such as the slowest)."""
    items = sorted(seen, key=lambda s: s.at or "")
    path = ["products", listing.product] + (["columns", column] if column else []) + ["notes"]
    shown = sorted(items, key=telling)[-SAMPLE:] if telling else items[-SAMPLE:]
    return Proposal(rule=rule, subject=subject, tool=listing.tool, summary=summary,
                    change=Change(path=path, sentence=sentence), support=len(items),
                    newest=items[-1].at or "" if items else "", sample=shown)


def values_of(value: Any) -> list[Any]:
    """An argument's values: a list's items, or the one value."""
    return list(value) if isinstance(value, list) else [value]


def succeeded(calls: Iterable[CallSeen]) -> list[CallSeen]:
    return [c for c in calls if c.listing is not None and c.error is None]
