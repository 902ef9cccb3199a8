"""Classify the change between two versions of a tool definition (wire form).

major: a parameter or output field removed or retyped, a parameter newly required, or an enum
value removed; minor: additive (new optional parameter, enum value or output field); patch:
wording only. This is the structural part; semantic and policy kinds are added by the drift
detectors that know a governed definition or a role's projection changed.
"""

from __future__ import annotations

from typing import Any

from tether.context.meta import enum_of
from tether.registry.semver import Level


def _props(schema: dict[str, Any] | None) -> dict[str, Any]:
    return dict((schema or {}).get("properties", {}))


def _flat(schema: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in _props(schema).items():
        out[prefix + k] = v
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
            if isinstance(v.get("items"), dict):
                out.update(_flat(v["items"], f"{prefix}{k}[]."))
    return out


def classify(old: dict[str, Any], new: dict[str, Any]) -> tuple[Level, str]:
    """(level, kind) with kind one of wording | additive | breaking."""
    breaking = additive = False
    for key in ("inputSchema", "outputSchema"):
        a, b = _flat(old.get(key)), _flat(new.get(key))
        if set(a) - set(b):
            breaking = True
        if set(b) - set(a):
            additive = True
        for name in set(a) & set(b):
            ta, tb = a[name].get("type"), b[name].get("type")
            if key == "inputSchema" and tb == "array" and ta != "array" and enum_of(b[name]):
                additive = True  # one value became one or several: a bare value still works
            elif ta != tb:
                breaking = True
            ea = set(map(str, enum_of(a[name]) or []))
            eb = set(map(str, enum_of(b[name]) or []))
            if ea - eb:
                breaking = True
            if eb - ea:
                additive = True
    req_a = set(old.get("inputSchema", {}).get("required", []))
    req_b = set(new.get("inputSchema", {}).get("required", []))
    if req_b - req_a:
        breaking = True
    if breaking:
        return "major", "breaking"
    if additive:
        return "minor", "additive"
    return "patch", "wording"
