"""`tether check`: detect, regenerate, classify, note, diff, gate, publish, in one pass.

Routes: wording and additive changes publish at once by a named rule; breaking,
semantic and policy changes wait in a review for a named human; a change that would expose a
restricted column (by the current policy or by the one the last check saw) is blocked, paged and
never published. Exit codes: 2 error, 12 blocked, 11 waiting for review, 10 published, 0 none.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from tether.config import Project
from tether.context.meta import ToolContext, context_of, retired_info, stamp_publication
from tether.drift import audit, gate
from tether.drift.detectors import DetectContext, Event, run_detectors, snapshot
from tether.drift.export import EXPORT_INDEX, TOOLS_DIR, export, unchanged
from tether.drift.gate import related
from tether.drift.retire import retirement
from tether.errors import ConfigError, TetherError
from tether.policy import exposure as exposing
from tether.policy import require_reviewer
from tether.policy.versions import POLICY_KIND
from tether.profiling.layers import refresh_all
from tether.profiling.policycheck import Problem, check_profiled, sources_of
from tether.profiling.probe import PROFILE_KEY, profile_changed
from tether.profiling.readable import Closed, read_product, readers
from tether.registry import FIRST, NewVersion, Registry, bump, content_hash, open_registry
from tether.registry import policy as policyversion
from tether.sources import open_product_source
from tether.toolgen import GeneratedTool, generate, without_products
from tether.toolgen.describe import split_sentences

META_KEY_STATE = "check:last"


class Blocked(TetherError):
    """A publication the gate blocked (exit 12)."""

    exit_code = 12
  # what the last check generated against
EXIT = {"error": 2, "blocked": 12, "review": 11, "published": 10, "none": 0}


@dataclass
class Outcome:
    tool: str
    outcome: str  # unchanged | published | pending | blocked | unreadable
    version: str | None = None
    change_level: str | None = None
    change_kind: str | None = None
    change_note: str | None = None
    review: int | None = None


@dataclass
class CheckResult:
    events: list[Event] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    publication: int | None = None
    reviews: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What the pass noticed that is no error (an imported input that is gone, its facts kept)."""

    @property
    def exit_code(self) -> int:
        kinds = {o.outcome for o in self.outcomes}
        if "blocked" in kinds:
            return EXIT["blocked"]
        if "pending" in kinds or "unreadable" in kinds:  # a person acts on both
            return EXIT["review"]
        return EXIT["published"] if "published" in kinds else EXIT["none"]

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "publication": self.publication,
                "reviews": self.reviews, "warnings": self.warnings, "events": self.events,
                "tools": [o.__dict__ for o in self.outcomes]}


def check(project: Project, progress: Callable[[str], None] | None = None,
          full: bool = False, author: str | None = None) -> CheckResult:
    """One pass. Products whose probe moved nothing keep their last profile (probe.py);
    ``full`` profiles every product. ``author`` (a policy user, else the OS login) is recorded
    on the reviews it opens: nobody approves their own policy change."""
    note = progress or (lambda _m: None)
    project, again, warnings = refresh_all(project)  # a moved import input is read again first
    if again:
        note(f"re-read the {', '.join(again)} import")
    registry = open_registry(project)
    try:
        result = run_pass(project, registry, note, full, author)
    finally:
        registry.close()
    result.warnings = warnings + result.warnings
    return result


