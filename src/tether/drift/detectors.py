"""Drift detectors: each a small function over the previous and current check state.

A state is what one check saw: per product its fingerprint, columns and enum values; per glossary
term and metric a hash of its meaning; per role and product the policy projection. Detectors are
a tuple of functions (DEFAULT_DETECTORS) a caller may extend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from tether.config import Project
from tether.context.profile import ProductProfile
from tether.errors import TetherError
from tether.imports.openlineage import dataset_columns
from tether.policy.entitle import role_masks
from tether.policy.model import restricted_columns
from tether.sources import open_source

Event = dict[str, Any]
State = dict[str, Any]


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


TERM_GOVERNS = {"definition", "predicate", "fields"}
METRIC_GOVERNS = {"measure", "predicate", "time", "time_end", "window", "outputs", "dimensions",
                  "calendar", "term"}


def definition_state(project: Project) -> State:
    """The ``term:`` and ``metric:`` keys of the state: what each governed definition governs,
    not its wording (an edited description or synonym is a wording change of the tools, a
    changed predicate or measure is semantic), and for an imported term the file and line (or
    node) each key came from."""
    c = project.config
    state: State = {}
    for term, g in c.glossary.items():
        governs = g.model_dump(include=TERM_GOVERNS)
        state[f"term:{term}"] = {"hash": _hash(governs), "definition": g.definition,
                                 "keys": {k: _hash(v) for k, v in sorted(governs.items())}}
        where = _imported_places(project, ("glossary", term), sorted(governs))
        if where:  # an imported term: the file and line (or node) each key came from
            state[f"term:{term}"]["where"] = where
    for metric, m in c.metrics.items():
        governs = m.model_dump(include=METRIC_GOVERNS)
        governs["outputs"] = {k: o["sql"] for k, o in governs.get("outputs", {}).items()}
        state[f"metric:{metric}"] = {"hash": _hash(governs)}
    return state


def snapshot(project: Project, profiles: dict[str, ProductProfile]) -> State:
    """The state a check compares against next time."""
    c = project.config
    state: State = {}
    for name, prof in profiles.items():
        cols = [x.column.name for x in prof.columns]
        state[f"product:{name}"] = {
            "fingerprint": prof.fingerprint,
            "columns": {x.column.name: [x.column.type, x.column.nullable] for x in prof.columns},
            "enums": {x.column.name: {str(e.value): e.count for e in x.enum}
                      for x in prof.columns if x.enum is not None},
            "restricted": sorted(restricted_columns(c, name, cols)),
        }
    tables = upstream_tables(project)
    into = _edges_into(project)
    observed = dataset_columns(project)  # OpenLineage schema facets of upstream datasets
    for name in profiles:
        edges = _upstream(project, name, into)
        nodes = sorted({e[0] for e in edges})
        lineage: dict[str, Any] = {
            "edges": edges,
            "upstream_fingerprints": {n: state[f"product:{n}"]["fingerprint"]
                                      if f"product:{n}" in state else tables[n]
                                      for n in nodes if f"product:{n}" in state or n in tables},
        }
        seen = {n: observed[n] for n in nodes if n in observed
                and f"product:{n}" not in state and n not in tables}
        if seen:  # only where a dataset was observed: other states keep their shape
            lineage["upstream_fingerprints"] |= {n: _hash(c) for n, c in seen.items()}
            lineage["upstream_columns"] = seen
        state[f"lineage:{name}"] = lineage
    for n, columns in observed.items():
        state[f"dataset:{n}"] = {"columns": columns}
    state |= definition_state(project)
    for name in c.products:
        state[f"described:{name}"] = _described(project, name)
    for role, r in c.policies.roles.items():
        for product, p in c.products.items():
            # the rules as written, not the columns they match today: a new column caught by an
            # existing rule is a schema event, not a policy edit
            state[f"policy:{role}:{product}"] = {
                "row_filter": r.row_filters.get(product),
                # as they apply: the pii selector over the columns classified pii now, so
                # declassifying a column (by hand or in an import) is a policy change
                "masks": {f"{product}.{col}": mode
                          for col, mode in sorted(role_masks(c, role, product).items())},
                "restricted_rules": sorted(
                    [g for g in c.policies.restricted if fnmatchcase(product, g.split(".")[0])]
                    + [f"{product}.{col}" for col, f in p.columns.items()
                       if f.classification == "restricted"]),
            }
    return state


def _described(project: Project, name: str) -> dict[str, Any]:
    """What a product's descriptions say (hashed), and the import each imported one came from."""
    p = project.config.products[name]
    columns = {k: f.description for k, f in sorted(p.columns.items()) if f.description}
    described: dict[str, Any] = {"hash": _hash([p.description, columns]),
                                 "description": p.description,
                                 "columns": {k: _hash(v) for k, v in columns.items()}}
    places = {k: str(o) for k, path in [("description", ("description",)), *[
        (col, ("columns", col, "description")) for col in columns]]
        if (o := project.origin("products", name, *path)) is not None and o.kind}
    if places:  # imported descriptions: the node (or file) each came from
        described["where"] = places
    return described


