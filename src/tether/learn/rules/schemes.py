"""Identifier scheme confusion: values given to an identifier parameter that fit another
declared scheme's pattern, not the parameter's own (and the parameter does not resolve that
scheme). Proposes a note on the parameter naming both schemes and the crosswalk tool; never a
value (one caller's identifier is not every caller's to read)."""

from __future__ import annotations

import re
from collections import defaultdict

from tether.learn.model import MIN_SUPPORT, Proposal
from tether.learn.observe import CallSeen, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal, values_of


def _fits(pattern: str | None, value: object) -> bool:
    if not pattern or not isinstance(value, str):
        return False
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return False


@rule(reads={"calls"}, writes={"column_notes"})
def scheme_confusion(seen: Observed) -> list[Proposal]:
    schemes = seen.config.identifier_schemes
    groups: dict[tuple[str, str, str], list[CallSeen]] = defaultdict(list)
    for c in seen.calls:
        la = c.listing
        if la is None:
            continue
        ids = seen.config.products[la.product].identifiers
        for param, value in c.args.items():
            column = la.params.get(param)
            own = ids.get(column or "")
            if own is None or own not in schemes:
                continue
            takes = set(la.schemes.get(param) or [own])
            others = set()
            for v in values_of(value):
                if _fits(schemes[own].pattern, v):
                    continue
                other = next((n for n, s in schemes.items()
                              if n not in takes and _fits(s.pattern, v)), None)
                if other is not None:
                    others.add(other)
            for other in others:  # one call counts once for each scheme it confused
                groups[(la.tool, param, other)].append(c)
    out = []
    by_product = seen.by_product()
    for (tool, param, other), calls in sorted(groups.items()):
        if len(calls) < MIN_SUPPORT:
            continue
        la = seen.listings[tool]
        column = la.params[param]
        own = seen.config.products[la.product].identifiers[column]
        walk = schemes[other].crosswalk
        via = by_product.get(walk.split(".")[0]) if walk else None
        # the crosswalk maps only the schemes it holds: name it only when it holds this one
        holds = set(seen.config.products[via.product].identifiers.values()) if via else set()
        how = f"; map them to {own} with {via.tool} first" if via and own in holds else ""
        sentence = (f"Takes {own} values only: callers have passed {other} values here, which "
                    f"match no row{how}")
        out.append(proposal("scheme_confusion", f"{param}:{other}", la, column, sentence,
                            f"{len(calls)} calls passed {other} values to {param} ({own})",
                            (c.seen() for c in calls)))
    return out