def run_pass(project: Project, registry: Registry, note: Callable[[str], None],
             full: bool, author: str | None = None) -> CheckResult:
    now = project.now()
    stamp = now.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    old = registry.state()
    cache = {k.split(":", 1)[1]: v for k, v in old.items() if k.startswith(PROFILE_KEY)}
    gone = _unreadable(project)  # a product that cannot be read stops no other
    whole, project = project, without_products(project, set(gone))
    kept = {n: v for n, v in cache.items() if n in gone}  # their profiles wait for them
    listed, cache, redone = profile_changed(project, cache, full=full, progress=note)
    cache |= kept
    profiles = {p.product: p for p in listed}
    # a policy naming a missing column fails closed; a rule reading a table that is gone
    # closes what it guards in the servers, and is drift here
    broken = check_profiled(project, profiles, closing=readers(whole, set(gone)))
    new = _kept(old, sticky_restrictions(snapshot(project, profiles), old), set(gone))
    note("running detectors")
    events = run_detectors(old, new, DetectContext(_first_seen(project), stamp,
                                                   project.config.drift.vanish_after_checks))
    events += unreadable_events(whole, gone, broken, stamp)
    cached = {PROFILE_KEY + n: v for n, v in cache.items()}
    restricted = exposing.restricted_by(project, old, new)
    # the policy as tether.yaml writes it, a product gone or not (its columns as last read)
    policy = policyversion.pending(whole, registry, {
        n: [c.column.name for c in p.columns] for n, p in profiles.items()} | {
        n: list(old[f"product:{n}"]["columns"]) for n in gone if f"product:{n}" in old})
    widens = policy is not None and policy.waits
    current = registry.current()
    open_reviews = [r for r in registry.reviews() if r["status"] in ("pending", "blocked")]
    # nothing moved since a check that found every tool current: generation would give the
    # same tools, so skip it (the key holds the config and the day: descriptions name periods)
    key = generation_key(project, now)
    last = old.get(META_KEY_STATE, {})
    if (not full and not redone and not events and not open_reviews and policy is None
            and last.get("clean")
            and last.get("key") == key and last.get("publication") == registry.latest_publication()):
        registry.save_state(new | cached | {META_KEY_STATE: last}, now)
        return CheckResult(outcomes=[Outcome(n, "unchanged", v.version)
                                     for n, v in sorted(current.items())])
    tools = generate(project, profiles, "grounded")
    waiting = {(t["name"], t["hash"]): (r["id"], r["status"]) for r in open_reviews
               for t in r["body"]["tools"]}
    result = CheckResult(events=events)
    routes: Routes = {"auto": [], "human": [], "blocked": []}
    unread = _held(current, gone)
    for t in tools:
        wire = t.wire()
        prev = current.get(t.name)
        if prev is not None and t.name in unread:  # kept as published while unreadable
            result.outcomes.append(Outcome(t.name, "unreadable", prev.version,
                                           change_note=unread[t.name]))
            continue
        if prev is not None and unchanged(prev, wire, t.plan):
            result.outcomes.append(Outcome(t.name, "unchanged", prev.version))
            continue
        moved = gate.server_moved(project, prev.plan if prev else None, t.plan)
        route, level, kind = gate.route(t, wire, prev.definition if prev else None, events,
                                        restricted, policy_widens=widens, moved=bool(moved))
        version = bump(prev.version, level) if prev else FIRST
        change_note = _note(project, t, events, kind, new, moved) if prev else "New tool."
        _stamp(wire, version, prev.version if prev else None, level, kind, change_note, stamp,
               now + dt.timedelta(days=project.config.drift.deprecation_days), route)
        outcome = Outcome(t.name, "published" if route == "auto" else
                          ("blocked" if route == "blocked" else "pending"),
                          version, level, kind, change_note)
        held = waiting.get((t.name, content_hash(wire)))
        if held is not None:  # the same candidate already waits (or is blocked): ask once
            outcome.review = held[0]
            outcome.outcome = "blocked" if held[1] == "blocked" else "pending"
            result.outcomes.append(outcome)
            continue
        routes[route].append(Candidate(t.name, t.plan.model_dump(mode="json"), wire, outcome))
        result.outcomes.append(outcome)
    _retire_vanished(project, {t.name for t in tools}, current, open_reviews, restricted,
                     routes, result, unread)
    if policy is not None:
        _route_policy(policy, stamp, waiting, routes, result, policyversion.author_of(author))
    dispatch(project, registry, routes, result, current, old, new, events,
             author=policyversion.author_of(author))
    clean = all(o.outcome == "unchanged" for o in result.outcomes)
    # the events and the state they were detected against land in one transaction: a check
    # killed before it records nothing, and the next one detects the same events once
    registry.save_state(new | cached | {META_KEY_STATE: {
        "key": key, "publication": registry.latest_publication(), "clean": clean}}, now,
        events=events)
    return result


