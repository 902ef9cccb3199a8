"""`tether retire TOOL` and `tether rollback TOOL --to VERSION`: each builds the new version
(drift/retire.py) and submits it through the check's gate like any other change."""

from __future__ import annotations

from typing import Any

from tether.config import Project
from tether.context.meta import context_of, retired_info
from tether.drift import check as checking
from tether.drift.check import Candidate, CheckResult
from tether.drift.classify import classify
from tether.drift.retire import publication_stamp, rollback
from tether.errors import ConfigError
from tether.policy import exposure as exposing
from tether.registry import Registry, ToolVersion, content_hash, open_registry


def retire_tool(project: Project, name: str, reason: str | None = None) -> CheckResult:
    """`tether retire TOOL`: the retirement of a published tool as a review (a person decides,
    as for any breaking change); blocked if what it keeps serving exposes a restricted column.
    Returns a CheckResult (exit 11 waits for review, 12 blocked)."""
    registry = open_registry(project)
    try:
        current = registry.current()
        prev = _published(current, name)
        if retired_info(prev.definition):
            raise ConfigError(f"{name} is already retired (version {prev.version}).",
                              hint=f"`tether rollback {name} --to VERSION` brings it back.")
        state = registry.state()
        restricted = exposing.restricted_by(project, state)
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
        exposed = exposing.exposure(wire, target.plan, exposing.restricted_by(project, state))
        route = "blocked" if exposed else (
            "human" if kind in ("breaking", "semantic", "policy") else "auto")
        stamp = publication_stamp(project.now())
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

    if name not in current:
        raise ConfigError(f"there is no published tool {name!r}.",
                          hint="See `tether tools` for the published tools.")
    return current[name]


def _submit(project: Project, registry: Registry, candidate: Candidate,
            current: dict[str, ToolVersion], state: dict[str, Any], route: str | None = None,
            rule: str | None = None) -> CheckResult:

    route = route or ("blocked" if candidate.outcome.outcome == "blocked" else "human")
    routes: dict[str, list[Any]] = {"auto": [], "human": [], "blocked": []}
    routes[route].append(candidate)
    result = checking.CheckResult(outcomes=[candidate.outcome])
    checking.dispatch(project, registry, routes, result, current, state, state, [], rule=rule)
    return result
