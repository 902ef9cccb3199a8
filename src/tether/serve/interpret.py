"""Arguments as models write them: a name or a value put where the tool has it, and said so.

A model that calls a tool often names an argument by what it means rather than by the
parameter's name: the column it filters (``widget_id`` for ``canonical_widget_id``, whose
column is ``widget_id``), an identifier scheme the parameter accepts, a glossary word for the
column (``area``), the product whose key the parameter holds (``shelf`` for ``bx_shelfnum``,
which holds ``shelf``'s key), or the name in another case style (``binColour``). And it sometimes puts a
value under the wrong parameter (``step: "NORTH"`` where NORTH is a bin's area). Before the
arguments are checked, each unknown name that names exactly one parameter is used as that
parameter, and each enum value given to a parameter that does not hold it, but that exactly one
other parameter holds, is moved there; the result says both (``interpreted``, ``moved_values``)
and the answer sentence repeats it. An unknown argument whose value is an object of arguments
(``filter: {binColour: "red"}``) is opened first, each name in it read the same way. An unknown
name that means no parameter, but whose values only one parameter not given holds (``zone:
"north"`` where NORTH is a bin's area), is that parameter; an argument whose value is not one it
takes but the name of another parameter the call gives (``part_id: "widget_no"`` beside
``widget_no``) is read as that parameter. A name that could mean two
parameters, or none that way either, is refused with the parameters it might mean. Nothing here
reads data or decides access: the interpreted call is validated, refused and filtered exactly as
one written that way, so an interpretation never widens what a caller reads.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from tether.config import TetherConfig
from tether.context.config_model import reference_of
from tether.context.meta import ToolContext, enum_of
from tether.context.names import IDENTIFIER_WORDS, name_words, ref_column
from tether.serve.arguments import validator
from tether.toolgen.describe import singular
from tether.toolgen.model import AGGREGATE, QueryPlan
from tether.toolgen.plan import ArgumentError

INSIDE = "arguments."
"""How a result says an argument given beside the generic listing's product was read inside its
``arguments`` (``interpreted: {"limit": "arguments.limit"}``; serve/calls.py)."""


def norm(name: str) -> str:
    """A name's words, any identifier word as ``id`` (``widget_id`` and ``widgetNo`` both name
    ``widget_no``'s identifier)."""
    return "_".join("id" if w in IDENTIFIER_WORDS else w for w in name_words(name))


def _names(definition: dict[str, Any], plan: QueryPlan, config: TetherConfig
           ) -> dict[str, set[str]]:
    """Each parameter and the names that mean it: its own, the column it filters, the
    identifier schemes it takes, and the glossary's words for its column (normalized)."""
    props = (definition.get("inputSchema") or {}).get("properties") or {}
    ctx = ToolContext.of(definition)
    columns = (ctx.fields or {}).get("arguments") or {}
    schemes = {f.param: [r.scheme for r in f.routes] for f in plan.filters}
    out: dict[str, set[str]] = {}
    for param in props:
        said = {param}
        refs = columns.get(param) or []
        refs = [refs] if isinstance(refs, str) else list(refs)
        for r in refs:
            said.add(ref_column(str(r))[1])
        said |= set(schemes.get(param, []))
        if ctx.canonical_ids.get(param):
            said.add(ctx.canonical_ids[param])
        for r in refs:  # the product whose key it holds names it too ("shelf": 2)
            said |= _referenced(config, str(r))
        fields = {str(r).lower() for r in refs}
        for term, t in config.glossary.items():
            if fields & {x.lower() for x in t.fields}:
                said |= {term, *t.synonyms}
        out[param] = {norm(x) for x in said if x}
    return out


def _referenced(config: TetherConfig, column: str) -> set[str]:
    """The product whose key ``product.column`` holds (the one its parameter's description
    names: config_model.reference_of), as its name and its singular; empty for none."""
    found = reference_of(config, *ref_column(column))
    return {found[0], singular(found[0])} if found else set()


def named_by(given: str, definition: dict[str, Any], plan: QueryPlan, config: TetherConfig
             ) -> list[str]:
    """The parameters a given argument name means by its words alone (its own name, the column,
    a scheme, a glossary word): not a name read from the values it came with."""
    return _meant(given, _names(definition, plan, config))


def _meant(given: str, names: dict[str, set[str]]) -> list[str]:
    """The parameters ``given`` names: one whose names hold it exactly, else every one with a
    name whose words include all of its words (``widget_id`` in ``canonical_widget_id``)."""
    key = norm(given)
    if not key:
        return []
    exact = [p for p, said in names.items() if key in said]
    if exact:
        return exact
    words = set(key.split("_"))
    return [p for p, said in names.items()
            if any(words <= set(s.split("_")) for s in said)]