def _route_policy(policy: policyversion.PolicyChange, stamp: str,
                  waiting: dict[tuple[str, str], tuple[int, str]], routes: Routes,
                  result: CheckResult, author: str) -> None:
    """tether.yaml's policy as a candidate: published at once when it can only narrow (or
    changes no one's access), or widens while no published policy has named two reviewers
    (the first admin: recorded with its author, and said); else a person decides; asked once
    while it waits."""
    route = "human" if policy.waits else "auto"
    alone = policy.effect == "widening" and route == "auto"
    wire = policy.definition(stamp, route, "first-admin" if alone else None)
    if alone:
        context_of(wire)["review"]["by"] = author
        result.warnings.append(policyversion.first_admin_words(policy, author))
    outcome = Outcome(POLICY_KIND, "published" if route == "auto" else "pending",
                      policy.version, policy.level, POLICY_KIND,
                      policy.note if policy.supersedes else "The first policy version.")
    held = waiting.get((POLICY_KIND, content_hash(wire)))
    result.outcomes.append(outcome)
    if held is not None:
        outcome.review = held[0]
        outcome.outcome = "blocked" if held[1] == "blocked" else "pending"
        return
    routes[route].append(Candidate(POLICY_KIND, {"kind": POLICY_KIND}, wire, outcome))


@dataclass
class Candidate:
    """A version on its way through the gate: the tool, its plan, its wire definition."""

    name: str
    plan: dict[str, Any]
    wire: dict[str, Any]
    outcome: Outcome
    retire: bool = False


Routes = dict[str, list[Candidate]]


def dispatch(project: Project, registry: Registry, routes: Routes, result: CheckResult,
             current: dict[str, Any], old: dict[str, Any], new: dict[str, Any],
             events: list[Event], rule: str | None = None, author: str | None = None) -> None:
    """What every publisher does with the gate's routes: publish the auto ones in one
    publication, open one review for those a person decides and one (paged) for the blocked
    ones (``author``: who ran it), and export the tools now current."""
    now = project.now()
    if routes["auto"]:
        kinds = sorted({c.outcome.change_kind or "" for c in routes["auto"]})
        rule = rule or f"auto: {'+'.join(kinds)}"
        result.publication = registry.publish(
            [NewVersion(c.name, c.outcome.version or FIRST, c.wire, c.plan)
             for c in routes["auto"]], rule, now)
        audit.record(project, registry,
                     audit.message(rule, {c.name: c.outcome.change_note for c in routes["auto"]}))
    for route in ("human", "blocked"):
        if routes[route]:
            policy = registry.current_policy()
            body = _review_body(routes[route], current | (
                {POLICY_KIND: policy} if policy is not None else {}), old, new, events)
            rid = registry.add_review(route, "pending" if route == "human" else "blocked",
                                      body, now, author=author)
            result.reviews.append(rid)
            for c in routes[route]:
                c.outcome.review = rid
            if route == "blocked":
                gate.page_blocked(project, rid, [c.name for c in routes[route]])
    export(project.root / TOOLS_DIR, served_definitions(project, registry),
           project.root / EXPORT_INDEX)


def served_definitions(project: Project, registry: Registry) -> list[dict[str, Any]]:
    """The current definition of every tool that is still served (a retired tool's, until its
    window ends): what tools/ holds."""
    days = dt.timedelta(days=project.config.drift.deprecation_days)
    out = []
    for v in registry.current().values():
        if retired_info(v.definition) and project.now() > (
                dt.datetime.fromisoformat(v.published_at) + days):
            continue
        out.append(v.definition)
    return out


