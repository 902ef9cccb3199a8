"""Reading labelled cases for the rules that learn from evaluation runs: which listing a
trace's call reached, and the calls a label's symptoms name."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tether.learn.observe import CaseSeen, Listing, Observed

_CALL = re.compile(r"call (\d+) \(([^)]*)\)")


def listing_of_call(seen: Observed, case: CaseSeen, index: int) -> Listing | None:
    """The listing the case's call ``index`` reached (itself, or the product it named)."""
    if case.trace is None:
        return None
    call = next((c for c in case.trace.tool_calls if c.index == index), None)
    if call is None:
        return None
    return seen.listing_for(call.name, call.arguments)[0]


def symptoms(case: CaseSeen, text: str) -> Iterator[tuple[int, str]]:
    """(call index, symptom) for each symptom of the case that holds ``text`` and names a
    call."""
    for s in case.label.symptoms:
        if text in s:
            m = _CALL.search(s)
            if m:
                yield int(m.group(1)), s
