"""`tether ci`: the context-CI items, evaluated against this project's registry and files.

Each item is a small function returning (status, why): status is "holds", "fails" or
"not configured". Items 1-5 say whether drift can be detected, 6-9 whether it propagates, 10-12
whether anyone would know it worked, 13 whether the policy covers every product it should, 14
whether the policy servers enforce is the approved one and tether.yaml's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tether.config import Acceptance, Project
from tether.context.meta import ToolContext, enum_of
from tether.drift.detectors import definition_state
from tether.drift.export import TOOLS_DIR
from tether.policy import versions
from tether.policy.coverage import gaps
from tether.profiling.copied import copies
from tether.registry import Registry, ToolVersion, VersionInfo
from tether.registry.policy import coverage_gaps, holds_policy

HOLDS, FAILS, NOT_CONFIGURED = "holds", "fails", "not configured"
ACCEPTED = "accepted"
"""A finding a reviewer accepted (ci.accept, in the approved policy): said, never a failure."""


def accepted(f: Facts) -> list[Acceptance]:
    """The findings the approved policy accepts (an acceptance in tether.yaml counts once a
    reviewer approved it, as any widening)."""
    doc = (f.policy.definition.get("policy") if f.policy is not None else None) or {}
    return [Acceptance.model_validate(a) for a in doc.get("accepted", [])]


@dataclass
class Facts:
    project: Project
    current: dict[str, ToolVersion]
    versions: list[VersionInfo]
    state: dict[str, Any]
    reviews: list[dict[str, Any]]
    calls: dict[str, Any]  # Registry.call_summary()
    policy: ToolVersion | None = None  # the access policy's current version


Item = Callable[[Facts], tuple[str, str]]


def _ctx(v: ToolVersion) -> ToolContext:
    return ToolContext.of(v.definition)


def fingerprints(f: Facts) -> tuple[str, str]:
    bad = [n for n, v in f.current.items() if not (_ctx(v).schema_fingerprint
                                                   and _ctx(v).generated_at)]
    return (FAILS, f"no fingerprint or generated_at: {', '.join(bad)}") if bad else (
        HOLDS, f"all {len(f.current)} published tools carry both")


def recomputed(f: Facts) -> tuple[str, str]:
    if not f.state:
        return FAILS, "no check has run: run `tether check` (or `tether watch`) on a schedule"
    return HOLDS, "`tether check` recomputes every product's fingerprint and raises schema events"


def enums_from_data(f: Facts) -> tuple[str, str]:
    mismatched = []
    for name, v in f.current.items():
        if v.plan.get("action"):  # a write tool's enum is the states its declared moves reach
            continue
        for product in _ctx(v).products:
            enums = f.state.get(f"product:{product}", {}).get("enums", {})
            for pname, schema in v.definition.get("inputSchema", {}).get("properties", {}).items():
                listed = enum_of(schema)
                if listed is not None and pname in enums and set(map(str, listed)) != set(
                        enums[pname]):
                    mismatched.append(f"{name}.{pname}")
    if mismatched:
        return FAILS, f"enums differ from the last check's data: {', '.join(mismatched)}"
    return HOLDS, "every enum was discovered from the data at the last check"


def lineage(f: Facts) -> tuple[str, str]:
    targets = {e.to for e in f.project.config.lineage}
    missing = sorted(p for p in f.project.config.products if p not in targets)
    if missing:
        return FAILS, f"no upstream lineage declared for: {', '.join(missing)}"
    return HOLDS, "every product has upstream lineage; tools sit below their products"


def glossary(f: Facts) -> tuple[str, str]:
    now = definition_state(f.project)
    stale = [k.split(":", 1)[1] for k, v in now.items() if k.startswith(("term:", "metric:"))
             and f.state.get(k, {}).get("hash") != v["hash"]]
    if stale:
        return FAILS, f"edited since the last check (run tether check): {', '.join(stale)}"
    return HOLDS, "every term and metric is hashed; an edit raises definition_changed"


def generated(f: Facts) -> tuple[str, str]:
    edited = []
    for name, v in f.current.items():
        path = f.project.root / TOOLS_DIR / f"{name}.json"
        if path.exists() and json.loads(path.read_text()) != v.definition:
            edited.append(path.name)
    if edited:
        return FAILS, f"tools/ differs from the registry (hand-edited?): {', '.join(edited)}"
    return HOLDS, "tools/ equals the registry; regeneration is `tether check`"


def versioned(f: Facts) -> tuple[str, str]:
    bad = [f"{v.name}@{v.version}" for v in f.versions if v.version != "1.0.0"
           and not (v.supersedes and v.deprecation)]
    return (FAILS, f"missing supersedes or deprecation: {', '.join(bad)}") if bad else (
        HOLDS, "every version has semver; later ones a supersedes pointer and a window")


def diffs(f: Facts) -> tuple[str, str]:
    bad = [str(r["id"]) for r in f.reviews
           if set(r["body"].get("diffs", {})) != {"schema", "description", "policy"}]
    return (FAILS, f"reviews without the three diffs: {', '.join(bad)}") if bad else (
        HOLDS, f"{len(f.reviews)} reviews, each with schema, description and policy diffs")


def routing(f: Facts) -> tuple[str, str]:
    bad = []
    for v in f.versions:
        narrowed = v.change_kind == "policy" and v.review.get("rule") == "auto-policy-narrowing"
        if v.change_kind in ("breaking", "semantic", "policy") and not v.review.get("by") \
                and not narrowed:
            bad.append(f"{v.name}@{v.version}")
    blocked = {t["name"] + "@" + str(t["version"]) for r in f.reviews
               if r["status"] == "blocked" for t in r["body"]["tools"]}
    leaked = sorted(blocked & {f"{v.name}@{v.version}" for v in f.versions})
    if bad or leaked:
        return FAILS, f"published without a human: {bad}; blocked yet published: {leaked}"
    return HOLDS, "additive auto by rule, semantic/policy by a named human, restricted blocked"


def change_notes(f: Facts) -> tuple[str, str]:
    bad = [f"{v.name}@{v.version}" for v in f.versions if v.supersedes
           and not (v.noted and v.change_note)]
    return (FAILS, f"no change note the model reads: {', '.join(bad)}") if bad else (
        HOLDS, "servers send tools/list_changed; every new version's description has its note")


def pinned(f: Facts) -> tuple[str, str]:
    soon = (f.project.now() + dt.timedelta(days=7)).date()
    # (tool, deprecated version) -> the served_until dates the later versions state, read once:
    # the call log may hold many thousands of calls and the registry a thousand versions
    windows: dict[tuple[str, str], list[str]] = {}
    for v in f.versions:
        for old, d in v.deprecation.items():
            if isinstance(d, dict) and d.get("served_until"):
                windows.setdefault((v.name, old), []).append(str(d["served_until"]))
    closing = []
    for c in f.calls["deprecated"]:
        user, tool, version = c["user"], c["tool"], c["version"]
        for until in windows.get((tool, version), []):
            if dt.date.fromisoformat(until) <= soon:
                closing.append(f"{user} on {tool}@{version} (until {until})")
    if closing:
        return FAILS, f"still pinned to a closing window: {'; '.join(sorted(set(closing)))}"
    return HOLDS, (f"{f.calls['deprecated_calls']} calls to deprecated versions counted; none "
                   "pinned near a close")


def regression(f: Facts) -> tuple[str, str]:
    suite = f.project.config.eval.regression_suite
    if not suite:
        return NOT_CONFIGURED, "no eval.regression_suite named in tether.yaml"
    d = f.project.root / suite
    missing = [x for x in ("index.json", "labels.jsonl", "traces") if not (d / x).exists()]
    if missing:
        return FAILS, f"regression suite {suite} is not a labelled run folder (no {missing[0]})"
    latest = max((v.publication for v in f.versions), default=0)
    replayed = f.project.root / ".tether" / "regression" / f"publication-{latest}" / "labels.jsonl"
    if latest > 1 and not replayed.is_file():  # the first publication is the baseline
        return FAILS, (f"regression suite {suite} was not replayed against publication {latest} "
                       "(tether check and tether review approve replay it)")
    return HOLDS, f"regression suite {suite} replays after each publication"


def policy_coverage(f: Facts) -> tuple[str, str]:
    """Row filters reach every product that joins a filtered one (policy/coverage.py), and no
    masked column's values are copied into one a masking role reads unmasked
    (profiling/copied.py); a finding accepted in the approved policy (ci.accept) is said, not
    failed."""
    config = f.project.config
    filtered = any(r.row_filters for r in config.policies.roles.values())
    if not filtered and not any(r.masks for r in config.policies.roles.values()):
        return NOT_CONFIGURED, "no role has a row filter or a mask"
    states = {k.split(":", 1)[1]: v.get("columns", {})
              for k, v in f.state.items() if k.startswith("product:")}
    taken = [a for a in accepted(f) if a.item == 13]

    def takes(product: str, role: str) -> bool:
        return any(a.product in (None, product) and a.role in (None, role) for a in taken)

    found = gaps(config, {k: list(v) for k, v in states.items()}) if filtered else []
    kept = [g for g in found if not takes(g.product, g.role)]
    copied = [c for c in copies(f.project, states)
              if not all(takes(c.product, r) for r in c.roles)]
    said = [f"{g.sentence()} (accepted: {_reason(taken, g.product, g.role)})"
            for g in found if g not in kept]
    if kept or copied:
        return FAILS, "; ".join([g.sentence() for g in kept] + [c.sentence() for c in copied]) + (
            (". Give each a row filter (policies.roles.R.row_filters), e.g. its key IN (SELECT "
             "the key FROM the filtered product WHERE the same condition), or {via: PRODUCT}"
             if kept else "") + (". Mask each copy for those roles (or mark it personal)"
                                 if copied else ""))
    if said:
        return HOLDS, "every gap is accepted: " + "; ".join(said)
    return HOLDS, ("every product that holds a row-filtered product's key is filtered for the "
                   "same roles, and no masked column's values are read unmasked elsewhere")


def _reason(taken: list[Acceptance], product: str, role: str) -> str:
    return next(a.reason for a in taken if a.product in (None, product)
                and a.role in (None, role))


def policy_served(f: Facts) -> tuple[str, str]:
    """tether.yaml's access policy is the version servers enforce: none waits, none unchecked."""
    if f.policy is None:
        return FAILS, ("no access policy version is published, so servers have none to "
                       "enforce: run `tether build` or `tether check`")
    columns = {k.split(":", 1)[1]: list(v.get("columns", {}))
               for k, v in f.state.items() if k.startswith("product:")}
    here = versions.document(f.project.config, coverage_gaps(f.project, columns))
    approved = f.policy.definition.get("policy")
    if versions.same(here, approved):
        return HOLDS, (f"servers enforce policy {f.policy.version}, which is tether.yaml's; "
                       "a widening waits for a reviewer who is not its author")
    words = "; ".join(c.words for c in versions.changes(approved, here))
    waiting = [str(r["id"]) for r in f.reviews
               if r["status"] == "pending" and holds_policy(r)]
    return FAILS, (f"servers enforce policy {f.policy.version}, not tether.yaml's ({words}); "
                   + (f"review {', '.join(waiting)} waits for a reviewer" if waiting
                      else "run `tether check`"))


