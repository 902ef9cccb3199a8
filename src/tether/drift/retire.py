"""Retiring a tool and rolling one back: both are new versions, through the one gate.

A tool is never deleted from the registry (versions are immutable). It is *retired*: a new
major version of the same definition whose ``_meta["tether/context"].retired`` says why; the
server keeps serving it, with the reason and the date in its description, for
``drift.deprecation_days`` after that version is published, then lists it no more and answers a
call with when it was retired. A tool that disappears from tether.yaml (renamed, its product
removed) is retired by `tether check` through a review; `tether retire TOOL` asks for the same
explicitly. `tether rollback TOOL --to VERSION` republishes an old definition as a new version,
classified against the current one like any other change.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from tether.context.meta import context_of, stamp_publication
from tether.registry import Registry, ToolVersion, bump
from tether.registry.semver import Level
from tether.registry.store import CHANGE_SENTENCE

if TYPE_CHECKING:  # check imports this module back, lazily
    from tether.config import Project
    from tether.drift.check import Candidate, CheckResult

RETIRED_KEY = "retired"
_PUBLICATION_SENTENCES = ("Changed in ", "Retired in ")
"""Sentences a publication adds to a description (and its sources); a republished definition
drops the old ones and states its own."""


def retired_info(definition: dict[str, Any]) -> dict[str, Any] | None:
    """``{reason}`` when this definition retires its tool, else None."""
    found = context_of(definition).get(RETIRED_KEY)
    return found if isinstance(found, dict) else None


def _stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _republished(definition: dict[str, Any], sentence: str, head: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``definition`` as a new version: the earlier publication sentences and fields
    gone, ``sentence`` at the end of its description (sourced), ``head`` first in its context,
    ``extra`` last."""
    wire: dict[str, Any] = json.loads(json.dumps(definition))
    base = CHANGE_SENTENCE.sub("", str(wire.get("description", ""))).strip()
    wire["description"] = f"{base} {sentence}"
    ctx = context_of(wire)
    sources = {k: v for k, v in (ctx.get("sources") or {}).items()
               if not k.startswith(_PUBLICATION_SENTENCES)}
    sources[sentence] = "schema"
    dropped = {"change_note", "deprecation", "review", "supersedes", RETIRED_KEY, "sources"}
    stamp_publication(wire, head, drop=dropped, tail={"sources": sources} | (extra or {}))
    return wire


def retirement(prev: ToolVersion, reason: str, at: dt.datetime) -> tuple[dict[str, Any], str]:
    """(wire definition, version) retiring ``prev``'s tool: the same definition, a major
    version, the reason in its context and its description. The window is counted by the
    server from the day this version is published."""
    version = bump(prev.version, "major")
    why = reason.rstrip(".")
    head = {"version": version, "supersedes": prev.version, "change_level": "major",
            "change_kind": "breaking", "change_note": f"Retired: {why}.",
            "review": {"mode": "human", "at": _stamp(at)}, "generated_at": _stamp(at)}
    wire = _republished(prev.definition,
                        f"Retired in {version}: {why}; do not use it for new work.", head,
                        {RETIRED_KEY: {"reason": why}})
    return wire, version


def rollback(current: ToolVersion, target: ToolVersion, at: dt.datetime,
             level: Level, kind: str) -> tuple[dict[str, Any], str]:
    """(wire definition, version): ``target``'s definition republished after ``current``,
    with the bump its difference from ``current`` calls for."""
    version = bump(current.version, level)
    note = f"Rolled back to the definition of {target.version}."
    head = {"version": version, "supersedes": current.version, "change_level": level,
            "change_kind": kind, "change_note": note, "generated_at": _stamp(at)}
    return _republished(target.definition, f"Changed in {version}: {note}", head), version


