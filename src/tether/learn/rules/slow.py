"""Slow combinations: the calls that set the same row-choosing parameters (whatever their
values) whose 95th-percentile time is over half the statement timeout. Proposes a note on the
product saying so and what narrows such a call."""

from __future__ import annotations

from collections import defaultdict

from tether.learn.model import MIN_SUPPORT, Proposal
from tether.learn.observe import CallSeen, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import percentile, proposal

SHARE = 0.5
"""A combination is slow when its p95 exceeds this share of the statement timeout."""


@rule(reads={"calls"}, writes={"product_notes"})
def slow_combination(seen: Observed) -> list[Proposal]:
    groups: dict[tuple[str, tuple[str, ...]], list[CallSeen]] = defaultdict(list)
    for c in seen.calls:
        if c.listing is not None and c.refusal is None:
            groups[(c.listing.tool, tuple(sorted(c.filters())))].append(c)
    limit_ms = seen.timeout_s * 1000
    out = []
    for (tool, names), calls in sorted(groups.items()):
        if len(calls) < MIN_SUPPORT:
            continue
        p95 = percentile([c.latency_ms for c in calls], 0.95)
        if p95 <= SHARE * limit_ms:
            continue
        la = seen.listings[tool]
        unused = [p for p in ([*(["period"] if la.period else []), *la.params]) if p not in names]
        which = f"setting only {' and '.join(names)}" if names else "with no filter"
        narrow = (f": add {' or '.join(unused[:2])} to narrow them" if unused
                  else ": ask for fewer rows")
        out.append(proposal(
            "slow_combination", ",".join(names) or "(none)", la, None,
            f"Calls {which} have taken {p95 / 1000:.2g} s at the 95th percentile (the limit is "
            f"{seen.timeout_s:g} s){narrow}",
            f"{len(calls)} calls {which}: p95 {p95:.0f} ms of a {limit_ms:.0f} ms timeout",
            (c.seen() for c in calls), telling=lambda s: s.latency_ms or 0.0))
    return out
