"""A call's arguments as the tool takes them: blanks left out, lists where several values are
taken, checked against the schema (with the values the governed definition declares), and the
texts an error may quote back. Functions over a call and its definition (a schema's validator
is built once and kept); no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
from typing import Any

import jsonschema

from tether.context.meta import ToolContext, enum_of, with_enum
from tether.serve.kinds import Call, ToolError
from tether.toolgen.model import AGGREGATE, QueryPlan
from tether.toolgen.write import CONTROL

SHAPING = ("count_by", AGGREGATE)
"""Listing arguments that ask for counts or totals instead of rows."""


_VALIDATORS: dict[str, Any] = {}
_BY_OBJECT: dict[int, tuple[dict[str, Any], Any]] = {}


def validator(schema: dict[str, Any]) -> Any:
    """The schema's validator, built once per schema text; found by the schema object first (a
    definition's schema is the same object call after call, and writing its text to look it
    up cost more than checking the arguments)."""
    hit = _BY_OBJECT.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        _VALIDATORS[key] = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    if len(_BY_OBJECT) > 4096:  # definitions come and go with publications
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, _VALIDATORS[key])
    return _VALIDATORS[key]


def known(call: Call) -> tuple[str, ...]:
    """Texts the caller wrote: what an engine error may quote back to them."""
    return (*(str(v) for v in call.args.values()), call.tool)


def without_blanks(call: Call) -> Call:
    """Arguments a model wrote as "nothing" are not given: a null or an empty string for any
    argument (models fill optional parameters with "" rather than leave them out), and a
    placeholder cursor ("null", "none") on a first page. A real value, however odd, stays and
    is validated."""
    def blank(v: Any) -> bool:
        return v is None or (isinstance(v, str) and not v.strip())

    def empty(key: str, v: Any) -> bool:
        if blank(v) or (isinstance(v, list) and all(blank(x) for x in v)):
            return True
        return key == "cursor" and isinstance(v, str) and v.strip().lower() in ("null", "none")

    def kept(v: Any) -> Any:  # a list's blank items are left out as well
        return [x for x in v if not blank(x)] if isinstance(v, list) else v

    if not any(empty(k, v) or kept(v) != v for k, v in call.args.items()):
        return call
    return dataclasses.replace(call, args={k: kept(v) for k, v in call.args.items()
                                           if not empty(k, v)})


_SCALAR = ("string", "integer", "number", "boolean")


def as_declared(call: Call) -> Call:
    """A single value for a parameter that takes several values of an enum at once is a list of
    one; a value given twice counts once. The other way round, a list of one for a parameter
    that takes one value (count_by, sum_and_average_of, a filter on one identifier) is that
    value: it asks the same. A number written as a string for a number parameter is the
    number."""
    props = (call.definition.get("inputSchema") or {}).get("properties") or {}
    several = {f.param for f in call.plan.filters if f.several} | {
        k for k, v in call.args.items() if not isinstance(v, list | dict) and isinstance(
            props.get(k), dict) and props[k].get("type") == "array"}
    one = [k for k, v in call.args.items() if isinstance(v, list) and len(v) == 1 and (
        k in SHAPING or (isinstance(props.get(k), dict) and props[k].get("type") in _SCALAR))
        and not (call.plan.action is not None and k in CONTROL)]  # a write's: as given
    numeric = {k for k, v in call.args.items() if _numbered(props.get(k), v) != v}
    if not several & set(call.args) and not one and not numeric:
        return call
    args = dict(call.args)
    for k in one:
        args[k] = args[k][0]
    for k in several & set(args):
        values = args[k] if isinstance(args[k], list) else [args[k]]
        args[k] = list({json.dumps(v, sort_keys=True, default=str): v for v in values}.values())
    for k in list(args):
        args[k] = _numbered(props.get(k), args[k])
    return dataclasses.replace(call, args=args)


_INTEGER = re.compile(r"[+-]?\d{1,18}")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _numbered(prop: Any, value: Any) -> Any:
    """A number written as a string ("1" for an integer parameter, or in an integer list) is
    that number: models quote numbers, and the string and the number mean the same. Anything
    else is left as given, for the schema to refuse."""
    if not isinstance(prop, dict):
        return value
    if isinstance(value, list) and prop.get("type") == "array":
        item = prop.get("items")
        out = [_numbered(item, v) for v in value]
        return out if out != value else value
    if not isinstance(value, str):
        return value
    text = value.strip()
    if prop.get("type") == "integer" and _INTEGER.fullmatch(text):
        return int(text)
    if prop.get("type") == "number" and _NUMBER.fullmatch(text):
        return float(text) if not _INTEGER.fullmatch(text) else int(text)
    return value


def shown(value: Any) -> str:
    """An argument as an answer or an error quotes it: several values joined with "or"."""
    if isinstance(value, list):
        return " or ".join(str(v)[:80] for v in value[:10]) + (" ..." if len(value) > 10 else "")
    return str(value)[:80]


def validate(definition: dict[str, Any], args: dict[str, Any]) -> None:
    """Arguments against the tool's inputSchema; unknown arguments are refused too."""
    schema = definition.get("inputSchema") or {"type": "object"}
    allowed = set(schema.get("properties", {}))
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)[:200]}; allowed: "
                        f"{', '.join(sorted(allowed)) or 'none'} (call again without the "
                        "others)")
    errors = sorted(validator(schema).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = str(e.path[0]) if e.path else "arguments"  # a list's item: its parameter
        described = schema.get("properties", {}).get(where, {}).get("description", "")
        quoted = repr(e.instance)
        quoted = quoted if len(quoted) <= 80 else quoted[:77] + "..."
        if e.validator == "enum":
            msg = f"{quoted} is not allowed; allowed values: " + ", ".join(
                map(str, e.validator_value)) + elsewhere(schema, where, e.instance)
            if where not in (*SHAPING, "order") and where not in (schema.get("required") or []):
                # a model that meant every value made one up ("ALL") until it gave up
                msg += f"; leave {where} out for every value"
        elif e.validator == "pattern":
            msg = f"{quoted} does not fit the format {e.validator_value}"
        else:
            msg = e.message if len(e.message) <= 300 else e.message[:297] + "..."
        raise ToolError(f"{where}: {msg}" + (f". {described}" if described else ""))


def with_declared(definition: dict[str, Any], plan: QueryPlan) -> dict[str, Any]:
    """The definition as arguments are checked against it: each enum with the values the
    governed definition names that the data does not hold (they match no row; refusing one the
    definition itself names left a model with nothing but a refusal to answer from)."""
    extra = {f.param: f.declared for f in plan.filters if f.declared}
    if not extra:
        return definition
    out = copy.deepcopy(definition)
    props = out.get("inputSchema", {}).get("properties", {})
    for param, values in extra.items():
        prop = props.get(param)
        enum = enum_of(prop)
        if prop is not None and enum is not None:
            with_enum(prop, [*enum, *(v for v in values if v not in enum)])
    return out


def elsewhere(schema: dict[str, Any], param: str, value: Any) -> str:
    """Where a value refused by one parameter's enum belongs: the other parameters that list it
    (compared as text, case-insensitively), so the call can be made again right."""
    said = str(value).strip().lower()
    others = [name for name, prop in (schema.get("properties") or {}).items()
              if name != param and any(str(v).lower() == said for v in enum_of(prop) or [])]
    if not others:
        return ""
    return f" ({value!r} is a value of {' and '.join(others)}: call again with {others[0]})"


def coerce_times(args: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    """ISO date-time strings -> aware datetimes (UTC when no offset); a bad one is a ToolError."""
    props = (definition.get("inputSchema") or {}).get("properties", {})
    out = dict(args)
    for name, value in args.items():
        if props.get(name, {}).get("format") == "date-time" and isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ToolError(f"{name}: {value[:40]!r} is not an ISO 8601 date-time; write "
                                "e.g. 2026-08-01T00:00:00Z") from None
            out[name] = parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return out


def definition_products(definition: dict[str, Any]) -> list[str]:
    return ToolContext.of(definition).products


_UNIT = re.compile(r"unit: ([^;.)(]+?)(?: \(|[;.)]|$)", re.I)


def definition_units(definition: dict[str, Any]) -> dict[str, str]:
    out = {}
    rows = (((definition.get("outputSchema") or {}).get("properties") or {}).get("rows") or {})
    for name, schema in ((rows.get("items") or {}).get("properties") or {}).items():
        m = _UNIT.search(str(schema.get("description", "")))
        if m and m.group(1).strip().lower() not in ("number", "key, no unit", "none"):
            out[name] = m.group(1).strip()
    return out
