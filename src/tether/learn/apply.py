"""`tether learn --apply ID`, `tether learn dismiss ID`, `tether learn report ID`.

Applying writes the proposal's sentence into the learn layer (``.tether/imports/learn.json``,
merged under tether.yaml like any import, its sentences' source ``execution_logs``) and runs one
`tether check` pass: the same regeneration, diff, semver and gate as any change (a note is
wording: a patch, published by the gate's rule unless something else in the pass asks for a
person). After a publication the regression suite replays, as after any, and its metrics before
and after are kept with the proposal for `tether learn report`. Dismissing an applied proposal
takes its sentence out again through the same pass.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tether.config import Project, load_project
from tether.context.names import ref_column
from tether.drift.check import CheckResult, check
from tether.errors import ConfigError
from tether.eval.label.pipeline import LABELS_FILE
from tether.eval.regression import rerun, suite_dir
from tether.eval.report import load_labels
from tether.eval.trace import LabelLine
from tether.layers.model import IMPORTS_DIR, ImportLayer, now_stamp, only_notes, write_layer
from tether.learn.model import Proposal
from tether.learn.propose import load
from tether.profiling.layers import layer_lock
from tether.registry import open_registry
from tether.registry import proposals as stored
from tether.registry.policy import author_of

KIND = "learn"


@dataclass
class Applied:
    proposal: Proposal
    check: CheckResult | None  # None: the sentence was already there, nothing ran
    exit_code: int
    flipped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"proposal": self.proposal.model_dump(mode="json"), "exit_code": self.exit_code,
                "check": self.check.to_json() if self.check else None, "flipped": self.flipped}


def _layer(project: Project) -> ImportLayer:
    have = next((la for la in project.layers if la.kind == KIND), None)
    if have is not None:
        return have.model_copy(deep=True)
    return ImportLayer(kind=KIND, imported_at=now_stamp(project.now()))


def _place(project: Project, p: Proposal) -> None:
    """The proposal's place still exists: its product, and its column."""
    product = project.config.products.get(p.product)
    column = p.change.column
    if product is None:
        raise ConfigError(f"proposal {p.id} is about product {p.product!r}, which tether.yaml "
                          "no longer has.", hint=f"Dismiss it: tether learn dismiss {p.id}")
    tool = p.tool
    if column is not None and not _has_column(project, p.product, column):
        raise ConfigError(f"proposal {p.id} is about {p.product}.{column}, which {tool} no "
                          "longer takes.", hint=f"Dismiss it: tether learn dismiss {p.id}")


def _has_column(project: Project, product: str, column: str) -> bool:
    registry = open_registry(project)
    try:
        for v in registry.current().values():
            if v.plan.get("kind") == "list" and v.plan.get("product") == product:
                return any(ref_column(f["column"])[1] == column
                           for f in v.plan.get("filters") or [])
    finally:
        registry.close()
    return False


def _edit(project: Project, p: Proposal, add: bool) -> bool:
    """Add (or take out) the proposal's sentence in the learn layer; whether it changed."""
    with layer_lock(project.root, KIND):
        layer = _layer(load_project(project.root))
        node: dict[str, Any] = layer.config
        for part in p.change.path[:-1]:
            node = node.setdefault(part, {})
        notes: list[str] = node.setdefault(p.change.path[-1], [])
        where: list[str | int] = [*p.change.path, len(notes)]
        if add == (p.change.sentence in notes):
            return False
        if add:
            notes.append(p.change.sentence)
            layer.origins.append((where, f"proposal {p.id} ({p.rule})"))
        else:
            i = notes.index(p.change.sentence)
            notes.pop(i)
            layer.origins = _renumbered(layer.origins, p.change.path, i)
            _prune(layer.config, p.change.path)
        layer.origins = _list_origin(layer.origins, p.change.path)
        layer.imported_at = now_stamp(project.now())
        only_notes(layer, str(IMPORTS_DIR / f"{KIND}.json"))  # notes, nothing else, ever
        load_project(project.root, with_layer=layer)  # a layer that would not load: not written
        write_layer(project.root, layer)
    return True


def _renumbered(origins: list[tuple[list[str | int], str]], path: list[str], gone: int
                ) -> list[tuple[list[str | int], str]]:
    out = []
    n = len(path)
    for where, said in origins:
        at = where[n] if where[:n] == path and len(where) > n else None
        if isinstance(at, int):
            if at == gone:
                continue
            if at > gone:
                where = [*where[:n], at - 1, *where[n + 1:]]
        out.append((where, said))
    return out


def _list_origin(origins: list[tuple[list[str | int], str]], path: list[str]
                 ) -> list[tuple[list[str | int], str]]:
    """The notes list's own origin (what provenance names for the field): its proposals."""
    n = len(path)
    items = [said for where, said in origins if where[:n] == path and len(where) == n + 1]
    out = [(w, s) for w, s in origins if w != path]
    if items:
        ids = [s.split(" ")[1] for s in items]
        out.append((list(path), f"proposal{'s' * (len(ids) > 1)} {', '.join(ids)}"))
    return out


