"""Build: profile, generate, compare with the registry, publish what changed, export tools/."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.config import Project
from tether.context.meta import stamp_publication
from tether.drift import audit, gate
from tether.drift.check import META_KEY_STATE, generation_key, run_pass
from tether.drift.classify import classify
from tether.drift.detectors import snapshot
from tether.drift.export import EXPORT_INDEX, TOOLS_DIR, export, unchanged
from tether.errors import UnreadableProduct
from tether.policy import exposure as exposing
from tether.policy.versions import POLICY_KIND
from tether.profiling.policycheck import check_profiled
from tether.profiling.probe import PROFILE_KEY, profile_changed
from tether.registry import (
    FIRST,
    NewVersion,
    Registry,
    bump,
    open_registry,
)
from tether.registry import policy as policyversion
from tether.toolgen import GeneratedTool, Mode, generate, without_products

"""What the last export of tools/ wrote (see :func:`export`)."""


@dataclass
class Outcome:
    name: str
    version: str | None
    outcome: str  # published | unchanged | generated | pending | blocked
    change_level: str | None = None
    change_kind: str | None = None
    review: int | None = None


@dataclass
class BuildResult:
    mode: Mode
    publication: int | None
    outcomes: list[Outcome] = field(default_factory=list)
    export_dir: Path | None = None
    reviews: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # products that could not be read: why

    @property
    def exit_code(self) -> int:
        """As `tether check` exits, but 0 when something was published: 12 blocked, 11 waits
        for review, else 0."""
        kinds = {o.outcome for o in self.outcomes}
        return 12 if "blocked" in kinds else 11 if "pending" in kinds else 0


def build(project: Project, mode: Mode = "grounded", progress: Callable[[str], None] | None = None,
          author: str | None = None) -> BuildResult:
    """Regenerate the tools of ``mode``; grounded tools are published and versioned, the first
    set (and the first access policy version) by the rule `initial`, every later one through
    the gate as `tether check` does (``author``: who runs it, recorded on reviews)."""
    note = progress or (lambda _m: None)
    if mode == "grounded":
        registry = open_registry(project)
        try:
            if registry.latest_publication():
                return _through_check(project, registry, note, author)
        finally:
            registry.close()
    skipped: dict[str, UnreadableProduct] = {}
    listed, cache, _ = profile_changed(project, {}, full=True, progress=note, skipped=skipped)
    if skipped:  # the first build: a product that cannot be read stops no other
        if len(skipped) == len(project.config.products):
            raise next(iter(skipped.values()))
        project = without_products(project, set(skipped))
    said = [e.paragraph() for e in skipped.values()]
    profiles = {p.product: p for p in listed}
    check_profiled(project, profiles)  # a policy naming a missing column fails closed
    note("generating tool definitions")
    tools = generate(project, profiles, mode)
    if mode != "grounded":
        out_dir = project.root / TOOLS_DIR / mode
        export(out_dir, [t.wire() for t in tools])
        return BuildResult(mode, None, [Outcome(t.name, None, "generated") for t in tools], out_dir,
                           skipped=said)
    registry = open_registry(project)
    try:
        result = _publish(project, registry, tools, {
            n: [c.column.name for c in p.columns] for n, p in profiles.items()})
        if not registry.state():  # the baseline the first `tether check` compares against

            # as a check that found every tool current records it: the next check with nothing
            # moved need not generate again (a first build of thousands of tools then checks in
            # the time a probe takes)
            clean = {"key": generation_key(project, project.now()),
                     "publication": registry.latest_publication(),
                     "clean": not result.exit_code}
            registry.save_state(snapshot(project, profiles)
                                | {PROFILE_KEY + n: v for n, v in cache.items()}
                                | {META_KEY_STATE: clean}, project.now())
        note("exporting tools/")
        current = registry.current()
        export(project.root / TOOLS_DIR,
               [current[t.name].definition for t in tools if t.name in current],
               project.root / EXPORT_INDEX)
        result.export_dir = project.root / TOOLS_DIR
        result.skipped = said
        return result
    finally:
        registry.close()


def _through_check(project: Project, registry: Registry, note: Callable[[str], None],
                   author: str | None = None) -> BuildResult:
    """A build after the first publication is a full check: the same gate, routes and reviews
    (a breaking change waits for a person, an exposure is blocked), wherever it comes from."""
    checked = run_pass(project, registry, note, full=True, author=author)
    outcomes = [Outcome(o.tool, o.version, o.outcome, o.change_level, o.change_kind, o.review)
                for o in checked.outcomes]
    return BuildResult("grounded", checked.publication, outcomes, project.root / TOOLS_DIR,
                       checked.reviews)


def _publish(project: Project, registry: Registry, tools: list[GeneratedTool],
             columns: dict[str, list[str]]) -> BuildResult:
    """The first publication: every tool by the rule `initial`, except one that would expose a
    restricted column (the gate's own check), which is blocked and paged; and tether.yaml's
    access policy as its first version."""
    current = registry.current()
    now = project.now()
    stamp = now.isoformat().replace("+00:00", "Z")
    new: list[NewVersion] = []
    outcomes: list[Outcome] = []
    restricted = exposing.restricted_by(project)
    for t in tools:
        wire = t.wire()
        exposed = exposing.exposure(wire, t.plan.model_dump(mode="json"), restricted)
        if exposed:
            outcomes.append(Outcome(t.name, None, "blocked"))
            gate.page_blocked(project, None, [t.name], exposed)
            continue
        prev = current.get(t.name)
        if prev is not None and unchanged(prev, wire, t.plan):
            outcomes.append(Outcome(t.name, prev.version, "unchanged"))
            continue
        if prev is None:
            version, level, kind = FIRST, None, None
            fields: dict[str, Any] = {
                "version": version, "generated_at": stamp,
                "review": {"mode": "auto", "rule": "initial", "at": stamp}}
        else:
            level, kind = classify(prev.definition, wire)
            version = bump(prev.version, level)
            fields = {"version": version, "supersedes": prev.version, "generated_at": stamp,
                      "change_level": level, "change_kind": kind,
                      "review": {"mode": "auto", "rule": "build", "at": stamp}}
        stamp_publication(wire, fields)
        new.append(NewVersion(t.name, version, wire, t.plan.model_dump(mode="json")))
        outcomes.append(Outcome(t.name, version, "published", level, kind))
    rule = "initial" if not current else "build"
    policy = policyversion.pending(project, registry, columns)
    if policy is not None and policy.supersedes is None:
        new.append(NewVersion(POLICY_KIND, policy.version,
                              policy.definition(stamp, "auto", "initial"), {"kind": POLICY_KIND}))
        outcomes.append(Outcome(POLICY_KIND, policy.version, "published"))
    pid = registry.publish(new, rule, now)
    if pid is not None and project.config.drift.audit_repo:

        audit.record(project, registry,
                     audit.message(rule, {v.name: None for v in new}))
    return BuildResult("grounded", pid, outcomes)