def interpret(definition: dict[str, Any], plan: QueryPlan, given: dict[str, Any],
              config: TetherConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments where the tool has them, and what was interpreted (``{"interpreted":
    {given: param}, "moved_values": {value: param}}``, empty when nothing was). ArgumentError for
    a name that means two or more parameters, or none."""
    props = (definition.get("inputSchema") or {}).get("properties") or {}
    args, origin = _unwrapped(given, props)
    unknown = [k for k in args if k not in props]
    filters = {f.param for f in plan.filters}
    said: dict[str, Any] = {}
    interpreted = {origin[k]: k for k in args if k in origin and k in props}
    if unknown:
        names = _names(definition, plan, config)
        for k in unknown:
            meant = [p for p in _meant(k, names) if p not in args]
            name = origin.get(k, k)
            if len(meant) == 1 and meant[0] not in interpreted.values():
                interpreted[name] = meant[0]
                args[meant[0]] = args.pop(k)
                continue
            if len(meant) > 1:
                raise ArgumentError(f"unknown argument {name[:80]!r}: it could mean "
                                f"{' or '.join(meant)}; call again with one of them")
            held = _holder(args[k], {p: props[p] for p in filters if p in props and p not in args})
            if not meant and held is not None and held[0] not in interpreted.values():
                # a name that means no parameter, with values that only one parameter holds
                interpreted[name] = held[0]
                del args[k]
                args[held[0]] = held[1]
                continue
            close = difflib.get_close_matches(norm(k), [norm(p) for p in props], n=3,
                                              cutoff=0.6)
            hint = [p for p in props if norm(p) in close]
            raise ArgumentError(f"unknown argument(s) {name[:80]}; allowed: "
                            f"{', '.join(sorted(props)) or 'none'}"
                            + (f" (did you mean {' or '.join(hint)}?)" if hint else "")
                            + " (call again without the others)")
    interpreted.update(_naming(args, props))
    interpreted.update(_cuts(args, props))
    if interpreted:
        said["interpreted"] = interpreted
    moved = _moved(args, {k: v for k, v in props.items() if k in filters})
    moved += _direction(args, props, plan)
    if moved:
        said["moved_values"] = {str(v): p for v, p in moved}
    return (args if said else given), said


def _naming(args: dict[str, Any], props: dict[str, Any]) -> dict[str, str]:
    """An argument whose value is nothing it takes but the name of another parameter the call
    gives (``part_id: "widget_no"`` beside ``widget_no: "W-7"``) says where its value is, not
    a value: it is read as that parameter (dropped; the other keeps the value it was given).
    A value the parameter takes (text that happens to be a parameter's name) stays."""
    out: dict[str, str] = {}
    for k in list(args):
        value = args[k]
        if k not in props or not isinstance(value, str):
            continue
        named = [p for p in args if p != k and p in props and norm(p) == norm(value)]
        if len(named) == 1 and not _takes(props[k], value):
            del args[k]
            out[k] = named[0]
    return out


def _takes(prop: Any, value: str) -> bool:
    """Whether a parameter's schema takes ``value`` (alone, or as a list of one)."""
    if not isinstance(prop, dict):
        return True
    check = validator(prop)  # the one the arguments are checked with, formats included
    return check.is_valid(value) or (prop.get("type") == "array" and check.is_valid([value]))


CUTS = ("count_by", AGGREGATE)
"""Arguments whose values are the tool's own column names."""


def _cuts(args: dict[str, Any], props: dict[str, Any]) -> dict[str, str]:
    """A column name given to count_by or sum_and_average_of that is not one of its values but
    whose words name exactly one of them (``colour`` for ``body_colour``) is that value
    (changed in ``args``), as an argument's name is read: ``{"count_by colour": "count_by
    body_colour"}``. Two or none: left as given, for the schema to refuse with the values."""
    out = {}
    for key in CUTS:
        given, enum = args.get(key), enum_of(props.get(key)) or []
        if isinstance(given, list) and len(given) == 1:  # a list of one asks the same
            given = given[0]
        if not isinstance(given, str) or given in enum or not enum:
            continue
        meant = _meant(given, {str(v): {norm(str(v))} for v in enum})
        if len(meant) == 1:
            args[key] = meant[0]
            out[f"{key} {given[:80]}"] = f"{key} {meant[0]}"
    return out


def _unwrapped(given: dict[str, Any], props: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[str, str]]:
    """The arguments with each unknown argument whose value is an object of arguments (``filter:
    {widget_id: 7}``, as models write filters) opened in place, and where each opened one came
    from (``widget_id`` -> ``filter.widget_id``). An object whose names are already given at
    the top is left as it is (and refused below): nothing given is overridden."""
    args, origin = dict(given), {}
    for k, value in given.items():
        if k in props or not isinstance(value, dict) or not value:
            continue
        if any(inner in args or inner in origin for inner in value):
            continue
        del args[k]
        for inner, v in value.items():
            args[inner] = v
            origin[inner] = f"{k}.{inner}"
    return args, origin


def _direction(args: dict[str, Any], props: dict[str, Any], plan: QueryPlan
               ) -> list[tuple[Any, str]]:
    """A direction given as what to sort by (``order_by: "desc"``, ``order`` not given) is the
    ``order`` it names (moved in ``args``): sorting never changes which rows or values answer,
    and ``order`` alone sorts the one measure asked for, or says what it needs. A column that
    is itself called that stays what it is."""
    spec, home = args.get("order_by"), enum_of(props.get("order"))
    if not isinstance(spec, str) or "order" in args or home is None:
        return []
    said = next((d for d in home if str(d).lower() == spec.strip().lower()), None)
    if said is None or spec in (plan.orderable or []) or spec in plan.group_by:
        return []
    del args["order_by"]
    args["order"] = said
    return [(said, "order")]


def _holder(value: Any, props: dict[str, Any]) -> tuple[str, Any] | None:
    """The one parameter (of ``props``) whose enum holds every value of ``value`` (compared as
    text, case-insensitively), with the values as that enum spells them (a list where it takes
    several); None when none or more than one does."""
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, list | dict) or v is None for v in values):
        return None
    homes = {p: [next((x for x in enum_of(prop) or []
                       if str(x).lower() == str(v).strip().lower()), None) for v in values]
             for p, prop in props.items()}
    homes = {p: got for p, got in homes.items() if all(x is not None for x in got)
             and (len(got) == 1 or (props[p] or {}).get("type") == "array")}
    if len(homes) != 1:
        return None
    (home, canonical), = homes.items()
    return home, canonical if (props[home] or {}).get("type") == "array" else canonical[0]