def _prune(config: dict[str, Any], path: list[str]) -> None:
    """Drop the mappings the removal left empty."""
    for depth in range(len(path), 0, -1):
        node: Any = config
        for part in path[:depth - 1]:
            node = node.get(part, {})
        key = path[depth - 1]
        if isinstance(node, dict) and node.get(key) in ([], {}):
            del node[key]


def metrics(labels: list[LabelLine]) -> dict[str, Any]:
    """What a report compares: cases, correct, correct and grounded, failures by class."""
    return {"cases": len(labels), "correct": sum(lab.correct is True for lab in labels),
            "correct_and_grounded": sum(lab.correct is True and lab.grounded is True
                                        for lab in labels),
            "failures_by_class": dict(sorted(Counter(lab.failure_class for lab in labels
                                                     if lab.failure_class).items()))}


def _regression(project: Project, publication: int) -> tuple[dict[str, Any] | None,
                                                           list[dict[str, Any]]]:
    suite = suite_dir(project)
    if suite is None:
        return None, []
    result = rerun(project, publication)
    if result is None:
        return None, []
    before = metrics(load_labels(suite / LABELS_FILE))
    after = metrics(load_labels(result.run_dir / LABELS_FILE))
    return ({"suite": str(suite), "run_dir": str(result.run_dir), "publication": publication,
             "before": before, "after": after, "flipped": result.flipped}, result.flipped)


def apply(project: Project, pid: int, by: str | None = None) -> Applied:
    """Apply an open proposal through the gate."""
    who = author_of(by)
    p = report(project, pid)
    if p.status == "dismissed" or (p.status == "applied" and _present(project, p)):
        raise ConfigError(f"proposal {pid} is {p.status}, not open.",
                          hint="Run `tether learn` to list the open proposals.")
    was = p.status
    _place(project, p)
    changed = _edit(project, p, add=True)
    try:
        result = check(load_project(project.root), author=who) if changed else None
    except BaseException:  # nothing half done: the sentence leaves the layer again
        if changed:
            _edit(project, p, add=False)
        raise
    p.status, p.decided_by = "applied", who
    p.publication = result.publication if result is not None else None
    p.outcome = _outcome(result, p.tool)
    _record(project, p, was)  # the sentence is in the layer: say so before anything else runs
    flipped: list[dict[str, Any]] = []
    if result is not None and result.publication is not None:
        try:
            p.report, flipped = _regression(load_project(project.root), result.publication)
        except Exception as e:  # published all the same: the report says the suite failed
            p.report = {"error": f"the regression suite did not run: {e}"}
        _record(project, p, "applied")
    code = result.exit_code if result is not None else 0
    if flipped and code in (0, 10):
        code = 11  # a flipped regression case waits for a person, as after `tether check`
    return Applied(p, result, code, flipped)


def _present(project: Project, p: Proposal) -> bool:
    """Whether the proposal's sentence is in the learn layer now."""
    layer = next((la for la in project.layers if la.kind == KIND), None)
    node: Any = layer.config if layer else {}
    for part in p.change.path:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return isinstance(node, list) and p.change.sentence in node


def _outcome(result: CheckResult | None, tool: str) -> str:
    """What the check pass did with the proposal's tool, in words."""
    if result is None:
        return "the sentence was already in the learn layer: nothing to publish"
    o = next((o for o in result.outcomes if o.tool == tool), None)
    if o is None or o.outcome == "unchanged":
        return "published nothing for this tool (its description already says it)"
    if o.outcome == "published":
        return f"published {o.version} ({o.change_level}, {o.change_kind})"
    if o.outcome == "pending":
        return f"{o.version} waits for a reviewer (review {o.review})"
    return f"{o.version} blocked"


def _record(project: Project, p: Proposal, expected: str) -> None:
    assert p.id is not None
    registry = open_registry(project)
    try:
        stored.decide(registry, p.id, p.status, p.decided_by or "", project.now(), _body(p),
                      p.publication, expected=expected)
    finally:
        registry.close()


def dismiss(project: Project, pid: int, by: str | None = None) -> tuple[Proposal,
                                                                      CheckResult | None]:
    """Dismiss a proposal: it stays away until newer evidence arrives. An applied one has its
    sentence taken out again, through the same check pass."""
    who = author_of(by)
    p = report(project, pid)
    if p.status == "dismissed":
        raise ConfigError(f"proposal {pid} is already dismissed.",
                          hint="Run `tether learn` to list the open proposals.")
    was = p.status
    result = None
    if _edit(project, p, add=False):  # applied (or left in the layer by a failed apply)
        result = check(load_project(project.root), author=who)
        p.publication = result.publication
    # back only with evidence newer than this decision: calls made while it was applied, or
    # before the last run of learn, are not new
    now = dt.datetime.now(dt.UTC).isoformat()
    p.status, p.decided_by, p.dismissed_at_newest = "dismissed", who, max(p.newest, now)
    _record(project, p, was)
    return p, result


def report(project: Project, pid: int) -> Proposal:
    """One stored proposal as it stands (an error naming the ids there are, else)."""
    registry = open_registry(project)
    try:
        return load(registry, pid)
    finally:
        registry.close()


def _body(p: Proposal) -> dict[str, Any]:
    return p.model_dump(mode="json", exclude={"id", "status", "decided_by", "publication"})