def _imported_places(project: Project, base: tuple[str, ...], keys: list[str]
                     ) -> dict[str, str]:
    """key -> where an import layer read it (file and line, a node), for imported keys."""
    out = {}
    for k in keys:
        origin = project.origin(*base, k)
        if origin is not None and origin.kind is not None:
            out[k] = origin.where or str(origin)
    return out


def upstream_tables(project: Project) -> dict[str, str]:
    """Fingerprints of the lineage nodes that are not products but are tables in a source
    (raw.orders, a staging table): one catalog read per source. Nodes found nowhere (a transform
    outside the warehouse) are compared by their edges only."""
    c = project.config
    nodes = sorted({e.from_ for e in c.lineage} - set(c.products))
    found: dict[str, str] = {}
    for name, cfg in c.sources.items() if nodes else ():
        try:
            src = open_source(name, cfg, project.root)
        except TetherError:
            continue  # a source that is down fails the product profiles, with the real error
        try:
            wanted = {n: src.table_expr(n) for n in nodes if n not in found}
            signatures = src.catalog_signatures(list(wanted.values()))
            for n, t in wanted.items():
                if t.name in signatures:
                    found[n] = _hash(signatures[t.name])
        finally:
            src.close()
    return found


def _edges_into(project: Project) -> dict[str, list[tuple[str, ...]]]:
    """{node: the lineage edges into it, as (from, to, via[, version])}: read once, not once a
    product. A versioned transform (a dbt model's checksum) is part of its edge; an edge
    without one keeps the three parts it always had."""
    into: dict[str, list[tuple[str, ...]]] = {}
    for e in project.config.lineage:
        into.setdefault(e.to, []).append(
            (e.from_, e.to, e.via or "", *([e.version] if e.version else [])))
    return into


def _upstream(project: Project, product: str,
              into: dict[str, list[tuple[str, ...]]] | None = None) -> list[list[str]]:
    """Every lineage edge above a product (transitively), as [from, to, via], sorted."""
    into = _edges_into(project) if into is None else into
    seen: set[tuple[str, ...]] = set()
    frontier = [product]
    while frontier:
        node = frontier.pop()
        for key in into.get(node, []):
            if key not in seen:
                seen.add(key)
                frontier.append(key[0])
    return [list(k) for k in sorted(seen)]


Detector = Callable[[State, State, "DetectContext"], list[Event]]


class DetectContext:
    """What detectors may ask of the data: the earliest time a value appears."""

    def __init__(self, first_seen: Callable[[str, str, str], str | None], now: str,
                 vanish_after: int = 3):
        self.first_seen = first_seen
        self.now = now
        self.vanish_after = vanish_after