def _misfits(prop: dict[str, Any], values: list[Any]) -> bool:
    """Every value fails the parameter's pattern (a parameter with none takes any value)."""
    pattern = prop.get("pattern")
    if not isinstance(pattern, str) or not all(isinstance(v, str) for v in values):
        return False  # a number given to a text parameter is not moved: it may be an id
    try:
        return not any(re.search(pattern, v) for v in values)
    except re.error:
        return False


def _in_its_case(value: Any, prop: dict[str, Any]) -> str | None:
    """A text that misses its parameter's format as written but fits it in exactly one other
    case (upper or lower), so spelled; else None."""
    if not isinstance(value, str):
        return None
    fits = {v for v in (value.upper(), value.lower()) if v != value and not _misfits(prop, [v])}
    return fits.pop() if len(fits) == 1 else None


def _moved(args: dict[str, Any], props: dict[str, Any]) -> list[tuple[Any, str]]:
    """Enum values given to a filter parameter (``props``: the filters') that does not hold
    them (an enum without them, or a pattern none of them fits), moved (in ``args``) to the one
    other filter, not given, that holds them all (compared as text, case-insensitively). What
    shapes the answer (order, count_by) is never a home; a free text parameter keeps any value.
    Values that the one other filter holding them was already given among others are read as
    that filter's, both conditions applying: it keeps only them (``kind: SHIPPED`` beside
    ``state: [OPEN, SHIPPED]`` reads ``state: [SHIPPED]``; beside ``size: LARGE`` a ``colour:
    LARGE`` is dropped), so nothing widens; so is an id given to two parameters where it
    misses one's format and fits the other's (``part_code: W-1`` beside ``widget_id: W-1``).
    A parameter's own value written in another case (``large``) is spelled as its enum lists
    it, or, for a parameter of too many values to list, in the one case its format takes
    (``bay cc`` for ``^[A-Z ]{6}$``)."""
    out: list[tuple[Any, str]] = []
    for k in list(args):
        own = enum_of(props.get(k))
        value = args[k]
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(v, list | dict) or v is None for v in values):
            continue
        if own is None:
            if not _misfits(props.get(k) or {}, values):
                continue
        elif any(str(v).strip().lower() in {str(o).lower() for o in own} for v in values):
            spelled = _holder(value, {k: props[k]})  # its own value in another case: as listed
            if spelled is not None and spelled[1] != value:
                args[k] = spelled[1]
                out += [(c, k) for c in (spelled[1] if isinstance(spelled[1], list)
                                         else [spelled[1]]) if c not in values]
            continue
        held = _holder(value, {p: prop for p, prop in props.items()
                               if p != k and p not in args})
        if held is None:
            again = _holder(value, {p: prop for p, prop in props.items()
                                    if p != k and p in args})
            if again is None:  # an id given to two parameters, one whose format it misses
                same = [p for p in props if p != k and p in args and args[p] == value
                        and enum_of(props[p]) is None and not _misfits(props[p] or {}, values)]
                again = (same[0], value) if len(same) == 1 else None
            if again is not None and _covers(args[again[0]], again[1]):
                # both filters apply: the other keeps only these of its values
                del args[k]
                args[again[0]] = again[1]
                out += [(c, again[0]) for c in (again[1] if isinstance(again[1], list)
                                                else [again[1]])]
            elif own is None and (respelled := _in_its_case(value, props.get(k) or {})):
                args[k] = respelled  # no other home: its own format, in another case
                out.append((respelled, k))
            continue
        home, canonical = held
        del args[k]  # a list where the parameter takes several, else the one value
        args[home] = canonical
        out += [(c, home) for c in (canonical if isinstance(canonical, list) else [canonical])]
    return out


def _covers(given: Any, values: Any) -> bool:
    """Every one of ``values`` is among what a parameter was given (as text, any case)."""
    have = {str(v).strip().lower() for v in (given if isinstance(given, list) else [given])}
    return all(str(v).lower() in have for v in (values if isinstance(values, list) else [values]))
