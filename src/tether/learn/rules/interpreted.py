"""Arguments the server had to interpret: a name given for a parameter (``interpreted``) or a
value given to the wrong parameter (``moved_values``), again and again. Proposes a note on the
parameter naming what callers wrote, so the next caller writes the parameter. A name is repeated
only when it is an identifier whose words mean that parameter (its column, a scheme, a glossary
word), never a name the server read from the values given with it (that name is free text one
caller typed); a value only when it is one of the parameter's own values."""

from __future__ import annotations

import re
from collections import defaultdict

from tether.context.meta import enum_of
from tether.learn.model import MIN_SUPPORT, Proposal, quoted
from tether.learn.observe import CallSeen, Listing, Observed
from tether.learn.rulebook import rule
from tether.learn.rules.common import proposal
from tether.serve.interpret import INSIDE, named_by
from tether.toolgen.model import QueryPlan

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,63}$")
"""A name a description may repeat: an identifier, never free text a caller typed."""


def _named_by(seen: Observed, la: Listing, given: str) -> list[str]:
    try:
        plan = QueryPlan.model_validate(la.plan)
    except ValueError:
        return []
    return named_by(given, la.definition, plan, seen.config)


@rule(reads={"calls"}, writes={"column_notes"})
def interpreted_arguments(seen: Observed) -> list[Proposal]:
    names: dict[tuple[str, str, str], list[CallSeen]] = defaultdict(list)
    moved: dict[tuple[str, str], list[tuple[CallSeen, list[str]]]] = defaultdict(list)
    meant: dict[tuple[str, str], list[str]] = {}
    for c in seen.calls:
        la = c.listing
        if la is None:
            continue
        for given, param in c.interpreted.items():
            # given beside rows_from_data_product's product, read inside its arguments: a name
            # of the product's own is a call's shape, not a misnaming (nothing to note)
            param = param.removeprefix(INSIDE)
            if param not in la.params or not _NAME.match(given) or given == param:
                continue
            if (la.tool, given) not in meant:  # a name its words mean, never one read from
                meant[(la.tool, given)] = _named_by(seen, la, given)  # the values given with it
            if meant[(la.tool, given)] == [param]:
                names[(la.tool, param, given)].append(c)
        by_param: dict[str, list[str]] = defaultdict(list)
        for value, param in c.moved.items():
            if param in la.params:
                by_param[param].append(value)
        for param, values in by_param.items():  # one call counts once, whatever it moved
            moved[(la.tool, param)].append((c, values))
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
        enum = {str(v) for v in enum_of(la.props.get(param) or {}) or []}
        values = sorted({v for _, vs in pairs for v in vs if v in enum})  # the tool's own values
        shown = ("" if seen.scoped(la.product, column) or not values
                 else f" such as {quoted(values[:3])}")
        out.append(proposal(
            "interpreted_arguments", "values", la, column,
            f"Values{shown} go in {param}, not in another parameter",
            f"{len(pairs)} calls gave {param}'s values to another parameter",
            (c.seen() for c, _ in pairs)))
    return out