def detect_schema(old: State, new: State, ctx: DetectContext) -> list[Event]:
    out = []
    for key, cur in new.items():
        if not key.startswith("product:") or key not in old:
            continue
        prev = old[key]
        if prev["fingerprint"] == cur["fingerprint"]:
            continue
        a, b = prev["columns"], cur["columns"]
        details = {
            "added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b)),
            "retyped": sorted(c for c in set(a) & set(b) if a[c][0] != b[c][0]),
            "nullability": sorted(c for c in set(a) & set(b) if a[c][1] != b[c][1]),
            "fingerprint": [prev["fingerprint"], cur["fingerprint"]],
        }
        out.append({"kind": "schema", "subject": key.split(":", 1)[1], "details": details,
                    "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_enums(old: State, new: State, ctx: DetectContext) -> list[Event]:
    out = []
    for key, cur in new.items():
        if not key.startswith("product:") or key not in old:
            continue
        product = key.split(":", 1)[1]
        for column, values in cur["enums"].items():
            before = old[key]["enums"].get(column)
            if before is None:
                continue
            for value in sorted(set(values) - set(before)):
                first = ctx.first_seen(product, column, value)
                out.append({"kind": "enum_value_added", "subject": f"{product}.{column}",
                            "details": {"value": value, "rows": values[value],
                                        "first_seen": first},
                            "first_observed_at": first, "detected_at": ctx.now})
            # absent values are counted across checks; N in a row is a probable deprecation
            absent_before = old[key].get("absent", {}).get(column, {})
            absent = {v: absent_before.get(v, 0) + 1
                      for v in (set(before) | set(absent_before)) - set(values)}
            cur.setdefault("absent", {})[column] = absent
            for value, n in sorted(absent.items()):
                if n == ctx.vanish_after:
                    out.append({"kind": "enum_value_vanished", "subject": f"{product}.{column}",
                                "details": {"value": value, "checks_absent": n},
                                "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_meaning(old: State, new: State, ctx: DetectContext) -> list[Event]:
    out = []
    for key, cur in new.items():
        if not key.startswith(("term:", "metric:")) or key not in old:
            continue
        if old[key]["hash"] != cur["hash"]:
            kind, subject = key.split(":", 1)
            details = {"before": old[key].get("definition"), "after": cur.get("definition")}
            before_keys = old[key].get("keys") or {}
            changed = [k for k, h in (cur.get("keys") or {}).items() if before_keys.get(k) != h]
            where = [cur["where"][k] for k in changed if k in cur.get("where", {})]
            if where:
                details["where"] = where[0]
            out.append({"kind": "definition_changed", "subject": f"{kind}:{subject}",
                        "details": details, "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_policy(old: State, new: State, ctx: DetectContext) -> list[Event]:
    out = []
    for key, cur in new.items():
        if key.startswith("policy:") and key in old and old[key] != cur:
            _, role, product = key.split(":", 2)
            out.append({"kind": "policy_changed", "subject": f"{role}:{product}",
                        "details": {"before": old[key], "after": cur},
                        "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_lineage(old: State, new: State, ctx: DetectContext) -> list[Event]:
    """A changed upstream edge or transform (`via`), or an upstream product's schema, invalidates
    every tool below the product."""
    out = []
    for key, cur in new.items():
        if key.startswith("lineage:") and key in old and old[key] != cur:
            before, after = old[key], cur
            changed = sorted(n for n in set(before["upstream_fingerprints"])
                             | set(after["upstream_fingerprints"])
                             if before["upstream_fingerprints"].get(n)
                             != after["upstream_fingerprints"].get(n))
            details: dict[str, Any] = {
                "edges_added": [e for e in after["edges"] if e not in before["edges"]],
                "edges_removed": [e for e in before["edges"] if e not in after["edges"]],
                "upstream_changed": changed}
            was, now = before.get("upstream_columns") or {}, after.get("upstream_columns") or {}
            lost = {n: sorted(set(was[n]) - set(now.get(n, {}))) for n in changed if n in was}
            if any(lost.values()):
                details["columns_lost"] = {n: c for n, c in lost.items() if c}
            out.append({"kind": "lineage_changed", "subject": key.split(":", 1)[1],
                        "details": details, "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_datasets(old: State, new: State, ctx: DetectContext) -> list[Event]:
    """An upstream dataset's observed schema (an OpenLineage schema facet) changed."""
    out = []
    for key, cur in new.items():
        if key.startswith("dataset:") and key in old and old[key] != cur:
            a, b = old[key]["columns"], cur["columns"]
            details = {"added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b)),
                       "retyped": sorted(c for c in set(a) & set(b) if a[c] != b[c])}
            out.append({"kind": "schema", "subject": key, "details": details,
                        "first_observed_at": None, "detected_at": ctx.now})
    return out


def detect_descriptions(old: State, new: State, ctx: DetectContext) -> list[Event]:
    """A product's or a column's description changed (typed, or in an imported dbt model): a
    wording change of the tools over it."""
    out = []
    for key, cur in new.items():
        if key.startswith("described:") and key in old and old[key]["hash"] != cur["hash"]:
            details: dict[str, Any] = {}
            if old[key].get("description") != cur.get("description"):
                details = {"before": old[key].get("description"),
                           "after": cur.get("description")}
            a, b = old[key].get("columns") or {}, cur.get("columns") or {}
            columns = sorted(c for c in set(a) | set(b) if a.get(c) != b.get(c))
            if columns:
                details["columns"] = columns
            places = cur.get("where") or {}
            found = [places[k] for k in (["description"] if "after" in details else [])
                     + columns if k in places]
            if found:
                details["where"] = found[0]
            out.append({"kind": "description_changed", "subject": key.split(":", 1)[1],
                        "details": details, "first_observed_at": None, "detected_at": ctx.now})
    return out


DEFAULT_DETECTORS: tuple[Detector, ...] = (detect_schema, detect_enums, detect_meaning,
                                           detect_policy, detect_lineage, detect_descriptions,
                                           detect_datasets)


def run_detectors(old: State, new: State, ctx: DetectContext,
                  detectors: tuple[Detector, ...] = DEFAULT_DETECTORS) -> list[Event]:
    if not old:
        return []  # the first check is the baseline
    return [e for d in detectors for e in d(old, new, ctx)]
