"""The types every part of serving shares: a published version as the server holds it, a call,
its answer, and the errors a model can fix (a refusal, a source that failed, a superseded pin).

Plain data and nothing that runs, so every module of serve/ may import it and it imports none of
them: how a kind runs is serve/runners.py's, the checks a call passes serve/pipeline.py's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from tether.context.meta import Evidence
from tether.toolgen.model import QueryPlan


@dataclass
class Version:
    """A published version of a tool as a server serves it."""

    name: str
    version: str
    definition: dict[str, Any]
    plan: QueryPlan
    served_until: dt.datetime | None = None  # superseded versions, and a retired tool
    successor: str | None = None
    asked: str | None = None  # the superseded version a call pinned, run under these rules
    # when the "Changed in" sentence leaves the description the model reads: the end of the
    # superseded version's window (history is no part of what a model reads after that)
    noted_until: dt.datetime | None = None


def superseded(pinned: Version, current: Version, why: str) -> ToolError:
    """The refusal of a call pinned to a version whose rules are no longer the current ones."""
    return ToolError(f"Not allowed: {pinned.name}@{pinned.version} is superseded by "
                     f"{current.version}, and {why}; call {pinned.name} without a version pin "
                     f"(see {current.version}'s definition)",
                     refusal={"reason": "superseded",
                              "detail": f"current version {current.version}"})


class ToolError(Exception):
    """A call the model can fix: the message says what was wrong and what is allowed. A policy
    refusal carries ``refusal`` ({reason, detail}) for the result's ``_meta``."""

    def __init__(self, message: str, refusal: dict[str, str] | None = None):
        super().__init__(message)
        self.refusal = refusal


class SourceFailed(ToolError):
    """A call that failed reading its source (an engine error, a timeout, a source that is
    down): the server checks the products it read (serve/health.py) and closes those that can
    no longer be read."""


@dataclass
class Answered:
    """A tool's result and the evidence of what it ran (the server puts the evidence in the
    result's ``_meta["tether/evidence"]``)."""

    result: dict[str, Any]
    evidence: Evidence


@dataclass
class Call:
    user: str
    tool: str
    version: str
    definition: dict[str, Any]
    plan: QueryPlan
    args: dict[str, Any]
    at: dt.datetime | None = None  # the clock, read once a call (Executor.now)
