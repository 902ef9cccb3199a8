"""Arguments the server had to interpret: a name given for a parameter (``interpreted``) or a
value given to the wrong parameter (``moved_values``), again and again. Proposes a note on the
parameter naming what callers wrote, so the next caller writes the parameter."""

from __future__ import annotations

from collections import defaultdict

from tether.learn.model import MIN_SUPPORT, Proposal, quoted, rule
from tether.learn.observe import CallSeen, Observed
from tether.learn.rules.common import proposal


@rule(reads={"calls"}, writes={"column_notes"})
def interpreted_arguments(seen: Observed) -> list[Proposal]:
    names: dict[tuple[str, str, str], list[CallSeen]] = defaultdict(list)
    moved: dict[tuple[str, str], list[tuple[CallSeen, str]]] = defaultdict(list)
    for c in seen.calls:
        la = c.listing
        if la is None:
            continue
        for given, param in c.interpreted.items():
            if param in la.params:
                names[(la.tool, param, given)].append(c)
        for value, param in c.moved.items():
            if param in la.params:
                moved[(la.tool, param)].append((c, value))
    out = []
    for (tool, param, given), calls in sorted(names.items()):
        if len(calls) < MIN_SUPPORT:
            continue
        la = seen.listings[tool]
        out.append(proposal(
            "interpreted_arguments", f"name:{given}", la, la.params[param],
            f"Pass it as {param} (callers have written {given})",
            f"{len(calls)} calls wrote {given} for {param}", (c.seen() for c in calls)))
    for (tool, param), pairs in sorted(moved.items()):
        if len(pairs) < MIN_SUPPORT:
            continue
        la = seen.listings[tool]
        column = la.params[param]
        values = sorted({v for _, v in pairs})
        shown = "" if seen.scoped(la.product, column) else f" such as {quoted(values[:3])}"
        out.append(proposal(
            "interpreted_arguments", "values", la, column,
            f"Values{shown} go in {param}, not in another parameter",
            f"{len(pairs)} calls gave {param}'s values to another parameter",
            (c.seen() for c, _ in pairs)))
    return out
