"""The access policy through the gate, as a tool is: versions in the registry, narrowing at
once, widening after a reviewer who did not write it, and the one policy every server enforces.

A check reads tether.yaml's policy as a document (policy/versions.py) and compares it with the
last published version. A change whose structure proves it only narrows (or a neutral one:
products added or removed, no new coverage gap) is published at once; anything else waits in a
review whose author (who ran the check) may not approve it. Servers enforce the last published
version (:func:`enforced`), so until a reviewer decides, every server, running or new, keeps
the last approved policy.
"""

from __future__ import annotations

import datetime as dt
import getpass
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether.config import Project
from tether.context.meta import context_in, tool_meta_of
from tether.errors import ConfigError, NotPermittedError
from tether.policy import versions
from tether.policy.coverage import gaps
from tether.policy.versions import POLICY_KIND, Change, Document, Effect
from tether.registry import FIRST, Registry, bump, open_registry
from tether.registry.semver import Level

LEVELS: dict[Effect, Level] = {"widening": "major", "narrowing": "minor", "neutral": "patch"}
"""A widening is the change that matters most; a narrowing restricts; neutral changes scope."""
OS_PREFIX = "os:"


def author_of(name: str | None = None) -> str:
    """Who is running this: the policy user named (``--as``), else ``os:<login name>``."""
    if name:
        return name
    try:
        return OS_PREFIX + getpass.getuser()
    except (KeyError, OSError):
        return OS_PREFIX + "unknown"


@dataclass
class PolicyChange:
    """The policy of tether.yaml as the next version: what changed and its effect."""

    version: str
    level: Level
    effect: Effect
    changes: list[Change]
    document: Document
    supersedes: str | None
    # every published version is the starter's example or the first admin's, none naming two
    # reviewers: a widening by the one person who runs the project publishes at once,
    # recorded with them (once a version names two reviewers, never again)
    first_admin: bool = False

    @property
    def waits(self) -> bool:
        """Whether it waits for a reviewer who is not its author."""
        return self.effect == "widening" and not self.first_admin

    @property
    def note(self) -> str:
        return ("; ".join(c.words for c in self.changes) or "policy edited").rstrip(".") + "."

    def definition(self, stamp: str, route: str, rule: str | None = None) -> dict[str, Any]:
        """The version as the registry stores it (its ``_meta`` as a tool's)."""
        ctx: dict[str, Any] = {"version": self.version}
        if self.supersedes:
            ctx |= {"supersedes": self.supersedes, "change_level": self.level,
                    "change_kind": POLICY_KIND, "change_note": self.note}
        ctx["review"] = {"mode": "auto" if route == "auto" else "human", "at": stamp}
        if route == "auto":
            ctx["review"]["rule"] = rule or f"auto-policy-{self.effect}"
        ctx["generated_at"] = stamp
        roles, users = len(self.document["roles"]), len(self.document["users"])
        return {"name": POLICY_KIND,
                "description": f"The access policy, version {self.version}: {roles} roles, "
                               f"{users} users. {self.note}",
                "policy": self.document, "changes": [c.to_json() for c in self.changes],
                "_meta": tool_meta_of(ctx)}


def coverage_gaps(project: Project, columns: Mapping[str, Sequence[str]]) -> list[str]:
    """The coverage gaps of tether.yaml's policy, as sentences (a new one widens)."""
    taken = [a for a in project.config.ci.accept if a.item == 13]
    return [g.sentence() for g in gaps(project.config, {k: list(v) for k, v in columns.items()})
            if not any(a.product in (None, g.product) and a.role in (None, g.role)
                       for a in taken)]


def pending(project: Project, registry: Registry, columns: Mapping[str, Sequence[str]]
            ) -> PolicyChange | None:
    """tether.yaml's policy as the next version, or None when it is the one published."""
    doc = versions.document(project.config, coverage_gaps(project, columns))
    cur = registry.current_policy()
    before = cur.definition.get("policy") if cur is not None else None
    if before is not None and versions.same(before, doc):
        return None
    found = versions.changes(before, doc)
    effect: Effect = versions.effect(found) if before is not None else "neutral"
    level = LEVELS[effect]
    version = bump(cur.version, level) if cur is not None else FIRST
    alone = cur is not None and all(_by_the_first_admin(v.definition)
                                    for v in registry.versions(POLICY_KIND))
    return PolicyChange(version, level, effect, found, doc,
                        cur.version if cur is not None else None, first_admin=alone)