def _retire_vanished(project: Project, generated: set[str], current: dict[str, Any],
                     open_reviews: list[dict[str, Any]], restricted: exposing.Restricted,
                     routes: Routes, result: CheckResult,
                     unread: dict[str, str] | None = None) -> None:
    """A published tool that tether.yaml no longer generates (renamed, its product removed) is
    retired through a review: a person decides, and it is served for its window meanwhile. A
    tool over a product that cannot be read now is kept as published (servers close it)."""
    asked = {t["name"] for r in open_reviews for t in r["body"]["tools"] if t.get("retire")}
    for name, prev in sorted(current.items()):
        if name in generated or retired_info(prev.definition):
            continue
        if unread and name in unread:
            result.outcomes.append(Outcome(name, "unreadable", prev.version,
                                           change_note=unread[name]))
            continue
        if name in asked:
            held = next(r for r in open_reviews for t in r["body"]["tools"]
                        if t.get("retire") and t["name"] == name)
            result.outcomes.append(Outcome(name, "blocked" if held["status"] == "blocked"
                                           else "pending", prev.version, "major", "breaking",
                                           review=held["id"]))
            continue
        candidate = retire_candidate(project, prev, f"{name} is no longer generated from "
                                     "tether.yaml (renamed, or its product or metric removed)",
                                     restricted)
        routes["blocked" if candidate.outcome.outcome == "blocked" else "human"].append(candidate)
        result.outcomes.append(candidate.outcome)


def retire_candidate(project: Project, prev: Any, reason: str,
                     restricted: exposing.Restricted) -> Candidate:
    """The retirement of ``prev``'s tool as a gate candidate: a person decides (a removal is
    breaking); blocked if the definition it keeps serving exposes a restricted column."""
    wire, version = retirement(prev, reason, project.now())
    blocked = bool(exposing.exposure(wire, prev.plan, restricted))
    outcome = Outcome(prev.name, "blocked" if blocked else "pending", version, "major",
                      "breaking", f"Retired: {reason}.")
    return Candidate(prev.name, prev.plan, wire, outcome, retire=True)


def _unreadable(project: Project) -> dict[str, Closed]:
    """The products whose source cannot be reached or whose table (or SQL) cannot be read now;
    every product gone is an error as before (there is nothing left to check)."""
    gone: dict[str, Closed] = {}
    by_source: dict[str, list[str]] = {}
    for p in project.config.products:
        by_source.setdefault(project.source_name(p), []).append(p)
    with sources_of(project) as source:
        for members in by_source.values():
            reading: contextlib.AbstractContextManager[None]
            try:
                reading = source(members[0]).catalog_read()
            except Exception:  # the source cannot be opened: each product says so below
                reading = contextlib.nullcontext()
            with reading:  # one read of the catalog for all of a source's tables
                gone |= {p: found for p in members
                         if isinstance(found := read_product(project, source, p), Closed)}
    if gone and len(gone) == len(project.config.products):
        first = next(iter(gone.values()))
        raise ConfigError(f"no product can be read: {first.product}: {first.reason}",
                          where=project.where("products", first.product),
                          hint="Check the sources in tether.yaml and that they are up.")
    return gone


def unreadable_events(project: Project, gone: dict[str, Closed], broken: list[Problem],
                      stamp: str) -> list[Event]:
    """Drift for each product that cannot be read (``missing_table``, ``source_unreachable``:
    servers close it for everyone) and each rule that reads one of them (a row filter that no
    longer compiles: servers close its product for its role)."""
    out: list[Event] = [{"kind": c.kind, "subject": p, "details": {
        "reason": c.reason, "closed_for": "every role"}, "first_observed_at": None,
        "detected_at": stamp} for p, c in sorted(gone.items())]
    for prob in broken:
        out.append({"kind": "missing_table", "subject": str(prob.product), "details": {
            "reason": f"{project.where(*prob.loc)}: {prob.message}",
            "closed_for": [prob.role] if prob.role else "every role",
            "reads": sorted(gone)}, "first_observed_at": None, "detected_at": stamp})
    return out


def _kept(old: dict[str, Any], new: dict[str, Any], gone: set[str]) -> dict[str, Any]:
    """A product that cannot be read keeps its last state: nothing else about it is detected
    until it can be read again (then its changes are, against what it was)."""
    for key, value in old.items():
        parts = key.split(":")
        if parts[0] in ("product", "lineage", "described", "policy") and parts[-1] in gone:
            new[key] = value
    return new


