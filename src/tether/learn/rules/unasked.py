"""Values never asked for: an enum parameter set in many calls, some of whose values no call
ever named. Proposes a note on the parameter naming what callers ask for, so the values that
matter are read first; the rest stay valid. Values are named only where every caller may read
them."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from tether.context.meta import enum_of
from tether.learn.model import Proposal, quoted
from tether.learn.observe import CallSeen, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal, succeeded, values_of

MIN_CALLS = 20
"""Fewest calls setting a parameter before its unasked values say anything."""


@rule(reads={"calls"}, writes={"column_notes"})
def values_never_asked(seen: Observed) -> list[Proposal]:
    asked: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    calls: dict[tuple[str, str], list[CallSeen]] = defaultdict(list)
    for c in succeeded(seen.calls):
        assert c.listing is not None
        for param, value in c.filters().items():
            own = {json.dumps(v) for v in enum_of(c.listing.props.get(param) or {}) or []}
            named = [json.dumps(v) for v in values_of(value) if json.dumps(v) in own]
            if named:  # the parameter's own values (a value moved elsewhere is not asked here)
                asked[(c.listing.tool, param)].update(named)
                calls[(c.listing.tool, param)].append(c)
    out = []
    for (tool, param), counts in sorted(asked.items()):
        la = seen.listings[tool]
        column = la.params.get(param)
        enum = [json.dumps(v) for v in enum_of(la.props.get(param) or {}) or []]
        never = [v for v in enum if v not in counts]
        n = len(calls[(tool, param)])
        if n < MIN_CALLS or not never or len(never) == len(enum):
            continue
        top = [json.loads(v) for v, _ in counts.most_common(3)]
        # values only where every caller may read them (else the counts alone)
        most = "" if seen.scoped(la.product, column) else f"Callers ask most for {quoted(top)}; "
        out.append(proposal(
            "values_never_asked", param, la, column,
            f"{most}{len(never)} of its {len(enum)} values have not been asked for in {n} calls "
            "(they remain valid)",
            f"{n} calls set {param}; never asked: {quoted([json.loads(v) for v in never][:8])}",
            (c.seen() for c in calls[(tool, param)])))
    return out