ITEMS: tuple[tuple[str, Item], ...] = (
    ("Every tool carries its schema fingerprint and generation time", fingerprints),
    ("Fingerprints are recomputed and a mismatch raises a drift event", recomputed),
    ("Every enum is discovered from data and re-sampled", enums_from_data),
    ("Tools are downstream assets in the lineage graph", lineage),
    ("Glossary and KPI edits raise drift events for the tools that use them", glossary),
    ("Tools are generated, never hand-edited; regeneration is one command", generated),
    ("Every tool has a version, a supersedes pointer and a deprecation window", versioned),
    ("Every regeneration produces schema, description and policy diffs", diffs),
    ("Additive auto-approves by rule; semantic and policy need a named human; restricted "
     "exposure blocks", routing),
    ("Agents get list_changed and the definition carries a change note", change_notes),
    ("Calls to deprecated versions are counted and nobody is pinned at the close", pinned),
    ("The agent's regression suite reruns on every context change", regression),
    ("Every product that joins a row-filtered product is filtered too", policy_coverage),
    ("The policy servers enforce is the last approved version, and it is tether.yaml's",
     policy_served),
)


def evaluate(project: Project, registry: Registry) -> list[dict[str, Any]]:
    facts = Facts(project, registry.current(), registry.version_index(), registry.state(),
                  registry.reviews(), registry.call_summary(), registry.current_policy())
    out = []
    whole = {a.item: a for a in accepted(facts) if a.product is None and a.role is None}
    for n, (title, item) in enumerate(ITEMS, 1):
        status, why = item(facts)
        if status == FAILS and n in whole:  # the whole item accepted, with its reason
            status, why = ACCEPTED, f"{why} (accepted: {whole[n].reason})"
        out.append({"item": n, "title": title, "status": status, "why": why})
    return out