def _held(current: dict[str, Any], gone: dict[str, Closed]) -> dict[str, str]:
    """The published tools kept as they are while products cannot be read (name -> why):
    those reading one, and those whose definition names one of them or a tool reading one
    (generated without it, they would lose what they say of it)."""
    held = {n: "Kept as published: " + "; ".join(
        f"{p} cannot be read now ({gone[p].reason.rstrip('.')})"
        for p in sorted(set(_products_of(v)) & set(gone))) + "."
        for n, v in current.items() if set(_products_of(v)) & set(gone)}
    if not gone:
        return held
    words = re.compile(r"\b(" + "|".join(map(re.escape, sorted({*gone, *held}))) + r")\b")
    return held | {n: f"Kept as published while {', '.join(sorted(gone))} cannot be read: it "
                   f"names {m.group(1)}." for n, v in current.items()
                   if n not in held and (m := words.search(json.dumps(v.definition)))}


def _products_of(prev: Any) -> list[str]:
    """The products a published tool reads (its definition's, else its plan's)."""
    found = ToolContext.of(prev.definition).products
    product = (prev.plan or {}).get("product")
    return [*found, *([product] if product else [])]


def sticky_restrictions(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """A column the gate once saw restricted stays restricted for the gate: lifting the
    restriction in tether.yaml must not, one check later, publish what it blocked."""
    for key, value in new.items():
        before = old.get(key)
        if key.startswith("product:") and isinstance(before, dict):
            value["restricted"] = sorted(set(value.get("restricted", []))
                                         | set(before.get("restricted", [])))
    return new


def generation_key(project: Project, now: dt.datetime) -> str:
    """What generation depends on beside the data: the configuration and the day."""
    config = project.config.model_dump(mode="json", exclude={"clock"})
    text = json.dumps([config, now.date().isoformat()], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _first_seen(project: Project) -> Callable[[str, str, str], str | None]:
    """When a value first landed, from the data: the earliest load time (freshness column) of
    the rows holding it, else their earliest metric time; None when the data cannot say."""
    def first(product: str, column: str, value: str) -> str | None:
        p = project.config.products[product]
        ts = (p.freshness.column if p.freshness and p.freshness.column else None) or (
            p.timestamp_column())
        if not ts or not p.table:
            return None
        with open_product_source(project, product) as src:
            q = exp.select(exp.func("MIN", exp.column(ts, quoted=True))).from_(
                src.table_expr(p.table)).where(
                exp.column(column, quoted=True).eq(exp.Placeholder(this="v")))
            found = src.query(q, {"v": value})[0][0]
        return found.isoformat() if hasattr(found, "isoformat") else None

    return first


def _note(project: Project, t: GeneratedTool, events: list[Event], kind: str,
          new: dict[str, Any], moved: str | None = None) -> str:
    """Plain words: what changed, when it first appeared, how many rows, what it means.
    Restricted columns are never named."""
    parts = [moved] if moved else []
    for e in related(t, events):
        d = e["details"]
        if e["kind"] == "enum_value_added":
            when = f" first seen {d['first_seen'][:16]}Z" if d.get("first_seen") else ""
            meaning = _glossary_meaning(project, d["value"])
            parts.append(f"new value {d['value']} in {e['subject']} ({d['rows']} rows{when})"
                         + (f"; {meaning}" if meaning else ""))
        elif e["kind"] == "enum_value_vanished":
            parts.append(f"{d['value']} no longer appears in {e['subject']}")
        elif e["kind"] == "schema":
            hidden = set(new.get(f"product:{e['subject']}", {}).get("restricted", []))
            bits = [f"{k} {', '.join(c for c in v if c not in hidden)}" for k, v in d.items()
                    if k != "fingerprint" and [c for c in v if c not in hidden]]
            if not bits:
                continue
            parts.append(f"{e['subject']} schema changed: {'; '.join(bits)}")
        elif e["kind"] == "definition_changed":
            after = str(d.get("after") or "edited").rstrip(".")
            where = f" ({d['where']})" if d.get("where") else ""
            parts.append(f"the governed definition of {e['subject'].split(':', 1)[1]} changed"
                         f"{where}: now {after}")
        elif e["kind"] == "description_changed":
            where = f" ({d['where']})" if d.get("where") else ""
            cols = d.get("columns", [])
            what = ([f"the description of {e['subject']}"] if "after" in d else []) + (
                [f"the descriptions of its columns {', '.join(cols[:5])}"
                 + (f" and {len(cols) - 5} more" if len(cols) > 5 else "")] if cols else [])
            parts.append(f"{' and '.join(what) or 'a description'} changed{where}")
        elif e["kind"] == "policy_changed":
            parts.append(f"policy for {e['subject'].replace(':', ' on ')} changed")
        elif e["kind"] == "lineage_changed":
            what = d["upstream_changed"] or [x[2] or x[0] for x in d["edges_added"]]
            lost = [f"{n} lost {', '.join(cols)}" for n, cols in sorted(
                (d.get("columns_lost") or {}).items())]
            parts.append(f"upstream of {e['subject']} changed: "
                         f"{', '.join(lost or what) or 'lineage'}")
    return ("; ".join(parts) or f"{kind} change").rstrip(".") + "."


def _glossary_meaning(project: Project, value: str) -> str | None:
    for term, g in project.config.glossary.items():
        if value.lower() in (g.definition + " " + " ".join(g.synonyms)).lower():
            return f"the glossary's '{term}' says: {g.definition.rstrip('.')}"
    return None


def _stamp(wire: dict[str, Any], version: str, supersedes: str | None, level: str, kind: str,
           note: str, stamp: str, served_until: dt.datetime, route: str) -> None:
    """Version fields into _meta, and the change note into the description the model reads."""
    ctx = context_of(wire)
    head: dict[str, Any] = {"version": version}
    if supersedes:
        head.update({"supersedes": supersedes, "change_level": level, "change_kind": kind,
                     "change_note": note,
                     "deprecation": {supersedes: {
                         "served_until": served_until.date().isoformat(),
                         "reason": f"superseded by {version}"}}})
        if not re.fullmatch(r"\w+ change\.", note):  # a note that says what changed
            sentence = f"Changed in {version}: {note}"
            wire["description"] = f"{wire['description']} {sentence}"
            ctx["sources"][sentence] = "samples" if "new value" in note else (
                "glossary" if kind == "semantic" else "policy" if kind == "policy" else "schema")
    head["review"] = {"mode": "auto" if route == "auto" else "human", "at": stamp}
    if route == "auto":  # a policy change routed at once only narrowed (gate.route)
        head["review"]["rule"] = "auto-policy-narrowing" if kind == "policy" else f"auto-{kind}"
    head["generated_at"] = stamp
    stamp_publication(wire, head)


def _review_body(items: list[Candidate], current: dict[str, Any], old: dict[str, Any],
                 new: dict[str, Any], events: list[Event]) -> dict[str, Any]:
    """One review object: the candidate versions and the three diffs (schema, description,
    policy projection)."""
    tools, schema, description, policy = [], {}, {}, {}
    for c in items:
        wire, o = c.wire, c.outcome
        prev = current[c.name].definition if c.name in current else {}
        tools.append({"name": c.name, "version": o.version, "hash": content_hash(wire),
                      "definition": wire, "plan": c.plan, "retire": c.retire,
                      "change_level": o.change_level, "change_kind": o.change_kind,
                      "change_note": o.change_note})
        schema[c.name] = _schema_diff(prev, wire)
        description[c.name] = "\n".join(difflib.unified_diff(
            _sentences(prev.get("description", "")), _sentences(wire["description"]),
            "published", "candidate", lineterm=""))
        if c.name == POLICY_KIND:  # the access policy itself: each change in words
            policy[c.name] = {"changes": wire.get("changes", []),
                              "before": prev.get("policy"), "after": wire.get("policy")}
            continue
        products = context_of(wire).get("products", [])
        policy[c.name] = {k: {"before": old.get(k), "after": new.get(k)}
                          for k in sorted(new) if k.startswith("policy:")
                          and k.rsplit(":", 1)[1] in products and old.get(k) != new.get(k)}
    return {"tools": tools, "diffs": {"schema": schema, "description": description,
                                      "policy": policy},
            "events": events}


def definition_diff(a: dict[str, Any], b: dict[str, Any], a_name: str = "published",
                    b_name: str = "candidate") -> dict[str, Any]:
    """What changed from definition ``a`` to ``b``: the schema paths (before, after) and the
    description as a unified diff of its sentences."""
    return {"schema": _schema_diff(a, b),
            "description": list(difflib.unified_diff(
                _sentences(a.get("description", "")), _sentences(b.get("description", "")),
                a_name, b_name, lineterm=""))}


def _sentences(text: str) -> list[str]:

    return split_sentences(text)


def _schema_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("inputSchema", "outputSchema"):
        fa, fb = _flatten(a.get(key) or {}), _flatten(b.get(key) or {})
        for path in sorted(set(fa) | set(fb)):
            if fa.get(path) != fb.get(path):
                out[f"{key}{path}"] = {"before": fa.get(path), "after": fb.get(path)}
    return out


def _flatten(node: Any, path: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{path}/{k}"))
        return out
    return {path: node}


def decide(project: Project, review_id: int, approve: bool, by: str,
           comment: str | None = None, via: str | None = None) -> int | None:
    """Approve (publish its versions atomically) or reject a pending review, as ``by``, who must
    be a user whose role has ``reviewer: true``; ``comment`` is kept with the decision. The CLI
    (``via="cli"``) and the console both decide through here, so they leave the same registry
    state. A policy change is never approved by its author (policyversion.may_approve)."""
    comment = (comment or "").strip() or None
    registry = open_registry(project)
    try:
        # who may decide is the approved policy's word: a role made reviewer in tether.yaml
        # is not one until that change is approved (by someone else)
        require_reviewer(policyversion.enforced(project, registry, required=False)[0].config, by)
        review = registry.review(review_id)
        if review is None:
            raise ConfigError(f"there is no review {review_id}.", hint="See `tether review list`.")
        if review["status"] != "pending":
            raise ConfigError(f"review {review_id} is {review['status']}, not pending.",
                              hint="Blocked reviews are never published; fix the policy.")
        if approve:
            policyversion.may_approve(review, by, via)
        restricted = exposing.restricted_by(project, registry.state(prefix="product:"))
        exposed = {t["name"]: exposing.exposure(t["definition"], t.get("plan") or {}, restricted)
                   for t in review["body"]["tools"]} if approve else {}
        if any(exposed.values()):  # the policy moved since the review was opened
            registry.decide_review(review_id, "blocked", by, project.now(), comment=comment)
            names = sorted(n for n, e in exposed.items() if e)
            gate.page_blocked(project, review_id, names,
                              sorted({f for e in exposed.values() for f in e}))
            raise Blocked(f"review {review_id} would expose a restricted column "
                          f"({', '.join(names)}); it is now blocked and nothing was published.",
                          hint="Restricted columns are never published; fix the policy.")
        versions = [NewVersion(t["name"], t["version"], _reviewed(t["definition"], by),
                               t["plan"]) for t in review["body"]["tools"]] if approve else None
        pid = registry.decide_review(review_id, "approved" if approve else "rejected", by,
                                     project.now(), versions, comment)
        if approve:
            audit.record(project, registry,
                         audit.message(f"review {review_id} approved by {by}",
                                       {t["name"]: t["change_note"]
                                        for t in review["body"]["tools"]}))
        export(project.root / TOOLS_DIR, served_definitions(project, registry),
               project.root / EXPORT_INDEX)
        return pid
    finally:
        registry.close()


def _reviewed(definition: dict[str, Any], by: str) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(json.dumps(definition))
    context_of(d)["review"]["by"] = by
    return d
