"""`tether learn`: run the rules over what was observed and keep what they propose in the
registry, merged with what earlier runs proposed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.config import Project
from tether.errors import ConfigError
from tether.learn.model import Proposal
from tether.learn.observe import Observed, observe, since_time
from tether.learn.rulebook import Rule
from tether.learn.rules import DEFAULT_RULES
from tether.registry import Registry, open_registry
from tether.registry import proposals as stored


@dataclass
class LearnResult:
    calls: int
    cases: int
    proposals: list[Proposal]  # open ones, found or still standing from earlier runs
    new: int  # found for the first time
    reopened: int  # dismissed before, back with newer evidence

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "cases": self.cases, "new": self.new,
                "reopened": self.reopened,
                "proposals": [p.model_dump(mode="json") for p in self.proposals]}


def from_row(row: dict[str, Any]) -> Proposal:
    return Proposal.model_validate(row["body"] | {
        "id": row["id"], "status": row["status"], "decided_by": row["decided_by"],
        "publication": row["publication"]})


def propose(seen: Observed, rules: Sequence[Rule] = DEFAULT_RULES) -> list[Proposal]:
    """Every proposal the rules make from what was observed (nothing stored)."""
    out: list[Proposal] = []
    for r in rules:
        if "runs" in r.reads and "calls" not in r.reads and not seen.cases:
            continue
        out += r(seen)
    return out


def _merge(counts: dict[str, int]) -> stored.Merge:
    def merge(old: dict[str, Any] | None, found: dict[str, Any]) -> dict[str, Any] | None:
        if old is None:
            counts["new"] += 1
            return found | {"status": "open"}
        if old["status"] == "applied":
            return None  # what it said is in the definitions; its evidence stays as applied
        if old["status"] == "dismissed":
            mark = old["body"].get("dismissed_at_newest") or ""
            if found["newest"] <= mark:
                return None  # nothing new since a person said no
            counts["reopened"] += 1
        body = found["body"] | {"dismissed_at_newest": old["body"].get("dismissed_at_newest")}
        return found | {"status": "open", "body": body}
    return merge


def learn(project: Project, since: str | None = None, runs: Sequence[Path] = (),
          rules: Sequence[Rule] = DEFAULT_RULES) -> LearnResult:
    """Read the call log (from ``since``: a time or a span such as ``7d``) and the labelled
    runs, propose, and store; the open proposals."""
    registry = open_registry(project)
    try:
        current = registry.current()
        if not current:
            raise ConfigError("the registry holds no tools yet, so no call names one.",
                              hint="Run `tether build`, serve, and learn from the calls made.")
        # the call log is stamped with the wall clock, whatever clock the project fixes
        seen = observe(project, registry, current, since_time(since, dt.datetime.now(dt.UTC)),
                       runs)
        found = propose(seen, rules)
        counts = {"new": 0, "reopened": 0}
        stored.save(registry, [_row(p) for p in found], _merge(counts), project.now())
        open_ = [from_row(r) for r in stored.proposals(registry, "open")]
    finally:
        registry.close()
    return LearnResult(len(seen.calls), len(seen.cases), open_, counts["new"],
                       counts["reopened"])


def _row(p: Proposal) -> dict[str, Any]:
    body = p.model_dump(mode="json", exclude={"id", "status", "decided_by", "publication"})
    return {"key": p.key, "rule": p.rule, "product": p.product, "support": p.support,
            "newest": p.newest, "body": body}


def load(registry: Registry, pid: int) -> Proposal:
    """One stored proposal, or an error naming what exists."""
    row = stored.proposal(registry, pid)
    if row is None:
        have = [r["id"] for r in stored.proposals(registry)]
        raise ConfigError(f"no proposal {pid} in the registry "
                          f"({'ids: ' + ', '.join(map(str, have[:20])) if have else 'none yet'}).",
                          hint="Run `tether learn` to list the open proposals and their ids.")
    return from_row(row)
