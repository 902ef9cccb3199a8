"""Combinations that always return zero rows: the same filter arguments (enum values and
periods; never a free value such as an identifier), called again and again by callers who read
the whole product, never once returning a row. Proposes a note on the product: the values named
only where every caller may read them, else the parameters alone."""

from __future__ import annotations

import json
from collections import defaultdict

from tether.context.meta import enum_of
from tether.learn.model import MIN_SUPPORT, Proposal, quoted
from tether.learn.observe import CallSeen, Listing, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal, succeeded, values_of


def _combination(c: CallSeen) -> tuple[tuple[str, str], ...] | None:
    """The call's row-choosing arguments, when each is an enum's value or a period."""
    la = c.listing
    assert la is not None
    out = []
    for param, value in sorted(c.filters().items()):
        if param != "period":
            allowed = {json.dumps(v) for v in enum_of(la.props.get(param) or {}) or []}
            if not allowed or any(json.dumps(v) not in allowed for v in values_of(value)):
                return None
        out.append((param, json.dumps(value, sort_keys=True)))
    return tuple(out) or None


def _unfiltered(seen: Observed, c: CallSeen) -> bool:
    """The caller reads every row of the product (no row filter): empty means the data."""
    assert c.listing is not None
    role = seen.config.policies.roles.get(c.role)
    return role is not None and c.listing.product not in role.row_filters


def _words(seen: Observed, la: Listing, combo: tuple[tuple[str, str], ...]) -> str:
    """The combination in words: values where every caller may read them, else names."""
    shown, named = [], []
    for param, value in combo:
        column = la.params.get(param)
        if param == "period" or not seen.scoped(la.product, column):
            shown.append(f"{param} {quoted(json.loads(value))}")
        else:
            named.append(param)
    text = " with ".join(shown)
    if named:
        text += (" with " if text else "") + f"{' and '.join(named)} set"
    return text


@rule(reads={"calls"}, writes={"product_notes"})
def always_empty(seen: Observed) -> list[Proposal]:
    empty: dict[tuple[str, tuple[tuple[str, str], ...]], list[CallSeen]] = defaultdict(list)
    some: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for c in succeeded(seen.calls):
        combo = _combination(c)
        if combo is None or c.listing is None:
            continue
        key = (c.listing.tool, combo)
        if c.rows:
            some.add(key)
        elif c.rows == 0 and _unfiltered(seen, c):
            empty[key].append(c)
    out = []
    for key, calls in sorted(empty.items()):
        if key in some or len(calls) < MIN_SUPPORT:
            continue
        la = seen.listings[key[0]]
        words = _words(seen, la, key[1])
        out.append(proposal(
            "always_empty", "|".join(f"{p}={v}" for p, v in key[1]), la, None,
            f"Calls with {words} have matched no rows ({len(calls)} calls): nothing holds that "
            "combination, so say so rather than retry", f"{len(calls)} calls with "
            f"{words} returned no rows", (c.seen() for c in calls)))
    return out