def retire_tool(project: Project, name: str, reason: str | None = None) -> CheckResult:
    """`tether retire TOOL`: the retirement of a published tool as a review (a person decides,
    as for any breaking change); blocked if what it keeps serving exposes a restricted column.
    Returns a CheckResult (exit 11 waits for review, 12 blocked)."""
    from tether.drift import check as checking
    from tether.drift import gate
    from tether.drift.publish import open_registry
    from tether.errors import ConfigError

    registry = open_registry(project)
    try:
        current = registry.current()
        prev = _published(current, name)
        if retired_info(prev.definition):
            raise ConfigError(f"{name} is already retired (version {prev.version}).",
                              hint=f"`tether rollback {name} --to VERSION` brings it back.")
        state = registry.state()
        restricted = gate.restricted_by(project, state)
        candidate = checking.retire_candidate(
            project, prev, reason or f"{name} was retired by request", restricted)
        return _submit(project, registry, candidate, current, state)
    finally:
        registry.close()


def rollback_tool(project: Project, name: str, to: str) -> CheckResult:
    """`tether rollback TOOL --to VERSION`: that version's definition, published as a new
    version through the gate (auto for wording and additive differences from the current one,
    a review for breaking ones, blocked if it exposes a restricted column now). The next
    `tether check` regenerates from tether.yaml as usual: revert the config too, or the check
    proposes the newer definition again."""
    from tether.drift import check as checking
    from tether.drift import gate
    from tether.drift.classify import classify
    from tether.drift.publish import open_registry
    from tether.errors import ConfigError
    from tether.registry import content_hash

    registry = open_registry(project)
    try:
        current = registry.current()
        now_version = _published(current, name)
        target = next((v for v in registry.versions(name) if v.version == to), None)
        if target is None:
            have = ", ".join(v.version for v in registry.versions(name))
            raise ConfigError(f"{name} has no version {to}.", hint=f"Its versions: {have}.")
        if content_hash(target.definition) == content_hash(now_version.definition):
            raise ConfigError(f"{name} {now_version.version} is already the definition of {to}.",
                              hint="Nothing to roll back.")
        level, kind = classify(now_version.definition, target.definition)
        if retired_info(now_version.definition):
            level, kind = "minor", "additive"  # bringing a retired tool back adds it again
        wire, version = rollback(now_version, target, project.now(), level, kind)
        state = registry.state()
        exposed = gate.exposure(wire, target.plan, gate.restricted_by(project, state))
        route = "blocked" if exposed else (
            "human" if kind in ("breaking", "semantic", "policy") else "auto")
        stamp = _stamp(project.now())
        context_of(wire)["review"] = (
            {"mode": "auto", "rule": "rollback", "at": stamp} if route == "auto"
            else {"mode": "human", "at": stamp})
        outcome = checking.Outcome(name, {"auto": "published", "human": "pending",
                                          "blocked": "blocked"}[route], version, level, kind,
                                   f"Rolled back to the definition of {to}.")
        candidate = checking.Candidate(name, target.plan, wire, outcome)
        return _submit(project, registry, candidate, current, state, route,
                       rule=f"rollback: {name} to {to}")
    finally:
        registry.close()


def _published(current: dict[str, ToolVersion], name: str) -> ToolVersion:
    from tether.errors import ConfigError

    if name not in current:
        raise ConfigError(f"there is no published tool {name!r}.",
                          hint="See `tether tools` for the published tools.")
    return current[name]


def _submit(project: Project, registry: Registry, candidate: Candidate,
            current: dict[str, ToolVersion], state: dict[str, Any], route: str | None = None,
            rule: str | None = None) -> CheckResult:
    from tether.drift import check as checking

    route = route or ("blocked" if candidate.outcome.outcome == "blocked" else "human")
    routes: dict[str, list[Any]] = {"auto": [], "human": [], "blocked": []}
    routes[route].append(candidate)
    result = checking.CheckResult(outcomes=[candidate.outcome])
    checking.dispatch(project, registry, routes, result, current, state, state, [], rule=rule)
    return result