def _by_the_first_admin(definition: Mapping[str, Any]) -> bool:
    """Whether a published policy version leaves the project with its first admin: it names
    fewer than two reviewers, and it is the starter's example (one user at most, every role
    reading every tool and table whole) or was itself published by that admin."""
    doc = definition.get("policy") or {}
    rule = (context_in(definition.get("_meta")).get("review") or {}).get("rule")
    example = len(doc.get("users") or {}) <= 1 and all(
        list(r.get("tools") or []) == ["*"] and (r.get("tables") or {}).get("allow") == ["*"]
        and not (r.get("tables") or {}).get("deny") and not r.get("row_filters")
        and not r.get("masks") for r in (doc.get("roles") or {}).values())
    return len(reviewers(doc)) < 2 and (example or rule == "first-admin")


def reviewers(doc: Document) -> list[str]:
    """The users of a policy document whose role may decide reviews."""
    roles = doc.get("roles") or {}
    return sorted(u for u, v in (doc.get("users") or {}).items()
                  if (roles.get(v.get("role")) or {}).get("reviewer"))


def first_admin_words(change: PolicyChange, author: str) -> str:
    """What a check says when a widening published at once because no one else could review
    it yet."""
    named = reviewers(change.document)
    others = [u for u in named if u != author]
    then = (f"from now on a widening waits for a reviewer who is not its author ("
            f"{', '.join(others[:5])} or another)" if len(named) >= 2 else
            "it names fewer than two reviewers, so the next widening is published the same "
            "way; add a second person with a reviewer role, and from then on each widening "
            "waits for a reviewer who is not its author")
    return (f"policy {change.version} widened access and was published at once (rule "
            f"first-admin, by {author}): no published policy has named two reviewers yet, so "
            f"no one else could review it; {then}.")


def approved_document(registry: Registry) -> tuple[str, Document] | None:
    """(version, document) of the policy servers enforce: the last one published."""
    cur = registry.current_policy()
    if cur is None:
        return None
    return cur.version, cur.definition["policy"]


def enforced(project: Project, registry: Registry, required: bool = True
             ) -> tuple[Project, str | None]:
    """``project`` with the last approved policy in place of tether.yaml's, and its version.
    Without one (a registry no build or check has written since policies were versioned):
    an error when ``required``, else tether.yaml's own policy and None."""
    found = approved_document(registry)
    if found is None:
        if required:
            raise ConfigError("the registry holds no approved access policy yet, so there is "
                              "no policy to enforce.", where=str(project.root),
                              hint="Run `tether build` (or `tether check`) once: it publishes "
                              "tether.yaml's policy as the first version.")
        return project, None
    version, doc = found
    return project.with_config(versions.apply(project.config, doc)), version


def holds_policy(review: Mapping[str, Any]) -> bool:
    """Whether a review holds a change of the access policy (its candidate ``policy``)."""
    return any(t.get("name") == POLICY_KIND for t in review["body"].get("tools", []))


def may_approve(review: Mapping[str, Any], by: str, via: str | None) -> None:
    """A review holding a policy change may not be approved by its author: the policy user
    who ran the check, or on the command line the same operating-system account."""
    if not holds_policy(review):
        return
    author = review.get("author")
    if not author:
        return  # opened before authors were recorded
    rid = review["id"]
    if author == by:
        raise NotPermittedError(
            f"{by} wrote the policy change review {rid} holds (they ran the check that opened "
            "it), and nobody approves their own widening of access.",
            hint="Another reviewer approves it (tether review approve ID --as NAME, or the "
                 "console); its author may still reject it.")
    if via == "cli" and author.startswith(OS_PREFIX) and author_of() == author:
        raise NotPermittedError(
            f"review {rid} holds a policy change opened by a check run under this login "
            f"({author[len(OS_PREFIX):]}); approving it under the same login would let one "
            "person widen access alone.",
            hint="Another person approves it under their own login or in the console (tether "
                 "ui); run checks as yourself with `tether check --as NAME`.")


def now_stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def as_enforced(project: Project) -> Project:
    """``project`` as servers enforce it: with the last approved policy, when its registry
    holds one (a project whose registry holds none is tether.yaml as it stands)."""
    registry = open_registry(project)
    try:
        return enforced(project, registry, required=False)[0]
    finally:
        registry.close()
